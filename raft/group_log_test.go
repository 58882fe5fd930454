package raft

import (
	"context"
	"sync"
	"testing"
	"time"
)

// recordingObserver keeps what a LogObserver was told, per node.
type recordingObserver struct {
	mu       sync.Mutex
	stored   []StoredEntry
	firstPtr map[uint64]*byte // a command's first byte, by index
}

func (o *recordingObserver) Stored(e StoredEntry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.Command {
		o.firstPtr[e.Index] = &e.Data[0]
	}
	e.Data = nil
	o.stored = append(o.stored, e)
}

func (o *recordingObserver) Truncated(min, max uint64) {}

// A leader's observer sees each entry once it is stored, in index order,
// a command carrying the very slice proposed; a follower's sees the same
// indexes.
func TestLogObserverSeesStoredEntries(t *testing.T) {
	nodes := newNodes(t, 3)
	obs := map[string]*recordingObserver{}
	ms := startGroup(t, nodes, "observed", func(g string, n *node, sm StateMachine) Config {
		cfg := fastConfig(g, n, sm)
		o := &recordingObserver{firstPtr: map[uint64]*byte{}}
		obs[n.id] = o
		cfg.LogObserver = o
		return cfg
	})
	l := leader(t, ms, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmds := [][]byte{command(1), command(2), command(3)}
	props := make([]Proposal, len(cmds))
	for i, c := range cmds {
		p, err := l.g.Propose(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		props[i] = p
	}
	indexes := make([]uint64, len(cmds))
	for i, p := range props {
		_, idx, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		indexes[i] = idx
	}
	lo := obs[l.node.id]
	lo.mu.Lock()
	for i, idx := range indexes {
		if got := lo.firstPtr[idx]; got != &cmds[i][0] {
			t.Errorf("command %d (index %d): the leader's observer saw another slice", i, idx)
		}
	}
	sawNoop := false
	for i, e := range lo.stored {
		if i > 0 && e.Index != lo.stored[i-1].Index+1 {
			t.Errorf("stored entries out of order: index %d after %d", e.Index, lo.stored[i-1].Index)
		}
		sawNoop = sawNoop || !e.Command
	}
	lo.mu.Unlock()
	if !sawNoop {
		t.Error("the leader's no-op was not seen as an entry without a command")
	}
	for _, m := range ms {
		if m == l {
			continue
		}
		o := obs[m.node.id]
		waitFor(t, 5*time.Second, "the follower's observer to see the commands", func() bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			_, ok := o.firstPtr[indexes[len(indexes)-1]]
			return ok
		})
	}
}
