package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadNodeAdminTLS: admin_tls from YAML, from --set and from the
// environment gives the same settings; a node without it has none.
func TestLoadNodeAdminTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "admin CA")
	certPEM, keyPEM := ca.server(t, "broker")
	certFile, keyFile, caFile := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"), filepath.Join(dir, "ca.crt")
	for path, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, caFile: ca.pem} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want := ListenerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, ClientAuth: ClientAuthRequired, MinVersion: "1.3"}

	yamlPath := filepath.Join(dir, "weir.yaml")
	yaml := "admin_tls:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\n  ca_file: " + caFile +
		"\n  client_auth: REQUIRED\n  min_version: 1.3\n"
	if err := writeFile(yamlPath, yaml); err != nil {
		t.Fatal(err)
	}
	noEnv := func() []string { return nil }
	for name, load := range map[string]func() (Node, error){
		"yaml": func() (Node, error) { return LoadNode([]string{"--config", yamlPath}, noEnv) },
		"set": func() (Node, error) {
			return LoadNode([]string{"--set", "admin_tls.cert_file=" + certFile, "--set", "admin_tls.key_file=" + keyFile,
				"--set", "admin_tls.ca_file=" + caFile, "--set", "admin_tls.client_auth=required", "--set", "admin_tls.min_version=1.3"}, noEnv)
		},
		"env": func() (Node, error) {
			return LoadNode(nil, func() []string {
				return []string{"WEIR_ADMIN_TLS__CERT_FILE=" + certFile, "WEIR_ADMIN_TLS__KEY_FILE=" + keyFile,
					"WEIR_ADMIN_TLS__CA_FILE=" + caFile, "WEIR_ADMIN_TLS__CLIENT_AUTH=required", "WEIR_ADMIN_TLS__MIN_VERSION=1.3"}
			})
		},
	} {
		n, err := load()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n.AdminTLS == nil || *n.AdminTLS != want {
			t.Errorf("%s: admin TLS %+v, want %+v", name, n.AdminTLS, want)
		}
	}

	n, err := LoadNode(nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if n.AdminTLS != nil {
		t.Errorf("default: admin TLS %+v, want none", n.AdminTLS)
	}
}

// TestLoadNodeRejectsBadAdminTLS: every problem names the admin_tls
// setting at fault, and the broker does not start with it.
func TestLoadNodeRejectsBadAdminTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "admin CA")
	certPEM, keyPEM := ca.server(t, "broker")
	certFile, keyFile := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	for path, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	good := []string{"--set", "admin_tls.cert_file=" + certFile, "--set", "admin_tls.key_file=" + keyFile}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown key", append(good, "--set", "admin_tls.certfile=x"), []string{"admin_tls.certfile", "unknown key"}},
		{"no key file", []string{"--set", "admin_tls.cert_file=" + certFile}, []string{"admin_tls.key_file: required"}},
		{"missing cert", []string{"--set", "admin_tls.cert_file=" + filepath.Join(dir, "nope.crt"), "--set", "admin_tls.key_file=" + keyFile},
			[]string{"admin_tls.cert_file", "no such file"}},
		{"client auth without CA", append(good, "--set", "admin_tls.client_auth=required"), []string{"admin_tls.ca_file: required when client_auth is required"}},
		{"bad client auth", append(good, "--set", "admin_tls.client_auth=sometimes"), []string{"admin_tls.client_auth", "sometimes"}},
		{"bad min version", append(good, "--set", "admin_tls.min_version=1.1"), []string{"admin_tls.min_version", "1.1"}},
		{"not a map", []string{"--set", "admin_tls=on"}, []string{"admin_tls: want a map"}},
	} {
		_, err := LoadNode(tc.args, func() []string { return nil })
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
}
