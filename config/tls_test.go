package config

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type handshakeResult struct {
	state tls.ConnectionState
	err   error
}

// tlsServer accepts TLS connections on loopback (net.Pipe would deadlock:
// a TLS 1.3 server writes its session tickets while the client writes its
// Finished) and reports each server-side handshake.
type tlsServer struct {
	addr    string
	results chan handshakeResult
}

func serveTLS(t *testing.T, cfg *tls.Config) *tlsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{addr: ln.Addr().String(), results: make(chan handshakeResult, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, cfg)
			_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
			err = tc.Handshake()
			if err == nil {
				_, err = tc.Write([]byte{1}) // the verdict the client waits for
			}
			state := tc.ConnectionState()
			_ = tc.Close()
			s.results <- handshakeResult{state: state, err: err}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return s
}

// dial handshakes and waits for the server's verdict, since in TLS 1.3
// the client's handshake ends before the server has checked its
// certificate.
func (s *tlsServer) dial(t *testing.T, cfg *tls.Config) (tls.ConnectionState, handshakeResult, error) {
	t.Helper()
	var client tls.ConnectionState
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.addr, cfg)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadFull(c, make([]byte, 1))
		client = c.ConnectionState()
		_ = c.Close()
	}
	select {
	case server := <-s.results:
		return client, server, err
	case <-time.After(10 * time.Second):
		t.Fatal("the server reported no handshake")
		return client, handshakeResult{}, err
	}
}

// servedCN is the common name of the certificate the server presents.
func (s *tlsServer) servedCN(t *testing.T, ca *testCA) string {
	t.Helper()
	client, server, err := s.dial(t, &tls.Config{RootCAs: ca.pool(), ServerName: "localhost"})
	if err != nil || server.err != nil {
		t.Fatalf("handshake: client %v, server %v", err, server.err)
	}
	return client.PeerCertificates[0].Subject.CommonName
}

// serverFiles writes a server certificate and key for cn.
func serverFiles(t *testing.T, ca *testCA, certFile, keyFile, cn string) {
	t.Helper()
	certPEM, keyPEM := ca.server(t, cn)
	replaceFile(t, certFile, certPEM)
	replaceFile(t, keyFile, keyPEM)
}

func TestTLSReloaderServesReplacedCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t, "test CA")
	serverFiles(t, ca, certFile, keyFile, "broker-a")
	var logs bytes.Buffer // written only by this goroutine's calls
	r, err := NewTLSReloader(ListenerTLS{CertFile: certFile, KeyFile: keyFile}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s := serveTLS(t, r.Config())
	expect := func(step, cn string) {
		t.Helper()
		if got := s.servedCN(t, ca); got != cn {
			t.Fatalf("%s: served %q, want %q", step, got, cn)
		}
	}
	expect("start", "broker-a")
	if err := r.Reload(); err != nil {
		t.Fatalf("reload of unchanged files: %v", err)
	}

	serverFiles(t, ca, certFile, keyFile, "broker-b")
	expect("replaced, not reloaded", "broker-a")
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	expect("reloaded", "broker-b")

	certC, keyC := ca.server(t, "broker-c")
	replaceFile(t, certFile, certC[:len(certC)/2])
	if err := r.Reload(); err == nil {
		t.Fatal("half-written certificate loaded")
	}
	expect("half-written certificate", "broker-b")
	if err := r.Reload(); err == nil {
		t.Fatal("half-written certificate loaded at the second try")
	}

	replaceFile(t, certFile, certC) // its key not yet
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "tls.key_file") {
		t.Fatalf("certificate with the previous key: %v", err)
	}
	expect("mismatched key", "broker-b")

	replaceFile(t, keyFile, keyC)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	expect("key arrived", "broker-c")

	replaceFile(t, certFile, nil)
	if err := r.Reload(); err == nil {
		t.Fatal("empty certificate file loaded")
	}
	expect("emptied file", "broker-c")

	// One error logged per broken version of the files, not per Reload.
	if n := strings.Count(logs.String(), "level=ERROR"); n != 3 {
		t.Errorf("%d errors logged, want 3:\n%s", n, logs.String())
	}
}

