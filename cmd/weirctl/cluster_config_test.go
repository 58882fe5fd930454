package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// fakeAdmin answers GET /v1/cluster_config with set and records PUT
// bodies; a PUT naming "bad" is refused with a problem map.
func fakeAdmin(t *testing.T, set map[string]any) (*httptest.Server, *[]map[string]any) {
	var puts []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/cluster_config":
			json.NewEncoder(w).Encode(set)
		case r.Method == "PUT" && r.URL.Path == "/v1/cluster_config":
			data, _ := io.ReadAll(r.Body)
			var body map[string]any
			json.Unmarshal(data, &body)
			puts = append(puts, body)
			if up, _ := body["upsert"].(map[string]any); up["bad"] != nil {
				w.WriteHeader(400)
				w.Write([]byte(`{"bad":"unknown property","log_retention_ms":"log_retention_ms: -5 out of range [-1, 4611686018427387904]"}`))
				return
			}
			w.Write([]byte(`{"config_version": 7}`))
		default:
			w.WriteHeader(404)
			w.Write([]byte(`{"message":"not found"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &puts
}

func TestClusterConfigSetAndErrors(t *testing.T) {
	srv, puts := fakeAdmin(t, map[string]any{"log_retention_ms": 5})
	out, _, err := run(t, "", "cluster", "config", "--admin-url", srv.URL, "set", "log_retention_ms=10", "auto_create_topics_enabled=true")
	if err != nil || !strings.Contains(out, "7") {
		t.Fatalf("set: %q %v", out, err)
	}
	up := (*puts)[0]["upsert"].(map[string]any)
	if up["log_retention_ms"] != "10" || up["auto_create_topics_enabled"] != "true" {
		t.Fatalf("PUT body: %v", (*puts)[0])
	}
	_, stderr, err := run(t, "", "cluster", "config", "--admin-url", srv.URL, "set", "bad=1", "log_retention_ms=-5")
	clitest.WantErrContains(t, err, "bad, log_retention_ms")
	if !strings.Contains(stderr, "unknown property") || !strings.Contains(stderr, "out of range") {
		t.Fatalf("problems not printed: %q", stderr)
	}
	_, _, err = run(t, "", "cluster", "config", "--admin-url", srv.URL, "set", "novalue")
	clitest.WantErrContains(t, err, "want name=value")
	_, _, err = run(t, "", "cluster", "config", "--admin-url", srv.URL, "get", "nope")
	clitest.WantErrContains(t, err, "unknown cluster property")
	out, _, err = run(t, "", "--format", "yaml", "cluster", "config", "--admin-url", srv.URL, "get")
	if err != nil || out != "log_retention_ms: 5\n" {
		t.Fatalf("get as YAML: %q %v", out, err)
	}
}

func TestClusterConfigImportRemovesAbsent(t *testing.T) {
	srv, puts := fakeAdmin(t, map[string]any{"log_retention_ms": 5, "retention_bytes": 9})
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("retention_bytes: 10\nenable_leader_balancer: false\n"), 0o644)
	if _, _, err := run(t, "", "cluster", "config", "--admin-url", srv.URL, "import", "-f", file); err != nil {
		t.Fatal(err)
	}
	body := (*puts)[0]
	up := body["upsert"].(map[string]any)
	if up["retention_bytes"] != float64(10) || up["enable_leader_balancer"] != false || len(up) != 2 {
		t.Fatalf("upsert: %v", body)
	}
	if rm := body["remove"].([]any); len(rm) != 1 || rm[0] != "log_retention_ms" {
		t.Fatalf("remove: %v", body)
	}
	t.Setenv(admin.URLEnv, srv.URL)
	out, _, err := run(t, "", "cluster", "config", "export")
	if err != nil || out != "log_retention_ms: 5\nretention_bytes: 9\n" {
		t.Fatalf("export via %s: %q %v", admin.URLEnv, out, err)
	}
}
