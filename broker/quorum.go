package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/raft"
)

// The controller group's quorum as DescribeQuorum (kafka-metadata-quorum)
// shows it. Only the group's leader knows how far each member's log
// reaches, so a broker that does not lead it asks the one that does
// (serviceControllerQuorum).

const serviceControllerQuorum = "controller.quorum"

// QuorumInfo is the controller group as its leader sees it.
type QuorumInfo struct {
	LeaderID      int32 `json:"leader_id"`
	LeaderEpoch   int32 `json:"leader_epoch"` // the group's Raft term
	HighWatermark int64 `json:"high_watermark"`
	// Voters and Observers (non-voting members catching up).
	Voters    []QuorumReplica `json:"voters"`
	Observers []QuorumReplica `json:"observers"`
}

// QuorumReplica is one member of the controller group.
type QuorumReplica struct {
	NodeID int32  `json:"node_id"`
	Addr   string `json:"addr"` // its RPC address, where the group's traffic goes
	// LogEndOffset is how far its log is known to match the leader's.
	LogEndOffset int64 `json:"log_end_offset"`
	// LastFetchMs and LastCaughtUpMs are Unix milliseconds of its last
	// acknowledged append and of the last one that reached the leader's
	// applied index; -1 when not known in this term.
	LastFetchMs    int64 `json:"last_fetch_ms"`
	LastCaughtUpMs int64 `json:"last_caught_up_ms"`
}

// ControllerQuorum describes the controller group, from its leader.
func (b *Broker) ControllerQuorum(ctx context.Context) (QuorumInfo, error) { return b.ctrl.quorum(ctx) }

func (c *controllerNode) quorum(ctx context.Context) (QuorumInfo, error) {
	g := c.group
	if g.IsLeader() {
		return c.localQuorum()
	}
	_, addr := g.Leader()
	if addr == "" {
		return QuorumInfo{}, fmt.Errorf("%w: the controller group has no leader", kerr.NotLeaderForPartition)
	}
	out, err := c.mux.Call(ctx, addr, serviceControllerQuorum, nil)
	if err != nil {
		return QuorumInfo{}, fmt.Errorf("%w: asking the controller leader: %w", kerr.RequestTimedOut, err)
	}
	var q QuorumInfo
	if err := json.Unmarshal(out, &q); err != nil {
		return QuorumInfo{}, fmt.Errorf("%w: the controller leader's answer: %w", kerr.UnknownServerError, err)
	}
	return q, nil
}

func (c *controllerNode) serveControllerQuorum(_ context.Context, _ string, _ []byte) ([]byte, error) {
	q, err := c.localQuorum()
	if err != nil {
		return nil, err
	}
	return json.Marshal(q)
}

func (c *controllerNode) localQuorum() (QuorumInfo, error) {
	qs, err := c.group.Quorum()
	if err != nil {
		return QuorumInfo{}, fmt.Errorf("%w: %w", kerr.NotLeaderForPartition, err)
	}
	nodeID := func(id string) int32 {
		n, err := strconv.Atoi(id)
		if err != nil {
			return -1
		}
		return int32(n)
	}
	unixMs := func(t time.Time) int64 {
		if t.IsZero() {
			return -1
		}
		return t.UnixMilli()
	}
	q := QuorumInfo{LeaderID: nodeID(qs.LeaderID), LeaderEpoch: int32(qs.Term), HighWatermark: int64(qs.CommitIndex)}
	for _, r := range qs.Replicas {
		addr, _ := raft.SplitMemberAddr(r.Addr)
		qr := QuorumReplica{NodeID: nodeID(r.ID), Addr: addr, LogEndOffset: int64(r.LogEnd),
			LastFetchMs: unixMs(r.LastContact), LastCaughtUpMs: unixMs(r.CaughtUp)}
		if r.Voter {
			q.Voters = append(q.Voters, qr)
		} else {
			q.Observers = append(q.Observers, qr)
		}
	}
	return q, nil
}
