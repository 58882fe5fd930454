package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/config"
)

// The SCRAM users of the admin API tests: admin is a superuser, bob is
// not.
const (
	adminUser, adminPassword = "admin", "admin-secret"
	bobUser, bobPassword     = "bob", "bob-secret"
)

// adminAnswer is one admin API response.
type adminAnswer struct {
	code   int
	body   string
	header http.Header
}

func (a adminAnswer) String() string { return fmt.Sprintf("%d %s", a.code, strings.TrimSpace(a.body)) }

// adminCall sends one request to the admin API at base, with basic
// credentials when user is set.
func adminCall(t testing.TB, cl *http.Client, base, method, path, user, password, body string) adminAnswer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return adminAnswer{code: resp.StatusCode, body: string(raw), header: resp.Header}
}

// createAdminUsers creates admin and bob over the Kafka protocol, which
// the admin API's authentication does not guard.
func createAdminUsers(t testing.TB, w *weirctl) {
	t.Helper()
	w.ok(t, "", "acl", "user", "create", adminUser, "--password", adminPassword)
	w.ok(t, "", "acl", "user", "create", bobUser, "--password", bobPassword, "--mechanism", "SCRAM-SHA-512")
}

// TestAdminAuth: one broker's admin API before and after
// admin_api_require_auth is set (at runtime, through weirctl as the
// superuser, following the documented bootstrap order): open at first;
// then reads need a user, changes a superuser, the readiness probe stays
// open, a wrong password is 401 and logged, and weirctl with credentials
// works and without them says which flags to pass.
func TestAdminAuth(t *testing.T) {
	b := StartBroker(t)
	w := newWeirctl(t, b)
	base := "http://" + b.AdminAddr
	cl := &http.Client{Timeout: requestTimeout}
	cc := func(args ...string) []string {
		return append([]string{"cluster", "config", "--admin-url", base}, args...)
	}
	as := func(user, password string, args ...string) []string {
		return append(args, "--admin-user", user, "--admin-password", password)
	}

	// Bootstrap: users, then superusers, then authentication.
	createAdminUsers(t, w)
	for _, path := range []string{"/v1/cluster_config", "/metrics", "/v1/brokers"} {
		if a := adminCall(t, cl, base, "GET", path, "", "", ""); a.code != 200 {
			t.Fatalf("before authentication is required: GET %s: %s", path, a)
		}
	}
	w.ok(t, "", cc("set", "superusers="+adminUser)...)
	w.ok(t, "", as(adminUser, adminPassword, cc("set", "admin_api_require_auth=true")...)...)
	pollUntil(t, configPropagation, "admin_api_require_auth in effect", func() error {
		if a := adminCall(t, cl, base, "GET", "/v1/cluster_config", "", "", ""); a.code != http.StatusUnauthorized {
			return fmt.Errorf("unauthenticated GET: %s", a)
		}
		return nil
	})

	a := adminCall(t, cl, base, "GET", "/v1/cluster_config", "", "", "")
	if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic ") || !strings.Contains(a.body, `"message"`) ||
		!strings.Contains(a.body, "authentication required") {
		t.Fatalf("unauthenticated GET: %s, WWW-Authenticate %q", a, a.header.Get("WWW-Authenticate"))
	}
	licenseText := tamperedLicense(t)
	for _, tc := range []struct {
		name, method, path, user, password, body string
		code                                     int
		want                                     string // part of the body
	}{
		{"readiness stays open", "GET", "/v1/status/ready", "", "", "", 200, "ready"},
		{"metrics need a user", "GET", "/metrics", "", "", "", 401, "authentication required"},
		{"bob reads metrics", "GET", "/metrics", bobUser, bobPassword, "", 200, "weir_"},
		{"bob reads the config", "GET", "/v1/cluster_config", bobUser, bobPassword, "", 200, "admin_api_require_auth"},
		{"bob reads the license", "GET", "/v1/features/license", bobUser, bobPassword, "", 200, "status"},
		{"wrong password", "GET", "/v1/cluster_config", bobUser, "not-" + bobPassword, "", 401, "authentication failed"},
		{"unknown user", "GET", "/v1/cluster_config", "mallory", bobPassword, "", 401, "authentication failed"},
		{"bob changes the config", "PUT", "/v1/cluster_config", bobUser, bobPassword,
			`{"upsert":{"log_retention_ms":1000}}`, 403, "user bob is not a superuser"},
		{"bob turns authentication off", "PUT", "/v1/cluster_config", bobUser, bobPassword,
			`{"upsert":{"admin_api_require_auth":false}}`, 403, "user bob is not a superuser"},
		{"bob sets an enterprise property", "PUT", "/v1/cluster_config", bobUser, bobPassword,
			`{"upsert":{"kafka_fetch_read_coalescing_enabled":true}}`, 403, "user bob is not a superuser"},
		{"bob sets the license", "PUT", "/v1/features/license", bobUser, bobPassword, licenseText, 403, "user bob is not a superuser"},
		{"admin changes the config", "PUT", "/v1/cluster_config", adminUser, adminPassword,
			`{"upsert":{"log_retention_ms":86400000}}`, 200, "config_version"},
		// Being a superuser does not get a license past its signature.
		{"admin sets a tampered license", "PUT", "/v1/features/license", adminUser, adminPassword, licenseText, 400, "signature"},
	} {
		a := adminCall(t, cl, base, tc.method, tc.path, tc.user, tc.password, tc.body)
		if a.code != tc.code || !strings.Contains(a.body, tc.want) {
			t.Errorf("%s: %s %s: %s, want %d with %q", tc.name, tc.method, tc.path, a, tc.code, tc.want)
		}
	}
	if log := b.Log(); !strings.Contains(log, "admin API authentication failed") || !strings.Contains(log, "user=mallory") {
		t.Errorf("the failed authentications are not logged")
	}

	// weirctl: credentials from flags; without them, what to pass.
	w.fails(t, "admin API: authentication required: pass --admin-user/--admin-password", cc("get", "log_retention_ms")...)
	w.fails(t, "admin API: user bob: authentication failed", as(bobUser, "wrong", cc("get", "log_retention_ms")...)...)
	got := decodeJSON[map[string]any](t, w.ok(t, "", as(bobUser, bobPassword, cc("get", "log_retention_ms", "--format", "json")...)...))
	if got["log_retention_ms"] != float64(86400000) {
		t.Fatalf("bob's weirctl cluster config get: %v", got)
	}
	w.fails(t, "admin API: user bob is not a superuser", as(bobUser, bobPassword, cc("set", "log_retention_ms=1000")...)...)
	w.fails(t, "user bob is not a superuser", as(bobUser, bobPassword,
		"cluster", "license", "--admin-url", base, "set", licenseText)...)
	w.ok(t, "", as(adminUser, adminPassword, cc("set", "log_retention_ms=3600000")...)...)
	w.ok(t, "", as(adminUser, adminPassword, "cluster", "license", "--admin-url", base, "info")...)

	// The superuser can open the API again, at runtime too.
	w.ok(t, "", as(adminUser, adminPassword, cc("set", "admin_api_require_auth=false")...)...)
	pollUntil(t, configPropagation, "admin API open again", func() error {
		if a := adminCall(t, cl, base, "GET", "/v1/cluster_config", "", "", ""); a.code != 200 {
			return fmt.Errorf("unauthenticated GET: %s", a)
		}
		return nil
	})
}

