package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// problems lists an error's parts as "listener:field" (listener by name,
// or #index), or as their text when not a *ListenerError, sorted.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var parts []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	} else {
		parts = []error{err}
	}
	var out []string
	for _, e := range parts {
		var le *ListenerError
		if !errors.As(e, &le) {
			out = append(out, e.Error())
			continue
		}
		label := le.Name
		if label == "" {
			label = fmt.Sprintf("#%d", le.Index)
		}
		if !strings.Contains(e.Error(), le.Field+":") || le.Name != "" && !strings.Contains(e.Error(), fmt.Sprintf("%q", le.Name)) {
			t.Errorf("error does not name its listener and field: %v", e)
		}
		out = append(out, label+":"+le.Field)
	}
	slices.Sort(out)
	return out
}

func TestParseListenersFromYAML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weir.yaml")
	yamlText := `
listeners:
  - name: internal
    address: 0.0.0.0:9092
    advertised_address: broker-0.internal:9092
    security_protocol: plaintext
  - name: external
    address: ":9093"
    advertised_address: kafka.example.com:9093
    security_protocol: SASL_SSL
    sasl_mechanisms: [SCRAM-SHA-512, PLAIN]
    tls:
      cert_file: /etc/weir/tls.crt
      key_file: /etc/weir/tls.key
      ca_file: /etc/weir/ca.crt
      client_auth: Required
      min_version: 1.3
  - name: ssl
    address: 127.0.0.1:9094
    sasl_mechanisms: PLAIN, SCRAM-SHA-256
    tls: {cert_file: a.crt, key_file: a.key}
`
	if err := writeFile(path, yamlText); err != nil {
		t.Fatal(err)
	}
	// Loaded as LoadNode loads the config file.
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		t.Fatal(err)
	}
	got, err := ParseListeners(k.Get("listeners"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Name: "internal", Address: "0.0.0.0:9092", AdvertisedAddress: "broker-0.internal:9092", SecurityProtocol: ProtocolPlaintext},
		{Name: "external", Address: ":9093", AdvertisedAddress: "kafka.example.com:9093", SecurityProtocol: ProtocolSASLSSL,
			SASLMechanisms: []string{"SCRAM-SHA-512", "PLAIN"},
			TLS:            &ListenerTLS{CertFile: "/etc/weir/tls.crt", KeyFile: "/etc/weir/tls.key", CAFile: "/etc/weir/ca.crt", ClientAuth: "required", MinVersion: "1.3"}},
		// The protocol from the name, as Kafka's default protocol map.
		{Name: "ssl", Address: "127.0.0.1:9094", SecurityProtocol: ProtocolSSL,
			SASLMechanisms: []string{"PLAIN", "SCRAM-SHA-256"},
			TLS:            &ListenerTLS{CertFile: "a.crt", KeyFile: "a.key"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", got, want)
	}
	if got[0].Advertised() != "broker-0.internal:9092" || got[2].Advertised() != "127.0.0.1:9094" {
		t.Errorf("advertised: %q, %q", got[0].Advertised(), got[2].Advertised())
	}

	if ls, err := ParseListeners(k.Get("no_such_key")); ls != nil || err != nil {
		t.Errorf("absent key: %v, %v", ls, err)
	}
}

func TestParseListenersRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want []string
	}{
		{"not a list", "PLAINTEXT://:9092", []string{"listeners: want a list of maps, got string"}},
		{"element not a map", []any{"PLAINTEXT://:9092"}, []string{"listeners[0]: want a map, got string"}},
		{"unknown key", []any{map[string]any{"name": "a", "adress": ":9092"}}, []string{"a:adress"}},
		{"unknown key of a nameless listener", []any{map[string]any{"adress": ":9092"}}, []string{"#0:adress"}},
		{"name not a string", []any{map[string]any{"name": []any{"a"}}}, []string{"#0:name"}},
		{"tls not a map", []any{map[string]any{"name": "a", "tls": "yes"}}, []string{"a:tls"}},
		{"unknown tls key", []any{map[string]any{"name": "a", "tls": map[string]any{"cert": "x"}}}, []string{"a:tls.cert"}},
		{"mechanisms a map", []any{map[string]any{"name": "a", "sasl_mechanisms": map[string]any{"PLAIN": true}}}, []string{"a:sasl_mechanisms"}},
		{"mechanism not a string", []any{map[string]any{"name": "a", "sasl_mechanisms": []any{true}}}, []string{"a:sasl_mechanisms"}},
		{"map with non-string keys", []any{map[any]any{1: "a"}}, []string{"listeners[0]: want a map with string keys, got key 1 (int)"}},
		{"every problem", []any{
			map[string]any{"name": "a", "port": 9092, "tls": map[string]any{"client_auth": false}},
			map[string]any{"name": "b", "address": map[string]any{}},
		}, []string{"a:port", "a:tls.client_auth", "b:address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := ParseListeners(tc.v)
			if ls != nil {
				t.Errorf("listeners returned with an error: %+v", ls)
			}
			if got := problems(t, err); !slices.Equal(got, tc.want) {
				t.Errorf("problems %q, want %q (%v)", got, tc.want, err)
			}
		})
	}
}

