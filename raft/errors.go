package raft

import (
	"context"
	"errors"
	"fmt"

	hraft "github.com/hashicorp/raft"
)

// Errors the rest of weir tests with errors.Is; hashicorp/raft's own error
// values never leave this package.
var (
	// ErrNotLeader: this node does not lead the group. The error is a
	// *NotLeaderError naming the leader when this node knows it.
	ErrNotLeader = errors.New("raft: not the leader")
	// ErrLeadershipLost: leadership was lost after the command was sent to
	// followers; it may or may not commit. Callers that must know retry
	// idempotently (Kafka producers do, with their sequence numbers).
	ErrLeadershipLost = errors.New("raft: leadership lost, outcome unknown")
	// ErrShutdown: the group is shut down.
	ErrShutdown = errors.New("raft: group shut down")
	// ErrExistingState: Bootstrap on a group that already has a term, log
	// or snapshot on disk; a restarted node rejoins from its own state.
	ErrExistingState = errors.New("raft: group has existing state, not bootstrapping")
)

// NotLeaderError is returned when a request needs the leader and this node
// is not it. LeaderID and LeaderAddr are empty while no leader is known.
type NotLeaderError struct {
	Group      string
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return fmt.Sprintf("raft: group %s: not the leader, no leader known", e.Group)
	}
	return fmt.Sprintf("raft: group %s: not the leader, leader is %s at %s", e.Group, e.LeaderID, e.LeaderAddr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// translate maps hashicorp/raft's errors onto weir's.
func (g *Group) translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hraft.ErrNotLeader), errors.Is(err, hraft.ErrLeadershipTransferInProgress):
		id, addr := g.Leader()
		return &NotLeaderError{Group: g.name, LeaderID: id, LeaderAddr: addr}
	case errors.Is(err, hraft.ErrLeadershipLost):
		return fmt.Errorf("group %s: %w", g.name, ErrLeadershipLost)
	case errors.Is(err, hraft.ErrRaftShutdown):
		return fmt.Errorf("group %s: %w", g.name, ErrShutdown)
	case errors.Is(err, hraft.ErrEnqueueTimeout):
		return fmt.Errorf("group %s: %w", g.name, context.DeadlineExceeded)
	}
	return fmt.Errorf("raft: group %s: %w", g.name, err)
}
