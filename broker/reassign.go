package broker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/raft"
)

// Partition reassignment (KIP-455): the controller records the target
// (broker/controller/reassign.go); the brokers named open their replicas
// (openAssigned) and the partition's leader changes its Raft group one
// member at a time until it holds exactly the target:
//
//  1. every replica of the partition that is not a member joins as a
//     non-voter, and is promoted to voter once caught up
//     (maintainMembers);
//  2. once every replica being added votes and has caught up with the
//     high watermark, a leader being removed hands leadership to a target
//     replica in sync, and the new leader removes the replicas being
//     removed, one at a time;
//  3. then it proposes CompleteReassignment, and the brokers left out
//     close their replicas and remove the files.
//
// Each step is a single-server membership change, so the group never
// loses its majority, and every step is taken again from the state if the
// leader changes midway. A cancel restores the original replicas; the
// leader then removes the members that no longer belong (step 1 in
// reverse). A member that is not a replica of the partition (a cancelled
// addition) is removed the same way, leadership moved first if it is the
// leader.

// Reassignment is a partition's reassignment as the controller records
// it.
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// ReassignPartition starts, replaces or (target nil) cancels the
// reassignment of one partition.
func (rs *Replicas) ReassignPartition(topic string, partition int32, target []int32) error {
	_, err := rs.propose(controller.ReassignPartition{Topic: topic, Partition: partition, Target: target})
	return err
}

// Reassignments lists the reassignments in progress; wanted (nil: all)
// picks partitions.
func (rs *Replicas) Reassignments(wanted func(topic string, partition int32) bool) []Reassignment {
	var out []Reassignment
	for _, t := range rs.view().Topics() {
		for i, p := range t.Partitions {
			if !p.Reassigning() || (wanted != nil && !wanted(t.Name, int32(i))) {
				continue
			}
			out = append(out, Reassignment{Topic: t.Name, Partition: int32(i), Replicas: slices.Clone(p.Replicas),
				Adding: slices.Clone(p.AddingReplicas), Removing: slices.Clone(p.RemovingReplicas)})
		}
	}
	return out
}

// reshapeGroup takes the next step toward a group whose members are the
// partition's replicas, on the leader; it reports whether it changed
// anything (one change per upkeep round).
func (rs *Replicas) reshapeGroup(p *Partition, cp controller.Partition, v *controller.View, servers []raft.Server, now time.Time) bool {
	self := rs.node.NodeID
	member := map[int32]raft.Server{}
	for _, s := range servers {
		if id, err := strconv.Atoi(s.ID); err == nil {
			member[int32(id)] = s
		}
	}
	// 1. Replicas that are not members join as non-voters (not those
	// being removed: they may have left already).
	for _, id := range cp.Replicas {
		if _, ok := member[id]; ok || !v.Live(id, now) || slices.Contains(cp.RemovingReplicas, id) {
			continue
		}
		return rs.changeMember(p, id, "added a replica as a non-voter to catch up", func(ctx context.Context) error {
			return p.group.AddNonvoter(ctx, strconv.Itoa(int(id)), rs.memberAddr(id, v))
		})
	}
	// Members that are not replicas leave (a cancelled addition).
	for id := range member {
		if slices.Contains(cp.Replicas, id) {
			continue
		}
		if id == self {
			return rs.handOver(p, cp, v, now)
		}
		return rs.changeMember(p, id, "removed a member that is no longer a replica", func(ctx context.Context) error {
			return p.group.RemoveServer(ctx, strconv.Itoa(int(id)))
		})
	}
	if !cp.Reassigning() {
		return false
	}
	// 2. Every replica being added votes and has caught up.
	for _, id := range cp.AddingReplicas {
		if id == self {
			continue // the leader is level with itself
		}
		if s := member[id]; !s.Voter || !p.tracking.current(id, p.HighWatermark(), now) {
			return false
		}
	}
	for _, id := range cp.RemovingReplicas {
		if _, ok := member[id]; !ok {
			continue
		}
		if id == self {
			return rs.handOver(p, cp, v, now)
		}
		return rs.changeMember(p, id, "removed a replica being reassigned away", func(ctx context.Context) error {
			return p.group.RemoveServer(ctx, strconv.Itoa(int(id)))
		})
	}
	// 3. The group is the target.
	target := cp.Target()
	rs.logger.Info("completing the reassignment", "topic", p.topic.Name(), "partition", p.Index, "replicas", target)
	if _, err := rs.propose(controller.CompleteReassignment{TopicID: p.topic.ID(), Partition: p.Index, Target: target}); err != nil {
		rs.logger.Warn("completing the reassignment", "topic", p.topic.Name(), "partition", p.Index, "err", err)
	}
	return true
}

