package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas end to end: set through kadm (and Kafka's own
// kafka-configs), enforced by the broker a client produces to.

// throttleHook counts the throttles responses carried.
type throttleHook struct {
	count atomic.Int64
	total atomic.Int64 // nanoseconds
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.count.Add(1)
	h.total.Add(int64(d))
}

func quotaName(s string) *string { return &s }

// TestQuotaProduceThrottled: a producer at full speed under a
// producer_byte_rate for its client id is throttled to about that rate.
func TestQuotaProduceThrottled(t *testing.T) {
	b := StartBroker(t)
	CreateTopic(t, b, "quota", 1, nil)
	const quota = 512 << 10 // bytes per second
	adm := b.Admin(t)
	altered, err := adm.AlterClientQuotas(ctxTimeout(t, requestTimeout), []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: quotaName("quota-producer")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}},
	}})
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, altered)
	}

	// The quota counts request bytes, so the records are sent as they
	// are: random values, no compression. Requests of at most 16 KiB keep
	// the overshoot of the last requests let through small.
	hook := &throttleHook{}
	cl := b.Client(t, kgo.ClientID("quota-producer"), kgo.WithHooks(hook), kgo.DefaultProduceTopic("quota"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(2000))
	value := make([]byte, 1024)
	rand.Read(value)
	// WEIR_QUOTA_RUN (a duration) runs longer, to measure how close the
	// rate comes to the quota once the 11-sample window is full.
	run := 10 * time.Second
	if v := os.Getenv("WEIR_QUOTA_RUN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("WEIR_QUOTA_RUN=%q: want a duration such as 60s", v)
		}
		run = d
	}
	var acked atomic.Int64
	var produceErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for time.Since(start) < run {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				produceErr.Store(err)
				return
			}
			if time.Since(start) <= run {
				acked.Add(int64(len(r.Value)))
			}
		})
	}
	wg.Wait()
	if err, _ := produceErr.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	rate := float64(acked.Load()) / run.Seconds()
	ratio := rate / quota
	t.Logf("achieved %.0f B/s of record values against a quota of %d B/s: %.2f×; %d throttled responses, %v of throttle",
		rate, quota, ratio, hook.count.Load(), time.Duration(hook.total.Load()))
	if hook.count.Load() == 0 {
		t.Fatal("no response carried a throttle")
	}
	if ratio < 0.75 || ratio > 1.25 {
		t.Fatalf("achieved %.2f× the quota, want 0.75-1.25×", ratio)
	}
	m := scrapeMetrics(t, b)
	if v, _ := m.value(`weir_kafka_throttled_responses_total{type="produce"}`); v == 0 {
		t.Error("weir_kafka_throttled_responses_total{type=\"produce\"} is 0")
	}
	if v, _ := m.value(`weir_kafka_quota_throttle_seconds_total{type="produce"}`); v == 0 {
		t.Error("weir_kafka_quota_throttle_seconds_total{type=\"produce\"} is 0")
	}

	// Another client id is not held back.
	free := b.Client(t, kgo.ClientID("free"), kgo.DefaultProduceTopic("quota"), kgo.WithHooks(&throttleHook{}))
	if err := free.ProduceSync(ctxTimeout(t, requestTimeout), &kgo.Record{Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// describedQuotas renders a DescribeClientQuotas answer as sorted lines.
func describedQuotas(t *testing.T, adm *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
	t.Helper()
	qs, err := adm.DescribeClientQuotas(ctxTimeout(t, requestTimeout), strict, comps)
	if err != nil {
		t.Fatalf("DescribeClientQuotas: %v", err)
	}
	var out []string
	for _, q := range qs {
		vals := make([]string, 0, len(q.Values))
		for _, v := range q.Values {
			vals = append(vals, v.String())
		}
		slices.Sort(vals)
		out = append(out, q.Entity.String()+" "+strings.Join(vals, ","))
	}
	slices.Sort(out)
	return out
}

// TestQuotaDescribeAlterRoundTrip: set, validate only, describe with
// each match type and strict, refuse, remove.
func TestQuotaDescribeAlterRoundTrip(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	entries := []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: quotaName("c1")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "consumer_byte_rate", Value: 2048}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 50}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: quotaName("alice")}, {Type: "client-id"}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 2.5}}},
	}
	validated, err := adm.ValidateAlterClientQuotas(ctx, entries)
	if err != nil || len(validated) != 3 || validated[0].Err != nil {
		t.Fatalf("validate: %v %+v", err, validated)
	}
	if got := describedQuotas(t, adm, false); len(got) != 0 {
		t.Fatalf("validate_only stored quotas: %v", got)
	}
	altered, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range altered {
		if a.Err != nil {
			t.Fatalf("%v: %v %s", a.Entity, a.Err, a.ErrMessage)
		}
	}
	all := describedQuotas(t, adm, false)
	want := []string{
		"{client-id=<default>, user=alice} controller_mutation_rate=2.500000",
		"{client-id=c1} consumer_byte_rate=2048.000000,producer_byte_rate=1024.000000",
		"{user=<default>} request_percentage=50.000000",
	}
	if !slices.Equal(all, want) {
		t.Fatalf("described\n%v\nwant\n%v", all, want)
	}
	user := func(mt kmsg.QuotasMatchType, name *string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: "user", MatchType: mt, MatchName: name}
	}
	for _, tc := range []struct {
		strict bool
		comps  []kadm.DescribeClientQuotaComponent
		want   []string
	}{
		{false, []kadm.DescribeClientQuotaComponent{user(kmsg.QuotasMatchTypeDefault, nil)}, want[2:]},
		{false, []kadm.DescribeClientQuotaComponent{user(kmsg.QuotasMatchTypeAny, nil)}, []string{want[0], want[2]}},
		{true, []kadm.DescribeClientQuotaComponent{user(kmsg.QuotasMatchTypeAny, nil)}, want[2:]},
		{false, []kadm.DescribeClientQuotaComponent{user(kmsg.QuotasMatchTypeExact, quotaName("alice"))}, want[:1]},
		{true, []kadm.DescribeClientQuotaComponent{user(kmsg.QuotasMatchTypeExact, quotaName("alice"))}, nil},
		{true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: kmsg.QuotasMatchTypeExact, MatchName: quotaName("c1")}}, want[1:2]},
	} {
		if got := describedQuotas(t, adm, tc.strict, tc.comps...); !slices.Equal(got, tc.want) {
			t.Errorf("strict %v %+v: %v, want %v", tc.strict, tc.comps, got, tc.want)
		}
	}
	// A filter Kafka refuses is refused here too.
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}, user(kmsg.QuotasMatchTypeAny, nil)})
	if !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("ip with user filter: %v, want INVALID_REQUEST", err)
	}
	// Invalid alterations, each with Kafka's error.
	bad, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: quotaName("c2")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: quotaName("g")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
	})
	if err != nil || len(bad) != 2 || !errors.Is(bad[0].Err, kerr.InvalidRequest) || !errors.Is(bad[1].Err, kerr.InvalidRequest) ||
		bad[0].ErrMessage != "producer_byte_rate cannot be a fractional value." {
		t.Fatalf("invalid alterations: %v %+v", err, bad)
	}
	// Removing every key removes the entity.
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entries[0].Entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "consumer_byte_rate", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	if got := describedQuotas(t, adm, false); !slices.Equal(got, []string{want[0], want[2]}) {
		t.Fatalf("after removal: %v", got)
	}
}