func TestTLSReloaderRun(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t, "test CA")
	serverFiles(t, ca, certFile, keyFile, "broker-a")
	r, err := NewTLSReloader(ListenerTLS{CertFile: certFile, KeyFile: keyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serveTLS(t, r.Config())
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.Run(ctx, 5*time.Millisecond)
	}()
	if got := s.servedCN(t, ca); got != "broker-a" {
		t.Fatalf("served %q", got)
	}
	serverFiles(t, ca, certFile, keyFile, "broker-b")
	deadline := time.Now().Add(10 * time.Second)
	for s.servedCN(t, ca) != "broker-b" {
		if time.Now().After(deadline) {
			t.Fatal("Run did not reload the replaced files")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}

func TestTLSClientAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	ca := newTestCA(t, "test CA")
	serverFiles(t, ca, certFile, keyFile, "broker")
	replaceFile(t, caFile, ca.pem)
	alice := ca.client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}, Country: []string{"US"}})
	mallory := newTestCA(t, "other CA").client(t, pkix.Name{CommonName: "mallory"})

	const principal = "User:CN=alice,OU=eng,O=acme,C=US"
	for _, tc := range []struct {
		clientAuth string
		cert       *tls.Certificate
		ok         bool
		principal  string
	}{
		{"none", nil, true, ""},
		{"none", &alice, true, ""}, // not asked for
		{"requested", nil, true, ""},
		{"requested", &alice, true, principal},
		{"requested", &mallory, false, ""},
		{"required", nil, false, ""},
		{"required", &alice, true, principal},
		{"required", &mallory, false, ""},
	} {
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			client := "no certificate"
			if tc.cert != nil {
				client = tc.cert.Leaf.Subject.CommonName
			}
			t.Run(tc.clientAuth+"/"+client+"/"+tls.VersionName(version), func(t *testing.T) {
				r, err := NewTLSReloader(ListenerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, ClientAuth: tc.clientAuth}, nil)
				if err != nil {
					t.Fatal(err)
				}
				s := serveTLS(t, r.Config())
				cfg := &tls.Config{RootCAs: ca.pool(), ServerName: "localhost", MaxVersion: version}
				if tc.cert != nil {
					// Sent even when the server's CA list does not name its
					// issuer, which Go's client would otherwise not do.
					cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return tc.cert, nil }
				}
				_, server, err := s.dial(t, cfg)
				if ok := err == nil && server.err == nil; ok != tc.ok {
					t.Fatalf("accepted %v, want %v (client %v, server %v)", ok, tc.ok, err, server.err)
				}
				if !tc.ok {
					return
				}
				if server.state.Version != version {
					t.Errorf("negotiated %s", tls.VersionName(server.state.Version))
				}
				got, ok := PeerPrincipal(server.state)
				if ok != (tc.principal != "") || got != tc.principal {
					t.Errorf("PeerPrincipal = %q, %v; want %q", got, ok, tc.principal)
				}
			})
		}
	}
}

func TestTLSMinVersion(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t, "test CA")
	serverFiles(t, ca, certFile, keyFile, "broker")
	for _, tc := range []struct {
		min       string
		clientMax uint16
		ok        bool
	}{
		{"", tls.VersionTLS11, false},
		{"", tls.VersionTLS12, true},
		{"1.2", tls.VersionTLS11, false},
		{"1.3", tls.VersionTLS12, false},
		{"1.3", tls.VersionTLS13, true},
	} {
		t.Run(tc.min+"/"+tls.VersionName(tc.clientMax), func(t *testing.T) {
			r, err := NewTLSReloader(ListenerTLS{CertFile: certFile, KeyFile: keyFile, MinVersion: tc.min}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := serveTLS(t, r.Config())
			_, server, err := s.dial(t, &tls.Config{RootCAs: ca.pool(), ServerName: "localhost", MinVersion: tls.VersionTLS10, MaxVersion: tc.clientMax})
			if ok := err == nil && server.err == nil; ok != tc.ok {
				t.Errorf("accepted %v, want %v (client %v, server %v)", ok, tc.ok, err, server.err)
			}
		})
	}
}

