package raft

import (
	"errors"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Tests of the transport's wire behaviour: pipeline order and timeouts,
// heartbeat answers, lazy frames, against a fake peer or a single node.

// TestTransportPipelineOrder: futures reach Consumer() in issue order
// although the peer answers in reverse, and Close fails those in flight.
func TestTransportPipelineOrder(t *testing.T) {
	nodes := newTpNodes(t, 1)
	gt, err := nodes[0].mux.groupTransport("pipe", TransportOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Close()
	const n = tpPipelineDepth
	hold := make(chan struct{})
	addr := fakePeer(t, func(frames []tpHeader, reply func(tpHeader, *hraft.AppendEntriesResponse)) {
		if len(frames) != n {
			return
		}
		<-hold
		for i := len(frames) - 1; i >= 0; i-- { // newest first
			reply(frames[i], &hraft.AppendEntriesResponse{Term: 1, LastLog: uint64(i), Success: true})
		}
	})
	p := openPipeline(t, gt, addr)
	for i := range n {
		if _, err := p.AppendEntries(&hraft.AppendEntriesRequest{Term: 1, PrevLogEntry: uint64(i + 1), LeaderCommitIndex: 1},
			new(hraft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	close(hold)
	for i := range n {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if f.Request().PrevLogEntry != uint64(i+1) || f.Response().LastLog != uint64(i) {
				t.Fatalf("future %d: request %d response %d", i, f.Request().PrevLogEntry, f.Response().LastLog)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d not delivered", i)
		}
	}

	// Close fails what is in flight (the fake peer no longer answers).
	f, err := p.AppendEntries(&hraft.AppendEntriesRequest{Term: 1, PrevLogEntry: 99, LeaderCommitIndex: 1}, new(hraft.AppendEntriesResponse))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		if !errors.Is(err, hraft.ErrPipelineShutdown) {
			t.Errorf("future after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close left a future pending")
	}
}

// TestTransportHeartbeatAnswers: a heartbeat is answered by the group's
// own Raft only: a group whose Raft is shut down (processHeartbeat does
// not answer) or not running gets an error, never a success.
func TestTransportHeartbeatAnswers(t *testing.T) {
	nodes := newTpNodes(t, 2)
	recv, err := nodes[1].mux.groupTransport("hb", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	recv.SetHeartbeatHandler(func(hraft.RPC) {}) // never answers, like a shut-down Raft
	send, err := nodes[0].mux.groupTransport("hb", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	hb := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 3, Leader: []byte(nodes[0].member())}
	var resp hraft.AppendEntriesResponse
	err = send.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("heartbeat to a group that did not answer: %v", err)
	}
	recv.SetHeartbeatHandler(func(rpc hraft.RPC) {
		rpc.Respond(&hraft.AppendEntriesResponse{Term: 3, Success: true}, nil)
	})
	if err := send.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp); err != nil || !resp.Success {
		t.Errorf("heartbeat: %v %+v", err, resp)
	}
	recv.Close()
	err = send.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp)
	if err == nil || strings.Contains(err.Error(), "unexpected command") {
		t.Errorf("heartbeat to a closed group: %v", err)
	}
	// Without a heartbeat handler the heartbeat goes through Consumer().
	other, err := nodes[1].mux.groupTransport("hb2", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		rpc := <-other.Consumer()
		rpc.Respond(&hraft.AppendEntriesResponse{Term: 4, Success: true}, nil)
	}()
	send2, err := nodes[0].mux.groupTransport("hb2", TransportOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer send2.Close()
	if err := send2.AppendEntries("n1", hraft.ServerAddress(nodes[1].member()), hb, &resp); err != nil || resp.Term != 4 {
		t.Errorf("heartbeat via Consumer: %v %+v", err, resp)
	}
}

// An AppendEntries without entries is a lazy frame: it waits for its
// group's delay (an hour here) unless something urgent follows it on the
// connection, which takes it along, in order; its answer is lazy the same
// way.
func TestTransportLazyFrames(t *testing.T) {
	nodes := newTpNodes(t, 2)
	p := lazyPipeline(t, nodes, "lazy", time.Hour)
	keepAlive := keepAliveRequest()
	if _, err := p.AppendEntries(keepAlive, new(hraft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-p.Consumer():
		t.Fatalf("keep-alive answered before anything urgent (err %v)", f.Error())
	case <-time.After(200 * time.Millisecond):
	}
	if st := nodes[1].mux.transportStats(); st.FramesReceived != 0 {
		t.Fatalf("the lazy frame was sent: %+v", st)
	}
	withEntry := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte("l"),
		PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1,
		Entries: []*hraft.Log{{Index: 2, Term: 1, Type: hraft.LogCommand, Data: []byte("x")}}}
	if _, err := p.AppendEntries(withEntry, new(hraft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []*hraft.AppendEntriesRequest{keepAlive, withEntry} {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatalf("future %d: %v", i, err)
			}
			if f.Request() != want || !f.Response().Success {
				t.Fatalf("future %d out of order or failed: %+v", i, f.Response())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d not delivered after an urgent frame", i)
		}
	}
}

// Lazy frames of groups with different delays share a connection: the
// writer flushes at the earliest deadline queued, so a group with a short
// delay is not held up by another's long one queued before it.
func TestTransportLazyFramesEarliestDelay(t *testing.T) {
	nodes := newTpNodes(t, 2)
	futures := make(map[string]hraft.AppendPipeline)
	for _, g := range []struct {
		name  string
		delay time.Duration
	}{{"slow", time.Hour}, {"fast", 20 * time.Millisecond}} {
		p := lazyPipeline(t, nodes, g.name, g.delay)
		futures[g.name] = p
		if _, err := p.AppendEntries(keepAliveRequest(), new(hraft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case f := <-futures["fast"].Consumer():
		if err := f.Error(); err != nil || !f.Response().Success {
			t.Fatalf("fast group's keep-alive: %v %+v", err, f.Response())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a 20 ms keep-alive queued behind an hour-long one was not sent")
	}
}

// lazyPipeline is a pipeline from nodes[0] to nodes[1] for group, both
// ends with the given delay, the receiving end answering every request;
// all of it is closed when the test ends.
func lazyPipeline(t *testing.T, nodes []*tpNode, group string, delay time.Duration) hraft.AppendPipeline {
	t.Helper()
	recv, err := nodes[1].mux.groupTransport(group, TransportOptions{Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go serveConsumer(recv.Consumer(), done)
	send, err := nodes[0].mux.groupTransport(group, TransportOptions{Timeout: 5 * time.Second, Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close() })
	p := openPipeline(t, send, nodes[1].member())
	t.Cleanup(func() { p.Close() })
	return p
}

// keepAliveRequest is an AppendEntries without entries: a leader's
// commit-index keep-alive.
func keepAliveRequest() *hraft.AppendEntriesRequest {
	return &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte("l"),
		PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1}
}

// A pipeline's futures time out in order on its one timer, each its
// timeout after it was issued.
func TestTransportPipelineTimeout(t *testing.T) {
	nodes := newTpNodes(t, 1)
	gt, err := nodes[0].mux.groupTransport("pipe", TransportOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Close()
	addr := fakePeer(t, func([]tpHeader, func(tpHeader, *hraft.AppendEntriesResponse)) {}) // never answers
	p := openPipeline(t, gt, addr)
	defer p.Close()
	start := time.Now()
	for i := range 2 {
		if _, err := p.AppendEntries(&hraft.AppendEntriesRequest{Term: 1, PrevLogEntry: uint64(i + 1), LeaderCommitIndex: 1,
			Entries: []*hraft.Log{{Index: uint64(i + 2), Term: 1}}}, new(hraft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 2 {
		select {
		case f := <-p.Consumer():
			err := f.Error()
			if f.Request().PrevLogEntry != uint64(i+1) || err == nil {
				t.Fatalf("future %d: request %d, err %v", i, f.Request().PrevLogEntry, err)
			}
			if i == 0 && !errors.Is(err, errTpTimeout) {
				t.Fatalf("first future: %v, want a timeout", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d never timed out", i)
		}
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
		t.Fatalf("timed out after %v with a 300ms timeout", el)
	}
}

// A batch's handlers share a goroutine, but one that blocks does not
// keep the others from running: they spill onto goroutines of their own.
func TestTransportHeartbeatSlowGroup(t *testing.T) {
	nodes := newTpNodes(t, 2)
	release := make(chan struct{})
	ran := make(chan string, 4)
	var senders []*groupTransport
	for _, name := range []string{"slow", "a", "b"} {
		recv, err := nodes[1].mux.groupTransport(name, TransportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recv.SetHeartbeatHandler(func(rpc hraft.RPC) {
			if name == "slow" {
				<-release
			}
			ran <- name
			rpc.Respond(&hraft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		})
		// A delay long enough that all three go in one batch.
		send, err := nodes[0].mux.groupTransport(name, TransportOptions{Timeout: 5 * time.Second, Delay: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		senders = append(senders, send)
	}
	target := hraft.ServerAddress(nodes[1].member())
	errc := make(chan error, len(senders))
	for _, gt := range senders {
		go func() {
			var resp hraft.AppendEntriesResponse
			errc <- gt.AppendEntries("n1", target, &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1,
				Leader: []byte(nodes[0].member())}, &resp)
		}()
		time.Sleep(10 * time.Millisecond) // "slow" first in the batch
	}
	for range 2 {
		select {
		case name := <-ran:
			if name == "slow" {
				t.Fatal("the slow handler ran before being released")
			}
		case <-time.After(3 * time.Second):
			t.Fatal("a blocked handler held up the rest of its batch")
		}
	}
	close(release)
	for range senders {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
