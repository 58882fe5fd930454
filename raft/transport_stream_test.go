package raft

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// streamTo records streamRun acknowledged appends with entries to target,
// so that the transport offers target a pipeline.
func streamTo(gt *groupTransport, target string) {
	a := &hraft.AppendEntriesRequest{Term: 1, Entries: []*hraft.Log{{Index: 1, Term: 1}}}
	for range streamRun {
		gt.commits.replicated(target, a)
	}
}

// openPipeline opens a pipeline to target as if entries streamed to it.
func openPipeline(t testing.TB, gt *groupTransport, target string) hraft.AppendPipeline {
	t.Helper()
	streamTo(gt, target)
	p, err := gt.AppendEntriesPipeline("peer", hraft.ServerAddress(target))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openPipes(gt *groupTransport) int {
	gt.inMu.Lock()
	defer gt.inMu.Unlock()
	return len(gt.pipes)
}

// The transport offers a pipeline only once appends with entries stream
// to the follower, and an append without entries answered after the
// stream stopped ends the pipeline (reported unsuccessful to Raft).
func TestPipelineOfferedWhileEntriesStream(t *testing.T) {
	nodes := newTpNodes(t, 1)
	gt, err := nodes[0].mux.groupTransport("stream", TransportOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Close()
	addr := fakePeer(t, func(frames []tpHeader, reply func(tpHeader, *hraft.AppendEntriesResponse)) {
		for _, f := range frames {
			reply(f, &hraft.AppendEntriesResponse{Term: 1, Success: true})
		}
	})
	if _, err := gt.AppendEntriesPipeline("peer", hraft.ServerAddress(addr)); !errors.Is(err, hraft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("pipeline to a follower nothing was sent to: %v, want ErrPipelineReplicationNotSupported", err)
	}
	withEntries := &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1, Leader: []byte("l"),
		LeaderCommitIndex: 1, Entries: []*hraft.Log{{Index: 1, Term: 1, Type: hraft.LogCommand, Data: []byte("x")}}}
	for i := range streamRun {
		if _, err := gt.AppendEntriesPipeline("peer", hraft.ServerAddress(addr)); err == nil {
			t.Fatalf("pipeline offered after %d appends with entries, want %d", i, streamRun)
		}
		if err := gt.AppendEntries("peer", hraft.ServerAddress(addr), withEntries, new(hraft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := gt.AppendEntriesPipeline("peer", hraft.ServerAddress(addr))
	if err != nil {
		t.Fatalf("pipeline after %d appends with entries: %v", streamRun, err)
	}
	defer p.Close()
	answer := func(req *hraft.AppendEntriesRequest) bool {
		t.Helper()
		f, err := p.AppendEntries(req, new(hraft.AppendEntriesResponse))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-p.Consumer():
			if got != f || got.Error() != nil {
				t.Fatalf("future %p (%v), want %p", got, got.Error(), f)
			}
			return got.Response().Success
		case <-time.After(5 * time.Second):
			t.Fatal("no answer in 5s")
		}
		return false
	}
	if !answer(keepAliveRequest()) {
		t.Fatal("keep-alive while entries stream: answered unsuccessful")
	}
	// The stream stops: its last acknowledgement is older than streamGap.
	gt.commits.mu.Lock()
	gt.commits.byPeer[addr].entriesAck = time.Now().Add(-2 * streamGap)
	gt.commits.mu.Unlock()
	if answer(keepAliveRequest()) {
		t.Fatal("keep-alive after the stream stopped: answered successful, want the pipeline ended")
	}
	if answer(withEntries) != true {
		t.Fatal("append with entries: unsuccessful")
	}
	if _, err := gt.AppendEntriesPipeline("peer", hraft.ServerAddress(addr)); !errors.Is(err, hraft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("pipeline after one more append with entries: %v, want ErrPipelineReplicationNotSupported", err)
	}
}

// End to end: an idle group's leader keeps no pipelines; entries
// streaming open one per follower, and they close again once the entries
// stop, while every entry commits everywhere.
func TestIdleGroupLeavesItsPipelines(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "stream", fastConfig)
	l := leader(t, ms, 10*time.Second)
	applyN(t, ms, 1)
	pipes := func(want int) func() bool {
		return func() bool {
			l := leader(t, ms, 10*time.Second)
			return openPipes(l.g.trans) == want
		}
	}
	waitFor(t, 10*time.Second, "an idle leader without pipelines", pipes(0))

	var stop atomic.Bool
	done := make(chan fsmState)
	go func() {
		var st fsmState
		for i := uint64(2); !stop.Load() && i <= 2000; i++ {
			if _, _, err := l.g.Apply(t.Context(), command(i)); err != nil {
				break
			}
			st.Sum += i
			st.Count++
			time.Sleep(5 * time.Millisecond)
		}
		done <- st
	}()
	waitFor(t, 10*time.Second, "a pipeline to each follower while entries stream", pipes(len(nodes)-1))
	stop.Store(true)
	st := <-done
	waitFor(t, 10*time.Second, "the pipelines closed once the entries stopped", pipes(0))
	converge(t, ms, fsmState{Sum: 1 + st.Sum, Count: 1 + st.Count}, 10*time.Second)
}
