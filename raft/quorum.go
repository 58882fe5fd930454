package raft

import (
	"fmt"
	"time"
)

// ReplicaState is a group member as the group's leader knows it, for
// DescribeQuorum: how far its log is known to match the leader's, and
// when it last acknowledged an append and last had everything applied on
// the leader. Times are zero when unknown (a follower that has not
// acknowledged an append in this term).
type ReplicaState struct {
	Server
	LogEnd      uint64
	LastContact time.Time
	CaughtUp    time.Time
}

// QuorumState is the group as its leader sees it.
type QuorumState struct {
	LeaderID string
	Term     uint64
	// CommitIndex is the leader's commit index (Kafka's high watermark of
	// the metadata log).
	CommitIndex uint64
	Replicas    []ReplicaState
}

// Quorum describes the group's members with what the leader learned from
// their acknowledged appends in its term. Leader only (ErrNotLeader).
func (g *Group) Quorum() (QuorumState, error) {
	if !g.IsLeader() {
		return QuorumState{}, fmt.Errorf("group %s: %w", g.name, ErrNotLeader)
	}
	term := g.raft.CurrentTerm()
	servers, err := g.Configuration()
	if err != nil {
		return QuorumState{}, err
	}
	q := QuorumState{LeaderID: g.id, Term: term, CommitIndex: g.raft.CommitIndex()}
	now := time.Now()
	for _, s := range servers {
		rs := ReplicaState{Server: s}
		if s.ID == g.id {
			rs.LogEnd, rs.LastContact, rs.CaughtUp = g.raft.LastIndex(), now, now
		} else if fm, ok := g.trans.commits.progressOf(s.Addr, term); ok {
			rs.LogEnd, rs.LastContact, rs.CaughtUp = fm.index, fm.lastAck, fm.caughtUp
		}
		q.Replicas = append(q.Replicas, rs)
	}
	if !g.IsLeader() || g.raft.CurrentTerm() != term {
		return QuorumState{}, fmt.Errorf("group %s: leadership changed while describing it: %w", g.name, ErrNotLeader)
	}
	return q, nil
}
