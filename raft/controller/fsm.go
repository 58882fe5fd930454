package controller

import (
	"io"

	"github.com/hashicorp/raft"
)

// FSM adapts a State to hashicorp/raft. It also implements
// raft.ConfigurationStore, so that a committed configuration change
// advances the applied index (WaitIndex on its index returns).
//
// Apply returns a Result (ApplyFuture.Response()). Only LogCommand entries
// carry controller commands; raft hands the FSM nothing else but
// configuration entries (through StoreConfiguration).
type FSM struct {
	state *State
}

var (
	_ raft.FSM                = (*FSM)(nil)
	_ raft.ConfigurationStore = (*FSM)(nil)
	_ raft.FSMSnapshot        = (*fsmSnapshot)(nil)
)

// NewFSM returns an FSM applying to s.
func NewFSM(s *State) *FSM { return &FSM{state: s} }

// State returns the state the FSM applies to.
func (f *FSM) State() *State { return f.state }

// Apply applies one committed log entry.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		f.state.Advance(l.Index)
		return Result{Index: l.Index}
	}
	return f.state.Apply(l.Index, l.Data)
}

// StoreConfiguration advances the applied index over a configuration
// entry.
func (f *FSM) StoreConfiguration(index uint64, _ raft.Configuration) {
	f.state.Advance(index)
}

// Snapshot captures the current View (immutable, so Persist can encode it
// while Apply goes on).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{view: f.state.View()}, nil
}

// Restore replaces the state with a snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.state.Restore(rc)
}

type fsmSnapshot struct {
	view *View
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.view.EncodeSnapshot(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
