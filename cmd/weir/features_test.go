package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// fakeLicense keeps a license the way the broker reports it.
type fakeLicense struct {
	*fakeBackend
	info broker.LicenseInfo
	sets []string
}

func (f *fakeLicense) LicenseInfo() broker.LicenseInfo { return f.info }
func (f *fakeLicense) SetLicense(text string) (config.License, error) {
	f.sets = append(f.sets, text)
	if text != "good" {
		return config.License{}, fmt.Errorf("%w: %w: tampered", broker.ErrInvalidLicense, config.ErrLicenseSignature)
	}
	l := config.License{Version: 1, Org: "Acme", Type: "enterprise", Expiry: time.Unix(1798761600, 0).UTC()}
	f.info = broker.LicenseInfo{Loaded: true, License: &l, SHA256: "abc",
		Status: config.LicenseStatus{Status: "valid", Valid: true, Org: "Acme", Type: "enterprise", Expiry: l.Expiry, DaysLeft: 100}}
	return l, nil
}

func TestFeaturesLicense(t *testing.T) {
	base, _ := newFake(t)
	f := &fakeLicense{fakeBackend: base, info: broker.LicenseInfo{
		Status: config.LicenseStatus{Status: "none", Expiry: time.Unix(1790000000, 0)},
		InUse:  []string{"kafka_fetch_read_coalescing_enabled"}, Violation: true}}
	mux := http.NewServeMux()
	registerFeatures(mux, f)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, doc := do(t, "GET", srv.URL+"/v1/features/license", "")
	if code != 200 || doc["loaded"] != false || doc["license"] != nil || doc["status"] != "none" || doc["violation"] != true ||
		doc["expires"] != float64(1790000000) || fmt.Sprint(doc["features_in_use"]) != "[kafka_fetch_read_coalescing_enabled]" {
		t.Fatalf("GET without a license: %d %v", code, doc)
	}
	code, ent := do(t, "GET", srv.URL+"/v1/features/enterprise", "")
	if code != 200 || ent["license_status"] != "none" || ent["violation"] != true ||
		fmt.Sprint(ent["features"]) != "[map[enabled:true name:kafka_fetch_read_coalescing_enabled]]" {
		t.Fatalf("enterprise: %d %v", code, ent)
	}

	if code, e := do(t, "PUT", srv.URL+"/v1/features/license", "tampered"); code != 400 || !strings.Contains(e["message"].(string), "tampered") {
		t.Fatalf("bad license: %d %v", code, e)
	}
	if code, e := do(t, "PUT", srv.URL+"/v1/features/license", "  \n"); code != 400 || !strings.Contains(e["message"].(string), "empty") {
		t.Fatalf("empty license: %d %v", code, e)
	}
	if code, _ := do(t, "PUT", srv.URL+"/v1/features/license", strings.Repeat("a", maxLicenseBody+1)); code != 413 {
		t.Fatalf("oversized license: %d", code)
	}
	code, doc = do(t, "PUT", srv.URL+"/v1/features/license", "good\n")
	lic, _ := doc["license"].(map[string]any)
	if code != 200 || doc["loaded"] != true || doc["status"] != "valid" || lic["org"] != "Acme" || lic["expires"] != float64(1798761600) ||
		lic["sha256"] != "abc" || lic["format_version"] != float64(1) {
		t.Fatalf("good license: %d %v", code, doc)
	}
	if got := strings.Join(f.sets, "|"); got != "tampered|good" {
		t.Fatalf("SetLicense saw %q", got)
	}
	if code, _ := do(t, "DELETE", srv.URL+"/v1/features/license", ""); code != 405 {
		t.Fatalf("DELETE: %d", code)
	}
}

// TestClusterConfigPutRefusesUnlicensedFeatures: without a license, turning
// an enterprise feature on is one more entry in the error map, and nothing
// is written; turning it off is allowed.
func TestClusterConfigPutRefusesUnlicensedFeatures(t *testing.T) {
	f, srv := newFake(t)
	code, errs := do(t, "PUT", srv.URL+"/v1/cluster_config", `{"upsert":{"kafka_fetch_read_coalescing_enabled":true,"log_retention_ms":-7}}`)
	msg, _ := errs["kafka_fetch_read_coalescing_enabled"].(string)
	if code != 400 || len(errs) != 2 || !strings.Contains(msg, "enterprise feature") || !strings.Contains(msg, "no license") {
		t.Fatalf("%d %v", code, errs)
	}
	if f.calls != 0 {
		t.Fatal("refused PUT wrote")
	}
	if code, _ := do(t, "PUT", srv.URL+"/v1/cluster_config", `{"upsert":{"kafka_fetch_read_coalescing_enabled":false}}`); code != 200 {
		t.Fatalf("turning off: %d", code)
	}
	f.licensed = true
	if code, _ := do(t, "PUT", srv.URL+"/v1/cluster_config", `{"upsert":{"kafka_fetch_read_coalescing_enabled":true}}`); code != 200 {
		t.Fatalf("licensed: %d", code)
	}
}
