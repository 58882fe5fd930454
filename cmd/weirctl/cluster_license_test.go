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

	"go.yaml.in/yaml/v3"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

const (
	goodLicense = "weir-license-v1.acme.signed"

	// validLicenseDoc carries a field weirctl does not know; it must be
	// ignored by the summary and relayed by --format json|yaml.
	validLicenseDoc = `{"loaded":true,"license":{"format_version":1,"org":"Acme","type":"enterprise","expires":1798761600,"sha256":"ab12"},` +
		`"status":"valid","valid":true,"builtin_trial":false,"expires":1798761600,"days_left":29,` +
		`"warning":"the license expires in 29 days (2027-01-01); set a license with 'weirctl cluster license set'",` +
		`"violation":false,"features_in_use":["kafka_fetch_read_coalescing_enabled"],"added_later":{"x":[1,2]}}`

	// trialViolationDoc has no license loaded and no warning.
	trialViolationDoc = `{"loaded":false,"status":"expired","valid":false,"builtin_trial":true,"expires":0,` +
		`"violation":true,"features_in_use":["kafka_fetch_read_coalescing_enabled","audit_log_enabled"]}`
)

// licenseRequest is what the fake broker saw in one PUT.
type licenseRequest struct {
	contentType string
	body        string
}

// fakeLicenseAdmin serves GET with doc and accepts a PUT whose trimmed body
// is goodLicense; any other license is refused the way the broker does.
func fakeLicenseAdmin(t *testing.T, doc string) (*httptest.Server, *[]licenseRequest) {
	var puts []licenseRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path != licensePath:
			w.WriteHeader(404)
			w.Write([]byte(`{"message":"not found"}`))
		case r.Method == "GET":
			w.Write([]byte(doc))
		case r.Method == "PUT":
			data, _ := io.ReadAll(r.Body)
			puts = append(puts, licenseRequest{r.Header.Get("Content-Type"), string(data)})
			if strings.TrimSpace(string(data)) != goodLicense {
				w.WriteHeader(400)
				w.Write([]byte(`{"message":"invalid license: signature does not verify"}`))
				return
			}
			w.Write([]byte(validLicenseDoc))
		default:
			w.WriteHeader(405)
			w.Write([]byte(`{"message":"method not allowed"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &puts
}

func TestLicenseSetFromArgFileAndStdin(t *testing.T) {
	srv, puts := fakeLicenseAdmin(t, validLicenseDoc)
	file := filepath.Join(t.TempDir(), "acme.license")
	if err := os.WriteFile(file, []byte("\n"+goodLicense+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stdin string
		args        []string
		wantBody    string
	}{
		{"argument", "", []string{goodLicense}, goodLicense},
		{"file", "", []string{"--file", file}, "\n" + goodLicense + "\n"},
		{"stdin", "  " + goodLicense + "\n", []string{"-f", "-"}, "  " + goodLicense + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*puts = nil
			args := append([]string{"cluster", "license", "--admin-url", srv.URL, "set"}, tc.args...)
			out, _, err := run(t, tc.stdin, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, "license set\n") || !strings.Contains(out, "Acme") {
				t.Errorf("output:\n%s", out)
			}
			if len(*puts) != 1 || (*puts)[0].body != tc.wantBody || (*puts)[0].contentType != "text/plain" {
				t.Errorf("PUTs: %+v", *puts)
			}
		})
	}
}

func TestLicenseSetRefusedAndUsageErrors(t *testing.T) {
	srv, puts := fakeLicenseAdmin(t, validLicenseDoc)
	_, _, err := run(t, "", "cluster", "license", "--admin-url", srv.URL, "set", "forged")
	clitest.WantErrContains(t, err, "signature does not verify")
	clitest.WantErrContains(t, err, "refused the license")

	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", nil, "missing license"},
		{"", []string{"k", "--file", "x"}, "not both"},
		{"", []string{"a", "b"}, "one license key"},
		{" \n", []string{"-f", "-"}, "empty"},
		{"", []string{"-f", filepath.Join(t.TempDir(), "absent")}, "no such file"},
	} {
		args := append([]string{"cluster", "license", "--admin-url", srv.URL, "set"}, tc.args...)
		_, _, err := run(t, tc.stdin, args...)
		clitest.WantErrContains(t, err, tc.want)
	}
	if len(*puts) != 1 {
		t.Errorf("usage errors must not reach the broker; PUTs: %+v", *puts)
	}
}

func TestLicenseInfoTable(t *testing.T) {
	srv, _ := fakeLicenseAdmin(t, validLicenseDoc)
	t.Setenv(admin.URLEnv, srv.URL)
	out, stderr, err := run(t, "", "cluster", "license", "info")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"STATUS", "valid", "VIOLATION        no", "FEATURES IN USE  kafka_fetch_read_coalescing_enabled",
		"ORGANIZATION     Acme", "TYPE             enterprise",
		"EXPIRES          2027-01-01T00:00:00Z (29 days left)", "SHA256           ab12", "WARNING          the license expires in 29 days",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "License violation") {
		t.Errorf("no violation expected:\n%s", out)
	}
	if !strings.Contains(stderr, "warning: the license expires in 29 days") {
		t.Errorf("warning not on stderr: %q", stderr)
	}
}

func TestLicenseInfoViolationWithoutWarning(t *testing.T) {
	srv, _ := fakeLicenseAdmin(t, trialViolationDoc)
	out, stderr, err := run(t, "", "cluster", "license", "--admin-url", srv.URL, "info")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"expired (built-in trial)", "VIOLATION        yes", "kafka_fetch_read_coalescing_enabled, audit_log_enabled",
		"LICENSE          none loaded", "EXPIRES          unknown", "behave as their defaults until a valid license is set",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	for _, absent := range []string{"WARNING", "SHA256", "ORGANIZATION"} {
		if strings.Contains(out, absent) {
			t.Errorf("%s shown without a warning or license:\n%s", absent, out)
		}
	}
	if !strings.Contains(stderr, "behave as their defaults") || strings.Count(stderr, "warning:") != 1 {
		t.Errorf("stderr should carry only the violation: %q", stderr)
	}
}

func TestLicenseInfoDocuments(t *testing.T) {
	srv, _ := fakeLicenseAdmin(t, validLicenseDoc)
	var want map[string]any
	if err := json.Unmarshal([]byte(validLicenseDoc), &want); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{cli.FormatJSON, cli.FormatYAML} {
		t.Run(format, func(t *testing.T) {
			out, stderr, err := run(t, "", "--format", format, "cluster", "license", "--admin-url", srv.URL, "info")
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if format == cli.FormatJSON {
				err = json.Unmarshal([]byte(out), &got)
			} else {
				err = yaml.Unmarshal([]byte(out), &got)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			// Compare through JSON so YAML's int and JSON's float64 agree.
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("document changed:\n got %s\nwant %s", gotJSON, wantJSON)
			}
			if !strings.HasPrefix(out, `{`+"\n"+`  "loaded": true`) && !strings.HasPrefix(out, "loaded: true\nlicense:\n") {
				t.Errorf("the broker's key order should be kept:\n%s", out)
			}
			if !strings.Contains(stderr, "warning:") {
				t.Errorf("warning belongs on stderr in every format: %q", stderr)
			}
		})
	}
}

func TestLicenseAPIMissing(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, _, err := run(t, "", "cluster", "license", "--admin-url", srv.URL, "info")
	clitest.WantErrContains(t, err, "no license API")
}
