package main

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/config/tlstest"
)

// TestAdminListenerMutualTLS: behind admin_tls with client_auth
// requested, a verified client certificate authenticates as User:CN=...,
// a superuser when superusers names it; a caller without one may still
// use basic credentials; a certificate of another CA is refused in the
// handshake.
func TestAdminListenerMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "admin CA")
	certFile, keyFile := ca.Server(t, "broker").WriteFiles(t, dir, "admin")
	node := config.Node{AdminAddr: "127.0.0.1:0", AdminTLS: &config.ListenerTLS{
		CertFile: certFile, KeyFile: keyFile, CAFile: ca.WriteCertFile(t, dir), ClientAuth: config.ClientAuthRequested,
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	ln, err := listenAdmin(ctx, node, logger)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeAuthBackend(t)
	f.superusers = append(f.superusers, "User:CN=weir-admin")
	f.requireAuth(t, true)
	srv := newAdminServer(newAdminAuth(f, logger).wrap(reachedHandler), logger)
	go srv.Serve(ln)
	defer srv.Close()
	base := "https://" + ln.Addr().String()

	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(certs...)}}
	}
	admin := client(ca.Client(t, pkix.Name{CommonName: "weir-admin"}).TLS)
	reader := client(ca.Client(t, pkix.Name{CommonName: "reader"}).TLS)
	anonymous := client()

	for _, tc := range []struct {
		name, method, user, password string
		cl                           *http.Client
		code                         int
		message                      string
	}{
		{"superuser certificate changes", "PUT", "", "", admin, 200, ""},
		{"certificate reads", "GET", "", "", reader, 200, ""},
		{"certificate changes", "PUT", "", "", reader, 403, "user CN=reader is not a superuser"},
		{"no certificate, no credentials", "GET", "", "", anonymous, 401, "or a client certificate"},
		{"no certificate, basic credentials", "PUT", "admin", "admin-pw", anonymous, 200, ""},
		{"named user wins over the certificate", "PUT", "bob", "bob-pw", admin, 403, "user bob is not a superuser"},
	} {
		p := probe(t, tc.cl, tc.method, base+"/v1/cluster_config", tc.user, tc.password)
		if p.code != tc.code || !strings.Contains(p.message, tc.message) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, p.code, p.message, tc.code, tc.message)
		}
	}

	// Go's client sends a certificate only when its issuer is one the
	// server asks for; a certificate sent regardless must be refused.
	foreign := tlstest.NewCA(t, "other CA").Client(t, pkix.Name{CommonName: "weir-admin"}).TLS
	impostor := client()
	impostor.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &foreign, nil
	}
	req, _ := http.NewRequest("GET", base+"/v1/cluster_config", nil)
	resp, err := impostor.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate of another CA: %d, want a failed handshake", resp.StatusCode)
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		t.Fatalf("the client refused the server, not the server the client: %v", err)
	}
}

// TestListenAdminRefusesBrokenTLS: a certificate that does not load
// stops the broker at start, naming admin_tls.
func TestListenAdminRefusesBrokenTLS(t *testing.T) {
	dir := t.TempDir()
	node := config.Node{AdminAddr: "127.0.0.1:0", AdminTLS: &config.ListenerTLS{
		CertFile: tlstest.WriteFile(t, filepath.Join(dir, "admin.pem"), []byte("not a certificate")),
		KeyFile:  tlstest.WriteFile(t, filepath.Join(dir, "admin.key"), []byte("not a key")),
	}}
	ln, err := listenAdmin(context.Background(), node, slog.New(slog.DiscardHandler))
	if err == nil {
		ln.Close()
		t.Fatal("a broken certificate was accepted")
	}
	if !strings.Contains(err.Error(), "admin_tls") || !strings.Contains(err.Error(), "cert_file") {
		t.Fatalf("error %q does not name admin_tls's cert_file", err)
	}
}
