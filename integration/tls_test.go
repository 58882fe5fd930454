package integration

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sslClientOpts are kgo options for lb's SSL listener that give up
// quickly, for clients expected to be refused.
func sslClientOpts(lb *ListenerBroker, ca *TestCA, certs ...tls.Certificate) []kgo.Opt {
	return append(TLSClientOpts(lb.Addrs["SSL"], ca.ClientConfig(certs...)), kgo.RequestRetries(0), kgo.RetryTimeout(3*time.Second))
}

// TestTLSClientCertificateIsThePrincipal: with client_auth required, a
// client without a certificate, or with one of another CA, is refused;
// one the CA signed gets in as "User:" and its subject, which the
// superusers property names (CN=weir-admin creates a topic and produces),
// while another subject of the same CA is refused by authorization.
func TestTLSClientCertificateIsThePrincipal(t *testing.T) {
	ca := NewTestCA(t, "weir test CA")
	lb := StartBrokerWithListeners(t, plaintextAndSSL(t, ca, "required"),
		WithSet("cluster.kafka_enable_authorization", "true"),
		WithSet("cluster.superusers", "User:CN=weir-admin"))
	ctx := ctxTimeout(t, time.Minute)

	stranger := NewTestCA(t, "another CA").ClientCert(t, "weir-admin")
	for name, cfg := range map[string]*tls.Config{
		"no certificate": ca.ClientConfig(),
		// Sent although the server asks for its own CA's, as a client
		// configured with one certificate does.
		"another CA's certificate": {RootCAs: ca.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &stranger, nil
		}},
	} {
		cl := lb.Client(t, kgo.SeedBrokers(lb.Addrs["SSL"]), kgo.DialTLSConfig(cfg), kgo.RequestRetries(0), kgo.RetryTimeout(3*time.Second))
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err == nil {
			t.Errorf("%s: a Metadata request was answered", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}

	const topic = "mtls"
	admin := lb.Client(t, append(sslClientOpts(lb, ca, ca.ClientCert(t, "weir-admin")), kgo.DefaultProduceTopic(topic))...)
	created, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatalf("CreateTopics as User:CN=weir-admin (a superuser): %v", err)
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Value: []byte("from weir-admin")}).FirstErr(); err != nil {
		t.Fatalf("produce as User:CN=weir-admin: %v", err)
	}

	guest := lb.Client(t, append(sslClientOpts(lb, ca, ca.ClientCert(t, "weir-guest")), kgo.DefaultProduceTopic(topic))...)
	if err := guest.ProduceSync(ctx, &kgo.Record{Value: []byte("from weir-guest")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce as User:CN=weir-guest (no ACLs): %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	anonymous := lb.Client(t, kgo.RequestRetries(0), kgo.RetryTimeout(3*time.Second), kgo.DefaultProduceTopic(topic))
	if err := anonymous.ProduceSync(ctx, &kgo.Record{Value: []byte("from nobody")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce as User:ANONYMOUS over PLAINTEXT: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// TestTLSListenerRefusesPlaintextClients: a plaintext Kafka client pointed
// at the SSL port gets an error, and the broker goes on serving both
// listeners.
func TestTLSListenerRefusesPlaintextClients(t *testing.T) {
	ca := NewTestCA(t, "weir test CA")
	lb := StartBrokerWithListeners(t, plaintextAndSSL(t, ca, "none"))
	ctx := ctxTimeout(t, time.Minute)

	wrong := lb.Client(t, kgo.SeedBrokers(lb.Addrs["SSL"]), kgo.RequestRetries(0), kgo.RetryTimeout(3*time.Second))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, wrong); err == nil {
		t.Fatal("a plaintext Metadata request to the SSL listener was answered")
	} else {
		t.Logf("plaintext client on the SSL port: %v", err)
	}

	if !lb.Running() {
		t.Fatal("the broker exited")
	}
	if code, raw := adminDo(t, lb.Broker, "GET", "/v1/status/ready", "", nil); code != 200 {
		t.Fatalf("ready: %d %s", code, raw)
	}
	for name, cl := range map[string]*kgo.Client{"SSL": lb.Client(t, sslClientOpts(lb, ca)...), "PLAINTEXT": lb.Client(t)} {
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
			t.Errorf("Metadata on %s after the refusal: %v", name, err)
		}
	}
	log := lb.Log()
	if !strings.Contains(log, "TLS handshake failed") || strings.Contains(log, "panic") {
		t.Errorf("the broker log should name the failed handshake and hold no panic:\n%s", lb.logTail(8<<10))
	}
}

// TestTLSCertificateRotation: replacing the certificate files of a running
// broker (as cert-manager or a renewal job does) serves the new
// certificate to new connections within the reload interval, without a
// restart; clients go on working.
func TestTLSCertificateRotation(t *testing.T) {
	ca := NewTestCA(t, "weir test CA")
	listeners := plaintextAndSSL(t, ca, "none")
	files := listeners[1].TLS
	lb := StartBrokerWithListeners(t, listeners, WithSet("tls_reload_interval", "200ms"))

	servedCN := func() (string, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", lb.Addrs["SSL"], ca.ClientConfig())
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	if cn, err := servedCN(); err != nil || cn != "weir broker" {
		t.Fatalf("before the renewal: served %q, %v", cn, err)
	}
	ctx := ctxTimeout(t, time.Minute)
	before := lb.Client(t, sslClientOpts(lb, ca)...)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, before); err != nil {
		t.Fatal(err)
	}

	ca.ServerFiles(t, "weir broker renewed", files.CertFile, files.KeyFile)
	pollUntil(t, 15*time.Second, "a new connection gets the renewed certificate", func() error {
		cn, err := servedCN()
		if err == nil && cn != "weir broker renewed" {
			err = fmt.Errorf("served %q", cn)
		}
		return err
	})
	for name, cl := range map[string]*kgo.Client{"connected before": before, "new": lb.Client(t, sslClientOpts(lb, ca)...)} {
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
			t.Errorf("Metadata from a client %s the renewal: %v", name, err)
		}
	}
}

// TestTLSKcat: librdkafka (kcat) produces and consumes over the SSL
// listener with a client certificate, configured as users configure it.
func TestTLSKcat(t *testing.T) {
	bin := kcatBinary(t)
	ca := NewTestCA(t, "weir test CA")
	lb := StartBrokerWithListeners(t, plaintextAndSSL(t, ca, "required"))
	const topic = "kcat-tls"
	CreateTopic(t, lb.Broker, topic, 1, nil)
	certFile, keyFile := ca.ClientFiles(t, "kcat")
	ssl := []string{"-b", lb.Advertised["SSL"], "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca.CAFile,
		"-X", "ssl.certificate.location=" + certFile, "-X", "ssl.key.location=" + keyFile}

	if out := runKcat(t, bin, nil, 30*time.Second, append(ssl, "-L")...); !strings.Contains(out, " at "+lb.Advertised["SSL"]) {
		t.Errorf("kcat -L over SSL should list the broker at %s:\n%s", lb.Advertised["SSL"], out)
	}
	runKcat(t, bin, []byte("tls-0\ntls-1\n"), 60*time.Second, append(ssl, "-P", "-t", topic)...)
	out := runKcat(t, bin, nil, 60*time.Second, append(ssl, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")...)
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(got) != 2 || got[0] != "tls-0" || got[1] != "tls-1" {
		t.Fatalf("kcat consumed %q over SSL", got)
	}
}

// TestTLSJavaClient: the Java client's timestamps scenario (a producer,
// a consumer and offsetsForTimes) over the SSL listener, trusting the test
// CA from a PEM file as kafka-clients allows (ssl.truststore.type=PEM).
func TestTLSJavaClient(t *testing.T) {
	java, jar := javaTools(t)
	ca := NewTestCA(t, "weir test CA")
	lb := StartBrokerWithListeners(t, plaintextAndSSL(t, ca, "none"))
	// runJavaScenario bootstraps from the Broker's KafkaAddr.
	runJavaScenario(t, java, jar, &Broker{KafkaAddr: lb.Addrs["SSL"]}, "timestamps",
		"weir.client.security.protocol=SSL",
		"weir.client.ssl.truststore.type=PEM",
		"weir.client.ssl.truststore.location="+ca.CAFile)
}
