package broker

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/log/logtest"
)

// With log_page_cache_bytes set, the broker reports what its budget
// holds: the appends whose writeback was started, and nothing dropped
// while they are within it. Without a budget there is no such metric.
func TestPageCacheMetrics(t *testing.T) {
	for _, budget := range []int64{-1, 64 << 20} {
		reg := prometheus.NewRegistry()
		node := testNode(t.TempDir())
		node.LogPageCacheBytes = budget
		b, err := Open(Options{Node: node, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, b, "cached", 1, nil)
		for range 40 { // 40 batches of 100 KB: past a few writeback steps
			produceBatch(t, b, "cached", 0, logtest.Batch{Records: 100, ValueSize: 1000})
		}
		held, heldOK := seriesValue(t, reg, "weir_log_page_cache_held_bytes", nil)
		dropped, droppedOK := seriesValue(t, reg, "weir_log_page_cache_dropped_bytes_total", nil)
		b.Close()
		if budget < 0 {
			if heldOK || droppedOK {
				t.Fatalf("no budget: page cache metrics reported (held %v, dropped %v)", held, dropped)
			}
			continue
		}
		if !heldOK || !droppedOK {
			t.Fatalf("budget %d: held reported %v, dropped reported %v; want both", budget, heldOK, droppedOK)
		}
		if held < 1<<20 || held > 4<<20 || dropped != 0 {
			t.Fatalf("budget %d after 4 MB of appends: held %v, dropped %v; want 1-4 MiB held, nothing dropped", budget, held, dropped)
		}
	}
}
