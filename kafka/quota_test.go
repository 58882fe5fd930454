package kafka

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/log/logtest"
)

type fakeQuotaSource struct {
	index  uint64
	quotas []controller.ClientQuota
}

func (f *fakeQuotaSource) ClientQuotas() []controller.ClientQuota { return f.quotas }
func (f *fakeQuotaSource) ClientQuotasIndex() uint64              { return f.index }

func quotaEntity(user, client *string, hasUser, hasClient bool) controller.ClientQuotaEntity {
	var e controller.ClientQuotaEntity
	if hasUser {
		e = append(e, controller.QuotaEntityPart{Type: controller.QuotaEntityUser, Name: user})
	}
	if hasClient {
		e = append(e, controller.QuotaEntityPart{Type: controller.QuotaEntityClientID, Name: client})
	}
	return e
}

// Kafka's precedence: the eight levels, most specific first, per key.
func TestQuotaPrecedence(t *testing.T) {
	alice, c1 := sp("alice"), sp("c1")
	levels := []controller.ClientQuotaEntity{
		quotaEntity(alice, c1, true, true),
		quotaEntity(alice, nil, true, true),
		quotaEntity(alice, nil, true, false),
		quotaEntity(nil, c1, true, true),
		quotaEntity(nil, nil, true, true),
		quotaEntity(nil, nil, true, false),
		quotaEntity(nil, c1, false, true),
		quotaEntity(nil, nil, false, true),
	}
	wantTags := []sensorKey{{user: "alice", client: "c1"}, {user: "alice", client: "c1"}, {user: "alice"},
		{user: "alice", client: "c1"}, {user: "alice", client: "c1"}, {user: "alice"}, {client: "c1"}, {client: "c1"}}
	// With levels i.. configured, level i applies.
	for i := range levels {
		src := &fakeQuotaSource{index: 1}
		for j := i; j < len(levels); j++ {
			src.quotas = append(src.quotas, controller.ClientQuota{Entity: levels[j], Values: map[string]float64{"producer_byte_rate": float64(100 + j)}})
		}
		// An unrelated key set on a more specific level does not stop the search.
		if i > 0 {
			src.quotas = append(src.quotas, controller.ClientQuota{Entity: levels[0], Values: map[string]float64{"consumer_byte_rate": 1}})
		}
		m := newQuotaManager(src, time.Now, quotaMetrics{})
		v, key, ok := m.current().resolve("producer_byte_rate", "alice", "c1")
		if !ok || v != float64(100+i) || key != wantTags[i] {
			t.Errorf("levels %d..: %v %+v %v, want %d %+v", i, v, key, ok, 100+i, wantTags[i])
		}
		// Another user and client fall through to the defaults.
		v, _, ok = m.current().resolve("producer_byte_rate", "bob", "c2")
		want := map[int]float64{0: 104, 1: 104, 2: 104, 3: 104, 4: 104, 5: 105, 6: 107, 7: 107}[i]
		if !ok || v != want {
			t.Errorf("levels %d.., bob/c2: %v %v, want %v", i, v, ok, want)
		}
	}
}

// The rate is over the samples' span, at least 10 windows; the throttle
// (rate-quota)/quota × span.
func TestRateSensor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newRateSensor(t0)
	rate, span := s.record(1000, t0)
	if span != 10*time.Second || rate != 100 {
		t.Fatalf("rate %v span %v", rate, span)
	}
	// 25 s later, every sample but the new one has expired.
	rate, span = s.record(500, t0.Add(25*time.Second))
	if span != 10*time.Second || rate != 50 {
		t.Fatalf("after expiry: rate %v span %v", rate, span)
	}
	// One sample a second for 15 s: the span grows to 11 windows at most.
	s = newRateSensor(t0)
	for i := 0; i < 15; i++ {
		rate, span = s.record(100, t0.Add(time.Duration(i)*time.Second))
	}
	if span != 10*time.Second || math.Abs(rate-110) > 1e-9 {
		t.Fatalf("steady: rate %v span %v", rate, span)
	}

	m := newQuotaManager(&fakeQuotaSource{}, time.Now, func() quotaMetrics { m, _ := newQuotaMetrics(); return m }())
	q := &connQuotas{}
	q.limit[quotaProduce], q.sensor[quotaProduce] = 100, newRateSensor(t0)
	if d := m.record(q, quotaProduce, 1000, t0); d != 0 {
		t.Fatalf("at the quota: throttle %v", d)
	}
	// 1500 over 10 s is 150/s against 100: (150-100)/100 × 10 s.
	if d := m.record(q, quotaProduce, 500, t0); d != 5*time.Second {
		t.Fatalf("throttle %v, want 5s", d)
	}
	q.limit[quotaRequest], q.sensor[quotaRequest] = 1, newRateSensor(t0)
	if d := m.record(q, quotaRequest, 1000, t0); d != time.Second {
		t.Fatalf("request throttle %v, want bounded by one window", d)
	}
}

