package raft

import (
	"bytes"
	"context"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

type observingMachine struct {
	countFSM
	membership []uint64
}

func (m *observingMachine) MembershipApplied(index uint64) {
	m.membership = append(m.membership, index)
}

// Membership entries reach a machine that observes them, and only
// command entries reach Apply.
func TestMembershipReachesObserver(t *testing.T) {
	m := &observingMachine{}
	a := smAdapter{m}
	a.StoreConfiguration(7, hraft.Configuration{})
	if len(m.membership) != 1 || m.membership[0] != 7 {
		t.Fatalf("observed %v, want [7]", m.membership)
	}
	if got := a.Apply(&hraft.Log{Index: 8, Type: hraft.LogNoop}); got != nil {
		t.Fatalf("a no-op entry reached Apply: %v", got)
	}
	// A machine that does not observe membership is left alone.
	smAdapter{&countFSM{}}.StoreConfiguration(9, hraft.Configuration{})
}

// scribbleFSM applies as countFSM does, then overwrites the entry's bytes,
// as a partition stamps offsets into a produced batch in place.
type scribbleFSM struct{ countFSM }

func (f *scribbleFSM) Apply(e Entry) any {
	res := f.countFSM.Apply(e)
	for i := range e.Data {
		e.Data[i] = 0xff
	}
	return res
}

// An Apply that rewrites e.Data in place changes nothing anyone else sees:
// not what followers receive, not what the log store keeps (a member
// restarted with an empty state machine replays the log to the same
// state), and on the leader only the proposer's own buffer.
func TestApplyMayRewriteData(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := make([]*member, len(nodes))
	fsms := make([]*scribbleFSM, len(nodes))
	for i, n := range nodes {
		fsms[i] = &scribbleFSM{}
		g, err := n.mux.Start(fastConfig("scribble", n, fsms[i]))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Bootstrap(servers(nodes)); err != nil {
			t.Fatal(err)
		}
		ms[i] = &member{node: n, g: g, fsm: &fsms[i].countFSM}
	}
	var sum uint64
	for v := uint64(1); v <= 20; v++ {
		cmd := command(v)
		orig := bytes.Clone(cmd)
		l := leader(t, ms, 10*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _, err := l.g.Apply(ctx, cmd)
		cancel()
		if err != nil {
			t.Fatalf("apply %d: %v", v, err)
		}
		if bytes.Equal(cmd, orig) {
			t.Fatalf("apply %d: the leader's state machine was not handed the proposer's buffer (no rewrite seen)", v)
		}
		sum += v
	}
	converge(t, ms, fsmState{sum, 20}, 10*time.Second)

	// The followers' applies took the entries they stored from memory
	// (walstore's hand-off) and rewrote them, and the replay below still
	// reads the leader's bytes from their logs.
	handOff := func(n *node) (handed uint64, held int64) {
		n.mux.storeMu.Lock()
		defer n.mux.storeMu.Unlock()
		for _, s := range n.mux.stores {
			st := s.Stats()
			handed, held = handed+st.HandedOff, held+st.HandOffBytes
		}
		return handed, held
	}
	for _, m := range ms {
		if handed, _ := handOff(m.node); !m.g.IsLeader() && handed == 0 {
			t.Fatalf("a follower read back every entry it applied; none was handed off")
		}
	}

	// A follower restarted with an empty state machine replays the log.
	var f int
	for i, m := range ms {
		if !m.g.IsLeader() {
			f = i
			break
		}
	}
	if err := ms[f].g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, held := handOff(nodes[f]); held != 0 {
		t.Fatalf("a stopped group still holds %d bytes of entries for its apply", held)
	}
	fresh := &scribbleFSM{}
	g, err := nodes[f].mux.Start(fastConfig("scribble", nodes[f], fresh))
	if err != nil {
		t.Fatal(err)
	}
	ms[f] = &member{node: nodes[f], g: g, fsm: &fresh.countFSM}
	converge(t, ms, fsmState{sum, 20}, 10*time.Second)
}
