package coalescer

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// prometheus/testutil would need github.com/kylelemons/godebug added to
// go.mod, so the collector is checked through a registry's Gather.
func TestMetricsMatchStats(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	const shards = 3
	c := newEnabled(t, Options{Shards: shards, Registerer: reg})

	r := &reader{payload: "p", watermark: 1}
	var held []*Result
	for p := range int32(12) {
		k := baseKey()
		k.Partition = p
		held = append(held, mustRead(t, c, k, 1, r.read), mustRead(t, c, k, 1, r.read))
		if p%3 == 0 {
			held = append(held, mustRead(t, c, k, 2, r.read)) // stale: reinsertion
		}
	}
	defer func() {
		for _, res := range held {
			res.Release()
		}
	}()

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	stats := c.Stats()
	want := map[string]struct {
		help  string
		value func(ShardStats) float64
	}{
		insertionsName:   {"Fetch reads that missed and performed a new read.", func(s ShardStats) float64 { return float64(s.Insertions) }},
		reinsertionsName: {"Fetch reads that re-read an existing stale or expired entry.", func(s ShardStats) float64 { return float64(s.Reinsertions) }},
		readyHitsName:    {"Fetch reads served from a retained, already-completed read.", func(s ShardStats) float64 { return float64(s.ReadyHits) }},
		inflightHitsName: {"Fetch reads served by awaiting an in-flight read.", func(s ShardStats) float64 { return float64(s.InflightHits) }},
		rangeHitsName: {"Ready hits answered with part of a recent result of another offset or limit (counted in ready hits too).",
			func(s ShardStats) float64 { return float64(s.RangeHits) }},
		sharedBytesName: {"Record bytes fetches took from other fetches' reads (ready and in-flight hits).",
			func(s ShardStats) float64 { return float64(s.SharedBytes) }},
		readsName:     {"Log reads made by coalesced fetches that missed.", func(s ShardStats) float64 { return float64(s.Reads) }},
		readBytesName: {"Record bytes returned by those reads.", func(s ShardStats) float64 { return float64(s.ReadBytes) }},
		readSecondsName: {"Time spent in those reads; divided by their count, what one hit saves.",
			func(s ShardStats) float64 { return float64(s.ReadNanos) / 1e9 }},
	}
	if len(families) != len(want) {
		t.Fatalf("%d metric families, want %d", len(families), len(want))
	}
	for _, f := range families {
		w, ok := want[f.GetName()]
		if !ok {
			t.Fatalf("unexpected metric %s", f.GetName())
		}
		if f.GetHelp() != w.help || f.GetType() != dto.MetricType_COUNTER {
			t.Fatalf("%s: help %q type %v", f.GetName(), f.GetHelp(), f.GetType())
		}
		if len(f.GetMetric()) != shards {
			t.Fatalf("%s: %d series, want one per shard", f.GetName(), len(f.GetMetric()))
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "shard" {
				t.Fatalf("%s: labels %v", f.GetName(), m.GetLabel())
			}
			shard, err := strconv.Atoi(m.GetLabel()[0].GetValue())
			if err != nil || shard < 0 || shard >= shards {
				t.Fatalf("%s: bad shard label %q", f.GetName(), m.GetLabel()[0].GetValue())
			}
			if got, want := m.GetCounter().GetValue(), w.value(stats[shard]); got != want {
				t.Fatalf("%s{shard=%d} = %v, Stats says %v", f.GetName(), shard, got, want)
			}
		}
	}
	if sum := lookups(SumStats(stats)); sum != (ShardStats{Insertions: 12, Reinsertions: 4, ReadyHits: 12}) {
		t.Fatalf("stats sum = %+v", sum)
	}

	c.Close()
	if families, _ := reg.Gather(); len(families) != 0 {
		t.Fatal("Close left the metrics registered")
	}
	again, err := New(Options{Registerer: reg})
	if err != nil {
		t.Fatalf("registering after Close: %v", err)
	}
	if _, err := New(Options{Registerer: reg}); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Fatalf("duplicate registration: %v", err)
	}
	again.Close()
}

func TestHitRatio(t *testing.T) {
	tests := []struct {
		stats ShardStats
		want  float64
	}{
		{ShardStats{}, 0},
		{ShardStats{Insertions: 1}, 0},
		{ShardStats{Insertions: 1, InflightHits: 63}, 63.0 / 64},
		{ShardStats{Insertions: 1, Reinsertions: 1, ReadyHits: 1, InflightHits: 1}, 0.5},
		{ShardStats{ReadyHits: 5}, 1},
	}
	for _, tt := range tests {
		if got := HitRatio(tt.stats); got != tt.want {
			t.Errorf("HitRatio(%+v) = %v, want %v", tt.stats, got, tt.want)
		}
	}
	sum := SumStats([]ShardStats{{Insertions: 1, ReadyHits: 2, SharedBytes: 5, Reads: 1, ReadBytes: 7, ReadNanos: 9},
		{Reinsertions: 3, InflightHits: 4, SharedBytes: 1, Reads: 3, ReadBytes: 1, ReadNanos: 1}})
	if sum != (ShardStats{Insertions: 1, Reinsertions: 3, ReadyHits: 2, InflightHits: 4, SharedBytes: 6, Reads: 4, ReadBytes: 8, ReadNanos: 10}) {
		t.Fatalf("SumStats = %+v", sum)
	}
}

func TestStatsAreSnapshotsPerShard(t *testing.T) {
	c := newEnabled(t, Options{Shards: 2})
	r := &reader{payload: "p"}
	res := mustRead(t, c, baseKey(), 0, r.read)
	res.Release()
	stats := c.Stats()
	stats[c.ShardOf(baseKey())].Insertions = 99
	if c.Stats()[c.ShardOf(baseKey())].Insertions != 1 {
		t.Fatal("Stats returned live state")
	}
}

func TestHitsCountSharedBytesAndMissesTheirReads(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1})
	r := &reader{payload: "abcd", watermark: 1} // reads return "abcd#N", 6 bytes
	first := mustRead(t, c, baseKey(), 1, r.read)
	hit := mustRead(t, c, baseKey(), 1, r.read) // ready hit
	first.Release()
	hit.Release()

	held := &reader{payload: "wxyz", hold: make(chan struct{})}
	a := readAsync(c, context.Background(), keyAt(7), 0, held.read)
	waitUntil(t, "the read starts", func() bool { return held.calls.Load() == 1 })
	b := readAsync(c, context.Background(), keyAt(7), 0, held.read)
	waitUntil(t, "the waiter joins", func() bool { return c.Stats()[0].InflightHits == 1 })
	close(held.hold)
	for _, ch := range []<-chan outcome{a, b} {
		o := receive(t, ch)
		if o.err != nil {
			t.Fatal(o.err)
		}
		o.res.Release()
	}

	st := c.Stats()[0]
	if st.SharedBytes != 12 || st.Reads != 2 || st.ReadBytes != 12 || st.ReadNanos == 0 {
		t.Fatalf("stats %+v: want 12 shared bytes (one ready, one in-flight hit), 2 reads of 12 bytes and their time", st)
	}
}
