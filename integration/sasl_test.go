package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestSASLListener: users created with AlterUserScramCredentials, then the
// broker restarted with kafka_sasl_mechanisms: SCRAM-SHA-256, SCRAM-SHA-512
// and PLAIN users produce and consume (franz-go, kcat/librdkafka and the
// Java client, where installed); a client without credentials, a wrong
// password and an unknown user are refused.
func TestSASLListener(t *testing.T) {
	t.Parallel()
	b := StartBroker(t)
	const topic = "secured"
	createTopicVia(t, b, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	altered, err := kadm.NewClient(b.Client(t)).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-pw"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("creating users: %v %v", err, altered.Error())
	}

	b.Stop(t)
	b.spec.sets = append(b.spec.sets, "kafka_sasl_mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN")
	b.args = b.buildArgs()
	b.spec.pingOpts = []kgo.Opt{kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism())}
	b.Start(t)

	alice := b.Client(t, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()), kgo.DefaultProduceTopic(topic))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, alice); err != nil {
		t.Fatalf("metadata as alice (SCRAM-SHA-256): %v", err)
	}
	for i := range 10 {
		if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("franz-%d", i))}).FirstErr(); err != nil {
			t.Fatalf("produce as alice (SCRAM-SHA-256): %v", err)
		}
	}
	recs := consumeN(t, b, 10, 30*time.Second, []string{topic}, kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism()))
	for i, r := range recs {
		if want := fmt.Sprintf("franz-%d", i); string(r.Value) != want {
			t.Fatalf("record %d: %q, want %q", i, r.Value, want)
		}
	}
	viaPlain := b.Client(t, kgo.SASL(plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism()))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, viaPlain); err != nil {
		t.Fatalf("PLAIN as bob: %v", err)
	}

	refused := func(name string, opts ...kgo.Opt) {
		t.Helper()
		cl := b.Client(t, append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))...)
		rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
		defer rcancel()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		if err == nil {
			t.Fatalf("%s: a metadata request was answered", name)
		}
		t.Logf("%s: %v", name, err)
	}
	refused("no credentials")
	refused("wrong password", kgo.SASL(scram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism()))
	refused("unknown user", kgo.SASL(plain.Auth{User: "mallory", Pass: "x"}.AsMechanism()))
	{
		cl := b.Client(t, kgo.SASL(scram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism()), kgo.RequestRetries(0))
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	}

	// librdkafka, as kcat users configure it.
	bin := kcatBinary(t)
	auth := func(mech, user, pass string) []string {
		return []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
			"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}
	}
	produce := append([]string{"-b", b.KafkaAddr, "-P", "-t", topic}, auth("SCRAM-SHA-512", "bob", "bob-pw")...)
	runKcat(t, bin, []byte("kcat-0\nkcat-1\n"), 60*time.Second, produce...)
	consume := append([]string{"-b", b.KafkaAddr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"}, auth("PLAIN", "alice", "alice-pw")...)
	lines := strings.Split(strings.TrimSuffix(runKcat(t, bin, nil, 60*time.Second, consume...), "\n"), "\n")
	if len(lines) != 12 || lines[10] != "kcat-0" || lines[11] != "kcat-1" {
		t.Fatalf("kcat consumed %d lines: %q", len(lines), lines)
	}

	// The Java client, configured as Kafka users do (kafka-clients 4.x):
	// its produce-consume scenario, authenticated with SCRAM-SHA-256.
	java, jar := javaTools(t)
	runJavaScenario(t, java, jar, b, "produce-consume",
		"weir.client.security.protocol=SASL_PLAINTEXT",
		"weir.client.sasl.mechanism=SCRAM-SHA-256",
		`weir.client.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-pw";`)
}
