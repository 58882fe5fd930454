package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recordKeys is each record as "partition/offset=value", sorted.
func recordKeys(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d/%d=%s", r.Partition, r.Offset, r.Value)
	}
	slices.Sort(out)
	return out
}

// TestFetchSessionsKgo: a kgo consumer of a multi-partition topic reads
// the same records with fetch sessions (kgo's default) as with
// kgo.DisableFetchSessions(), with per-fetch limits small enough that
// most of its fetches are incremental and return records, and while
// records are still being produced; the broker's session metrics see the
// session.
func TestFetchSessionsKgo(t *testing.T) {
	b := StartBroker(t)
	const (
		topic        = "fetch-sessions"
		partitions   = 12
		perPartition = 300
	)
	createTopicVia(t, b, topic, partitions)
	prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := seqRecords(topic, partitions, perPartition)
	half := len(recs) / 2
	produceAll(t, prod, recs[:half], 30*time.Second)

	// Small limits: many fetches per partition, most of them incremental.
	limits := []kgo.Opt{kgo.FetchMaxBytes(4 << 10), kgo.FetchMaxPartitionBytes(1 << 10)}
	// The rest arrives while the sessions consumer reads.
	produced := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		produced <- prod.ProduceSync(ctx, recs[half:]...).FirstErr()
	}()
	got := recordKeys(consumeN(t, b, len(recs), 90*time.Second, []string{topic}, append(limits, kgo.ClientID("with-sessions"))...))
	if err := <-produced; err != nil {
		t.Fatalf("producing the second half: %v", err)
	}
	want := recordKeys(consumeN(t, b, len(recs), 90*time.Second, []string{topic},
		append(limits, kgo.ClientID("without-sessions"), kgo.DisableFetchSessions())...))
	if !slices.Equal(got, want) {
		t.Fatalf("with sessions %d records, without %d: they differ", len(got), len(want))
	}
	if len(got) != partitions*perPartition {
		t.Fatalf("%d records, want %d", len(got), partitions*perPartition)
	}

	// While a consumer is open its session is cached; kgo closes it
	// (epoch -1) when the client closes. The clients above closed theirs
	// too, but on a loaded machine a close can be late or lost (the
	// session then waits for its idle eviction): count from what is
	// cached once that settles.
	var baseSessions, baseParts float64
	settle := time.Now().Add(30 * time.Second)
	for {
		page := scrapeMetrics(t, b)
		baseSessions, _ = page.value("weir_kafka_fetch_sessions")
		baseParts, _ = page.value("weir_kafka_fetch_session_partitions")
		if baseSessions == 0 || time.Now().After(settle) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.KafkaAddr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if fs := cl.PollFetches(ctx); fs.NumRecords() == 0 {
		t.Fatalf("no records: %v", fs.Errors())
	}
	pollUntil(t, scrapeTimeout, "a cached session", func() error {
		page := scrapeMetrics(t, b)
		sessions, _ := page.value("weir_kafka_fetch_sessions")
		parts, _ := page.value("weir_kafka_fetch_session_partitions")
		if _, ok := page.value("weir_kafka_fetch_session_evictions_total"); !ok {
			return fmt.Errorf("no weir_kafka_fetch_session_evictions_total")
		}
		if sessions != baseSessions+1 || parts != baseParts+partitions {
			return fmt.Errorf("%v sessions, %v partitions; want %v, %v", sessions, parts, baseSessions+1, baseParts+partitions)
		}
		return nil
	})
	cl.Close()
	pollUntil(t, scrapeTimeout, "the session closed", func() error {
		if n, _ := scrapeMetrics(t, b).value("weir_kafka_fetch_sessions"); n > baseSessions {
			return fmt.Errorf("%v sessions, %v before the client", n, baseSessions)
		}
		return nil
	})
}

// TestFetchSessionsRaw: on a real broker, an incremental fetch omits the
// partitions where nothing changed and lists the one that got a record;
// its responses are smaller than the full one's.
func TestFetchSessionsRaw(t *testing.T) {
	b := StartBroker(t)
	const (
		topic      = "fetch-sessions-raw"
		partitions = 8
	)
	createTopicVia(t, b, topic, partitions)
	prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, prod, seqRecords(topic, partitions, 3), 30*time.Second)

	rc := dialRaw(t, b.KafkaAddr)
	var parts []fetchPart
	for p := range int32(partitions) {
		parts = append(parts, fetchPart{Topic: topic, Partition: p, Offset: 3, MaxBytes: 1 << 20})
	}
	req := buildFetch(12, fetchSpec{MaxBytes: 1 << 20, Parts: parts})
	req.SessionID, req.SessionEpoch = 0, 0
	full := rc.Do(req).(*kmsg.FetchResponse)
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch: error %d, session %d", full.ErrorCode, full.SessionID)
	}
	if n := len(full.Topics[0].Partitions); n != partitions {
		t.Fatalf("full fetch lists %d partitions, want %d", n, partitions)
	}

	incremental := func(epoch int32) *kmsg.FetchResponse {
		t.Helper()
		req := buildFetch(12, fetchSpec{MaxBytes: 1 << 20})
		req.SessionID, req.SessionEpoch = full.SessionID, epoch
		resp := rc.Do(req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || resp.SessionID != full.SessionID {
			t.Fatalf("incremental epoch %d: error %d, session %d", epoch, resp.ErrorCode, resp.SessionID)
		}
		return resp
	}
	if resp := incremental(1); len(resp.Topics) != 0 {
		t.Fatalf("idle incremental fetch lists %d topics, want none", len(resp.Topics))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 5, Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp := incremental(2)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("after a produce to partition 5: %d topics, want one partition", len(resp.Topics))
	}
	if p := resp.Topics[0].Partitions[0]; p.Partition != 5 || p.HighWatermark != 4 || len(p.RecordBatches) == 0 {
		t.Fatalf("after a produce to partition 5: partition %d hw %d, %d record bytes", p.Partition, p.HighWatermark, len(p.RecordBatches))
	}
	// Its offset did not move: the record again, nothing else.
	resp = incremental(3)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 5 {
		t.Fatalf("repeat: %+v", resp.Topics)
	}
	fullSize := len(full.AppendTo(nil))
	incremental(4)
	req = buildFetch(12, fetchSpec{MaxBytes: 1 << 20, Parts: []fetchPart{{Topic: topic, Partition: 5, Offset: 4, MaxBytes: 1 << 20}}})
	req.SessionID, req.SessionEpoch = full.SessionID, 5
	idle := rc.Do(req).(*kmsg.FetchResponse)
	if idle.ErrorCode != 0 || len(idle.Topics) != 0 {
		t.Fatalf("caught up: error %d, %d topics", idle.ErrorCode, len(idle.Topics))
	}
	if idleSize := len(idle.AppendTo(nil)); idleSize*4 > fullSize {
		t.Fatalf("idle incremental response %d bytes, full %d", idleSize, fullSize)
	}
}