func TestTLSReloaderReloadsClientCAs(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	serverCA, oldCA, newCA := newTestCA(t, "server CA"), newTestCA(t, "old client CA"), newTestCA(t, "new client CA")
	serverFiles(t, serverCA, certFile, keyFile, "broker")
	replaceFile(t, caFile, oldCA.pem)
	r, err := NewTLSReloader(ListenerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, ClientAuth: "required"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serveTLS(t, r.Config())
	oldClient := oldCA.client(t, pkix.Name{CommonName: "old"})
	newClient := newCA.client(t, pkix.Name{CommonName: "new"})
	accepted := func(cert tls.Certificate) bool {
		_, server, err := s.dial(t, &tls.Config{RootCAs: serverCA.pool(), ServerName: "localhost", Certificates: []tls.Certificate{cert}})
		return err == nil && server.err == nil
	}
	if !accepted(oldClient) || accepted(newClient) {
		t.Fatal("before the reload: want the old CA's client only")
	}
	replaceFile(t, caFile, newCA.pem)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if accepted(oldClient) || !accepted(newClient) {
		t.Fatal("after the reload: want the new CA's client only")
	}
}

func TestNewTLSReloaderRejects(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	ca := newTestCA(t, "test CA")
	serverFiles(t, ca, certFile, keyFile, "broker")
	replaceFile(t, caFile, ca.pem)
	for _, tc := range []struct {
		name string
		cfg  ListenerTLS
		want string
	}{
		{"client_auth", ListenerTLS{CertFile: certFile, KeyFile: keyFile, ClientAuth: "always"}, "tls.client_auth"},
		{"required without CAs", ListenerTLS{CertFile: certFile, KeyFile: keyFile, ClientAuth: "required"}, "tls.ca_file"},
		{"min_version", ListenerTLS{CertFile: certFile, KeyFile: keyFile, MinVersion: "1.0"}, "tls.min_version"},
		{"no files", ListenerTLS{}, "cert_file and key_file are required"},
		{"missing cert", ListenerTLS{CertFile: certFile + ".missing", KeyFile: keyFile}, "tls.cert_file"},
		{"key is the cert", ListenerTLS{CertFile: certFile, KeyFile: certFile}, "tls.key_file"},
		{"CA is a key", ListenerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: keyFile}, "tls.ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewTLSReloader(tc.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewTLSReloader = %v, %v; want an error about %s", r, err, tc.want)
			}
		})
	}
}

// Object identifiers of the attributes below.
var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidL      = asn1.ObjectIdentifier{2, 5, 4, 7}
	oidST     = asn1.ObjectIdentifier{2, 5, 4, 8}
	oidStreet = asn1.ObjectIdentifier{2, 5, 4, 9}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
)

const tagUniversalString = 28 // which Java prints as hex

// attr is an attribute with a value of the given universal tag.
func attr(oid asn1.ObjectIdentifier, tag int, value string) rawAttribute {
	return rawAttribute{Type: oid, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(value)}}
}

func utf8Attr(oid asn1.ObjectIdentifier, value string) rawAttribute {
	return attr(oid, asn1.TagUTF8String, value)
}