// handOver moves leadership off this broker, which is leaving the group,
// to a target replica that votes, is live, in sync and caught up.
func (rs *Replicas) handOver(p *Partition, cp controller.Partition, v *controller.View, now time.Time) bool {
	lagMax := time.Duration(rs.props.Int("replica_lag_time_max_ms")) * time.Millisecond
	isr := p.tracking.isr(rs.node.NodeID, cp.Replicas, now, lagMax)
	for _, id := range cp.Target() {
		reg, ok := v.Broker(id)
		if id == rs.node.NodeID || !ok || !v.Live(id, now) || !slices.Contains(isr, id) || !p.tracking.current(id, p.HighWatermark(), now) {
			continue
		}
		rs.logger.Info("moving leadership off a replica being removed", "topic", p.topic.Name(), "partition", p.Index, "to", id)
		if err := p.group.TransferLeadership(strconv.Itoa(int(id)), reg.RPCAddr); err != nil {
			rs.logger.Warn("leadership transfer", "topic", p.topic.Name(), "partition", p.Index, "to", id, "err", err)
		}
		return true
	}
	return false
}

func (rs *Replicas) changeMember(p *Partition, id int32, change string, do func(context.Context) error) bool {
	// A replica joining or leaving the group starts again from no
	// progress: what it reported as an earlier member (its log level with
	// this leader's) says nothing of whether it is fetching now, and would
	// let a reassignment count a paused or dead broker as caught up.
	p.tracking.forget(id)
	ctx, cancel := context.WithTimeout(context.Background(), replicaOpTimeout)
	defer cancel()
	if err := do(ctx); err != nil {
		rs.logger.Warn("partition group membership", "topic", p.topic.Name(), "partition", p.Index, "replica", id, "change", change, "err", err)
	} else {
		rs.logger.Info("partition group membership", "topic", p.topic.Name(), "partition", p.Index, "replica", id, "change", change)
	}
	return true
}

// removeUnassignedReplicas deletes the files of replicas this broker holds
// for partitions the controller no longer places here: a reassignment that
// completed or was cancelled while this broker was down (closeMoved does
// it for those it sees happen).
func (rs *Replicas) removeUnassignedReplicas(topics []*Topic) {
	v := rs.view()
	for _, t := range topics {
		ct := v.TopicByID(t.ID())
		if ct == nil {
			continue
		}
		have := t.partitions()
		for i, cp := range ct.Partitions {
			if (i < len(have) && have[i] != nil) || slices.Contains(cp.Replicas, rs.node.NodeID) {
				continue
			}
			dir := filepath.Join(rs.topicDir(t.Name(), t.ID()), strconv.Itoa(i))
			if _, err := os.Stat(dir); err != nil {
				continue
			}
			rs.logger.Warn("removing a replica reassigned away from this broker while it was down", "topic", t.Name(), "partition", i)
			if err := os.RemoveAll(dir); err != nil {
				rs.logger.Warn("removing a reassigned replica's log", "topic", t.Name(), "partition", i, "err", err)
			}
			if err := rs.mux().RemoveGroupState(rs.raftDir(), partitionGroupName(t.ID(), int32(i))); err != nil {
				rs.logger.Warn("removing a reassigned replica's raft state", "topic", t.Name(), "partition", i, "err", err)
			}
		}
	}
}
