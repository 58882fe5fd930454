package walstore

import (
	"fmt"
	"slices"
	"testing"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	fsys := newFaultFS()
	s, err := Open(testDir, Options{FS: fsys, Registerer: reg, SegmentBytes: 64 << 10, PrepareSpares: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 100; i += 10 { // past half the segment in small writes: a spare is prepared
		storeRange(t, s.Group("big"), i, i+9, 1)
	}
	waitFor(t, "a prepared spare", func() bool { return s.Stats().Spares == 1 })
	for i := range 3 {
		storeRange(t, s.Group(fmt.Sprint("g", i)), 1, 2, 1)
	}
	follower := s.Group("g0")
	if err := follower.StoreLogsHandOff(mkLogs("g0", 3, 4, 1)); err != nil {
		t.Fatal(err)
	}
	var l hraft.Log
	if err := follower.GetLog(3, &l); err != nil {
		t.Fatal(err)
	}
	if err := s.Group("g1").GetLog(1, &l); err != nil { // from the ring
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.Counter != nil:
			got[mf.GetName()] = m.Counter.GetValue()
		case m.Gauge != nil:
			got[mf.GetName()] = m.Gauge.GetValue()
		case m.Histogram != nil:
			got[mf.GetName()] = float64(m.Histogram.GetSampleCount())
		}
	}
	st := s.Stats()
	want := map[string]float64{
		"weir_raft_log_fsyncs_total":               float64(st.Fsyncs),
		"weir_raft_log_batch_records":              float64(st.Batches),
		"weir_raft_log_batch_groups":               float64(st.Batches),
		"weir_raft_log_bytes_written_total":        float64(st.BytesWritten),
		"weir_raft_log_segments":                   1,
		"weir_raft_log_groups":                     4,
		"weir_raft_log_relocated_bytes_total":      0,
		"weir_raft_log_sync_seconds":               float64(st.Fsyncs),
		"weir_raft_log_handed_off_entries_total":   1,
		"weir_raft_log_ring_reads_total":           1,
		"weir_raft_log_file_reads_total":           float64(st.FileReads),
		"weir_raft_log_spare_segments":             1,
		"weir_raft_log_spares_prepared_total":      1,
		"weir_raft_log_segments_from_spares_total": 0,
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
	mustClose(t, s)
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		var names []string
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
		t.Fatalf("still registered after Close: %v", slices.Sorted(slices.Values(names)))
	}
	// A reopened store registers again.
	s, err = Open(testDir, Options{FS: fsys, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
}
