package raft

import (
	"testing"

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