// The expected names are what Java's X500Principal.getName() gives for
// these encodings, by sun.security.x509.AVA.toRFC2253String.
func TestJavaRFC2253(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdns []rdnSET // in certificate order: the first RDN prints last
		want string
	}{
		{"empty subject", nil, ""},
		{"common case", []rdnSET{{attr(oidC, asn1.TagPrintableString, "US")}, {utf8Attr(oidO, "acme")}, {utf8Attr(oidOU, "eng")}, {utf8Attr(oidCN, "alice")}},
			"CN=alice,OU=eng,O=acme,C=US"},
		{"other keywords", []rdnSET{{utf8Attr(oidL, "Paris")}, {utf8Attr(oidST, "IDF")}, {utf8Attr(oidStreet, "1 rue X")}, {attr(oidDC, asn1.TagIA5String, "com")}, {attr(oidDC, asn1.TagIA5String, "example")}, {utf8Attr(oidUID, "alice")}},
			"UID=alice,DC=example,DC=com,STREET=1 rue X,ST=IDF,L=Paris"},
		{"special characters anywhere", []rdnSET{{utf8Attr(oidCN, `a,b+c=d<e>f#g;h"i\j`)}}, `CN=a\,b\+c\=d\<e\>f\#g\;h\"i\\j`},
		{"leading hash", []rdnSET{{utf8Attr(oidCN, "#1")}}, `CN=\#1`},
		{"leading and trailing spaces", []rdnSET{{utf8Attr(oidCN, "  a b ")}}, `CN=\ \ a b\ `},
		{"carriage returns at the ends", []rdnSET{{utf8Attr(oidCN, "\ra\r")}}, "CN=\\\ra\\\r"},
		{"only spaces", []rdnSET{{utf8Attr(oidCN, "  ")}}, `CN=\ \ `},
		{"NUL", []rdnSET{{utf8Attr(oidCN, "a\x00b")}}, `CN=a\00b`},
		{"other characters as they are", []rdnSET{{utf8Attr(oidCN, "Zoë_@*!\n日本")}}, "CN=Zoë_@*!\n日本"},
		{"emailAddress", []rdnSET{{attr(oidEmail, asn1.TagIA5String, "a@b.c")}, {utf8Attr(oidCN, "alice")}},
			"CN=alice,1.2.840.113549.1.9.1=#16056140622e63"},
		{"serialNumber", []rdnSET{{attr(oidSerial, asn1.TagPrintableString, "42")}}, "2.5.4.5=#13023432"},
		{"multi-valued RDN", []rdnSET{{utf8Attr(oidO, "acme")}, {utf8Attr(oidCN, "a"), utf8Attr(oidOU, "b")}}, "CN=a+OU=b,O=acme"},
		{"BMPString read as UTF-8", []rdnSET{{attr(oidCN, asn1.TagBMPString, "\x00a\x00b")}}, `CN=\00a\00b`},
		{"T61String byte above 0x7f", []rdnSET{{attr(oidCN, asn1.TagT61String, "caf\xe9")}}, "CN=caf\uFFFD"},
		{"GeneralString", []rdnSET{{attr(oidCN, asn1.TagGeneralString, "x")}}, "CN=x"},
		{"UniversalString as hex", []rdnSET{{attr(oidCN, tagUniversalString, "\x00\x00\x00a")}}, "CN=#1c0400000061"},
		{"non-string value as hex", []rdnSET{{attr(oidCN, asn1.TagInteger, "\x01")}}, "CN=#020101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			der, err := asn1.Marshal(tc.rdns)
			if err != nil {
				t.Fatal(err)
			}
			got, err := javaRFC2253(der)
			if err != nil || got != tc.want {
				t.Errorf("javaRFC2253 = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := javaRFC2253([]byte{0x30, 0x05, 0x31}); err == nil {
		t.Error("malformed subject accepted")
	}
}

func TestPeerPrincipalNeedsAVerifiedCertificate(t *testing.T) {
	ca := newTestCA(t, "test CA")
	leaf := ca.client(t, pkix.Name{CommonName: "alice"}).Leaf
	for _, tc := range []struct {
		name  string
		state tls.ConnectionState
		want  string
	}{
		{"no certificate", tls.ConnectionState{HandshakeComplete: true}, ""},
		{"not verified", tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{leaf}}, ""},
		{"handshake not done", tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, ca.cert}}}, ""},
		{"verified", tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, ca.cert}}}, "User:CN=alice"},
	} {
		got, ok := PeerPrincipal(tc.state)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: PeerPrincipal = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}
