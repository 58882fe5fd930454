package admin

import (
	"testing"
)

func TestParseAdminError(t *testing.T) {
	for _, tc := range []struct {
		body, want string
	}{
		{`{"message":"license expired"}`, "admin API: 400 license expired"},
		{`{"message":"license expired","code":"EXPIRED","retry":false}`, "admin API: 400 license expired"},
		{`{"bad":"unknown property","log_retention_ms":"out of range"}`, "invalid cluster properties: bad, log_retention_ms"},
		{"plain text\n", "admin API: 400 plain text"},
		{"", "admin API: 400 Bad Request"},
	} {
		if got := parseError(400, []byte(tc.body)).Error(); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.body, got, tc.want)
		}
	}
}

func TestResolveAdminURL(t *testing.T) {
	t.Setenv(URLEnv, "")
	if got := resolveURL(""); got != defaultURL {
		t.Errorf("default: %q", got)
	}
	t.Setenv(URLEnv, " broker-2:9644 ")
	if got := resolveURL(""); got != "http://broker-2:9644" {
		t.Errorf("env: %q", got)
	}
	if got := resolveURL("https://b:9644/"); got != "https://b:9644" {
		t.Errorf("flag wins: %q", got)
	}
}
