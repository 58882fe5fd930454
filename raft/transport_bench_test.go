package raft

import (
	"fmt"
	"sync"
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
// round. The tick is 1 ms here so the round measures the work, not the
// wait for the tick.
func BenchmarkTransportHeartbeatFanIn(b *testing.B) {
	const groups = 1000
	nodes := newBenchNodes(b, 2)
	nodes[0].hub.tick = time.Millisecond
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
		if senders[i], err = nodes[0].mux.groupTransport(name, TransportOptions{}); err != nil {
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
	for b.Loop() {
		round()
	}
	b.StopTimer()
	if ferr != nil {
		b.Fatal(ferr)
	}
	st := nodes[0].mux.transportStats()
	b.ReportMetric(float64(st.HeartbeatsSent-st0.HeartbeatsSent)/float64(max(st.HeartbeatFramesSent-st0.HeartbeatFramesSent, 1)), "groups/frame")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*groups), "ns/heartbeat")
}