func TestParseListenersAcceptsOtherShapes(t *testing.T) {
	// As koanf's confmap provider, or a decoder keeping interface keys,
	// would hand them over; bare numbers as YAML types them.
	got, err := ParseListeners([]map[string]any{
		{"name": "a", "address": "127.0.0.1:9092", "tls": map[any]any{"min_version": 1.2, "cert_file": 7}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{{Name: "a", Address: "127.0.0.1:9092", TLS: &ListenerTLS{CertFile: "7", MinVersion: "1.2"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
}

func TestValidateListeners(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	ca := newTestCA(t, "test CA")
	certPEM, keyPEM := ca.server(t, "broker")
	_, otherKeyPEM := ca.server(t, "other")
	for name, data := range map[string]string{
		"tls.crt":       string(certPEM),
		"tls.key":       string(keyPEM),
		"combined.pem":  string(certPEM) + string(keyPEM),
		"other.key":     string(otherKeyPEM),
		"ca.crt":        "# test CA, as openssl prints it\n" + string(ca.pem),
		"garbage":       "not PEM at all\n",
		"empty":         "",
		"truncated.crt": string(certPEM[:len(certPEM)/2]),
		"corrupt.crt":   strings.Replace(string(certPEM), "\n", "\nAAAA", 3),
	} {
		if err := writeFile(path(name), data); err != nil {
			t.Fatal(err)
		}
	}
	goodTLS := func() *ListenerTLS {
		return &ListenerTLS{CertFile: path("tls.crt"), KeyFile: path("tls.key")}
	}
	withTLS := func(edit func(*ListenerTLS)) []Listener {
		tc := goodTLS()
		edit(tc)
		return []Listener{{Name: "ext", Address: "127.0.0.1:9093", SecurityProtocol: ProtocolSSL, TLS: tc}}
	}
	plain := func(name, addr string) Listener {
		return Listener{Name: name, Address: addr, AdvertisedAddress: "kafka.example.com:9092", SecurityProtocol: ProtocolPlaintext}
	}
	for _, tc := range []struct {
		name      string
		listeners []Listener
		want      []string
	}{
		{"none", nil, nil},
		{"valid", []Listener{
			{Name: "internal", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolPlaintext},
			{Name: "external", Address: "0.0.0.0:9093", AdvertisedAddress: "kafka.example.com:9093", SecurityProtocol: ProtocolSSL,
				TLS: &ListenerTLS{CertFile: path("tls.crt"), KeyFile: path("tls.key"), CAFile: path("ca.crt"), ClientAuth: "required", MinVersion: "1.3"}},
			{Name: "sasl", Address: "[::1]:9094", SecurityProtocol: ProtocolSASLSSL, SASLMechanisms: []string{"SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-256"},
				TLS: &ListenerTLS{CertFile: path("combined.pem"), KeyFile: path("combined.pem"), CAFile: path("ca.crt"), ClientAuth: "requested", MinVersion: "1.2"}},
			{Name: "Replication-2", Address: "localhost:9095", SecurityProtocol: ProtocolSASLPlaintext, SASLMechanisms: []string{"PLAIN"}},
		}, nil},

		{"name missing", []Listener{{Address: "127.0.0.1:9092", SecurityProtocol: ProtocolPlaintext}}, []string{"#0:name"}},
		{"name with a space", []Listener{{Name: "in ternal", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolPlaintext}}, []string{"in ternal:name"}},
		{"names differing in case", []Listener{plain("internal", "127.0.0.1:9092"), plain("INTERNAL", "127.0.0.1:9093")}, []string{"INTERNAL:name"}},

		{"address without port", []Listener{{Name: "a", Address: "nonsense", SecurityProtocol: ProtocolPlaintext}}, []string{"a:address"}},
		{"address with a service name", []Listener{{Name: "a", Address: "127.0.0.1:http", SecurityProtocol: ProtocolPlaintext}}, []string{"a:address"}},
		{"address port too large", []Listener{{Name: "a", Address: "127.0.0.1:70000", SecurityProtocol: ProtocolPlaintext}}, []string{"a:address"}},
		{"address missing", []Listener{{Name: "a", SecurityProtocol: ProtocolPlaintext}}, []string{"a:address"}},

		{"same address", []Listener{plain("a", "127.0.0.1:9092"), plain("b", "127.0.0.1:9092")}, []string{"b:address"}},
		{"wildcard and loopback", []Listener{plain("a", "0.0.0.0:9092"), plain("b", "127.0.0.1:9092")}, []string{"b:address"}},
		{"empty host and IPv6 wildcard", []Listener{plain("a", ":9092"), plain("b", "[::]:9092")}, []string{"b:address"}},
		{"two spellings of ::1", []Listener{plain("a", "[::1]:9092"), plain("b", "[0:0:0:0:0:0:0:1]:9092")}, []string{"b:address"}},
		{"host names differing in case", []Listener{plain("a", "localhost:9092"), plain("b", "LOCALHOST:9092")}, []string{"b:address"}},
		{"three on one port", []Listener{plain("a", "0.0.0.0:9092"), plain("b", "10.0.0.1:9092"), plain("c", "10.0.0.2:9092")}, []string{"b:address", "c:address"}},
		{"different ports", []Listener{plain("a", "0.0.0.0:9092"), plain("b", "0.0.0.0:9093")}, nil},
		{"different hosts", []Listener{plain("a", "10.0.0.1:9092"), plain("b", "10.0.0.2:9092")}, nil},
		{"port 0 twice", []Listener{plain("a", "127.0.0.1:0"), plain("b", "127.0.0.1:0")}, nil},

		{"advertised from a wildcard address", []Listener{{Name: "a", Address: "0.0.0.0:9092", SecurityProtocol: ProtocolPlaintext}}, []string{"a:advertised_address"}},
		{"advertised from an empty host", []Listener{{Name: "a", Address: ":9092", SecurityProtocol: ProtocolPlaintext}}, []string{"a:advertised_address"}},
		{"advertised unspecified", []Listener{{Name: "a", Address: "127.0.0.1:9092", AdvertisedAddress: "[::]:9092", SecurityProtocol: ProtocolPlaintext}}, []string{"a:advertised_address"}},
		{"advertised without host", []Listener{{Name: "a", Address: "127.0.0.1:9092", AdvertisedAddress: ":9092", SecurityProtocol: ProtocolPlaintext}}, []string{"a:advertised_address"}},
		{"advertised port 0", []Listener{{Name: "a", Address: "127.0.0.1:9092", AdvertisedAddress: "kafka:0", SecurityProtocol: ProtocolPlaintext}}, []string{"a:advertised_address"}},
		{"advertised without port", []Listener{{Name: "a", Address: "127.0.0.1:9092", AdvertisedAddress: "kafka", SecurityProtocol: ProtocolPlaintext}}, []string{"a:advertised_address"}},

		{"protocol missing", []Listener{{Name: "a", Address: "127.0.0.1:9092"}}, []string{"a:security_protocol"}},
		{"protocol unknown", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: "TLS"}}, []string{"a:security_protocol"}},
		{"protocol not normalised", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: "plaintext"}}, []string{"a:security_protocol"}},

		{"SASL without mechanisms", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolSASLPlaintext}}, []string{"a:sasl_mechanisms"}},
		{"mechanisms without SASL", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolPlaintext, SASLMechanisms: []string{"PLAIN"}}}, []string{"a:sasl_mechanisms"}},
		{"unknown and miscased mechanisms", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolSASLPlaintext, SASLMechanisms: []string{"GSSAPI", "plain", "PLAIN"}}}, []string{"a:sasl_mechanisms", "a:sasl_mechanisms"}},
		{"mechanism twice", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolSASLPlaintext, SASLMechanisms: []string{"PLAIN", "PLAIN"}}}, []string{"a:sasl_mechanisms"}},

		{"SSL without tls", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolSSL}}, []string{"a:tls"}},
		{"SASL_SSL without tls", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolSASLSSL, SASLMechanisms: []string{"PLAIN"}}}, []string{"a:tls"}},
		// Not also the missing files: they would not be used.
		{"plaintext with tls", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolPlaintext, TLS: &ListenerTLS{CertFile: path("missing")}}}, []string{"a:tls"}},
		{"SASL_PLAINTEXT with tls", []Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolSASLPlaintext, SASLMechanisms: []string{"PLAIN"}, TLS: goodTLS()}}, []string{"a:tls"}},

		{"files not named", withTLS(func(c *ListenerTLS) { c.CertFile, c.KeyFile = "", "" }), []string{"ext:tls.cert_file", "ext:tls.key_file"}},
		{"cert missing", withTLS(func(c *ListenerTLS) { c.CertFile = path("missing.crt") }), []string{"ext:tls.cert_file"}},
		{"cert not PEM", withTLS(func(c *ListenerTLS) { c.CertFile = path("garbage") }), []string{"ext:tls.cert_file"}},
		{"cert empty", withTLS(func(c *ListenerTLS) { c.CertFile = path("empty") }), []string{"ext:tls.cert_file"}},
		{"cert half written", withTLS(func(c *ListenerTLS) { c.CertFile = path("truncated.crt") }), []string{"ext:tls.cert_file"}},
		{"cert corrupt", withTLS(func(c *ListenerTLS) { c.CertFile = path("corrupt.crt") }), []string{"ext:tls.cert_file"}},
		{"key is a certificate", withTLS(func(c *ListenerTLS) { c.KeyFile = path("tls.crt") }), []string{"ext:tls.key_file"}},
		{"key missing", withTLS(func(c *ListenerTLS) { c.KeyFile = path("missing.key") }), []string{"ext:tls.key_file"}},
		{"key of another certificate", withTLS(func(c *ListenerTLS) { c.KeyFile = path("other.key") }), []string{"ext:tls.key_file"}},
		{"CA missing", withTLS(func(c *ListenerTLS) { c.CAFile = path("missing.crt") }), []string{"ext:tls.ca_file"}},
		{"CA not PEM", withTLS(func(c *ListenerTLS) { c.CAFile = path("garbage") }), []string{"ext:tls.ca_file"}},
		{"CA file holds a key", withTLS(func(c *ListenerTLS) { c.CAFile = path("tls.key") }), []string{"ext:tls.ca_file"}},
		{"CA half written", withTLS(func(c *ListenerTLS) { c.CAFile = path("truncated.crt") }), []string{"ext:tls.ca_file"}},
		{"CA unused is fine", withTLS(func(c *ListenerTLS) { c.CAFile = path("ca.crt") }), nil},
		{"client_auth unknown", withTLS(func(c *ListenerTLS) { c.ClientAuth, c.CAFile = "want", path("ca.crt") }), []string{"ext:tls.client_auth"}},
		{"client_auth Kafka's other spelling", withTLS(func(c *ListenerTLS) { c.ClientAuth, c.CAFile = "REQUIRED", path("ca.crt") }), []string{"ext:tls.client_auth"}},
		{"required without CAs", withTLS(func(c *ListenerTLS) { c.ClientAuth = "required" }), []string{"ext:tls.ca_file"}},
		{"requested without CAs", withTLS(func(c *ListenerTLS) { c.ClientAuth = "requested" }), []string{"ext:tls.ca_file"}},
		{"none without CAs", withTLS(func(c *ListenerTLS) { c.ClientAuth = "none" }), nil},
		{"TLS 1.1", withTLS(func(c *ListenerTLS) { c.MinVersion = "1.1" }), []string{"ext:tls.min_version"}},
		{"TLSv1.3 spelling", withTLS(func(c *ListenerTLS) { c.MinVersion = "TLSv1.3" }), []string{"ext:tls.min_version"}},

		{"every problem at once", []Listener{
			{Name: "a", Address: "0.0.0.0:9092", SecurityProtocol: "SASL_SSL", SASLMechanisms: []string{"GSSAPI"},
				TLS: &ListenerTLS{CertFile: path("missing.crt"), KeyFile: path("tls.key"), CAFile: path("garbage"), ClientAuth: "maybe", MinVersion: "1.0"}},
			{Name: "A", Address: "127.0.0.1:9092", SecurityProtocol: "SSL"},
			{Address: "bad", SecurityProtocol: "PLAIN"},
		}, []string{
			"#2:address", "#2:name", "#2:security_protocol",
			"A:address", "A:name", "A:tls",
			"a:advertised_address", "a:sasl_mechanisms", "a:tls.ca_file", "a:tls.cert_file", "a:tls.client_auth", "a:tls.min_version",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateListeners(tc.listeners)
			if got := problems(t, err); !slices.Equal(got, tc.want) {
				t.Errorf("problems %q, want %q\n%v", got, tc.want, err)
			}
		})
	}
}

func TestValidateListenersWrapsCauses(t *testing.T) {
	err := ValidateListeners([]Listener{{Name: "a", Address: "127.0.0.1:9092", SecurityProtocol: ProtocolSSL,
		TLS: &ListenerTLS{CertFile: filepath.Join(t.TempDir(), "missing.crt"), KeyFile: "x.key"}}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file not wrapped: %v", err)
	}
	if !strings.Contains(err.Error(), `listener "a": tls.cert_file: `) || !strings.Contains(err.Error(), "missing.crt") {
		t.Errorf("error does not name the listener, field and file: %v", err)
	}
}
