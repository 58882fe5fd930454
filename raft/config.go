package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Config describes one group on one node.
//
// The timer defaults are sized for many groups on a small machine, not for
// the fastest failover of one group: hashicorp/raft runs every group's
// timers itself (no shared tick, no quiescing), so an idle leader still
// sends each follower a heartbeat every HeartbeatTimeout/10 (randomised
// up to ×2) and an empty AppendEntries every CommitTimeout (×1–2), by
// which hashicorp tells followers the commit index and retries a
// follower whose append failed; weir's transport carries the commit index
// with the heartbeats too (transport_commit.go) and the group's leader
// wakes a stalled follower's replication itself (catchup.go), so a group
// may set CommitTimeout long. With the defaults below that is about
// 3 + 2 ≈ 5 RPCs/s per follower per idle group, against about 20 with
// hashicorp's (1 s, 50 ms). doc.go has the measured cost.
type Config struct {
	// Group names the Raft group; it is its snapshots' directory under
	// Dir and its name on the wire and in the shared log ([A-Za-z0-9._-],
	// at most 255 bytes).
	Group string
	// NodeID is this broker's id in the group's configuration.
	NodeID string
	// Dir is the broker's Raft directory, the same for all its groups:
	// the shared log lives in it, the group's snapshots in Dir/Group.
	Dir string
	// StateMachine is the group's replicated state. Apply runs on one
	// goroutine per group; Snapshot must return quickly (Apply waits),
	// Persist may not.
	StateMachine StateMachine
	// Class labels the commit latency histogram ("controller",
	// "partition"); default "default". Keep it to a handful of values.
	Class string
	// Logger; nil means the Mux's logger. The group name is added.
	Logger *slog.Logger

	// HeartbeatTimeout: a follower with no contact from the leader for this
	// long (×1–2) starts an election; the leader heartbeats every tenth of
	// it. Default 2 s (hashicorp: 1 s).
	HeartbeatTimeout time.Duration
	// ElectionTimeout: how long a candidate waits for votes (×1–2) before
	// trying again. Default 2 s (hashicorp: 1 s).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout: a leader that has not heard from a quorum for
	// this long steps down. Must not exceed HeartbeatTimeout. Default 1 s.
	LeaderLeaseTimeout time.Duration
	// LeaderHeartbeatTimeout is the group's HeartbeatTimeout (and at
	// least its ElectionTimeout) while this node leads it; 0 means
	// HeartbeatTimeout. A leader heartbeats each follower every tenth to
	// fifth of its heartbeat timeout, while how soon a dead leader is
	// replaced depends on the followers' HeartbeatTimeout only, so a
	// longer one here makes idle groups cheaper without slowing failover.
	// LeaderLeaseTimeout must stay well above the leader's heartbeat
	// interval.
	LeaderHeartbeatTimeout time.Duration
	// CommitTimeout: the idle leader's interval (×1–2) for telling
	// followers the commit index, where commit notices do not (peers of
	// an older release), and hashicorp's retry of a failed append to a
	// follower that catchup.go has not woken. Default 200 ms (hashicorp:
	// 50 ms).
	CommitTimeout time.Duration

	// SnapshotInterval, SnapshotThreshold and TrailingLogs pass through to
	// hashicorp/raft (defaults 120 s, 8192, 10240).
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// BatchApply queues up to MaxAppendEntries proposals while the
	// leader writes the previous ones (hashicorp/raft's BatchApplyCh),
	// so that one writer proposing several commands in a row
	// (Group.Propose) gets them written and fsynced together.
	BatchApply bool
	// MaxAppendEntries passes through to hashicorp/raft (default 64): the
	// most entries stored (and sent to a follower) at once.
	MaxAppendEntries int
	// NoSnapshotRestoreOnStart: the FSM recovers from its own files and
	// Raft does not call Restore at start (for FSMs that are durable logs).
	NoSnapshotRestoreOnStart bool

	// LogObserver, when set, is told of every write to and truncation
	// of the group's log on this node (group_log.go).
	LogObserver LogObserver

	// TransportTimeout bounds one RPC on the node's shared transport
	// (InstallSnapshot scales it). Default 10 s.
	TransportTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Class == "" {
		c.Class = "default"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, 2*time.Second)
	def(&c.ElectionTimeout, 2*time.Second)
	def(&c.LeaderLeaseTimeout, min(time.Second, c.HeartbeatTimeout))
	def(&c.CommitTimeout, 200*time.Millisecond)
	def(&c.TransportTimeout, 10*time.Second)
}

// maxTransportDelay caps how long a group's heartbeats and commit-index
// appends wait to share the transport's frames and writes.
const maxTransportDelay = 250 * time.Millisecond

// transportDelay is the group's TransportOptions.Delay: a small fraction
// of each timer the wait adds to (the followers' heartbeat timeout, the
// leader's lease, the commit-index keep-alive), at most
// maxTransportDelay. Partitions (3 s, 3 s, 30 s) wait the full 250 ms;
// the controller (2 s, 1 s, 200 ms) 50 ms.
func (c *Config) transportDelay() time.Duration {
	d := min(c.HeartbeatTimeout/12, c.LeaderLeaseTimeout/10, c.CommitTimeout/4, maxTransportDelay)
	return max(d, time.Millisecond)
}

func (c *Config) validate() error {
	if err := validGroupName(c.Group); err != nil {
		return err
	}
	switch {
	case c.NodeID == "":
		return errors.New("raft: Config.NodeID is empty")
	case c.Dir == "":
		return errors.New("raft: Config.Dir is empty")
	case c.StateMachine == nil:
		return errors.New("raft: Config.StateMachine is nil")
	}
	return nil
}

// raftConfig is the hashicorp/raft configuration for c.
func (c *Config) raftConfig() (*hraft.Config, error) {
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	if c.SnapshotInterval > 0 {
		rc.SnapshotInterval = c.SnapshotInterval
	}
	if c.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.TrailingLogs > 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
	if c.MaxAppendEntries > 0 {
		rc.MaxAppendEntries = c.MaxAppendEntries
	}
	rc.NoSnapshotRestoreOnStart = c.NoSnapshotRestoreOnStart
	rc.BatchApplyCh = c.BatchApply
	// One timing series per heartbeat and append, not two.
	rc.NoLegacyTelemetry = true
	if err := hraft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raft: group %s: %w", c.Group, err)
	}
	return rc, nil
}
