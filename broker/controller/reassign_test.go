package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A reassignment shows Kafka's replicas/adding/removing while it runs,
// can be replaced and cancelled, completes only to the target in
// progress, and survives a snapshot.
func TestReassignPartition(t *testing.T) {
	h := newHarness(t)
	h.ok(InitCluster{ClusterID: "c"})
	h.register(4, 0)
	h.ok(CreateTopic{Name: "t", ID: topicID(1), Partitions: 2, Assignment: [][]int32{{1, 2, 3}, {2, 3, 4}}})
	part := func(i int32) Partition {
		t.Helper()
		p, ok := h.s.View().Partition(topicID(1), i)
		if !ok {
			t.Fatalf("no partition %d", i)
		}
		return p
	}
	h.ok(ReportLeader{TopicID: topicID(1), Partition: 0, Leader: 1, LeaderEpoch: 1, Term: 1, ISR: []int32{1, 2, 3}})

	// {1,2,3} → {2,3,4}: 4 is added, 1 removed.
	h.ok(ReassignPartition{Topic: "t", Partition: 0, Target: []int32{2, 3, 4}})
	p := part(0)
	if !slices.Equal(p.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{1}) ||
		!slices.Equal(p.Original(), []int32{2, 3, 1}) || !slices.Equal(p.Target(), []int32{2, 3, 4}) || !p.Reassigning() {
		t.Fatalf("during: %+v", p)
	}
	// A completion for another target is stale.
	h.fails(CompleteReassignment{TopicID: topicID(1), Partition: 0, Target: []int32{2, 3}}, kerr.NoReassignmentInProgress)

	// Replaced: the original stays the original.
	h.ok(ReassignPartition{Topic: "t", Partition: 0, Target: []int32{1, 4}})
	p = part(0)
	if !slices.Equal(p.Replicas, []int32{1, 4, 2, 3}) || !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{2, 3}) {
		t.Fatalf("replaced: %+v", p)
	}

	// Survives a snapshot.
	snap, err := h.s.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	restored := New(testOptions())
	if err := restored.Restore(bytesReader(snap)); err != nil {
		t.Fatal(err)
	}
	if rp, _ := restored.View().Partition(topicID(1), 0); !slices.Equal(rp.AddingReplicas, []int32{4}) || !slices.Equal(rp.RemovingReplicas, []int32{2, 3}) {
		t.Fatalf("restored: %+v", rp)
	}

	// Cancelled: back to the original, the ISR kept within it.
	h.ok(ReassignPartition{Topic: "t", Partition: 0})
	p = part(0)
	if !slices.Equal(p.Replicas, []int32{1, 2, 3}) || p.Reassigning() || !slices.Equal(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("cancelled: %+v", p)
	}
	h.fails(ReassignPartition{Topic: "t", Partition: 0}, kerr.NoReassignmentInProgress)

	// Completed: replicas become the target, the removed one leaves the ISR.
	h.ok(ReassignPartition{Topic: "t", Partition: 0, Target: []int32{2, 3, 4}})
	h.ok(CompleteReassignment{TopicID: topicID(1), Partition: 0, Target: []int32{2, 3, 4}})
	p = part(0)
	if !slices.Equal(p.Replicas, []int32{2, 3, 4}) || p.Reassigning() || !slices.Equal(p.ISR, []int32{2, 3}) {
		t.Fatalf("completed: %+v", p)
	}
	h.fails(CompleteReassignment{TopicID: topicID(1), Partition: 0, Target: []int32{2, 3, 4}}, kerr.NoReassignmentInProgress)

	// The same replicas again: nothing to do. A replication factor change
	// is a reassignment.
	if r := h.ok(ReassignPartition{Topic: "t", Partition: 1, Target: []int32{2, 3, 4}}); r.Changed {
		t.Fatal("reassigning to the current replicas changed the state")
	}
	h.ok(ReassignPartition{Topic: "t", Partition: 1, Target: []int32{2}})
	if p = part(1); !slices.Equal(p.RemovingReplicas, []int32{3, 4}) || len(p.AddingReplicas) != 0 {
		t.Fatalf("RF 3 → 1: %+v", p)
	}

	// Refusals.
	h.fails(ReassignPartition{Topic: "nope", Partition: 0, Target: []int32{1}}, kerr.UnknownTopicOrPartition)
	h.fails(ReassignPartition{Topic: "t", Partition: 9, Target: []int32{1}}, kerr.UnknownTopicOrPartition)
	h.fails(ReassignPartition{Topic: "t", Partition: 0, Target: []int32{1, 1}}, kerr.InvalidReplicaAssignment)
	h.fails(ReassignPartition{Topic: "t", Partition: 0, Target: []int32{1, 7}}, kerr.InvalidReplicaAssignment)
	h.fails(ReassignPartition{Topic: "t", Partition: 0, Target: []int32{}}, kerr.InvalidReplicaAssignment)
}