// TestQuotaKafkaConfigsTool: Kafka's own kafka-configs (ConfigCommand)
// sets, describes and deletes client and user quotas.
func TestQuotaKafkaConfigsTool(t *testing.T) {
	t.Parallel()
	b := StartBroker(t)
	configs := func(args ...string) string {
		t.Helper()
		out, err := kafkaTool(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", b.KafkaAddr}, args...)...)
		if err != nil {
			t.Fatalf("kafka-configs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	configs("--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048", "--entity-type", "clients", "--entity-name", "c1")
	out := configs("--describe", "--entity-type", "clients")
	if !strings.Contains(out, "client-id 'c1'") || !strings.Contains(out, "producer_byte_rate=1024.0") || !strings.Contains(out, "consumer_byte_rate=2048.0") {
		t.Fatalf("describe clients:\n%s", out)
	}
	configs("--alter", "--add-config", "request_percentage=25.5", "--entity-type", "users", "--entity-default")
	out = configs("--describe", "--entity-type", "users", "--entity-default")
	if !strings.Contains(out, "default user") || !strings.Contains(out, "request_percentage=25.5") {
		t.Fatalf("describe default user:\n%s", out)
	}
	configs("--alter", "--delete-config", "producer_byte_rate", "--entity-type", "clients", "--entity-name", "c1")
	out = configs("--describe", "--entity-type", "clients", "--entity-name", "c1")
	if strings.Contains(out, "producer_byte_rate") || !strings.Contains(out, "consumer_byte_rate=2048.0") {
		t.Fatalf("describe c1 after --delete-config:\n%s", out)
	}
	// What the tool set is what the broker holds.
	got := describedQuotas(t, b.Admin(t), false)
	want := []string{"{client-id=c1} consumer_byte_rate=2048.000000", "{user=<default>} request_percentage=25.500000"}
	if !slices.Equal(got, want) {
		t.Fatalf("described %v, want %v", got, want)
	}
}

// TestQuotaClusterEveryBroker: a quota altered through one broker is
// described and enforced by every broker.
func TestQuotaClusterEveryBroker(t *testing.T) {
	bs := StartCluster(t, 3)
	alter := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "client-id", quotaName("kgo") // the direct clients' id
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "request_percentage", 1e-6
	e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
	alter.Entries = append(alter.Entries, e)
	resp, err := ask(t, bs[0], alter)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.AlterClientQuotasResponse); r.Entries[0].ErrorCode != 0 {
		t.Fatalf("alter through node %d: %s", bs[0].NodeID, errName(r.Entries[0].ErrorCode))
	}
	for _, b := range bs {
		pollUntil(t, 10*time.Second, "the quota on every broker", func() error {
			dr, err := ask(t, b, kmsg.NewPtrDescribeClientQuotasRequest())
			if err != nil {
				return err
			}
			if n := len(dr.(*kmsg.DescribeClientQuotasResponse).Entries); n != 1 {
				return errors.New("node " + b.KafkaAddr + " describes no quota")
			}
			md := kmsg.NewPtrMetadataRequest()
			mr, err := ask(t, b, md)
			if err != nil {
				return err
			}
			if mr.(*kmsg.MetadataResponse).ThrottleMillis <= 0 {
				return errors.New("node " + b.KafkaAddr + " does not throttle")
			}
			return nil
		})
	}
}

// TestQuotaConnectionCreationRate: with connection_creation_rate set on
// the default ip entity, a burst of new connections from one address is
// served up to the rate, and the ones over it are closed unserved; with
// the quota removed, new connections are served again.
func TestQuotaConnectionCreationRate(t *testing.T) {
	b := StartBroker(t)
	setIPRate := func(remove bool) {
		t.Helper()
		alter := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type = "ip" // name null: the default for every address
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value, op.Remove = "connection_creation_rate", 2, remove
		e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
		alter.Entries = append(alter.Entries, e)
		resp, err := ask(t, b, alter)
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.(*kmsg.AlterClientQuotasResponse); r.Entries[0].ErrorCode != 0 {
			t.Fatalf("AlterClientQuotas: %s %s", errName(r.Entries[0].ErrorCode), derefStr(r.Entries[0].ErrorMessage))
		}
	}
	// served reports whether a new connection answers ApiVersions.
	served := func() bool {
		c, err := net.DialTimeout("tcp", b.KafkaAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("conn-rate")).AppendRequest(nil, req, 1)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(frame); err != nil {
			return false
		}
		var size [4]byte
		_, err = io.ReadFull(c, size[:])
		return err == nil
	}
	setIPRate(false)
	time.Sleep(200 * time.Millisecond) // the quota reaches the listener at its next connection
	var ok, closed int
	for range 40 {
		if served() {
			ok++
		} else {
			closed++
		}
	}
	t.Logf("40 connections at once under 2 connections/s: %d served, %d closed", ok, closed)
	// 2 per second over a window padded to 10 s: about 20 pass.
	if ok < 10 || closed < 10 {
		t.Fatalf("%d served and %d closed of 40 connections over a rate of 2/s", ok, closed)
	}
	if v, _ := scrapeMetrics(t, b).value(`weir_kafka_throttled_responses_total{type="connection"}`); v < float64(closed) {
		t.Errorf("throttled connections counted %v, closed %d", v, closed)
	}
	setIPRate(true)
	pollUntil(t, 10*time.Second, "new connections served once the quota is removed", func() error {
		if !served() {
			return errors.New("a new connection was closed")
		}
		return nil
	})
}
