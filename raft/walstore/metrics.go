package walstore

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's collectors. None is labelled: there is one
// store per node, and per-group series would be the cardinality problem
// this package exists to avoid.
type metrics struct {
	reg          prometheus.Registerer
	all          []prometheus.Collector
	fsyncs       prometheus.Counter
	batchRecords prometheus.Histogram
	batchGroups  prometheus.Histogram
	bytesWritten prometheus.Counter
	relocated    prometheus.Counter
	syncSeconds  prometheus.Histogram
	handedOff    prometheus.Counter
	ringReads    prometheus.Counter
	fileReads    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Store) (*metrics, error) {
	m := &metrics{
		reg: reg,
		fsyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_raft_log_fsyncs_total",
			Help: "fsyncs of the shared Raft log's segments.",
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_raft_log_batch_records",
			Help:    "Records made durable by one fsync of the shared Raft log (group-commit batch size).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13), // 1 … 4096
		}),
		batchGroups: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_raft_log_batch_groups",
			Help:    "Distinct Raft groups sharing one fsync of the shared Raft log.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 … 2048
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_raft_log_bytes_written_total",
			Help: "Bytes written to the shared Raft log, relocation and segment headers included.",
		}),
		relocated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_raft_log_relocated_bytes_total",
			Help: "Live bytes copied out of old segments of the shared Raft log so they could be deleted.",
		}),
		syncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_raft_log_sync_seconds",
			Help:    "Duration of one fsync of the shared Raft log.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14), // 0.1 ms … 0.8 s
		}),
	}
	m.handedOff = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_raft_log_handed_off_entries_total",
		Help: "Entries a follower's apply took from memory, as stored, instead of reading them back from the shared Raft log.",
	})
	m.ringReads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_raft_log_ring_reads_total",
		Help: "Entries read back (a leader's, to send to followers) from the ring of the shared Raft log's newest bytes, in memory.",
	})
	m.fileReads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_raft_log_file_reads_total",
		Help: "Entries read back from the shared Raft log's files: older than the ring holds.",
	})
	segments := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_raft_log_segments",
		Help: "Segment files of the shared Raft log.",
	}, func() float64 { return float64(s.Stats().Segments) })
	groups := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_raft_log_groups",
		Help: "Raft groups with entries or stable state in the shared Raft log.",
	}, func() float64 { return float64(s.Stats().Groups) })
	spares := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_raft_log_spare_segments",
		Help: "Files of the shared Raft log kept, written, to become its next segments.",
	}, func() float64 { return float64(s.spareCount()) })
	prepared := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "weir_raft_log_spares_prepared_total",
		Help: "Spare segment files of the shared Raft log written as zeros in the background, none being left to reuse.",
	}, func() float64 { return float64(s.preparedSpares.Load()) })
	reused := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "weir_raft_log_segments_from_spares_total",
		Help: "Segments of the shared Raft log made from a spare file (overwritten in place) rather than from an empty one.",
	}, func() float64 { return float64(s.reusedSpares.Load()) })
	for _, c := range []prometheus.Collector{m.fsyncs, m.batchRecords, m.batchGroups, m.bytesWritten, m.relocated, m.syncSeconds, m.handedOff, m.ringReads, m.fileReads, segments, groups, spares, prepared, reused} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, errors.Join(errors.New("walstore: registering metrics"), err)
		}
		m.all = append(m.all, c)
	}
	return m, nil
}

func (m *metrics) unregister() {
	for _, c := range m.all {
		m.reg.Unregister(c)
	}
}