// tamperedLicense is a well-formed license whose payload was changed
// after signing (by a key no broker trusts, besides).
func tamperedLicense(t testing.TB) string {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := config.SignLicense(key, config.License{Version: 1, Org: "Mallory", Type: config.LicenseTypeEnterprise,
		Expiry: time.Now().Add(24 * time.Hour).Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	payload, sig, _ := strings.Cut(signed, ".")
	return strings.TrimRight(payload, "=") + "A." + sig
}

// TestAdminAuthCluster: admin_api_require_auth set through one broker
// guards every broker's admin API, and weirctl's commands that read
// every broker's /metrics (cluster coalescer stats, cluster health) send
// the credentials to each of them.
func TestAdminAuthCluster(t *testing.T) {
	bs := StartCluster(t, 3)
	w := newWeirctl(t, bs[0])
	cl := &http.Client{Timeout: requestTimeout}
	url := func(b *Broker) string { return "http://" + b.AdminAddr }
	createAdminUsers(t, w)
	w.ok(t, "", "cluster", "config", "--admin-url", url(bs[1]), "set", "superusers=User:"+adminUser, "admin_api_require_auth=true")
	for _, b := range bs {
		pollUntil(t, configPropagation, fmt.Sprintf("node %d requires authentication", b.NodeID), func() error {
			if a := adminCall(t, cl, url(b), "GET", "/metrics", "", "", ""); a.code != http.StatusUnauthorized {
				return fmt.Errorf("unauthenticated GET /metrics: %s", a)
			}
			return nil
		})
		if a := adminCall(t, cl, url(b), "GET", "/metrics", bobUser, bobPassword, ""); a.code != 200 {
			t.Fatalf("node %d: bob's GET /metrics: %s", b.NodeID, a)
		}
	}

	bob := []string{"--admin-user", bobUser, "--admin-password", bobPassword}
	stats := []string{"--format", "json", "cluster", "coalescer", "--admin-url", url(bs[2]), "stats"}
	type coalescerStats struct {
		Brokers []struct {
			NodeID int32  `json:"node_id"`
			Error  string `json:"error"`
		} `json:"brokers"`
		Answered int `json:"answered"`
	}
	doc := decodeJSON[coalescerStats](t, w.ok(t, "", append(stats, bob...)...))
	if doc.Answered != 3 {
		t.Fatalf("cluster coalescer stats as bob: %+v", doc)
	}
	w.fails(t, "authentication required: pass --admin-user/--admin-password", stats...)

	type health struct {
		Healthy        bool `json:"healthy"`
		MemoryWarnings []struct {
			NodeID  int32  `json:"node_id"`
			Message string `json:"message"`
		} `json:"memory_warnings"`
	}
	healthArgs := []string{"--format", "json", "cluster", "health", "--admin-url", url(bs[0]), "--memory-sample", "200ms"}
	h := decodeJSON[health](t, w.ok(t, "", append(healthArgs, bob...)...))
	for _, mw := range h.MemoryWarnings {
		if strings.Contains(mw.Message, "not checked") {
			t.Fatalf("cluster health as bob could not read a broker: %+v", h.MemoryWarnings)
		}
	}
	h = decodeJSON[health](t, w.ok(t, "", healthArgs...))
	if len(h.MemoryWarnings) == 0 || !strings.Contains(h.MemoryWarnings[0].Message, "authentication required") {
		t.Fatalf("cluster health without credentials: %+v", h.MemoryWarnings)
	}
}

// TestAdminAuthMutualTLS: the admin API behind admin_tls with a test CA
// and client_auth requested, authentication required from the cluster's
// creation: a client certificate is the principal (User:CN=...), a
// superuser when superusers names it; plain HTTP is refused; weirctl
// talks to it with --admin-tls-ca/--admin-tls-cert/--admin-tls-key.
func TestAdminAuthMutualTLS(t *testing.T) {
	ca := NewTestCA(t, "weir admin test CA")
	server := ca.ListenerTLS(t, "requested")
	adminCertFile, adminKeyFile := ca.ClientFiles(t, "weir-admin")
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: requestTimeout, Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(certs...)}}
	}
	anonymous := client()
	b := startBrokerAdminTLS(t, anonymous,
		WithSet("admin_tls.cert_file", server.CertFile), WithSet("admin_tls.key_file", server.KeyFile),
		WithSet("admin_tls.ca_file", server.CAFile), WithSet("admin_tls.client_auth", server.ClientAuth),
		WithSet("cluster.superusers", "User:CN=weir-admin"), WithSet("cluster.admin_api_require_auth", "true"))
	base := "https://" + b.AdminAddr

	admin, reader := client(ca.ClientCert(t, "weir-admin")), client(ca.ClientCert(t, "reader"))
	for _, tc := range []struct {
		name         string
		cl           *http.Client
		method, body string
		code         int
		want         string
	}{
		{"no certificate", anonymous, "GET", "", 401, "client certificate"},
		{"reader reads", reader, "GET", "", 200, "admin_api_require_auth"},
		{"reader changes", reader, "PUT", `{"upsert":{"log_retention_ms":1000}}`, 403, "user CN=reader is not a superuser"},
		{"superuser certificate changes", admin, "PUT", `{"upsert":{"log_retention_ms":7200000}}`, 200, "config_version"},
	} {
		if a := adminCall(t, tc.cl, base, tc.method, "/v1/cluster_config", "", "", tc.body); a.code != tc.code || !strings.Contains(a.body, tc.want) {
			t.Errorf("%s: %s, want %d with %q", tc.name, a, tc.code, tc.want)
		}
	}
	if a := adminCall(t, &http.Client{Timeout: requestTimeout}, "http://"+b.AdminAddr, "GET", "/v1/cluster_config", "", "", ""); a.code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS listener: %s, want 400", a)
	}

	w := newWeirctl(t, b)
	cc := []string{"cluster", "config", "--admin-url", base}
	tlsFlags := []string{"--admin-tls-ca", ca.CAFile, "--admin-tls-cert", adminCertFile, "--admin-tls-key", adminKeyFile}
	w.ok(t, "", append(append(cc, "set", "log_retention_ms=10800000"), tlsFlags...)...)
	got := decodeJSON[map[string]any](t, w.ok(t, "", append(append(cc, "get", "log_retention_ms", "--format", "json"), tlsFlags...)...))
	if got["log_retention_ms"] != float64(10800000) {
		t.Fatalf("weirctl cluster config get over mTLS: %v", got)
	}
	w.fails(t, "certificate", append(cc, "get")...)
	w.fails(t, "authentication required: pass --admin-user/--admin-password", append(cc, "get", "--admin-tls-ca", ca.CAFile)...)
}

