package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition reassignment (KIP-455). A reassignment names a partition's
// target replica set. While it runs, the partition's Replicas are the
// target followed by the original replicas not in it, AddingReplicas the
// target's replicas not in the original and RemovingReplicas the
// original's not in the target, as Kafka shows them. The partition's
// leader then changes its Raft group one member at a time (adding the new
// replicas as non-voters, promoting them once caught up, moving
// leadership off a replica being removed, removing those) and, when the
// group holds exactly the target, completes the reassignment: Replicas
// become the target. A cancel puts the original replicas back; the leader
// then removes the replicas that were being added.

// ReassignPartition starts, replaces or (Target nil) cancels the
// reassignment of one partition.
type ReassignPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Target    []int32 `json:"target"` // null: cancel
}

func (ReassignPartition) Type() CommandType { return CmdReassignPartition }

// CompleteReassignment ends a partition's reassignment once its Raft
// group's members are the target: Replicas become Target. Proposed by the
// partition's leader; refused unless Target is the reassignment still in
// progress (a newer one or a cancel may have replaced it).
type CompleteReassignment struct {
	TopicID   TopicID `json:"topic_id"`
	Partition int32   `json:"partition"`
	Target    []int32 `json:"target"`
}

func (CompleteReassignment) Type() CommandType { return CmdCompleteReassignment }

// Reassigning reports whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// Original is the replica set before the reassignment in progress (the
// replicas when none is).
func (p Partition) Original() []int32 {
	return slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return contains(p.AddingReplicas, r) })
}

// Target is the replica set the reassignment in progress moves to (the
// replicas when none is).
func (p Partition) Target() []int32 {
	return slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return contains(p.RemovingReplicas, r) })
}

func (t *txn) reassignPartition(c ReassignPartition) Result {
	topic := t.cur.topics[c.Topic]
	if topic == nil {
		return Result{Err: errorf(kerr.UnknownTopicOrPartition, "no topic %q", c.Topic)}
	}
	p, err := partitionOf(topic, c.Partition)
	if err != nil {
		return Result{Err: err}
	}
	original := p.Original()
	np := p.Clone()
	if c.Target == nil {
		if !p.Reassigning() {
			return Result{Err: errorf(kerr.NoReassignmentInProgress, "%s/%d has no reassignment in progress", topic.Name, c.Partition)}
		}
		np.Replicas, np.AddingReplicas, np.RemovingReplicas = original, nil, nil
	} else {
		if err := t.checkAssignment([][]int32{c.Target}, len(c.Target)); err != nil {
			return Result{Err: err}
		}
		if slices.Equal(c.Target, original) && !p.Reassigning() {
			return Result{} // already there
		}
		np.Replicas = slices.Clone(c.Target)
		np.AddingReplicas, np.RemovingReplicas = nil, nil
		for _, r := range c.Target {
			if !contains(original, r) {
				np.AddingReplicas = append(np.AddingReplicas, r)
			}
		}
		for _, r := range original {
			if !contains(c.Target, r) {
				np.Replicas = append(np.Replicas, r)
				np.RemovingReplicas = append(np.RemovingReplicas, r)
			}
		}
	}
	np.ISR = slices.DeleteFunc(np.ISR, func(r int32) bool { return !contains(np.Replicas, r) })
	if len(np.ISR) == 0 {
		np.ISR = nil
	}
	t.setPartition(topic, c.Partition, np)
	return Result{Changed: true}
}

func (t *txn) completeReassignment(c CompleteReassignment) Result {
	topic, p, err := t.partitionByID(c.TopicID, c.Partition)
	if err != nil {
		return Result{Err: err}
	}
	if !p.Reassigning() || !slices.Equal(p.Target(), c.Target) {
		return Result{Err: errorf(kerr.NoReassignmentInProgress, "%s/%d is not being reassigned to %v (replicas %v, adding %v, removing %v)",
			topic.Name, c.Partition, c.Target, p.Replicas, p.AddingReplicas, p.RemovingReplicas)}
	}
	np := p.Clone()
	np.Replicas, np.AddingReplicas, np.RemovingReplicas = slices.Clone(c.Target), nil, nil
	np.ISR = slices.DeleteFunc(np.ISR, func(r int32) bool { return !contains(np.Replicas, r) })
	if len(np.ISR) == 0 {
		np.ISR = nil
	}
	t.setPartition(topic, c.Partition, np)
	return Result{Changed: true}
}

// partitionByID finds a partition by its topic's id.
func (t *txn) partitionByID(id TopicID, index int32) (*Topic, Partition, error) {
	topic := t.cur.byID[id]
	if topic == nil {
		return nil, Partition{}, errorf(kerr.UnknownTopicID, "no topic has id %s", id)
	}
	p, err := partitionOf(topic, index)
	return topic, p, err
}

func partitionOf(topic *Topic, index int32) (Partition, error) {
	if index < 0 || int(index) >= len(topic.Partitions) {
		return Partition{}, errorf(kerr.UnknownTopicOrPartition, "topic %s has no partition %d", topic.Name, index)
	}
	return topic.Partitions[index], nil
}

// setPartition replaces one partition of topic in the next view.
func (t *txn) setPartition(topic *Topic, index int32, p Partition) {
	nt := *topic
	nt.Partitions = append([]Partition(nil), topic.Partitions...)
	nt.Partitions[index] = p
	t.putTopic(nt.Name, nt.ID, &nt)
}
