package raft

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// batchFSM is countFSM applying in batches, recording each call: a batch
// as its indexes, a membership entry as "m<index>".
type batchFSM struct {
	observingMachine
	callsMu sync.Mutex
	calls   []string
	largest int
}

func (f *batchFSM) ApplyBatch(entries []Entry) []any {
	out := make([]any, len(entries))
	idx := make([]uint64, len(entries))
	for i, e := range entries {
		out[i] = f.Apply(e)
		idx[i] = e.Index
	}
	f.callsMu.Lock()
	f.calls = append(f.calls, fmt.Sprint(idx))
	f.largest = max(f.largest, len(entries))
	f.callsMu.Unlock()
	return out
}

func (f *batchFSM) MembershipApplied(index uint64) {
	f.callsMu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("m%d", index))
	f.callsMu.Unlock()
}

// hashicorp hands a BatchingFSM commands and membership entries in one
// slice: each run of commands reaches ApplyBatch in one call, a
// membership entry between runs reaches the observer in its place, and
// each command's result comes back at its position.
func TestBatchAdapterSplitsRunsAtMembershipEntries(t *testing.T) {
	m := &batchFSM{}
	a, ok := newFSM(m).(hraft.BatchingFSM)
	if !ok {
		t.Fatal("a BatchStateMachine is not run as hashicorp's BatchingFSM")
	}
	if _, ok := newFSM(&countFSM{}).(hraft.BatchingFSM); ok {
		t.Fatal("a StateMachine without ApplyBatch is run as a BatchingFSM")
	}
	cmd := func(i uint64) *hraft.Log {
		return &hraft.Log{Index: i, Type: hraft.LogCommand, Data: command(i)}
	}
	conf := func(i uint64) *hraft.Log { return &hraft.Log{Index: i, Type: hraft.LogConfiguration} }
	logs := []*hraft.Log{cmd(1), cmd(2), conf(3), cmd(4), conf(5), conf(6), cmd(7)}
	results := a.ApplyBatch(logs)
	if len(results) != len(logs) {
		t.Fatalf("%d results for %d entries", len(results), len(logs))
	}
	if want := []string{"[1 2]", "m3", "[4]", "m5", "m6", "[7]"}; !slices.Equal(m.calls, want) {
		t.Fatalf("calls %q, want %q", m.calls, want)
	}
	// countFSM answers each command with its running count.
	for i, want := range []any{uint64(1), uint64(2), nil, uint64(3), nil, nil, uint64(4)} {
		if results[i] != want {
			t.Fatalf("result %d: %v, want %v (all: %v)", i, results[i], want, results)
		}
	}
}

// A group whose machine applies in batches answers every proposal with
// its own entry's result, on a loaded leader whose commits come in runs.
func TestBatchMachineAnswersEachProposal(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := make([]*member, len(nodes))
	fsms := make([]*batchFSM, len(nodes))
	for i, n := range nodes {
		fsms[i] = &batchFSM{}
		cfg := fastConfig("batched", n, fsms[i])
		cfg.BatchApply = true
		g, err := n.mux.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Bootstrap(servers(nodes)); err != nil {
			t.Fatal(err)
		}
		ms[i] = &member{node: n, g: g, fsm: &fsms[i].countFSM}
	}
	l := leader(t, ms, 10*time.Second)
	const proposals = 200
	type answer struct {
		index uint64
		count any
	}
	answers := make([]answer, proposals)
	var wg sync.WaitGroup
	errs := make(chan error, proposals)
	for v := range uint64(proposals) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, index, err := l.g.Apply(ctx, command(v+1))
			if err != nil {
				errs <- fmt.Errorf("proposal %d: %w", v+1, err)
				return
			}
			answers[v] = answer{index, res}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// countFSM answers with its count of commands after the entry: in
	// index order, the answers must count 1, 2, 3… A result handed to
	// the wrong proposal breaks the sequence.
	slices.SortFunc(answers, func(a, b answer) int { return int(a.index) - int(b.index) })
	for i, a := range answers {
		if a.count != uint64(i+1) {
			t.Fatalf("the proposal at index %d was answered %v, want %d (the %d-th command)", a.index, a.count, i+1, i+1)
		}
	}
	converge(t, ms, fsmState{proposals * (proposals + 1) / 2, proposals}, 10*time.Second)
	largest := 0
	for _, f := range fsms {
		f.callsMu.Lock()
		largest = max(largest, f.largest)
		f.callsMu.Unlock()
	}
	t.Logf("largest batch applied: %d entries", largest)
}
