package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// countFSM sums the deltas of the commands it applies, once per command
// id: a command retried after ErrLeadershipLost (outcome unknown) may be in
// the log twice, and the FSM drops the second copy, as a partition drops a
// producer's retried batch. Two FSMs that applied the same log hold the
// same (sum, count).
type countFSM struct {
	mu       sync.Mutex
	sum      uint64
	count    uint64
	seen     map[uint64]bool
	restores int
}

type fsmState struct{ Sum, Count uint64 }

func (f *countFSM) restoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

func (f *countFSM) Apply(l Entry) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, d := binary.BigEndian.Uint64(l.Data), binary.BigEndian.Uint64(l.Data[8:])
	if f.seen == nil {
		f.seen = make(map[uint64]bool)
	}
	if !f.seen[id] {
		f.seen[id] = true
		f.sum += d
		f.count++
	}
	return f.count
}

func (f *countFSM) state() fsmState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fsmState{f.sum, f.count}
}

// Snapshot: sum, count, then the ids seen.
func (f *countFSM) Snapshot() (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := binary.BigEndian.AppendUint64(nil, f.sum)
	b = binary.BigEndian.AppendUint64(b, f.count)
	for id := range f.seen {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	return countSnapshot(b), nil
}

func (f *countFSM) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(b) < 16 || len(b)%8 != 0 {
		return fmt.Errorf("bad snapshot of %d bytes", len(b))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum, f.count = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])
	f.seen = make(map[uint64]bool)
	for i := 16; i < len(b); i += 8 {
		f.seen[binary.BigEndian.Uint64(b[i:])] = true
	}
	f.restores++
	return nil
}

type countSnapshot []byte

func (s countSnapshot) Persist(w io.Writer) error {
	_, err := w.Write(s)
	return err
}

func (countSnapshot) Release() {}

// command adds v under a random id, padded to 1 KiB so that a few entries
// fill a small raft-wal segment (see TestSnapshotRestore).
func command(v uint64) []byte {
	b := make([]byte, 1024)
	binary.BigEndian.PutUint64(b, rand.Uint64())
	binary.BigEndian.PutUint64(b[8:], v)
	return b
}

// node is one in-process broker: a mux on a loopback port and a Raft dir.
type node struct {
	id  string
	dir string
	mux *Mux
	reg *prometheus.Registry
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("WEIR_RAFT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newNodes(t testing.TB, n int) []*node {
	t.Helper()
	nodes := make([]*node, n)
	for i := range nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		m, err := NewMux(ln, MuxConfig{Logger: testLogger(t), Registerer: reg, HeaderTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		nd := &node{id: fmt.Sprintf("n%d", i), dir: t.TempDir(), mux: m, reg: reg}
		t.Cleanup(func() {
			if err := nd.mux.Close(); err != nil {
				t.Errorf("closing mux %s: %v", nd.id, err)
			}
		})
		nodes[i] = nd
	}
	return nodes
}

func servers(nodes []*node) []Server {
	s := make([]Server, len(nodes))
	for i, n := range nodes {
		s[i] = Server{ID: n.id, Addr: n.mux.Addr(), Voter: true}
	}
	return s
}

// fastConfig shortens the timers so tests elect within about a second.
func fastConfig(group string, n *node, sm StateMachine) Config {
	return Config{
		Group: group, NodeID: n.id, Dir: n.dir, StateMachine: sm, Class: "test",
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 20 * time.Millisecond,
	}
}

// member is one node's part of a group in a test.
type member struct {
	node *node
	g    *Group
	fsm  *countFSM
}

// startGroup starts group on every node with cfg and bootstraps it.
func startGroup(t testing.TB, nodes []*node, group string, cfg func(string, *node, StateMachine) Config) []*member {
	t.Helper()
	ms := make([]*member, len(nodes))
	for i, n := range nodes {
		fsm := &countFSM{}
		g, err := n.mux.Start(cfg(group, n, fsm))
		if err != nil {
			t.Fatalf("start %s on %s: %v", group, n.id, err)
		}
		if err := g.Bootstrap(servers(nodes)); err != nil {
			t.Fatalf("bootstrap %s on %s: %v", group, n.id, err)
		}
		ms[i] = &member{node: n, g: g, fsm: fsm}
	}
	return ms
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leader waits for one running member to lead and returns it.
func leader(t testing.TB, ms []*member, timeout time.Duration) *member {
	t.Helper()
	var l *member
	waitFor(t, timeout, "a leader", func() bool {
		for _, m := range ms {
			if m != nil && m.g.IsLeader() {
				l = m
				return true
			}
		}
		return false
	})
	return l
}

// applyN applies deltas 1..n through whichever member leads, retrying each
// command across elections (ErrLeadershipLost included: the FSM drops
// duplicates), and returns the sum applied.
func applyN(t testing.TB, ms []*member, n int) uint64 {
	t.Helper()
	var sum uint64
	for i := 1; i <= n; i++ {
		applyOne(t, ms, command(uint64(i)))
		sum += uint64(i)
	}
	return sum
}

// applyOne applies cmd through whichever member leads, sending the same
// command again after an election until one attempt succeeds.
func applyOne(t testing.TB, ms []*member, cmd []byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := leader(t, ms, 10*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _, err := l.g.Apply(ctx, cmd)
		cancel()
		switch {
		case err == nil:
			return
		case time.Now().After(deadline):
			t.Fatalf("apply on %s: %v (giving up)", l.node.id, err)
		case errors.Is(err, ErrNotLeader), errors.Is(err, ErrLeadershipLost),
			errors.Is(err, context.DeadlineExceeded):
			t.Logf("apply on %s: %v (retrying)", l.node.id, err)
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("apply on %s: %v", l.node.id, err)
		}
	}
}

// converge waits for every running member's FSM to hold want.
func converge(t testing.TB, ms []*member, want fsmState, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("every FSM at %+v", want), func() bool {
		for _, m := range ms {
			if m != nil && m.fsm.state() != want {
				return false
			}
		}
		return true
	})
}
