package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
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

// superuserPassword is the superuser's, in every secured broker.
const superuserPassword = "admin-pw"

// securedBroker requires SASL (SCRAM-SHA-256 and PLAIN) on its Kafka
// listener and authorizes every request against the ACLs, with the
// superuser admin.
type securedBroker struct {
	*Broker
	admin *kadm.Client
}

// asUser is the client option that authenticates with SCRAM-SHA-256.
func asUser(user, password string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism())
}

// startSecuredBroker starts an open broker (superusers=admin), creates the
// users (admin and users: name to password) and the topics (name to
// partitions) while it is open, turns kafka_enable_authorization on
// through Kafka's config API, and restarts it with
// kafka_sasl_mechanisms=SCRAM-SHA-256,PLAIN: the order docs/security.md
// gives for closing a cluster.
func startSecuredBroker(t *testing.T, users map[string]string, topics map[string]int32) *securedBroker {
	t.Helper()
	b := StartBroker(t, WithSet("cluster.superusers", "admin"))
	ctx := ctxTimeout(t, 2*time.Minute)
	open := b.Admin(t)
	upserts := []kadm.UpsertSCRAM{{User: "admin", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: superuserPassword}}
	for user, password := range users {
		upserts = append(upserts, kadm.UpsertSCRAM{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: password})
	}
	altered, err := open.AlterUserSCRAMs(ctx, nil, upserts)
	if err != nil || altered.Error() != nil {
		t.Fatalf("creating users: %v %v", err, altered.Error())
	}
	for name, partitions := range topics {
		CreateTopic(t, b, name, partitions, nil)
	}
	set, err := open.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "kafka_enable_authorization", Value: kmsg.StringPtr("true")}})
	if err != nil || len(set) != 1 || set[0].Err != nil {
		t.Fatalf("turning authorization on: %v %+v", err, set)
	}

	b.Stop(t)
	b.spec.sets = append(b.spec.sets, "kafka_sasl_mechanisms=SCRAM-SHA-256,PLAIN")
	b.args = b.buildArgs()
	b.spec.pingOpts = []kgo.Opt{asUser("admin", superuserPassword)}
	b.Start(t)
	return &securedBroker{Broker: b, admin: kadm.NewClient(b.Client(t, asUser("admin", superuserPassword)))}
}

// allow creates the ACLs the builder describes, as admin.
func (sb *securedBroker) allow(t *testing.T, acls *kadm.ACLBuilder) {
	t.Helper()
	results, err := sb.admin.CreateACLs(ctxTimeout(t, requestTimeout), acls)
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("CreateACLs %s %s %s %s: %v (%s)", r.Principal, r.Operation, r.Type, r.Name, r.Err, r.ErrMessage)
		}
	}
}

// produceAs produces n records "<topic>-<i>" to topic as the client cl and
// returns the first error.
func produceAs(ctx context.Context, cl *kgo.Client, topic string, n int) error {
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// firstConsumeError polls a consumer until it reports an error (other
// than its own context's end) or timeout, and returns the number of
// records it received meanwhile and that error.
func firstConsumeError(cl *kgo.Client, timeout time.Duration) (records int, err error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		records += fs.NumRecords()
		var first error
		fs.EachError(func(_ string, _ int32, err error) {
			if first == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				first = err
			}
		})
		if first != nil {
			return records, first
		}
	}
	return records, nil
}

// topicNames is every non-internal topic a Metadata request for all
// topics shows the client.
func topicNames(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctxTimeout(t, requestTimeout), cl)
	if err != nil {
		t.Fatalf("metadata of every topic: %v", err)
	}
	var names []string
	for _, mt := range resp.Topics {
		if mt.ErrorCode != 0 {
			t.Fatalf("metadata of every topic lists %s with %s", derefStr(mt.Topic), errName(mt.ErrorCode))
		}
		if !mt.IsInternal {
			names = append(names, derefStr(mt.Topic))
		}
	}
	slices.Sort(names)
	return names
}

