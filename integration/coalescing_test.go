package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// coalescerSum adds one coalescer counter over every shard of a scrape.
func coalescerSum(s scrape, counter string) float64 {
	var sum float64
	for series, v := range s {
		if strings.HasPrefix(series, "vectorized_kafka_fetch_read_coalescer_"+counter+"_total{") {
			sum += v
		}
	}
	return sum
}

func setCoalescingVia(t *testing.T, b *Broker, on bool) {
	t.Helper()
	body := fmt.Sprintf(`{"upsert":{"kafka_fetch_read_coalescing_enabled":%v}}`, on)
	if code, raw := adminDo(t, b, "PUT", "/v1/cluster_config", body, nil); code != http.StatusOK {
		t.Fatalf("PUT kafka_fetch_read_coalescing_enabled=%v: %d %s", on, code, raw)
	}
}

// TestFetchCoalescingFanout: 32 kgo consumers (separate connections)
// tail one partition of a real broker with coalescing on, while a
// producer writes; coalescing is switched off and on again mid-stream.
// Every consumer receives exactly the produced records, in order, and
// the coalescer's metrics show the shared reads.
func TestFetchCoalescingFanout(t *testing.T) {
	b := StartBroker(t)
	const (
		topic     = "fanout"
		consumers = 32
		records   = 600
	)
	createTopicVia(t, b, topic, 1)
	setCoalescingVia(t, b, true)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := make([][]int64, consumers)
	var wg sync.WaitGroup
	ready := make(chan struct{}, consumers)
	for i := range consumers {
		cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(500*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready <- struct{}{}
			for len(got[i]) < records && ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					got[i] = append(got[i], int64(binary.BigEndian.Uint64(r.Value)))
				})
			}
		}()
	}
	for range consumers {
		<-ready
	}

	prod := b.Client(t, kgo.DefaultProduceTopic(topic))
	for n := range records {
		switch n {
		case records / 3:
			setCoalescingVia(t, b, false)
		case 2 * records / 3:
			setCoalescingVia(t, b, true)
		}
		v := make([]byte, 512)
		binary.BigEndian.PutUint64(v, uint64(n))
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		if n%20 == 0 {
			time.Sleep(5 * time.Millisecond) // a steady stream, not one burst
		}
	}
	wg.Wait()
	for i, seq := range got {
		if len(seq) != records {
			t.Fatalf("consumer %d received %d records, want %d", i, len(seq), records)
		}
		for n, v := range seq {
			if v != int64(n) {
				t.Fatalf("consumer %d: record %d is %d", i, n, v)
			}
		}
	}

	s := scrapeMetrics(t, b)
	ins, reins := coalescerSum(s, "insertions"), coalescerSum(s, "reinsertions")
	ready2, inflight := coalescerSum(s, "ready_hits"), coalescerSum(s, "inflight_hits")
	t.Logf("coalescer: insertions %.0f reinsertions %.0f ready hits %.0f inflight hits %.0f; log reads %.0f",
		ins, reins, ready2, inflight, s["weir_log_reads_total"])
	if ready2+inflight == 0 {
		t.Fatal("no coalescer hits with 32 consumers tailing one partition")
	}

	// weirctl reads the same counters from every broker's /metrics.
	type shardStats struct {
		ReadyHits    float64 `json:"ready_hits"`
		InflightHits float64 `json:"inflight_hits"`
	}
	stats := decodeJSON[struct {
		Brokers []struct {
			NodeID int32      `json:"node_id"`
			Total  shardStats `json:"total"`
		} `json:"brokers"`
	}](t, newWeirctl(t, b).ok(t, "", "cluster", "coalescer", "stats", "--admin-url", "http://"+b.AdminAddr, "--format", "json"))
	if len(stats.Brokers) != 1 || stats.Brokers[0].Total.ReadyHits < ready2 || stats.Brokers[0].Total.InflightHits < inflight {
		t.Fatalf("weirctl cluster coalescer stats: %+v, scraped ready %.0f inflight %.0f", stats, ready2, inflight)
	}
}
