package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAdminCredentialsResolve(t *testing.T) {
	t.Setenv(UserEnv, "")
	t.Setenv(PasswordEnv, "")
	const plain, secure = "http://b:9644", "https://b:9644"
	for _, tc := range []struct {
		name      string
		flags     credentials
		env       [2]string // user, password
		base      string
		user, pw  string
		wantError string
	}{
		{name: "none", base: plain},
		{name: "flags", flags: credentials{user: "alice", password: "pw"}, base: plain, user: "alice", pw: "pw"},
		{name: "environment", env: [2]string{"bob", "env-pw"}, base: plain, user: "bob", pw: "env-pw"},
		{name: "flags win", flags: credentials{user: "alice", password: "pw"}, env: [2]string{"bob", "env-pw"}, base: plain, user: "alice", pw: "pw"},
		{name: "password from the environment", flags: credentials{user: "alice"}, env: [2]string{"", "env-pw"}, base: plain, user: "alice", pw: "env-pw"},
		{name: "user without password", flags: credentials{user: "alice"}, base: plain, wantError: "--admin-user alice needs --admin-password"},
		{name: "password without user", flags: credentials{password: "pw"}, base: plain, wantError: "--admin-password needs --admin-user"},
		{name: "cert without key", flags: credentials{certFile: "c.pem"}, base: secure, wantError: "go together"},
		{name: "CA on plain HTTP", flags: credentials{caFile: "ca.pem"}, base: plain, wantError: "need an https:// admin URL"},
		{name: "CA on HTTPS", flags: credentials{caFile: "ca.pem"}, base: secure},
	} {
		t.Setenv(UserEnv, tc.env[0])
		t.Setenv(PasswordEnv, tc.env[1])
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

// TestAdminCredentialsStayWithTheBroker: a redirect to another host is
// not followed with the credentials; one within the broker is.
func TestAdminCredentialsStayWithTheBroker(t *testing.T) {
	t.Setenv(UserEnv, "")
	t.Setenv(PasswordEnv, "")
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

	cl := newHTTPClient(broker.URL, credentials{user: "alice", password: "pw"}, 5*time.Second)
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