// TestACLAuthorization: a broker with SASL and ACLs refuses clients
// without valid credentials, and gives each user what its ACLs say:
// WRITE without READ, READ on a prefix with a DENY on one topic under it,
// DESCRIBE-filtered metadata, groups that need READ, and a superuser who
// needs no ACL. Also kcat, refused a topic.
func TestACLAuthorization(t *testing.T) {
	t.Parallel()
	sb := startSecuredBroker(t,
		map[string]string{"writer": "writer-pw", "reader": "reader-pw", "temp": "temp-pw"},
		map[string]int32{"ingest": 1, "orders-eu": 2, "orders-secret": 1, "payments": 1})
	sb.allow(t, kadm.NewACLs().Allow("User:writer").Topics("ingest").Operations(kadm.OpWrite))
	sb.allow(t, kadm.NewACLs().Allow("User:reader").Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	sb.allow(t, kadm.NewACLs().Allow("User:reader").Groups("orders-app").Operations(kadm.OpRead))
	sb.allow(t, kadm.NewACLs().Deny("User:reader").Topics("orders-secret").Operations(kadm.OpRead))
	ctx := ctxTimeout(t, 3*time.Minute)
	adminClient := sb.Client(t, asUser("admin", superuserPassword))
	for topic, n := range map[string]int{"orders-eu": 6, "orders-secret": 2, "payments": 2} {
		if err := produceAs(ctx, adminClient, topic, n); err != nil {
			t.Fatalf("admin producing to %s: %v", topic, err)
		}
	}

	// refused asserts that a client with opts cannot get a Metadata
	// answer, and returns the error it got.
	refused := func(t *testing.T, opts ...kgo.Opt) error {
		t.Helper()
		cl := sb.Client(t, append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))...)
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		if err == nil {
			t.Fatal("a Metadata request was answered")
		}
		t.Logf("refused: %v", err)
		return err
	}

	t.Run("no credentials", func(t *testing.T) {
		// The broker closes a connection that skips authentication.
		var closed *kgo.ErrFirstReadEOF
		if err := refused(t); !errors.As(err, &closed) {
			t.Fatalf("without credentials: %v, want the connection closed", err)
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		for name, opt := range map[string]kgo.Opt{
			"SCRAM-SHA-256": asUser("reader", "guess"),
			"PLAIN":         kgo.SASL(plain.Auth{User: "reader", Pass: "guess"}.AsMechanism()),
		} {
			if err := refused(t, opt); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("%s with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", name, err)
			}
		}
	})

	t.Run("revoked user", func(t *testing.T) {
		before := sb.Client(t, asUser("temp", "temp-pw"))
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxTimeout(t, requestTimeout), before); err != nil {
			t.Fatalf("temp before its credential is deleted: %v", err)
		}
		deleted, err := sb.admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "temp", Mechanism: kadm.ScramSha256}}, nil)
		if err != nil || deleted.Error() != nil {
			t.Fatalf("deleting temp: %v %v", err, deleted.Error())
		}
		if err := refused(t, asUser("temp", "temp-pw")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("temp on a new connection after deletion: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})

	t.Run("write without read", func(t *testing.T) {
		writer := sb.Client(t, asUser("writer", "writer-pw"), kgo.RequestRetries(2))
		if err := produceAs(ctx, writer, "ingest", 5); err != nil {
			t.Fatalf("writer producing to ingest (WRITE): %v", err)
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := produceAs(pctx, writer, "payments", 1); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("writer producing to payments (no ACL): %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		consumer := sb.Client(t, asUser("writer", "writer-pw"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ingest": {0: kgo.NewOffset().AtStart()}}))
		records, err := firstConsumeError(consumer, 60*time.Second)
		if !errors.Is(err, kerr.TopicAuthorizationFailed) || records != 0 {
			t.Fatalf("writer consuming ingest: %v after %d records, want TOPIC_AUTHORIZATION_FAILED and none", err, records)
		}
	})

	t.Run("prefixed read", func(t *testing.T) {
		recs := consumeN(t, sb.Broker, 6, 60*time.Second, []string{"orders-eu"},
			asUser("reader", "reader-pw"), kgo.ConsumerGroup("orders-app"))
		for _, r := range recs {
			if !strings.HasPrefix(string(r.Value), "orders-eu-") {
				t.Fatalf("reader got %q from orders-eu", r.Value)
			}
		}
		committed, err := sb.admin.FetchOffsets(ctx, "orders-app")
		if err != nil {
			t.Fatalf("admin fetching orders-app's offsets: %v", err)
		}
		if err := committed.Error(); err != nil {
			t.Fatalf("orders-app's offsets: %v", err)
		}
		payments := sb.Client(t, asUser("reader", "reader-pw"), kgo.ConsumeTopics("payments"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		records, err := firstConsumeError(payments, 60*time.Second)
		if !errors.Is(err, kerr.TopicAuthorizationFailed) || records != 0 {
			t.Fatalf("reader consuming payments: %v after %d records, want TOPIC_AUTHORIZATION_FAILED and none", err, records)
		}
	})

	t.Run("deny overrides prefixed allow", func(t *testing.T) {
		secret := sb.Client(t, asUser("reader", "reader-pw"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders-secret": {0: kgo.NewOffset().AtStart()}}))
		records, err := firstConsumeError(secret, 60*time.Second)
		if !errors.Is(err, kerr.TopicAuthorizationFailed) || records != 0 {
			t.Fatalf("reader consuming orders-secret: %v after %d records, want TOPIC_AUTHORIZATION_FAILED and none", err, records)
		}
	})

	t.Run("metadata shows described topics", func(t *testing.T) {
		// READ and WRITE imply DESCRIBE; a DENY of READ does not deny it.
		if got, want := topicNames(t, sb.Client(t, asUser("reader", "reader-pw"))), []string{"orders-eu", "orders-secret"}; !slices.Equal(got, want) {
			t.Errorf("reader sees %v, want %v", got, want)
		}
		if got, want := topicNames(t, sb.Client(t, asUser("writer", "writer-pw"))), []string{"ingest"}; !slices.Equal(got, want) {
			t.Errorf("writer sees %v, want %v", got, want)
		}
		if got, want := topicNames(t, adminClient), []string{"ingest", "orders-eu", "orders-secret", "payments"}; !slices.Equal(got, want) {
			t.Errorf("admin sees %v, want %v", got, want)
		}
	})

	t.Run("group needs read", func(t *testing.T) {
		other := sb.Client(t, asUser("reader", "reader-pw"), kgo.ConsumeTopics("orders-eu"), kgo.ConsumerGroup("other-app"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		records, err := firstConsumeError(other, 60*time.Second)
		if !errors.Is(err, kerr.GroupAuthorizationFailed) || records != 0 {
			t.Fatalf("reader in group other-app: %v after %d records, want GROUP_AUTHORIZATION_FAILED and none", err, records)
		}
		adm := kadm.NewClient(sb.Client(t, asUser("reader", "reader-pw")))
		if _, err := adm.FetchOffsets(ctx, "other-app"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("reader fetching other-app's offsets: %v, want GROUP_AUTHORIZATION_FAILED", err)
		}
	})

	t.Run("superuser", func(t *testing.T) {
		created, err := sb.admin.CreateTopic(ctx, 1, 1, nil, "admin-made")
		if err != nil || created.Err != nil {
			t.Fatalf("admin creating a topic: %v %v", err, created.Err)
		}
		if err := produceAs(ctx, adminClient, "admin-made", 3); err != nil {
			t.Fatalf("admin producing: %v", err)
		}
		consumeN(t, sb.Broker, 3, 60*time.Second, []string{"admin-made"}, asUser("admin", superuserPassword), kgo.ConsumerGroup("admin-group"))
		altered, err := sb.admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}, "admin-made")
		if err != nil || len(altered) != 1 || altered[0].Err != nil {
			t.Fatalf("admin altering a topic config: %v %+v", err, altered)
		}
		described, err := sb.admin.DescribeGroups(ctx, "admin-group", "orders-app")
		if err != nil || described.Error() != nil {
			t.Fatalf("admin describing groups: %v %v", err, described.Error())
		}
		list := kmsg.NewPtrDescribeACLsRequest()
		list.ResourceType, list.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		list.Operation, list.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		acls, err := list.RequestWith(ctx, adminClient)
		if err != nil || acls.ErrorCode != 0 {
			t.Fatalf("admin listing ACLs: %v %v", err, errName(acls.ErrorCode))
		}
		listed := 0
		for _, r := range acls.Resources {
			listed += len(r.ACLs)
		}
		if listed != 4 {
			t.Errorf("admin lists %d ACLs, want the 4 created", listed)
		}
		deleted, err := sb.admin.DeleteTopic(ctx, "admin-made")
		if err != nil || deleted.Err != nil {
			t.Fatalf("admin deleting a topic: %v %v", err, deleted.Err)
		}
	})

	t.Run("kcat refused a topic", func(t *testing.T) {
		bin := kcatBinary(t)
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, bin, "-b", sb.KafkaAddr, "-C", "-t", "payments", "-o", "beginning", "-e", "-q",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
			"-X", "sasl.username=reader", "-X", "sasl.password=reader-pw")
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if cctx.Err() != nil {
			t.Fatalf("kcat did not give up on a refused topic within 60 s\nstderr:\n%s", stderr.String())
		}
		if err == nil || stdout.Len() != 0 || !strings.Contains(strings.ToLower(stderr.String()), "topic authorization failed") {
			t.Fatalf("kcat consuming payments as reader: exit %v, stdout %q\nstderr:\n%s\nwant a failure naming topic authorization", err, stdout.String(), stderr.String())
		}
		t.Logf("kcat: %v: %s", err, strings.TrimSpace(stderr.String()))
	})
}
