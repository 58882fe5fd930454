package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/config"
)

// fakeAuthBackend has users with plain passwords and a list of
// superuser principals.
type fakeAuthBackend struct {
	vals       *config.Values
	passwords  map[string]string
	superusers []string
}

func (f *fakeAuthBackend) Properties() *config.Values { return f.vals }
func (f *fakeAuthBackend) VerifyPassword(user, password string) bool {
	want, ok := f.passwords[user]
	return ok && want == password
}
func (f *fakeAuthBackend) Superuser(principal string) bool {
	return slices.Contains(f.superusers, principal)
}

func (f *fakeAuthBackend) requireAuth(t *testing.T, on bool) {
	t.Helper()
	v := "false"
	if on {
		v = "true"
	}
	if err := f.vals.Replace(map[string]string{requireAuthProperty: v}); err != nil {
		t.Fatal(err)
	}
}

func newFakeAuthBackend(t *testing.T) *fakeAuthBackend {
	t.Helper()
	vals, err := config.NewValues(config.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeAuthBackend{vals: vals, passwords: map[string]string{"admin": "admin-pw", "bob": "bob-pw"},
		superusers: []string{"User:admin"}}
}

// reachedHandler answers 200 "reached" to anything that gets past the
// authentication.
var reachedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	io.WriteString(w, "reached")
})

// authProbe is one request and what it got.
type authProbe struct {
	code    int
	body    string
	message string
	header  http.Header
}

func probe(t *testing.T, cl *http.Client, method, url, user, password string) authProbe {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" || password != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	p := authProbe{code: resp.StatusCode, body: string(data), header: resp.Header}
	var msg struct {
		Message string `json:"message"`
	}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(data, &msg); err != nil {
			t.Fatalf("%s %s: %d with a body that is not a JSON error: %q", method, url, resp.StatusCode, data)
		}
		p.message = msg.Message
	}
	return p
}

