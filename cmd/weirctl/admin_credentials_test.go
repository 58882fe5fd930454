package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/config/tlstest"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// TestAdminCommandsSendCredentials: every admin command sends the basic
// credentials, to the broker it is pointed at and to the others it finds
// through GET /v1/brokers; without them, or with refused ones, the error
// says what to do.
func TestAdminCommandsSendCredentials(t *testing.T) {
	t.Setenv(admin.UserEnv, "")
	t.Setenv(admin.PasswordEnv, "")
	seed, second := fakeCluster(t)
	seed.RequireCredentials("alice", "alice-pw")
	second.RequireCredentials("alice", "alice-pw")
	stats := []string{"--format", "json", "cluster", "coalescer", "--admin-url", seed.Server.URL, "stats"}

	out, _, err := run(t, "", append(stats, "--admin-user", "alice", "--admin-password", "alice-pw")...)
	if err != nil {
		t.Fatalf("with credentials: %v\n%s", err, out)
	}
	var doc coalescerStats
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Answered != 2 {
		t.Fatalf("with credentials both brokers answer: %+v", doc)
	}

	t.Setenv(admin.UserEnv, "alice")
	t.Setenv(admin.PasswordEnv, "alice-pw")
	if out, _, err := run(t, "", stats...); err != nil {
		t.Fatalf("credentials from the environment: %v\n%s", err, out)
	}
	t.Setenv(admin.UserEnv, "")
	t.Setenv(admin.PasswordEnv, "")

	_, _, err = run(t, "", stats...)
	clitest.WantErrContains(t, err, "admin API: authentication required: pass --admin-user/--admin-password")
	_, _, err = run(t, "", append(stats, "--admin-user", "alice", "--admin-password", "wrong")...)
	clitest.WantErrContains(t, err, "admin API: user alice: authentication required")
	_, _, err = run(t, "", "cluster", "config", "get", "--admin-url", seed.Server.URL, "--admin-user", "alice")
	clitest.WantErrContains(t, err, "--admin-user alice needs --admin-password")

	// The second broker refusing while the first accepts is reported
	// for that broker, with the same advice.
	second.RequireCredentials("carol", "carol-pw")
	out, _, err = run(t, "", append(stats, "--admin-user", "alice", "--admin-password", "alice-pw")...)
	if err != nil {
		t.Fatalf("one broker refusing: %v\n%s", err, out)
	}
	doc = coalescerStats{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	refused := false
	for _, b := range doc.Brokers {
		refused = refused || b.NodeID == 1 && strings.Contains(b.Error, "user alice: authentication required")
	}
	if doc.Answered != 1 || !refused {
		t.Fatalf("one broker refusing: %s", out)
	}
}

// TestAdminRefusalMessages: a 403 keeps the broker's message, which
// names the user that is not a superuser.
func TestAdminRefusalMessages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"message":"user bob is not a superuser: PUT /v1/cluster_config needs one"}`))
	}))
	defer srv.Close()
	_, _, err := run(t, "", "cluster", "config", "set", "log_retention_ms=1000", "--admin-url", srv.URL,
		"--admin-user", "bob", "--admin-password", "pw")
	clitest.WantErrContains(t, err, "admin API: user bob is not a superuser")
}

// TestAdminClientTLS: an https:// URL with --admin-tls-ca trusts that CA
// and presents --admin-tls-cert, with the basic credentials too.
func TestAdminClientTLS(t *testing.T) {
	t.Setenv(admin.UserEnv, "")
	t.Setenv(admin.PasswordEnv, "")
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	caFile := ca.WriteCertFile(t, dir)
	certFile, keyFile := ca.Client(t, pkix.Name{CommonName: "weirctl"}).WriteFiles(t, dir, "client")

	type seen struct {
		subject, user string
	}
	requests := make(chan seen, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{}
		if len(r.TLS.PeerCertificates) > 0 {
			s.subject = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		s.user, _, _ = r.BasicAuth()
		requests <- s
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"log_retention_ms": 1000}`))
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.Server(t, "broker").TLS},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.VerifyClientCertIfGiven,
	}
	srv.StartTLS()
	defer srv.Close()

	get := []string{"cluster", "config", "get", "--admin-url", srv.URL}
	if _, _, err := run(t, "", get...); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without --admin-tls-ca the test CA is not trusted: %v", err)
	}
	out, _, err := run(t, "", append(get, "--admin-tls-ca", caFile, "--admin-tls-cert", certFile, "--admin-tls-key", keyFile,
		"--admin-user", "alice", "--admin-password", "pw")...)
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if !strings.Contains(out, "log_retention_ms") {
		t.Fatalf("output:\n%s", out)
	}
	select {
	case s := <-requests:
		if s != (seen{subject: "weirctl", user: "alice"}) {
			t.Fatalf("the broker saw %+v", s)
		}
	default:
		t.Fatal("the broker saw no request")
	}
	_, _, err = run(t, "", append(get, "--admin-tls-ca", filepath.Join(dir, "missing.pem"))...)
	clitest.WantErrContains(t, err, "--admin-tls-ca")
}
