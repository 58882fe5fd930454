package raft

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Benchmarks of the shared transport against hashicorp's NetworkTransport
// over Mux.Layer (what groups use today), on loopback:
//
//	go test -run '^$' -bench BenchmarkTransport -benchtime 2s ./raft/

// newBenchNodes are test nodes without the fault-injecting wrapper, which
// would hide *net.TCPConn and with it writev.
func newBenchNodes(b *testing.B, n int) []*tpNode {
	nodes := newTpNodes(b, n)
	for _, nd := range nodes {
		nd.hub.wrap = nil
	}
	return nodes
}

// serveConsumer answers every RPC on ch with success until done closes.
func serveConsumer(ch <-chan hraft.RPC, done <-chan struct{}) {
	for {
		select {
		case rpc := <-ch:
			switch rpc.Command.(type) {
			case *hraft.AppendEntriesRequest:
				rpc.Respond(&hraft.AppendEntriesResponse{Term: 1, Success: true}, nil)
			default:
				rpc.Respond(nil, fmt.Errorf("not served"))
			}
		case <-done:
			return
		}
	}
}

func benchAppendRequest() *hraft.AppendEntriesRequest {
	req := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte("l"),
		PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1}
	for i := range 16 {
		req.Entries = append(req.Entries, &hraft.Log{Index: uint64(i + 2), Term: 1, Type: hraft.LogCommand,
			Data: make([]byte, 1024), AppendedAt: time.Now()})
	}
	return req
}

