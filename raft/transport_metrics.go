package raft

import (
	"errors"
	"net"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Counters of the shared transport. The per-frame ones are plain atomics
// read at scrape time (no Prometheus call on the hot path); errors are a
// CounterVec (rare), the batch size a histogram observed once per batch.
//
//	weir_raft_transport_frames_total{direction}            sent, received
//	weir_raft_transport_bytes_total{direction}             frames and snapshots
//	weir_raft_transport_heartbeat_frames_total{direction}  batches
//	weir_raft_transport_heartbeats_total{direction}        heartbeats in them
//	weir_raft_transport_heartbeat_batch_groups             heartbeats per batch sent
//	weir_raft_transport_connections{direction}            open: inbound, outbound
//	weir_raft_transport_rpc_errors_total{kind}             dial, conn, timeout,
//	                                                       remote, closed, too_large,
//	                                                       bad_frame, queue_full
//
// heartbeats_total / heartbeat_frames_total is the groups per frame.

// Error kinds, the values of the errors metric's kind label.
const (
	tpErrDial      = "dial"       // no connection to the peer
	tpErrConn      = "conn"       // the connection broke with the call in flight
	tpErrTimeout   = "timeout"    // no answer within the timeout
	tpErrRemote    = "remote"     // the peer answered with an error
	tpErrClosed    = "closed"     // the group, pipeline or transport is closed
	tpErrTooLarge  = "too_large"  // request over the frame limit; not sent
	tpErrBadFrame  = "bad_frame"  // a malformed frame closed a connection
	tpErrQueueFull = "queue_full" // an inbound request refused: its group's queue is full
)

type tpCounters struct {
	framesSent, framesRecv     atomic.Uint64
	bytesSent, bytesRecv       atomic.Uint64
	writes                     atomic.Uint64 // writev calls of connection writers
	hbFramesSent, hbFramesRecv atomic.Uint64
	hbSent, hbRecv             atomic.Uint64
	hbHeld                     atomic.Uint64 // heartbeats put back to wait for a dial
	noticesSent                atomic.Uint64 // commit notices in heartbeat batches sent
	noticesDelivered           atomic.Uint64 // commit notices handed to a group's Raft
	noticesIdle                atomic.Uint64 // received for a group already that far
	catchUps                   atomic.Uint64 // barriers written to wake a stalled follower's replication
	inbound, outbound          atomic.Int64
	dials, dialFailures        atomic.Uint64
	callsFailed                atomic.Uint64
	badFrames                  atomic.Uint64
}

// TransportStats is a snapshot of the shared transport's counters.
type TransportStats struct {
	FramesSent, FramesReceived uint64
	BytesSent, BytesReceived   uint64
	// Writes counts the connection writers' writes (one writev each);
	// FramesSent / Writes is how well frames share them. Snapshot
	// connections are not counted.
	Writes                                       uint64
	HeartbeatFramesSent, HeartbeatFramesReceived uint64
	HeartbeatsSent, HeartbeatsReceived           uint64
	// HeartbeatsHeld counts heartbeats put back in their peer's queue
	// because it could not be reached, to go with the next dial
	// (holdHeartbeats); one held several times counts each time.
	HeartbeatsHeld uint64
	// Commit notices (transport_commit.go): sent with heartbeats,
	// received and handed to the group's Raft, received for a group that
	// had applied that far already.
	CommitNoticesSent, CommitNoticesDelivered, CommitNoticesIdle uint64
	// CatchUps counts barriers the groups led here wrote to wake the
	// replication to a follower that stayed behind (catchup.go).
	CatchUps uint64
	// Connections open now (Connections = Inbound + Outbound), snapshot
	// connections included.
	Connections, InboundConnections, OutboundConnections int
	Dials, DialFailures                                  uint64
	// CallsFailed counts calls (and pipelined appends) that returned an
	// error, of any kind.
	CallsFailed uint64
	// BadFrames counts connections closed for a malformed frame.
	BadFrames uint64
	// Groups registered now.
	Groups int
}

// HeartbeatsPerFrame is the mean number of groups per heartbeat batch sent.
func (s TransportStats) HeartbeatsPerFrame() float64 {
	if s.HeartbeatFramesSent == 0 {
		return 0
	}
	return float64(s.HeartbeatsSent) / float64(s.HeartbeatFramesSent)
}

func (h *transportHub) stats() TransportStats {
	st := &h.st
	in, out := int(st.inbound.Load()), int(st.outbound.Load())
	h.gmu.RLock()
	groups := len(h.groups)
	h.gmu.RUnlock()
	return TransportStats{
		FramesSent: st.framesSent.Load(), FramesReceived: st.framesRecv.Load(),
		BytesSent: st.bytesSent.Load(), BytesReceived: st.bytesRecv.Load(),
		Writes:              st.writes.Load(),
		HeartbeatFramesSent: st.hbFramesSent.Load(), HeartbeatFramesReceived: st.hbFramesRecv.Load(),
		HeartbeatsSent: st.hbSent.Load(), HeartbeatsReceived: st.hbRecv.Load(),
		HeartbeatsHeld:    st.hbHeld.Load(),
		CommitNoticesSent: st.noticesSent.Load(), CommitNoticesDelivered: st.noticesDelivered.Load(),
		CommitNoticesIdle: st.noticesIdle.Load(), CatchUps: st.catchUps.Load(),
		Connections: in + out, InboundConnections: in, OutboundConnections: out,
		Dials: st.dials.Load(), DialFailures: st.dialFailures.Load(),
		CallsFailed: st.callsFailed.Load(),
		BadFrames:   st.badFrames.Load(),
		Groups:      groups,
	}
}

func (h *transportHub) countError(kind string) {
	h.met.errors.WithLabelValues(kind).Inc()
	switch kind {
	case tpErrBadFrame, tpErrQueueFull:
	default:
		h.st.callsFailed.Add(1)
	}
}

func (h *transportHub) countCallError(err error) {
	var re *remoteError
	switch {
	case errors.As(err, &re):
		h.countError(tpErrRemote)
	case errors.Is(err, errTpTimeout):
		h.countError(tpErrTimeout)
	case errors.Is(err, hraft.ErrTransportShutdown), errors.Is(err, hraft.ErrPipelineShutdown),
		errors.Is(err, net.ErrClosed), errors.Is(err, errTpGroupClosed):
		h.countError(tpErrClosed)
	case errors.Is(err, errTpFrameTooLarge):
		h.countError(tpErrTooLarge)
	default:
		h.countError(tpErrConn)
	}
}

type transportMetrics struct {
	reg         prometheus.Registerer
	errors      *prometheus.CounterVec
	batchGroups prometheus.Histogram
	counters    *tpCollector
}

func newTransportMetrics(reg prometheus.Registerer, h *transportHub) (*transportMetrics, error) {
	met := &transportMetrics{
		reg: reg,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_raft_transport_rpc_errors_total",
			Help: "Raft transport failures, by kind (dial, conn, timeout, remote, closed, too_large, bad_frame, queue_full).",
		}, []string{"kind"}),
		batchGroups: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_raft_transport_heartbeat_batch_groups",
			Help:    "Heartbeats (one per group) in each heartbeat batch this node sent.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15), // 1 … 16384
		}),
		counters: newTpCollector(h),
	}
	if reg == nil {
		return met, nil
	}
	cs := []prometheus.Collector{met.errors, met.batchGroups, met.counters}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, errors.Join(errors.New("raft: registering transport metrics"), err)
		}
	}
	return met, nil
}

