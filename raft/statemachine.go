package raft

import (
	"fmt"
	"io"

	hraft "github.com/hashicorp/raft"
)

// StateMachine is a group's replicated state in weir's own terms, so that
// packages outside raft/ never see hashicorp/raft's types.
type StateMachine interface {
	// Apply applies one committed command. It runs on the group's apply
	// goroutine, in index order; its result is what Group.Apply returns
	// on the leader that proposed the entry. Entries at or below an index
	// the machine already holds (replayed after a restart) must be
	// skipped. e.Data is this Apply's to rewrite in place but not to keep:
	// on the leader that proposed it, it is the proposer's buffer, which
	// Raft does not read again once the log store has it (followers are
	// sent the store's copies); elsewhere it is a copy the store made for
	// this Apply (TestApplyMayRewriteData).
	Apply(e Entry) any
	// Snapshot captures what a snapshot needs, quickly: Apply waits.
	Snapshot() (Snapshot, error)
	// Restore replaces the state with a snapshot's contents (a follower
	// installing one sent by its leader).
	Restore(r io.Reader) error
}

// Entry is one committed command.
type Entry struct {
	Index uint64
	Term  uint64
	Data  []byte
}

// Snapshot is a captured state being written out. Persist runs off the
// apply goroutine; Release follows it, whatever its outcome.
type Snapshot interface {
	Persist(w io.Writer) error
	Release()
}

// MembershipObserver is implemented by a StateMachine whose applied index
// must also move over committed membership changes: Raft hands those to
// no Apply, so a machine that waits for an index (the controller's
// WaitIndex after adding a voter) would otherwise wait for the next
// command.
type MembershipObserver interface {
	// MembershipApplied runs on the apply goroutine, in index order with
	// Apply, for the configuration entry at index.
	MembershipApplied(index uint64)
}

// BatchStateMachine is a StateMachine that applies the commands
// committed together in one call (hashicorp/raft's BatchingFSM: up to
// MaxAppendEntries at once). A machine whose every change copies shared
// state (the controller's immutable views) then copies it once per batch
// instead of once per entry.
type BatchStateMachine interface {
	StateMachine
	// ApplyBatch applies entries, consecutive in index order, and
	// returns one result per entry: what Apply would have returned for
	// each, applied one after another. The rules of Apply hold for each.
	ApplyBatch(entries []Entry) []any
}

// smAdapter runs a StateMachine as hashicorp's FSM, and as its
// ConfigurationStore so that membership entries reach a
// MembershipObserver.
type smAdapter struct{ sm StateMachine }

var (
	_ hraft.FSM                = smAdapter{}
	_ hraft.ConfigurationStore = smAdapter{}
	_ hraft.BatchingFSM        = batchAdapter{}
)

// newFSM is hashicorp's FSM for sm: batching when sm is a
// BatchStateMachine.
func newFSM(sm StateMachine) hraft.FSM {
	if b, ok := sm.(BatchStateMachine); ok {
		return batchAdapter{smAdapter{sm}, b}
	}
	return smAdapter{sm}
}

// batchAdapter is smAdapter for a BatchStateMachine. hashicorp hands
// ApplyBatch membership entries too (and then not to StoreConfiguration),
// so each run of commands goes to the machine in one call, and a
// membership entry between two runs to the MembershipObserver, in index
// order.
type batchAdapter struct {
	smAdapter
	batch BatchStateMachine
}

func (a batchAdapter) ApplyBatch(logs []*hraft.Log) []any {
	out := make([]any, len(logs))
	entries := make([]Entry, 0, len(logs))
	first := 0 // position in logs of entries[0]
	flush := func() {
		if len(entries) == 0 {
			return
		}
		results := a.batch.ApplyBatch(entries)
		if len(results) != len(entries) {
			panic(fmt.Sprintf("raft: ApplyBatch returned %d results for %d entries", len(results), len(entries)))
		}
		for i, l := 0, first; i < len(results); l++ {
			if logs[l].Type == hraft.LogCommand {
				out[l] = results[i]
				i++
			}
		}
		entries = entries[:0]
	}
	for i, l := range logs {
		switch l.Type {
		case hraft.LogCommand:
			if len(entries) == 0 {
				first = i
			}
			entries = append(entries, Entry{Index: l.Index, Term: l.Term, Data: l.Data})
		case hraft.LogConfiguration:
			flush()
			a.StoreConfiguration(l.Index, hraft.Configuration{})
		}
	}
	flush()
	return out
}

func (a smAdapter) StoreConfiguration(index uint64, _ hraft.Configuration) {
	if o, ok := a.sm.(MembershipObserver); ok {
		o.MembershipApplied(index)
	}
}

func (a smAdapter) Apply(l *hraft.Log) any {
	if l.Type != hraft.LogCommand {
		return nil
	}
	return a.sm.Apply(Entry{Index: l.Index, Term: l.Term, Data: l.Data})
}

func (a smAdapter) Snapshot() (hraft.FSMSnapshot, error) {
	s, err := a.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	return snapshotAdapter{s}, nil
}

func (a smAdapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return a.sm.Restore(rc)
}

type snapshotAdapter struct{ s Snapshot }

func (s snapshotAdapter) Persist(sink hraft.SnapshotSink) error {
	if err := s.s.Persist(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshotAdapter) Release() { s.s.Release() }