// BenchmarkTransportAppend: one AppendEntries of 16 × 1 KiB entries,
// request to answer, one at a time.
func BenchmarkTransportAppend(b *testing.B) {
	req := benchAppendRequest()
	b.Run("shared", func(b *testing.B) {
		nodes := newBenchNodes(b, 2)
		recv, err := nodes[1].mux.groupTransport("bench", TransportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		defer close(done)
		go serveConsumer(recv.Consumer(), done)
		send, err := nodes[0].mux.groupTransport("bench", TransportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		target := hraft.ServerAddress(nodes[1].member())
		var resp hraft.AppendEntriesResponse
		if err := send.AppendEntries("n1", target, req, &resp); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(16 * 1024)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := send.AppendEntries("n1", target, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hashicorp", func(b *testing.B) {
		nodes := newBenchNodes(b, 2)
		mk := func(n *tpNode) *hraft.NetworkTransport {
			l, err := n.mux.Layer("bench")
			if err != nil {
				b.Fatal(err)
			}
			tr := hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{Stream: l, MaxPool: 2,
				Timeout: 10 * time.Second, Logger: newHCLog(nil, "")})
			b.Cleanup(func() { tr.Close() })
			return tr
		}
		recv, send := mk(nodes[1]), mk(nodes[0])
		done := make(chan struct{})
		defer close(done)
		go serveConsumer(recv.Consumer(), done)
		target := hraft.ServerAddress(nodes[1].mux.Addr())
		var resp hraft.AppendEntriesResponse
		if err := send.AppendEntries("n1", target, req, &resp); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(16 * 1024)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := send.AppendEntries("n1", target, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTransportHeartbeatFanIn: 1,000 groups each send a heartbeat to
// the same peer at once and wait for their answers; one op is the whole
// round. The senders' delay is 1 ms here so the round measures the work,
// not the wait for the batch.
func BenchmarkTransportHeartbeatFanIn(b *testing.B) {
	const groups = 1000
	nodes := newBenchNodes(b, 2)
	senders := make([]*groupTransport, groups)
	for i := range senders {
		name := fmt.Sprintf("p-%04d", i)
		recv, err := nodes[1].mux.groupTransport(name, TransportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		recv.SetHeartbeatHandler(func(rpc hraft.RPC) {
			rpc.Respond(&hraft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		})
		if senders[i], err = nodes[0].mux.groupTransport(name, TransportOptions{Delay: time.Millisecond}); err != nil {
			b.Fatal(err)
		}
	}
	target := hraft.ServerAddress(nodes[1].member())
	hb := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte(nodes[0].member())}
	start := make([]chan struct{}, groups)
	var wg sync.WaitGroup
	var failed sync.Once
	var ferr error
	stop := make(chan struct{})
	for i, gt := range senders {
		start[i] = make(chan struct{})
		go func() {
			var resp hraft.AppendEntriesResponse
			for {
				select {
				case <-start[i]:
				case <-stop:
					return
				}
				if err := gt.AppendEntries("n1", target, hb, &resp); err != nil {
					failed.Do(func() { ferr = err })
				}
				wg.Done()
			}
		}()
	}
	defer close(stop)
	round := func() {
		wg.Add(groups)
		for _, ch := range start {
			ch <- struct{}{}
		}
		wg.Wait()
	}
	round()
	st0 := nodes[0].mux.transportStats()
	b.ReportAllocs()
	b.ResetTimer()
	u0, s0 := cpuTime()
	for b.Loop() {
		round()
	}
	b.StopTimer()
	cpuPerOp(b, u0, s0, b.N*groups, "cpu-ns/heartbeat")
	if ferr != nil {
		b.Fatal(ferr)
	}
	st := nodes[0].mux.transportStats()
	b.ReportMetric(float64(st.HeartbeatsSent-st0.HeartbeatsSent)/float64(max(st.HeartbeatFramesSent-st0.HeartbeatFramesSent, 1)), "groups/frame")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*groups), "ns/heartbeat")
}

// cpuPerOp reports the process's CPU time (user + system, both nodes)
// per unit of work: on an idle cluster CPU, not latency, is the cost.
func cpuPerOp(b *testing.B, u0, s0 time.Duration, units int, name string) {
	u1, s1 := cpuTime()
	b.ReportMetric(float64((u1-u0)+(s1-s0))/float64(max(units, 1)), name)
}

// BenchmarkTransportKeepAlive: what an idle leader's commit-index
// keep-alives cost. 200 groups each send an AppendEntries without entries
// through their pipeline every 50–100 ms (CommitTimeout ×1–2, scaled
// down), spread in time as on an idle node, and wait for its future; the
// follower's groups answer at once. One op is one keep-alive; ns/op is
// set by the pacing, cpu-ns/keepalive is the figure to compare.
func BenchmarkTransportKeepAlive(b *testing.B) {
	const (
		groups   = 200
		interval = 50 * time.Millisecond
	)
	nodes := newBenchNodes(b, 2)
	done := make(chan struct{})
	defer close(done)
	pipes := make([]hraft.AppendPipeline, groups)
	target := hraft.ServerAddress(nodes[1].member())
	for i := range pipes {
		name := fmt.Sprintf("p-%04d", i)
		recv, err := nodes[1].mux.groupTransport(name, TransportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		go serveConsumer(recv.Consumer(), done)
		send, err := nodes[0].mux.groupTransport(name, TransportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pipes[i] = openPipeline(b, send, string(target))
		defer pipes[i].Close()
	}
	keepAlive := func(pl hraft.AppendPipeline, req *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) error {
		if _, err := pl.AppendEntries(req, resp); err != nil {
			return err
		}
		f := <-pl.Consumer()
		return f.Error()
	}
	for _, pl := range pipes {
		var resp hraft.AppendEntriesResponse
		if err := keepAlive(pl, &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1,
			Leader: []byte("l"), PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1}, &resp); err != nil {
			b.Fatal(err)
		}
	}
	st0 := nodes[0].mux.transportStats()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	var failed sync.Once
	var ferr error
	b.ReportAllocs()
	b.ResetTimer()
	u0, s0 := cpuTime()
	for i, pl := range pipes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte("l"),
				PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1}
			var resp hraft.AppendEntriesResponse
			rnd := rand.New(rand.NewPCG(uint64(i), 1))
			for left.Add(-1) >= 0 {
				time.Sleep(interval + time.Duration(rnd.Int64N(int64(interval))))
				if err := keepAlive(pl, req, &resp); err != nil {
					failed.Do(func() { ferr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpuPerOp(b, u0, s0, b.N, "cpu-ns/keepalive")
	if ferr != nil {
		b.Fatal(ferr)
	}
	st := nodes[0].mux.transportStats()
	b.ReportMetric(float64(st.FramesSent-st0.FramesSent)/float64(max(st.Writes-st0.Writes, 1)), "frames/write")
}
