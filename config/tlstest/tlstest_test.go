package tlstest

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// handshake runs a TLS handshake between the two configurations over
// loopback TCP and returns what the server saw, and each side's error.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(10 * time.Second)
	ln.(*net.TCPListener).SetDeadline(deadline)
	clientErr := make(chan error, 1)
	go func() {
		nc, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			clientErr <- err
			return
		}
		defer nc.Close()
		nc.SetDeadline(deadline)
		c := tls.Client(nc, client)
		err = c.Handshake()
		if err == nil {
			// TLS 1.3 reports a refused client certificate on the first read.
			_, err = c.Read(make([]byte, 1))
		}
		clientErr <- err
	}()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(deadline)
	s := tls.Server(nc, server)
	serverErr := s.Handshake()
	if serverErr == nil {
		s.Write([]byte{1})
	}
	nc.Close()
	return s.ConnectionState(), serverErr, <-clientErr
}

// TestMutualTLS: a client trusting the CA verifies the server's
// certificate for localhost and 127.0.0.1, and the server verifies the
// client's and sees its subject; a certificate of another CA is refused.
func TestMutualTLS(t *testing.T) {
	ca := NewCA(t, "test CA")
	server := &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "broker").TLS},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	admin := ca.Client(t, pkix.Name{CommonName: "weir-admin", Organization: []string{"acme"}})
	for _, host := range []string{"localhost", "127.0.0.1"} {
		client := ca.ClientConfig(admin.TLS)
		client.ServerName = host
		state, serverErr, clientErr := handshake(t, server, client)
		if serverErr != nil || clientErr != nil {
			t.Fatalf("%s: server %v, client %v", host, serverErr, clientErr)
		}
		if got := state.PeerCertificates[0].Subject.String(); got != "CN=weir-admin,O=acme" {
			t.Fatalf("%s: the server saw %q", host, got)
		}
	}

	other := NewCA(t, "other CA")
	client := other.ClientConfig(other.Client(t, pkix.Name{CommonName: "mallory"}).TLS)
	client.RootCAs, client.ServerName = ca.Pool(), "localhost"
	// Go's client sends a certificate only when the server names its
	// issuer; this one sends it regardless.
	client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &client.Certificates[0], nil }
	if _, serverErr, _ := handshake(t, server, client); serverErr == nil {
		t.Fatal("the server accepted a certificate of another CA")
	}
	if _, _, clientErr := handshake(t, server, other.ClientConfig()); clientErr == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
}

func TestServerHosts(t *testing.T) {
	leaf := NewCA(t, "test CA").Server(t, "broker", "broker-1.example", "10.0.0.7").TLS.Leaf
	for host, ok := range map[string]bool{"broker-1.example": true, "10.0.0.7": true, "localhost": false, "127.0.0.1": false} {
		if err := leaf.VerifyHostname(host); (err == nil) != ok {
			t.Errorf("%s: %v", host, err)
		}
	}
}

// TestWriteFiles: the files load as tls and x509 read them, and no
// temporary file is left behind.
func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	ca := NewCA(t, "test CA")
	caFile := ca.WriteCertFile(t, dir)
	certFile, keyFile := ca.Server(t, "broker").WriteFiles(t, dir, "server")
	if certFile != filepath.Join(dir, "server.pem") || keyFile != filepath.Join(dir, "server.key") || caFile != filepath.Join(dir, "ca.pem") {
		t.Fatalf("paths %s %s %s", certFile, keyFile, caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("%d files in %s, want 3", len(entries), dir)
	}
}
