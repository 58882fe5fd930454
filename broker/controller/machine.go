package controller

import (
	"io"

	"github.com/weir-broker/weir/raft"
)

// Machine runs a State as the controller group's state machine, as the
// partitions run theirs: Apply returns a Result (what Group.Apply answers
// the proposer), and a committed membership change advances the applied
// index too, so that WaitIndex on its index returns.
type Machine struct {
	state *State
}

var (
	_ raft.StateMachine       = (*Machine)(nil)
	_ raft.MembershipObserver = (*Machine)(nil)
	_ raft.BatchStateMachine  = (*Machine)(nil)
)

// NewMachine returns a Machine applying to s.
func NewMachine(s *State) *Machine { return &Machine{state: s} }

// State returns the state the machine applies to.
func (m *Machine) State() *State { return m.state }

// Apply applies one committed command.
func (m *Machine) Apply(e raft.Entry) any {
	return m.state.Apply(e.Index, e.Data)
}

// ApplyBatch applies entries committed together (raft.BatchStateMachine).
func (m *Machine) ApplyBatch(entries []raft.Entry) []any {
	results := m.state.applyBatch(entries)
	out := make([]any, len(results))
	for i, r := range results {
		out[i] = r
	}
	return out
}

// MembershipApplied advances the applied index over a configuration
// entry.
func (m *Machine) MembershipApplied(index uint64) {
	m.state.Advance(index)
}

// Snapshot captures the current View (immutable, so Persist can encode it
// while Apply goes on).
func (m *Machine) Snapshot() (raft.Snapshot, error) {
	return viewSnapshot{view: m.state.View()}, nil
}

// Restore replaces the state with a snapshot.
func (m *Machine) Restore(r io.Reader) error {
	return m.state.Restore(r)
}

type viewSnapshot struct {
	view *View
}

func (s viewSnapshot) Persist(w io.Writer) error { return s.view.EncodeSnapshot(w) }

func (viewSnapshot) Release() {}