// Through a broker: a produce over the client's producer_byte_rate is
// answered with a throttle at once, and the connection's next request
// waits it out.
func TestProduceThrottled(t *testing.T) {
	_, b, addr := startServer(t)
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "quota", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	errs := b.AlterClientQuotas([]controller.ClientQuotaAlteration{{
		Entity: controller.ClientQuotaEntity{{Type: controller.QuotaEntityClientID, Name: sp("test")}},
		Set:    map[string]float64{controller.QuotaProducerByteRate: 1000},
	}}, false)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	c := dial(t, addr)
	produce := func() (*kmsg.ProduceResponse, time.Duration) {
		start := time.Now()
		resp := c.roundTrip(produceRequest(9, -1, "quota", logtest.Batch{Records: 3, ValueSize: 1000}.Encode())).(*kmsg.ProduceResponse)
		return resp, time.Since(start)
	}
	// 3000+ bytes over 10 s is 300/s against 1000/s: no throttle yet;
	// the fourth passes 1000/s and is throttled, answered at once.
	var resp *kmsg.ProduceResponse
	var took time.Duration
	for i := range 4 {
		resp, took = produce()
		if i < 3 && resp.ThrottleMillis != 0 {
			t.Fatalf("produce %d throttled %d ms", i, resp.ThrottleMillis)
		}
	}
	// About 12 KB over 10 s: 1.2 KB/s, (1.2-1)/1 × 10 s ≈ 2 s.
	if resp.ThrottleMillis < 1500 || resp.ThrottleMillis > 3500 || took > time.Second {
		t.Fatalf("throttle %d ms after %v: want about 2 s, answered at once", resp.ThrottleMillis, took)
	}
	start := time.Now()
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	c.roundTrip(md)
	if waited := time.Since(start); waited < time.Duration(resp.ThrottleMillis)*time.Millisecond*9/10 {
		t.Fatalf("the next request was answered after %v, within the %d ms throttle", waited, resp.ThrottleMillis)
	}
}

// controller_mutation_rate: a bucket of 11 s × rate, refused (v6+) or
// only throttled (older) once below zero.
func TestMutationQuota(t *testing.T) {
	_, b, addr := startServer(t)
	errs := b.AlterClientQuotas([]controller.ClientQuotaAlteration{{
		Entity: controller.ClientQuotaEntity{{Type: controller.QuotaEntityClientID, Name: sp("test")}},
		Set:    map[string]float64{controller.QuotaControllerMutationRate: 1},
	}}, false)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	create := func(version int16, name string, partitions int32) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
		req.Topics = append(req.Topics, rt)
		// A connection each: a throttled one is muted.
		return dial(t, addr).roundTrip(req).(*kmsg.CreateTopicsResponse)
	}
	// 12 partitions from a bucket of 11: created, 1 s of throttle.
	resp := create(7, "m1", 12)
	if resp.Topics[0].ErrorCode != 0 || resp.ThrottleMillis < 900 || resp.ThrottleMillis > 1000 {
		t.Fatalf("first: error %d throttle %d", resp.Topics[0].ErrorCode, resp.ThrottleMillis)
	}
	resp = create(7, "m2", 1)
	if resp.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || resp.ThrottleMillis <= 0 || b.Topic("m2") != nil {
		t.Fatalf("v7 while exceeded: error %d throttle %d", resp.Topics[0].ErrorCode, resp.ThrottleMillis)
	}
	resp = create(5, "m3", 1)
	if resp.Topics[0].ErrorCode != 0 || resp.ThrottleMillis <= 0 {
		t.Fatalf("v5 while exceeded: error %d throttle %d", resp.Topics[0].ErrorCode, resp.ThrottleMillis)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TopicNames = []string{"m1"}
	dr := dial(t, addr).roundTrip(del).(*kmsg.DeleteTopicsResponse)
	if dr.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || b.Topic("m1") == nil {
		t.Fatalf("delete v5 while exceeded: error %d", dr.Topics[0].ErrorCode)
	}
}