func (met *transportMetrics) unregister() {
	if met.reg == nil {
		return
	}
	met.reg.Unregister(met.errors)
	met.reg.Unregister(met.batchGroups)
	met.reg.Unregister(met.counters)
}

// tpCollector reports the atomics at scrape time.
type tpCollector struct {
	h                                                    *transportHub
	frames, bytes, hbFrames, hbs, hbHeld, notices, conns *prometheus.Desc
	catchUps                                             *prometheus.Desc
}

func newTpCollector(h *transportHub) *tpCollector {
	dir := []string{"direction"}
	return &tpCollector{
		h: h,
		frames: prometheus.NewDesc("weir_raft_transport_frames_total",
			"Frames on the shared Raft transport, by direction (sent, received).", dir, nil),
		bytes: prometheus.NewDesc("weir_raft_transport_bytes_total",
			"Bytes on the shared Raft transport (frames and snapshot data), by direction.", dir, nil),
		hbFrames: prometheus.NewDesc("weir_raft_transport_heartbeat_frames_total",
			"Heartbeat batch frames, by direction.", dir, nil),
		hbs: prometheus.NewDesc("weir_raft_transport_heartbeats_total",
			"Heartbeats carried in batch frames, by direction; divided by the frames, the groups per frame.", dir, nil),
		hbHeld: prometheus.NewDesc("weir_raft_transport_heartbeats_held_total",
			"Heartbeats put back to wait for the next dial of a peer that could not be reached, instead of failing at once.", nil, nil),
		notices: prometheus.NewDesc("weir_raft_transport_commit_notices_total",
			"Commit indexes carried with heartbeats to idle followers, by result (sent; received and delivered to the group; received for a group that had applied that far).",
			[]string{"result"}, nil),
		catchUps: prometheus.NewDesc("weir_raft_follower_catch_ups_total",
			"Barriers written by groups led here to wake the replication to a follower that answered heartbeats but stayed behind after a failed append.", nil, nil),
		conns: prometheus.NewDesc("weir_raft_transport_connections",
			"Open connections of the shared Raft transport, by direction (inbound, outbound).", dir, nil),
	}
}

func (c *tpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.frames
	ch <- c.bytes
	ch <- c.hbFrames
	ch <- c.hbs
	ch <- c.hbHeld
	ch <- c.notices
	ch <- c.catchUps
	ch <- c.conns
}

func (c *tpCollector) Collect(ch chan<- prometheus.Metric) {
	st := &c.h.st
	counter := func(d *prometheus.Desc, sent, recv uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(sent), "sent")
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(recv), "received")
	}
	counter(c.frames, st.framesSent.Load(), st.framesRecv.Load())
	counter(c.bytes, st.bytesSent.Load(), st.bytesRecv.Load())
	counter(c.hbFrames, st.hbFramesSent.Load(), st.hbFramesRecv.Load())
	counter(c.hbs, st.hbSent.Load(), st.hbRecv.Load())
	ch <- prometheus.MustNewConstMetric(c.hbHeld, prometheus.CounterValue, float64(st.hbHeld.Load()))
	ch <- prometheus.MustNewConstMetric(c.notices, prometheus.CounterValue, float64(st.noticesSent.Load()), "sent")
	ch <- prometheus.MustNewConstMetric(c.notices, prometheus.CounterValue, float64(st.noticesDelivered.Load()), "delivered")
	ch <- prometheus.MustNewConstMetric(c.notices, prometheus.CounterValue, float64(st.noticesIdle.Load()), "already_applied")
	ch <- prometheus.MustNewConstMetric(c.catchUps, prometheus.CounterValue, float64(st.catchUps.Load()))
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.inbound.Load()), "inbound")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.outbound.Load()), "outbound")
}
