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
	"time"

	"github.com/weir-broker/weir/config/tlstest"
)

func TestAdminCredentialsResolve(t *testing.T) {
	t.Setenv(adminUserEnv, "")
	t.Setenv(adminPasswordEnv, "")
	const plain, secure = "http://b:9644", "https://b:9644"
	for _, tc := range []struct {
		name      string
		flags     adminCredentials
		env       [2]string // user, password
		base      string
		user, pw  string
		wantError string
	}{
		{name: "none", base: plain},
		{name: "flags", flags: adminCredentials{user: "alice", password: "pw"}, base: plain, user: "alice", pw: "pw"},
		{name: "environment", env: [2]string{"bob", "env-pw"}, base: plain, user: "bob", pw: "env-pw"},
		{name: "flags win", flags: adminCredentials{user: "alice", password: "pw"}, env: [2]string{"bob", "env-pw"}, base: plain, user: "alice", pw: "pw"},
		{name: "password from the environment", flags: adminCredentials{user: "alice"}, env: [2]string{"", "env-pw"}, base: plain, user: "alice", pw: "env-pw"},
		{name: "user without password", flags: adminCredentials{user: "alice"}, base: plain, wantError: "--admin-user alice needs --admin-password"},
		{name: "password without user", flags: adminCredentials{password: "pw"}, base: plain, wantError: "--admin-password needs --admin-user"},
		{name: "cert without key", flags: adminCredentials{certFile: "c.pem"}, base: secure, wantError: "go together"},
		{name: "CA on plain HTTP", flags: adminCredentials{caFile: "ca.pem"}, base: plain, wantError: "need an https:// admin URL"},
		{name: "CA on HTTPS", flags: adminCredentials{caFile: "ca.pem"}, base: secure},
	} {
		t.Setenv(adminUserEnv, tc.env[0])
		t.Setenv(adminPasswordEnv, tc.env[1])
		got, err := tc.flags.resolve(tc.base)
		switch {
		case tc.wantError != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantError)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got.user != tc.user || got.password != tc.pw:
			t.Errorf("%s: user %q password %q, want %q %q", tc.name, got.user, got.password, tc.user, tc.pw)
		}
	}
}

// TestAdminCommandsSendCredentials: every admin command sends the basic
// credentials, to the broker it is pointed at and to the others it finds
// through GET /v1/brokers; without them, or with refused ones, the error
// says what to do.
func TestAdminCommandsSendCredentials(t *testing.T) {
	t.Setenv(adminUserEnv, "")
	t.Setenv(adminPasswordEnv, "")
	seed, second := fakeCluster(t)
	seed.requireCredentials("alice", "alice-pw")
	second.requireCredentials("alice", "alice-pw")
	stats := []string{"--format", "json", "cluster", "coalescer", "--admin-url", seed.srv.URL, "stats"}

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

	t.Setenv(adminUserEnv, "alice")
	t.Setenv(adminPasswordEnv, "alice-pw")
	if out, _, err := run(t, "", stats...); err != nil {
		t.Fatalf("credentials from the environment: %v\n%s", err, out)
	}
	t.Setenv(adminUserEnv, "")
	t.Setenv(adminPasswordEnv, "")

	_, _, err = run(t, "", stats...)
	wantErrContains(t, err, "admin API: authentication required: pass --admin-user/--admin-password")
	_, _, err = run(t, "", append(stats, "--admin-user", "alice", "--admin-password", "wrong")...)
	wantErrContains(t, err, "admin API: user alice: authentication required")
	_, _, err = run(t, "", "cluster", "config", "get", "--admin-url", seed.srv.URL, "--admin-user", "alice")
	wantErrContains(t, err, "--admin-user alice needs --admin-password")

	// The second broker refusing while the first accepts is reported
	// for that broker, with the same advice.
	second.requireCredentials("carol", "carol-pw")
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
	wantErrContains(t, err, "admin API: user bob is not a superuser")
}

// TestAdminClientTLS: an https:// URL with --admin-tls-ca trusts that CA
// and presents --admin-tls-cert, with the basic credentials too.
func TestAdminClientTLS(t *testing.T) {
	t.Setenv(adminUserEnv, "")
	t.Setenv(adminPasswordEnv, "")
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
	wantErrContains(t, err, "--admin-tls-ca")
}

// TestAdminCredentialsStayWithTheBroker: a redirect to another host is
// not followed with the credentials; one within the broker is.
func TestAdminCredentialsStayWithTheBroker(t *testing.T) {
	t.Setenv(adminUserEnv, "")
	t.Setenv(adminPasswordEnv, "")
	elsewhere := make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _, _ := r.BasicAuth()
		elsewhere <- user
	}))
	defer other.Close()
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/cluster_config":
			http.Redirect(w, r, other.URL+"/v1/cluster_config", http.StatusFound)
		case "/v1/features/license":
			http.Redirect(w, r, "/v1/features/license/", http.StatusMovedPermanently)
		default:
			if user, _, _ := r.BasicAuth(); user != "alice" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"loaded": false, "status": "none"}`))
		}
	}))
	defer broker.Close()

	cl := newAdminHTTPClient(broker.URL, adminCredentials{user: "alice", password: "pw"}, 5*time.Second)
	resp, err := cl.Get(broker.URL + "/v1/cluster_config")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a redirect to another host was followed: %d", resp.StatusCode)
	}
	if !strings.Contains(err.Error(), "not following a redirect") {
		t.Fatalf("error: %v", err)
	}
	select {
	case user := <-elsewhere:
		t.Fatalf("the other host was asked (as %q)", user)
	default:
	}
	resp, err = cl.Get(broker.URL + "/v1/features/license")
	if err != nil {
		t.Fatalf("a redirect within the broker: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a redirect within the broker: %d", resp.StatusCode)
	}
}