func setQuota(t *testing.T, b *broker.Broker, key string, value float64) {
	t.Helper()
	errs := b.AlterClientQuotas([]controller.ClientQuotaAlteration{{
		Entity: controller.ClientQuotaEntity{{Type: controller.QuotaEntityClientID, Name: sp("test")}},
		Set:    map[string]float64{key: value},
	}}, false)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
}

// consumer_byte_rate: a fetch over the quota is answered at once with no
// partitions and a throttle; the records come with a later fetch.
func TestFetchThrottled(t *testing.T) {
	_, b, addr := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "fq", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	for range 4 {
		resp := c.roundTrip(produceRequest(9, -1, "fq", logtest.Batch{Records: 3, ValueSize: 1000}.Encode())).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatal(code)
		}
	}
	setQuota(t, b, controller.QuotaConsumerByteRate, 500)
	fetch := func(offset int64) (*kmsg.FetchResponse, time.Duration) {
		start := time.Now()
		resp := c.roundTrip(fetchRequest(12, "fq", tp.ID(), offset, 1<<20)).(*kmsg.FetchResponse)
		return resp, time.Since(start)
	}
	// max_bytes is capped at 500 × 10 s: the first fetch returns one
	// batch (about 3 KB, 300 B/s over 10 s), the second passes the quota.
	resp, _ := fetch(0)
	if resp.ThrottleMillis != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("first fetch: throttle %d, %d topics", resp.ThrottleMillis, len(resp.Topics))
	}
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n > 5000+3500 {
		t.Fatalf("first fetch returned %d bytes, more than the quota allows in 10 s", n)
	}
	var next int64 = 3
	if len(resp.Topics[0].Partitions[0].RecordBatches) > 4000 {
		next = 6
	}
	resp, took := fetch(next)
	if resp.ThrottleMillis <= 0 || len(resp.Topics) != 0 || took > time.Second {
		t.Fatalf("second fetch: throttle %d, %d topics, after %v", resp.ThrottleMillis, len(resp.Topics), took)
	}
	// The connection waits the throttle out before its next fetch. (The
	// bytes were taken back, but within the first 10 s the rate's span
	// does not grow, so the same fetch may be throttled again, as in
	// Kafka.)
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	resp, took = fetch(next)
	if took < throttle*9/10 {
		t.Fatalf("the next fetch was answered after %v, within the %v throttle", took, throttle)
	}
	if resp.ErrorCode != 0 || resp.ThrottleMillis == 0 && len(resp.Topics) != 1 {
		t.Fatalf("after the throttle: error %d throttle %d, %d topics", resp.ErrorCode, resp.ThrottleMillis, len(resp.Topics))
	}
}

// request_percentage applies to a connection open before it was set,
// throttles at most one window, and spares ApiVersions.
func TestRequestPercentageThrottled(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	if resp := c.roundTrip(md).(*kmsg.MetadataResponse); resp.ThrottleMillis != 0 {
		t.Fatalf("throttled before any quota: %d", resp.ThrottleMillis)
	}
	setQuota(t, b, controller.QuotaRequestPercentage, 1e-6)
	resp := c.roundTrip(md).(*kmsg.MetadataResponse)
	if resp.ThrottleMillis <= 0 || resp.ThrottleMillis > 1000 {
		t.Fatalf("metadata throttle %d ms, want (0, 1000]", resp.ThrottleMillis)
	}
	time.Sleep(time.Duration(resp.ThrottleMillis) * time.Millisecond)
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	if resp := c.roundTrip(api).(*kmsg.ApiVersionsResponse); resp.ThrottleMillis != 0 {
		t.Fatalf("ApiVersions throttled %d ms", resp.ThrottleMillis)
	}
}
