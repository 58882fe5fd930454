package kafka

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/broker"
)

// loopbackClient is a kgo client whose every connection goes to addr (the
// test servers advertise a fixed address).
func loopbackClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(2 * time.Second),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		})}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSASLAuthentication: a server requiring SASL lets in SCRAM-SHA-256,
// SCRAM-SHA-512 and PLAIN users whose credentials were stored with
// AlterUserScramCredentials, and refuses wrong passwords, unknown users,
// disabled mechanisms and clients that skip authentication.
func TestSASLAuthentication(t *testing.T) {
	_, b, openAddr := startServer(t)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "secured", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	altered, err := kadm.NewClient(loopbackClient(t, openAddr)).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("creating users: %v %v", err, altered.Error())
	}
	_, addr := serveKafka(t, b, Options{MaxRequestBytes: 1 << 20, AdvertisedAddr: "127.0.0.1:9092",
		SASLMechanisms: []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"}})

	ping := func(mech kgosasl.Mechanism) error {
		opts := []kgo.Opt{}
		if mech != nil {
			opts = append(opts, kgo.SASL(mech))
		}
		cl := loopbackClient(t, addr, opts...)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		defer pcancel()
		// A request sent straight to the broker returns the
		// authentication error itself (a produce would be retried).
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(pctx, cl); err != nil {
			return err
		}
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "secured", Value: []byte("v")}).FirstErr()
	}
	for name, mech := range map[string]kgosasl.Mechanism{
		"SCRAM-SHA-256":         scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(),
		"SCRAM-SHA-512":         scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism(),
		"PLAIN against SCRAM":   plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(),
		"PLAIN, SHA-512 stored": plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism(),
	} {
		if err := ping(mech); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, mech := range map[string]kgosasl.Mechanism{
		"wrong password":           scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism(),
		"unknown user":             scram.Auth{User: "mallory", Pass: "x"}.AsSha256Mechanism(),
		"mechanism without a cred": scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism(),
		"PLAIN wrong password":     plain.Auth{User: "bob", Pass: "nope"}.AsMechanism(),
	} {
		err := ping(mech)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	if err := ping(nil); err == nil {
		t.Error("a client without SASL produced to a server that requires it")
	}

	// Raw: a disabled mechanism, and requests out of order.
	c := dial(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	if r := c.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI handshake: %+v", r)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version = 2
	if r := c.roundTrip(au).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate without a handshake: %+v", r)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c.send(md)
	c.expectClosed()

	// A server without SASL answers both APIs with ILLEGAL_SASL_STATE.
	open := dial(t, openAddr)
	hs.Mechanism = "PLAIN"
	if r := open.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake without SASL enabled: %+v", r)
	}
}
