package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// fakeBackend applies changes straight to a config.Values.
type fakeBackend struct {
	vals     *config.Values
	version  int64
	calls    int
	licensed bool
}

func (f *fakeBackend) Properties() *config.Values  { return f.vals }
func (f *fakeBackend) ClusterConfigVersion() int64 { return f.version }
func (f *fakeBackend) ClusterConfigStatus(context.Context) []broker.ConfigStatus {
	return []broker.ConfigStatus{{NodeID: 0, ConfigVersion: f.version, Invalid: []string{}, Unknown: []string{}}}
}
func (f *fakeBackend) CheckEnterprise(name, value string) error {
	if f.licensed {
		return nil
	}
	return config.CheckEnterprise(f.vals.Registry(), name, value, config.LicenseStatus{Status: config.LicenseStatusNone})
}
func (f *fakeBackend) AlterClusterProperties(changes []broker.PropertyChange, _ bool) error {
	f.calls++
	explicit := map[string]string{}
	for _, n := range f.vals.Registry().Names() {
		if v, ok := f.vals.Get(n); ok {
			explicit[n] = v
		}
	}
	for _, c := range changes {
		if c.Remove {
			delete(explicit, c.Name)
		} else {
			explicit[c.Name] = c.Value
		}
	}
	f.version++
	return f.vals.Replace(explicit)
}

func newFake(t *testing.T) (*fakeBackend, *httptest.Server) {
	vals, err := config.NewValues(config.NewRegistry(), map[string]string{"retention_bytes": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBackend{vals: vals}
	mux := http.NewServeMux()
	registerClusterConfig(mux, f)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

func do(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v", method, url, err)
	}
	return resp.StatusCode, out
}

func TestClusterConfigGet(t *testing.T) {
	_, srv := newFake(t)
	code, all := do(t, "GET", srv.URL+"/v1/cluster_config", "")
	if code != 200 || len(all) != len(config.NewRegistry().Names()) {
		t.Fatalf("%d %v", code, all)
	}
	if all["retention_bytes"] != float64(1000) || all["auto_create_topics_enabled"] != false || all["log_message_timestamp_type"] != "CreateTime" {
		t.Fatalf("typed values: %v", all)
	}
	code, set := do(t, "GET", srv.URL+"/v1/cluster_config?include_defaults=false", "")
	if code != 200 || len(set) != 1 || set["retention_bytes"] != float64(1000) {
		t.Fatalf("%d %v", code, set)
	}
	if code, _ := do(t, "GET", srv.URL+"/v1/cluster_config?include_defaults=maybe", ""); code != 400 {
		t.Fatalf("bad include_defaults: %d", code)
	}
	if code, body := do(t, "POST", srv.URL+"/v1/cluster_config", "{}"); code != 405 || body["message"] == nil {
		t.Fatalf("POST: %d %v", code, body)
	}
	if code, _ := do(t, "DELETE", srv.URL+"/v1/cluster_config/schema", ""); code != 405 {
		t.Fatalf("DELETE schema: %d", code)
	}
}

func TestClusterConfigPutValidatesEverything(t *testing.T) {
	f, srv := newFake(t)
	code, errs := do(t, "PUT", srv.URL+"/v1/cluster_config", `{"upsert":{
		"no_such_property": 1,
		"log_retention_ms": -5,
		"auto_create_topics_enabled": 3,
		"default_topic_partitions": "many",
		"log_message_timestamp_type": "Whenever",
		"log_segment_ms": 120000},
		"remove": ["retention_bytes", "also_unknown"]}`)
	if code != 400 {
		t.Fatalf("want 400, got %d %v", code, errs)
	}
	for _, name := range []string{"no_such_property", "log_retention_ms", "auto_create_topics_enabled", "default_topic_partitions", "log_message_timestamp_type", "also_unknown"} {
		if _, ok := errs[name]; !ok {
			t.Errorf("no error for %s: %v", name, errs)
		}
	}
	if len(errs) != 6 {
		t.Errorf("want 6 errors, got %v", errs)
	}
	if !strings.Contains(errs["log_retention_ms"].(string), "out of range") {
		t.Errorf("log_retention_ms: %v", errs["log_retention_ms"])
	}
	if f.calls != 0 {
		t.Fatal("a refused PUT reached AlterClusterProperties")
	}
	if v, _ := f.vals.Get("retention_bytes"); v != "1000" {
		t.Fatalf("retention_bytes changed to %s", v)
	}

	for _, body := range []string{`{"upsert":{},"extra":1}`, `{"upsert":`, `{} {}`, `{"upsert":{"log_retention_ms":null}}`,
		`{"upsert":{"log_retention_ms":1},"remove":["log_retention_ms"]}`} {
		if code, _ := do(t, "PUT", srv.URL+"/v1/cluster_config", body); code != 400 {
			t.Errorf("%s: want 400, got %d", body, code)
		}
	}
	big := `{"upsert":{"x":"` + strings.Repeat("a", maxClusterConfigBody) + `"}}`
	if code, _ := do(t, "PUT", srv.URL+"/v1/cluster_config", big); code != 413 {
		t.Errorf("oversized body: %d", code)
	}

	code, ok := do(t, "PUT", srv.URL+"/v1/cluster_config", `{"upsert":{"log_retention_ms":123456789,"auto_create_topics_enabled":"1","log_message_timestamp_type":"LogAppendTime"},"remove":["retention_bytes"]}`)
	if code != 200 || ok["config_version"] != float64(1) || f.calls != 1 {
		t.Fatalf("valid PUT: %d %v (calls %d)", code, ok, f.calls)
	}
	_, set := do(t, "GET", srv.URL+"/v1/cluster_config?include_defaults=false", "")
	if len(set) != 3 || set["log_retention_ms"] != float64(123456789) || set["auto_create_topics_enabled"] != true || set["log_message_timestamp_type"] != "LogAppendTime" {
		t.Fatalf("after PUT: %v", set)
	}
}

func TestClusterConfigSchema(t *testing.T) {
	_, srv := newFake(t)
	code, body := do(t, "GET", srv.URL+"/v1/cluster_config/schema", "")
	props, _ := body["properties"].(map[string]any)
	if code != 200 || len(props) != len(config.NewRegistry().Names()) {
		t.Fatalf("%d %v", code, body)
	}
	lr := props["log_retention_ms"].(map[string]any)
	if lr["type"] != "integer" || lr["minimum"] != float64(-1) || lr["maximum"] == nil || lr["default"] != float64(7*24*3600*1000) || lr["description"] == "" {
		t.Fatalf("log_retention_ms: %v", lr)
	}
	ts := props["log_message_timestamp_type"].(map[string]any)
	if ts["type"] != "string" || len(ts["enum"].([]any)) != 2 || ts["minimum"] != nil {
		t.Fatalf("log_message_timestamp_type: %v", ts)
	}
	gp := props["group_topic_partitions"].(map[string]any)
	if gp["needs_restart"] != true || gp["enterprise"] != false {
		t.Fatalf("group_topic_partitions: %v", gp)
	}
	if b := props["disable_metrics"].(map[string]any); b["type"] != "boolean" || b["default"] != false {
		t.Fatalf("disable_metrics: %v", b)
	}
}