// startBrokerAdminTLS starts a broker whose admin API is HTTPS. The
// harness's readiness check speaks plain HTTP, so this assembles the
// broker from the harness's parts, as StartCluster does, and waits for
// GET /v1/status/ready over TLS with cl instead.
func startBrokerAdminTLS(t *testing.T, cl *http.Client, opts ...BrokerOption) *Broker {
	t.Helper()
	spec := brokerSpec{nodeID: 1, logLevel: "info", dataDir: t.TempDir()}
	for _, o := range opts {
		o(&spec)
	}
	b := &Broker{DataDir: spec.dataDir, NodeID: spec.nodeID, spec: spec, bin: WeirBinary(t),
		logPath: filepath.Join(t.TempDir(), "weir.log")}
	t.Cleanup(func() { b.cleanup(t) })
	addrs := freeLoopbackAddrs(t, 3)
	b.KafkaAddr, b.AdminAddr, b.RPCAddr = addrs[0], addrs[1], addrs[2]
	b.args = b.buildArgs()
	if err := b.launch(); err != nil {
		t.Fatalf("starting weir: %v", err)
	}
	url := "https://" + b.AdminAddr + "/v1/status/ready"
	deadline := time.Now().Add(readyTimeout)
	for {
		if b.exited() {
			t.Fatalf("weir exited before becoming ready (%s)\n%s", first(b.exitState()), b.logTail(logTailBytes))
		}
		resp, err := cl.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %v: %v", url, readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
