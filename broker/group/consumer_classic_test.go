package group

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between the classic and the consumer protocol
// (consumer_classic.go).

func encodeAssignment(topic string, ps ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: ps}}
	return a.AppendTo(nil)
}

func decodeAssignment(t *testing.T, b []byte) map[string][]int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment: %v", err)
	}
	out := map[string][]int32{}
	for _, tp := range a.Topics {
		out[tp.Topic] = slices.Sorted(slices.Values(tp.Partitions))
	}
	return out
}

func classicHeartbeat(c *Coordinator, group, member string, generation int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 4, group, member, generation
	return c.Heartbeat(req).ErrorCode
}

// TestConsumerGroupOnlineMigration: a running classic group becomes a
// consumer group when a consumer-protocol member joins; its classic
// member stays in through JoinGroup, SyncGroup and Heartbeat, never
// sharing a partition; when the consumer-protocol member leaves, the
// group is classic again and rebalances.
func TestConsumerGroupOnlineMigration(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 4)
	store := newMemStore(2)
	c := newConsumerCoordinator(t, store, cat, consumerSettings())

	// A classic member owns everything.
	a := joinNew(t, c, "m", joinOpts{})
	if r := wait(t, syncAsync(c, "m", a.MemberID, a.Generation, map[string][]byte{a.MemberID: encodeAssignment("t", 0, 1, 2, 3)}), "sync"); r.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// A consumer-protocol member joins: the group is upgraded, and gets
	// nothing the classic member still owns.
	x := newConsumer(t, c, "m", "x")
	mustOK(t, x.join("t"))
	if len(x.owned["t"]) != 0 {
		t.Fatalf("x got %v while a owns everything", x.owned)
	}
	if d := describeGroup(t, c, "m"); d.ErrorCode != 0 || len(d.Members) != 2 {
		t.Fatalf("after the upgrade: %+v", d)
	}

	// The classic member is told to rejoin, and does (eager: owning
	// nothing), and syncs its share.
	if code := classicHeartbeat(c, "m", a.MemberID, a.Generation); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic heartbeat after the upgrade: %v", kerr.ErrorForCode(code))
	}
	rejoin := wait(t, joinAsync(c, joinReq("m", joinOpts{memberID: a.MemberID})), "classic rejoin")
	if rejoin.ErrorCode != 0 || rejoin.Generation <= a.Generation || rejoin.Protocol == nil || *rejoin.Protocol != "range" {
		t.Fatalf("classic rejoin: %v generation %d protocol %v", kerr.ErrorForCode(rejoin.ErrorCode), rejoin.Generation, rejoin.Protocol)
	}
	synced := wait(t, syncAsync(c, "m", a.MemberID, rejoin.Generation, nil), "classic sync")
	if synced.ErrorCode != 0 {
		t.Fatalf("classic sync: %v", kerr.ErrorForCode(synced.ErrorCode))
	}
	aOwns := decodeAssignment(t, synced.MemberAssignment)["t"]
	settle(t, x)
	seen := map[int32]bool{}
	for _, p := range append(slices.Clone(aOwns), x.owned["t"]...) {
		if seen[p] {
			t.Fatalf("partition %d owned twice: a %v x %v", p, aOwns, x.owned["t"])
		}
		seen[p] = true
	}
	if len(seen) != 4 || len(aOwns) != 2 {
		t.Fatalf("a %v x %v: want two each, all four", aOwns, x.owned["t"])
	}
	if code := classicHeartbeat(c, "m", a.MemberID, rejoin.Generation); code != 0 {
		t.Fatalf("classic heartbeat once reconciled: %v", kerr.ErrorForCode(code))
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.MemberID, commit.Generation = 8, "m", a.MemberID, rejoin.Generation
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: aOwns[0], Offset: 7}}}}
	if code := c.OffsetCommit(commit).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("classic member's commit: %v", kerr.ErrorForCode(code))
	}
	commit.Generation = a.Generation
	if code := c.OffsetCommit(commit).Topics[0].Partitions[0].ErrorCode; code != kerr.IllegalGeneration.Code {
		t.Fatalf("classic member's commit from the old generation: %v", kerr.ErrorForCode(code))
	}
	d := describeGroup(t, c, "m")
	types := map[string]int8{}
	for _, m := range d.Members {
		types[m.MemberID] = m.MemberType
	}
	if types[a.MemberID] != memberTypeClassic || types["x"] != memberTypeConsumer {
		t.Fatalf("member types: %v", types)
	}

	// The mixed group survives a reload.
	c2 := newConsumerCoordinator(t, store, cat, consumerSettings())
	if d2 := describeGroup(t, c2, "m"); fmt.Sprint(d2.Members) != fmt.Sprint(d.Members) || d2.Epoch != d.Epoch {
		t.Fatalf("reloaded mixed group:\n%+v\nwant\n%+v", d2, d)
	}
	x.c = c2

	// The consumer-protocol member leaves: the group is classic again
	// and its member rejoins in a rebalance.
	leave := x.request()
	leave.MemberEpoch = leaveEpoch
	mustOK(t, c2.ConsumerGroupHeartbeat(leave, Client{}))
	if d := describeGroup(t, c2, "m"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after the downgrade ConsumerGroupDescribe says %v", kerr.ErrorForCode(d.ErrorCode))
	}
	if code := classicHeartbeat(c2, "m", a.MemberID, rejoin.Generation); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic heartbeat after the downgrade: %v", kerr.ErrorForCode(code))
	}
	again := wait(t, joinAsync(c2, joinReq("m", joinOpts{memberID: a.MemberID})), "classic join after the downgrade")
	if again.ErrorCode != 0 || again.LeaderID != a.MemberID {
		t.Fatalf("join after the downgrade: %v leader %q", kerr.ErrorForCode(again.ErrorCode), again.LeaderID)
	}
}

// TestConsumerGroupClassicMemberJoinTimeout: a classic member of a
// migrated group told to rejoin that does not within its rebalance
// timeout is removed, heartbeats or not, and its partitions go on.
func TestConsumerGroupClassicMemberJoinTimeout(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 2)
	c := newConsumerCoordinator(t, newMemStore(2), cat, consumerSettings())
	a := joinNew(t, c, "m", joinOpts{rebalance: 300 * time.Millisecond})
	if r := wait(t, syncAsync(c, "m", a.MemberID, a.Generation, map[string][]byte{a.MemberID: encodeAssignment("t", 0, 1)}), "sync"); r.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	x := newConsumer(t, c, "m", "x")
	mustOK(t, x.join("t"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		code := classicHeartbeat(c, "m", a.MemberID, a.Generation)
		if code == kerr.UnknownMemberID.Code {
			break
		}
		if code != kerr.RebalanceInProgress.Code {
			t.Fatalf("classic heartbeat: %v", kerr.ErrorForCode(code))
		}
		if time.Now().After(deadline) {
			t.Fatal("a classic member that never rejoined is still in the group")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// With the classic member gone the group is classic-free, still a
	// consumer group, and x gets both partitions.
	settle(t, x)
	checkExclusive(t, "t", 2, x)
}
