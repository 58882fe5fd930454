package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func noEnv() []string { return nil }

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "weir.yaml")
	if err := writeFile(path, yaml); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadNodeListeners(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "test CA")
	certPEM, keyPEM := ca.server(t, "broker")
	for name, data := range map[string][]byte{"server.pem": certPEM, "server.key": keyPEM, "ca.pem": ca.pem} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := writeConfig(t, `
tls_reload_interval: 2s
listeners:
  - name: internal
    address: 0.0.0.0:9092
    advertised_address: broker-0.internal:9092
    security_protocol: plaintext
  - name: SSL
    address: 127.0.0.1:9093
    tls:
      cert_file: `+filepath.Join(dir, "server.pem")+`
      key_file: `+filepath.Join(dir, "server.key")+`
      ca_file: `+filepath.Join(dir, "ca.pem")+`
      client_auth: required
`)
	n, err := LoadNode([]string{"--config", path}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Name: "internal", Address: "0.0.0.0:9092", AdvertisedAddress: "broker-0.internal:9092", SecurityProtocol: ProtocolPlaintext},
		{Name: "SSL", Address: "127.0.0.1:9093", SecurityProtocol: ProtocolSSL, TLS: &ListenerTLS{
			CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server.key"),
			CAFile: filepath.Join(dir, "ca.pem"), ClientAuth: ClientAuthRequired}},
	}
	if !reflect.DeepEqual(n.Listeners, want) {
		t.Fatalf("listeners:\n%+v\nwant\n%+v", n.Listeners, want)
	}
	// The first listener is the broker's default address.
	if n.KafkaAddr != "0.0.0.0:9092" || n.AdvertisedKafkaAddr != "broker-0.internal:9092" {
		t.Errorf("kafka_addr %q, advertised_kafka_addr %q", n.KafkaAddr, n.AdvertisedKafkaAddr)
	}
	if n.TLSReloadInterval != 2*time.Second {
		t.Errorf("tls_reload_interval %v", n.TLSReloadInterval)
	}
}

// TestLoadNodeLegacyListener: without listeners, kafka_addr,
// advertised_kafka_addr and kafka_sasl_mechanisms make the one listener
// every broker had before.
func TestLoadNodeLegacyListener(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want Listener
	}{
		{nil, nil, Listener{Name: "PLAINTEXT", Address: DefaultKafkaAddr, AdvertisedAddress: DefaultKafkaAddr, SecurityProtocol: ProtocolPlaintext}},
		{[]string{"--kafka-addr", "0.0.0.0:19092", "--advertised-kafka-addr", "kafka.example:9092"}, nil,
			Listener{Name: "PLAINTEXT", Address: "0.0.0.0:19092", AdvertisedAddress: "kafka.example:9092", SecurityProtocol: ProtocolPlaintext}},
		{[]string{"--set", "kafka_sasl_mechanisms=SCRAM-SHA-512,PLAIN"}, []string{"WEIR_KAFKA_ADDR=127.0.0.1:29092"},
			Listener{Name: "SASL_PLAINTEXT", Address: "127.0.0.1:29092", AdvertisedAddress: "127.0.0.1:29092",
				SecurityProtocol: ProtocolSASLPlaintext, SASLMechanisms: []string{"SCRAM-SHA-512", "PLAIN"}}},
	} {
		n, err := LoadNode(tc.args, func() []string { return tc.env })
		if err != nil {
			t.Fatalf("%v %v: %v", tc.args, tc.env, err)
		}
		if !reflect.DeepEqual(n.Listeners, []Listener{tc.want}) {
			t.Errorf("%v %v: listeners %+v, want %+v", tc.args, tc.env, n.Listeners, tc.want)
		}
		if n.TLSReloadInterval != DefaultTLSReloadInterval {
			t.Errorf("tls_reload_interval %v, want %v", n.TLSReloadInterval, DefaultTLSReloadInterval)
		}
	}
}

func TestLoadNodeRefusesListenersWithLegacyKeys(t *testing.T) {
	path := writeConfig(t, "listeners:\n  - name: PLAINTEXT\n    address: 127.0.0.1:9092\n")
	for _, tc := range []struct {
		args []string
		env  []string
		key  string
	}{
		{[]string{"--kafka-addr", "127.0.0.1:9092"}, nil, "kafka_addr"},
		{[]string{"--advertised-kafka-addr", "kafka.example:9092"}, nil, "advertised_kafka_addr"},
		{nil, []string{"WEIR_KAFKA_SASL_MECHANISMS=PLAIN"}, "kafka_sasl_mechanisms"},
	} {
		_, err := LoadNode(append([]string{"--config", path}, tc.args...), func() []string { return tc.env })
		if err == nil || !strings.Contains(err.Error(), tc.key+": not allowed with listeners") {
			t.Errorf("%s with listeners: %v", tc.key, err)
		}
	}
	if _, err := LoadNode([]string{"--config", path}, noEnv); err != nil {
		t.Errorf("listeners alone: %v", err)
	}
}

func TestLoadNodeListenerErrorsNameTheListener(t *testing.T) {
	for yaml, want := range map[string]string{
		"listeners:\n  - name: external\n    address: 127.0.0.1:9093\n    security_protocol: SSL\n": `listener "external": tls: required for SSL`,
		"listeners:\n  - name: internal\n    address: 0.0.0.0:9092\n":                               `listener "internal": advertised_address`,
		"listeners:\n  - name: a\n    address: 127.0.0.1:9092\n    port: 1\n":                       `listener "a": port: unknown key`,
		"listeners:\n  - name: a\n    address: 127.0.0.1:9092\n    security_protocol: PLAINTEXT\n" +
			"  - name: A\n    address: 127.0.0.1:9093\n    security_protocol: PLAINTEXT\n": `listener "A": name: duplicate`,
		"listeners: PLAINTEXT://127.0.0.1:9092\n": "listeners: want a list of maps",
		"tls_reload_interval: 1ms\n":              "tls_reload_interval 1ms",
	} {
		_, err := LoadNode([]string{"--config", writeConfig(t, yaml)}, noEnv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", yaml, err, want)
		}
	}
}