// TestAdminAuth: with admin_api_require_auth off everything is open;
// turned on (no restart) reads need a user, changes and profiles a
// superuser, the readiness probe stays open, and failures are 401 with a
// challenge or 403, with JSON bodies saying why.
func TestAdminAuth(t *testing.T) {
	f := newFakeAuthBackend(t)
	auth := newAdminAuth(f, slog.New(slog.DiscardHandler))
	var delays atomic.Int32
	auth.failureDelay = func(context.Context) { delays.Add(1) }
	srv := httptest.NewServer(auth.wrap(reachedHandler))
	defer srv.Close()
	cl := srv.Client()

	for _, method := range []string{"GET", "PUT", "DELETE"} {
		if p := probe(t, cl, method, srv.URL+"/v1/cluster_config", "", ""); p.code != 200 || p.body != "reached" {
			t.Fatalf("auth off: %s without credentials: %d %s", method, p.code, p.body)
		}
	}

	f.requireAuth(t, true)
	for _, tc := range []struct {
		name, method, path, user, password string
		code                               int
		message                            string // part of the error message
	}{
		{"no credentials", "GET", "/v1/cluster_config", "", "", 401, "authentication required"},
		{"no credentials, metrics", "GET", "/metrics", "", "", 401, "authentication required"},
		{"no credentials, unknown path", "GET", "/nope", "", "", 401, "authentication required"},
		{"readiness", "GET", readinessPath, "", "", 200, ""},
		{"readiness HEAD", "HEAD", readinessPath, "", "", 200, ""},
		{"readiness is only GET", "POST", readinessPath, "", "", 401, "authentication required"},
		{"readiness prefix is not readiness", "GET", readinessPath + "/x", "", "", 401, "authentication required"},
		{"wrong password", "GET", "/v1/cluster_config", "bob", "nope", 401, "authentication failed: wrong user name or password"},
		{"unknown user", "GET", "/v1/cluster_config", "mallory", "bob-pw", 401, "authentication failed: wrong user name or password"},
		{"reader reads", "GET", "/v1/cluster_config", "bob", "bob-pw", 200, ""},
		{"reader reads metrics", "GET", "/metrics", "bob", "bob-pw", 200, ""},
		{"reader changes config", "PUT", "/v1/cluster_config", "bob", "bob-pw", 403, "user bob is not a superuser: PUT /v1/cluster_config needs one"},
		{"reader sets license", "PUT", "/v1/features/license", "bob", "bob-pw", 403, "user bob is not a superuser"},
		{"reader posts", "POST", "/v1/anything", "bob", "bob-pw", 403, "not a superuser"},
		{"reader profiles", "GET", "/debug/pprof/heap", "bob", "bob-pw", 403, "not a superuser"},
		{"reader profiles index", "GET", "/debug/pprof", "bob", "bob-pw", 403, "not a superuser"},
		{"superuser changes config", "PUT", "/v1/cluster_config", "admin", "admin-pw", 200, ""},
		{"superuser profiles", "GET", "/debug/pprof/heap", "admin", "admin-pw", 200, ""},
	} {
		before := delays.Load()
		p := probe(t, cl, tc.method, srv.URL+tc.path, tc.user, tc.password)
		if p.code != tc.code || !strings.Contains(p.message, tc.message) {
			t.Errorf("%s: %s %s: %d %q, want %d %q", tc.name, tc.method, tc.path, p.code, p.message, tc.code, tc.message)
		}
		if tc.code == 200 && tc.method != "HEAD" && p.body != "reached" {
			t.Errorf("%s: body %q, want the handler's", tc.name, p.body)
		}
		if challenge := p.header.Get("WWW-Authenticate"); (tc.code == 401) != (challenge != "") ||
			challenge != "" && !strings.HasPrefix(challenge, "Basic ") {
			t.Errorf("%s: %d with WWW-Authenticate %q", tc.name, p.code, challenge)
		}
		// Only a wrong guess is held back; no credentials is not one.
		if delayed := delays.Load() > before; delayed != strings.Contains(tc.message, "authentication failed") {
			t.Errorf("%s: delayed %v", tc.name, delayed)
		}
	}

	// Not basic credentials at all is a failed authentication too.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/cluster_config", nil)
	req.Header.Set("Authorization", "Bearer abc")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("bearer token: %d", resp.StatusCode)
	}

	// Turned off again, at runtime: open again.
	f.requireAuth(t, false)
	if p := probe(t, cl, "PUT", srv.URL+"/v1/cluster_config", "", ""); p.code != 200 {
		t.Fatalf("auth off again: %d %s", p.code, p.body)
	}
}

// TestAdminAuthFailureDelayHoldsOnlyItsRequest: while a failed
// authentication waits out its delay, other requests are served.
func TestAdminAuthFailureDelayHoldsOnlyItsRequest(t *testing.T) {
	f := newFakeAuthBackend(t)
	f.requireAuth(t, true)
	auth := newAdminAuth(f, slog.New(slog.DiscardHandler))
	waiting, release := make(chan struct{}), make(chan struct{})
	auth.failureDelay = func(ctx context.Context) {
		close(waiting)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	srv := httptest.NewServer(auth.wrap(reachedHandler))
	defer srv.Close()
	cl := srv.Client()
	cl.Timeout = 10 * time.Second

	// The goroutine reports rather than failing: only the test's own
	// goroutine may end it.
	type answer struct {
		code int
		err  error
	}
	failed := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/brokers", nil)
		req.SetBasicAuth("bob", "wrong")
		resp, err := cl.Do(req)
		if err != nil {
			failed <- answer{err: err}
			return
		}
		resp.Body.Close()
		failed <- answer{code: resp.StatusCode}
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the failed authentication never reached its delay")
	}
	if p := probe(t, cl, "GET", srv.URL+"/v1/brokers", "bob", "bob-pw"); p.code != 200 {
		t.Fatalf("a good request during another's delay: %d %s", p.code, p.body)
	}
	select {
	case a := <-failed:
		t.Fatalf("the failed request was answered before its delay ended: %d %v", a.code, a.err)
	default:
	}
	close(release)
	select {
	case a := <-failed:
		if a.err != nil || a.code != 401 {
			t.Fatalf("failed authentication: %d %v", a.code, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed request was not answered after its delay")
	}
}
