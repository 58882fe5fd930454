package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FaultReassign moves a partition while the workload runs: one of its
// replicas is reassigned away (replication factor one less), then back
// (the returning replica rebuilt from nothing by its leader), with the
// replica order shuffled, so membership changes, leadership moves off a
// removed leader and catch-up all run under produce traffic.
const FaultReassign = "reassign: drop and re-add a replica"

// reassignPartition runs the two moves of FaultReassign on partition p.
func (nm *Nemesis) reassignPartition(ctx context.Context, p int32) error {
	md, err := nm.c.firstAnswer(ctx, []string{nm.topic})
	if err != nil {
		return err
	}
	var replicas []int32
	for _, t := range md.Topics {
		for _, mp := range t.Partitions {
			if mp.Partition == p {
				replicas = slices.Clone(mp.Replicas)
			}
		}
	}
	if len(replicas) < 2 {
		return fmt.Errorf("%s/%d has replicas %v: nothing to drop", nm.topic, p, replicas)
	}
	drop := replicas[nm.rng.IntN(len(replicas))]
	keep := slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return r == drop })
	back := append(slices.Clone(keep), drop)
	nm.rng.Shuffle(len(back), func(i, j int) { back[i], back[j] = back[j], back[i] })
	for _, target := range [][]int32{keep, back} {
		start := time.Now()
		if err := nm.reassignTo(ctx, p, target); err != nil {
			return err
		}
		nm.event("%s: %s/%d moved to %v in %v", FaultReassign, nm.topic, p, target, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// reassignTo asks for partition p to move to target and waits until no
// reassignment of it runs and Metadata shows target as its replicas (a
// move that only adds replicas shows them at once).
func (nm *Nemesis) reassignTo(ctx context.Context, p int32, target []int32) error {
	nodes := nm.c.answering()
	if len(nodes) == 0 {
		return fmt.Errorf("no broker answers")
	}
	via := nodes[nm.rng.IntN(len(nodes))].ID
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 15_000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = nm.topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = p, target
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := nm.c.Ask(ctx, via, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("AlterPartitionReassignments: %w", err)
	}
	if err := kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("reassigning %s/%d to %v: %w", nm.topic, p, target, err)
	}
	wctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	lt := kmsg.NewListPartitionReassignmentsRequestTopic()
	lt.Topic, lt.Partitions = nm.topic, []int32{p}
	list.Topics = append(list.Topics, lt)
	for {
		md, err := nm.c.firstAnswer(wctx, []string{nm.topic})
		if err == nil {
			var lresp kmsg.Response
			if lresp, err = nm.c.Ask(wctx, via, list); err == nil && len(lresp.(*kmsg.ListPartitionReassignmentsResponse).Topics) == 0 {
				for _, t := range md.Topics {
					for _, mp := range t.Partitions {
						if mp.Partition == p && slices.Equal(mp.Replicas, target) {
							return nil
						}
					}
				}
			}
		}
		if wctx.Err() != nil {
			return fmt.Errorf("%s/%d not on %v within %v", nm.topic, p, target, healTimeout)
		}
		sleepCtx(wctx, 250*time.Millisecond)
	}
}
