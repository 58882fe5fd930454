package raft

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A group's proposals learn their outcomes in the order they were
// proposed, through Then or Wait alike, on one goroutine that ends once
// none is outstanding; a Then given after the outcome is known runs at
// once, and a follower's proposals are refused through Then too.
func TestProposalOutcomes(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "outcomes", fastConfig)
	l := leader(t, ms, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const n = 40
	var mu sync.Mutex
	var thenIndexes []uint64
	var thenErrs []error
	all := make(chan struct{}, n)
	var waited []Proposal
	for i := range n {
		p, err := l.g.Propose(ctx, command(uint64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			waited = append(waited, p)
			continue
		}
		p.Then(func(o Outcome) {
			mu.Lock()
			thenIndexes = append(thenIndexes, o.Index)
			if o.Err != nil {
				thenErrs = append(thenErrs, o.Err)
			}
			mu.Unlock()
			all <- struct{}{}
		})
	}
	var last uint64
	for _, p := range waited {
		_, idx, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if idx <= last {
			t.Fatalf("waited proposals' indexes out of order: %d after %d", idx, last)
		}
		last = idx
	}
	for range n / 2 {
		select {
		case <-all:
		case <-ctx.Done():
			t.Fatal("Then was not called for every proposal")
		}
	}
	mu.Lock()
	for i := 1; i < len(thenIndexes); i++ {
		if thenIndexes[i] <= thenIndexes[i-1] {
			t.Errorf("Then saw index %d after %d", thenIndexes[i], thenIndexes[i-1])
		}
	}
	if len(thenErrs) > 0 {
		t.Errorf("Then outcomes failed: %v", thenErrs)
	}
	mu.Unlock()

	idle := func() bool {
		l.g.outcomes.mu.Lock()
		defer l.g.outcomes.mu.Unlock()
		return !l.g.outcomes.running
	}
	waitFor(t, 5*time.Second, "the outcomes goroutine to end", idle)

	p, err := l.g.Propose(ctx, command(n+1))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	called := false
	p.Then(func(Outcome) { called = true })
	if !called {
		t.Fatal("Then on a settled proposal did not run at once")
	}

	var follower *member
	for _, m := range ms {
		if m != l {
			follower = m
			break
		}
	}
	fp, err := follower.g.Propose(ctx, command(n+2))
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan error, 1)
	fp.Then(func(o Outcome) { refused <- o.Err })
	select {
	case err := <-refused:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a follower's proposal: %v, want ErrNotLeader", err)
		}
	case <-ctx.Done():
		t.Fatal("a follower's proposal was never answered")
	}

	if err := follower.g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.g.Propose(ctx, command(n+3)); !errors.Is(err, ErrShutdown) {
		t.Fatalf("proposing to a group shut down: %v, want ErrShutdown", err)
	}
}
