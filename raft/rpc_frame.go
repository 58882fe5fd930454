package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
)

// RPC frames and the RPC metrics.

type rpcFrame struct {
	flags   byte
	id      uint32
	timeout uint32 // ms
	payload []byte
}

func appendFrameHeader(dst []byte, flags byte, id, timeout uint32, n int) []byte {
	dst = append(dst, rpcFrameVersion, flags)
	dst = binary.BigEndian.AppendUint32(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, timeout)
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// readFrame reads one frame, checking its header before allocating the
// payload. io.EOF means the peer closed between frames; errBadFrame
// wraps protocol violations.
func readFrame(r io.Reader, limit int) (rpcFrame, error) {
	var h [rpcFrameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return rpcFrame{}, err
	}
	if h[0] != rpcFrameVersion {
		return rpcFrame{}, fmt.Errorf("%w: version %d", errBadFrame, h[0])
	}
	f := rpcFrame{
		flags:   h[1],
		id:      binary.BigEndian.Uint32(h[2:]),
		timeout: binary.BigEndian.Uint32(h[6:]),
	}
	if f.flags&^(rpcFlagResponse|rpcFlagError) != 0 || f.flags == rpcFlagError {
		return rpcFrame{}, fmt.Errorf("%w: flags %#x", errBadFrame, f.flags)
	}
	n := binary.BigEndian.Uint32(h[10:])
	if uint64(n) > uint64(limit) {
		return rpcFrame{}, fmt.Errorf("%w: payload of %d bytes: %w", errBadFrame, n, ErrFrameTooLarge)
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return rpcFrame{}, err
	}
	return f, nil
}

// rpcMetrics are the RPC collectors, registered on the mux's registerer
// on first use. Services are a fixed set in code, so the service label is
// bounded.
type rpcMetrics struct {
	reg     prometheus.Registerer
	calls   *prometheus.CounterVec   // service, outcome
	latency *prometheus.HistogramVec // service
	handled *prometheus.CounterVec   // service, outcome
}

func newRPCMetrics(reg prometheus.Registerer) (*rpcMetrics, error) {
	met := &rpcMetrics{
		reg: reg,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_raft_rpc_calls_total",
			Help: "RPCs this node made, by service and outcome (ok, remote_error, dial_error, conn_error, deadline, canceled, closed, invalid).",
		}, []string{"service", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_raft_rpc_call_duration_seconds",
			Help:    "Duration of this node's RPCs that got an answer (ok or remote_error), by service, dial included.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 15), // 0.25 ms … 4 s
		}, []string{"service"}),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_raft_rpc_handled_total",
			Help: "RPC requests this node served, by service and outcome (ok, error, bad_frame).",
		}, []string{"service", "outcome"}),
	}
	if reg == nil {
		return met, nil
	}
	cs := []prometheus.Collector{met.calls, met.latency, met.handled}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, errors.Join(errors.New("raft: registering rpc metrics"), err)
		}
	}
	return met, nil
}

func (met *rpcMetrics) unregister() {
	if met.reg == nil {
		return
	}
	met.reg.Unregister(met.calls)
	met.reg.Unregister(met.latency)
	met.reg.Unregister(met.handled)
}
