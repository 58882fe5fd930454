package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw group-protocol tests of committed offsets and their storage:
// multi-group OffsetFetch, offset expiry, group metadata surviving a
// restart, and the __consumer_offsets topic.

// TestGroupRawOffsetFetchMultiGroup: OffsetFetch v8 answers several groups
// in one request, each with its own offsets; a group with no offsets
// answers -1 for requested partitions and nothing for "all topics".
func TestGroupRawOffsetFetchMultiGroup(t *testing.T) {
	b := grpBroker(t)
	const topic = "ofmg"
	CreateTopic(t, b, topic, 3, nil)
	waitCoordinator(t, b, "ofmg-1")
	rc := dialRaw(t, b.KafkaAddr)
	requireCommitOK(t, "simple commit ofmg-1", rawCommit(t, rc, 8, "ofmg-1", "", -1, topic, map[int32]int64{0: 5, 1: 7}, "meta-1"))
	requireCommitOK(t, "simple commit ofmg-2", rawCommit(t, rc, 8, "ofmg-2", "", -1, topic, map[int32]int64{2: 3}, "meta-2"))

	for _, v := range []int16{8, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = v
		g1 := kmsg.NewOffsetFetchRequestGroup()
		g1.Group = "ofmg-1"
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic = topic
		gt.Partitions = []int32{0, 1, 2}
		g1.Topics = append(g1.Topics, gt)
		g2 := kmsg.NewOffsetFetchRequestGroup()
		g2.Group = "ofmg-2" // Topics nil: all committed offsets
		g3 := kmsg.NewOffsetFetchRequestGroup()
		g3.Group = "ofmg-none"
		g3.Topics = append(g3.Topics, gt)
		g4 := kmsg.NewOffsetFetchRequestGroup()
		g4.Group = "ofmg-none-all"
		req.Groups = []kmsg.OffsetFetchRequestGroup{g1, g2, g3, g4}
		resp := rc.Do(req).(*kmsg.OffsetFetchResponse)

		got := map[string]map[int32]int64{}
		meta := map[string]map[int32]string{}
		for _, g := range resp.Groups {
			if g.ErrorCode != errNone {
				t.Errorf("OffsetFetch v%d group %s: error %d", v, g.Group, g.ErrorCode)
			}
			if got[g.Group] != nil {
				t.Errorf("OffsetFetch v%d: group %s answered twice", v, g.Group)
			}
			got[g.Group] = map[int32]int64{}
			meta[g.Group] = map[int32]string{}
			for _, gt := range g.Topics {
				if gt.Topic != topic {
					t.Errorf("OffsetFetch v%d group %s: unexpected topic %q", v, g.Group, gt.Topic)
				}
				for _, p := range gt.Partitions {
					if p.ErrorCode != errNone {
						t.Errorf("OffsetFetch v%d group %s partition %d: error %d", v, g.Group, p.Partition, p.ErrorCode)
					}
					got[g.Group][p.Partition] = p.Offset
					meta[g.Group][p.Partition] = derefStr(p.Metadata)
				}
			}
		}
		want := map[string]map[int32]int64{
			"ofmg-1":        {0: 5, 1: 7, 2: -1},
			"ofmg-2":        {2: 3},
			"ofmg-none":     {0: -1, 1: -1, 2: -1},
			"ofmg-none-all": {},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("OffsetFetch v%d with four groups: offsets %v, want %v", v, got, want)
		}
		if meta["ofmg-1"][0] != "meta-1" || meta["ofmg-1"][1] != "meta-1" || meta["ofmg-2"][2] != "meta-2" {
			t.Errorf("OffsetFetch v%d: metadata %v, want meta-1 for ofmg-1 partitions 0-1 and meta-2 for ofmg-2 partition 2", v, meta)
		}
	}
	// The same through the single-group versions.
	for v := int16(1); v <= 7; v++ {
		if got := rawFetchOffsets(t, rc, v, "ofmg-1", topic, 0, 1, 2); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 5, 1: 7, 2: -1}) {
			t.Errorf("OffsetFetch v%d ofmg-1: %v, want 0:5 1:7 2:-1", v, got)
		}
	}
}

// TestGroupRawOffsetExpiry: with group_offset_retention_sec=2 the offsets
// of an empty group disappear within a bounded wait, while those of a
// group with a live (heartbeating) member stay; once that member leaves,
// its group's offsets expire too.
func TestGroupRawOffsetExpiry(t *testing.T) {
	b := grpBroker(t,
		WithSet("cluster.group_offset_retention_sec", "2"),
		WithSet("cluster.group_offset_retention_check_ms", "500"),
	)
	const topic = "expiry"
	CreateTopic(t, b, topic, 2, nil)
	waitCoordinator(t, b, "exp-empty")
	rc := dialRaw(t, b.KafkaAddr)

	live := newRawMember(t, b, "exp-live", topic)
	live.sessionMs = 6000
	live.join()
	live.sync(map[string][]byte{live.id: consumerAssignment(topic, 0, 1)})
	requireCommitOK(t, "commit by the live member", rawCommit(t, live.rc, 8, "exp-live", live.id, live.gen, topic, map[int32]int64{0: 11, 1: 12}, ""))

	committed := time.Now()
	requireCommitOK(t, "simple commit exp-empty", rawCommit(t, rc, 8, "exp-empty", "", -1, topic, map[int32]int64{0: 21, 1: 22}, ""))
	if got := rawFetchOffsets(t, rc, 7, "exp-empty", topic, 0, 1); got[0] != 21 || got[1] != 22 {
		t.Fatalf("right after the commit exp-empty has %v, want 0:21 1:22", got)
	}

	var gone time.Duration
	grpWait(t, 15*time.Second, "offsets of the empty group expire", func() (bool, string) {
		if ec := live.heartbeat(); ec != errNone {
			t.Fatalf("heartbeat of the live member: error %d", ec)
		}
		if got := rawFetchOffsets(t, rc, 7, "exp-live", topic, 0, 1); got[0] != 11 || got[1] != 12 {
			t.Fatalf("offsets of the group with a live member changed to %v after %v, want 0:11 1:12 (only empty groups' offsets expire)", got, time.Since(committed))
		}
		got := rawFetchOffsets(t, rc, 7, "exp-empty", topic, 0, 1)
		if got[0] == -1 && got[1] == -1 {
			gone = time.Since(committed)
			return true, ""
		}
		return false, fmt.Sprintf("exp-empty offsets %v after %v", got, time.Since(committed))
	})
	if gone < 1500*time.Millisecond {
		t.Errorf("offsets of the empty group vanished %v after the commit, before the 2 s retention", gone)
	}
	t.Logf("empty group's offsets expired %v after the commit", gone)

	// Keep the live member alive past another retention period: its
	// offsets stay.
	until := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(until) {
		if ec := live.heartbeat(); ec != errNone {
			t.Fatalf("heartbeat of the live member: error %d", ec)
		}
		if got := rawFetchOffsets(t, rc, 7, "exp-live", topic, 0, 1); got[0] != 11 || got[1] != 12 {
			t.Fatalf("offsets of the group with a live member changed to %v, want 0:11 1:12", got)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// The member leaves: the group is empty and its offsets expire.
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version = 5
	lreq.Group = "exp-live"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = live.id
	lreq.Members = append(lreq.Members, lm)
	if resp := rc.Do(lreq).(*kmsg.LeaveGroupResponse); resp.ErrorCode != errNone || len(resp.Members) != 1 || resp.Members[0].ErrorCode != errNone {
		t.Fatalf("LeaveGroup v5: %+v", resp)
	}
	left := time.Now()
	grpWait(t, 15*time.Second, "offsets of the group that became empty expire", func() (bool, string) {
		got := rawFetchOffsets(t, rc, 7, "exp-live", topic, 0, 1)
		return got[0] == -1 && got[1] == -1, fmt.Sprintf("exp-live offsets %v %v after the leave", got, time.Since(left))
	})
	// Kafka (KIP-211) counts the retention of a consumer group's offsets
	// from when the group became empty, not from the (older) commit.
	if d := time.Since(left); d < 1500*time.Millisecond {
		t.Errorf("offsets of the group that became empty vanished %v after it became empty, before the 2 s retention (retention counted from the commit, not from when the group emptied)", d)
	}
	t.Logf("offsets of the group that became empty expired %v after the leave", time.Since(left))
}

// TestGroupRawMetadataSurvivesRestart: a Stable group's members,
// generation, protocol and assignments are rebuilt from __consumer_offsets
// after a restart: the members keep heartbeating with their ids and
// generation, and the next rebalance continues the generation sequence.
func TestGroupRawMetadataSurvivesRestart(t *testing.T) {
	b := grpBroker(t)
	const topic, group = "rstmeta", "rstmeta-g"
	CreateTopic(t, b, topic, 4, nil)
	waitCoordinator(t, b, group)
	tweak := func(m *rawMember) { m.sessionMs, m.rebalanceMs = 30000, 10000 }
	a, c := twoMemberGroup(t, b, group, topic, 4, tweak)
	gen := a.gen
	requireCommitOK(t, "commit by a", rawCommit(t, a.rc, 8, group, a.id, a.gen, topic, map[int32]int64{0: 4, 1: 5}, "x"))
	before := describeGroupRaw(t, a.rc, 5, group)

	b.Restart(t)
	for _, m := range []*rawMember{a, c} {
		m.rc = dialRaw(t, b.KafkaAddr)
	}
	waitCoordinator(t, b, group)
	for _, m := range []*rawMember{a, c} {
		var ec int16
		grpWait(t, 15*time.Second, "heartbeat after the restart", func() (bool, string) {
			ec = m.heartbeat()
			return ec != errCoordinatorLoadInProgress && ec != errCoordinatorNotAvailable && ec != errNotCoordinator, fmt.Sprintf("error %d", ec)
		})
		if ec != errNone {
			t.Errorf("heartbeat of member %q at generation %d after the restart: error %d, want 0 (group metadata rebuilt)", m.id, m.gen, ec)
		}
	}
	after := describeGroupRaw(t, a.rc, 5, group)
	if after.State != "Stable" || after.Protocol != before.Protocol || after.ProtocolType != before.ProtocolType || fmt.Sprint(memberIDs(after)) != fmt.Sprint(memberIDs(before)) {
		t.Errorf("after the restart: state %q protocol %q/%q members %v; before: %q %q/%q %v", after.State, after.ProtocolType, after.Protocol, memberIDs(after), before.State, before.ProtocolType, before.Protocol, memberIDs(before))
	}
	assigned := func(g kmsg.DescribeGroupsResponseGroup) map[string]string {
		out := map[string]string{}
		for _, m := range g.Members {
			out[m.MemberID] = fmt.Sprint(decodeAssignment(t, m.MemberAssignment))
		}
		return out
	}
	if fmt.Sprint(assigned(after)) != fmt.Sprint(assigned(before)) {
		t.Errorf("assignments after the restart %v, before %v", assigned(after), assigned(before))
	}
	if got := rawFetchOffsets(t, a.rc, 7, group, topic, 0, 1); got[0] != 4 || got[1] != 5 {
		t.Errorf("offsets after the restart %v, want 0:4 1:5", got)
	}
	// Members can still commit at their generation.
	requireCommitOK(t, "commit by c after the restart", rawCommit(t, c.rc, 8, group, c.id, c.gen, topic, map[int32]int64{2: 6}, ""))

	// A new member starts the next generation.
	d := newRawMember(t, b, group, topic)
	tweak(d)
	chD := d.joinAsync()
	grpWait(t, 5*time.Second, "the rebalance starts", func() (bool, string) {
		ec := a.heartbeat()
		return ec == errRebalanceInProgress, fmt.Sprintf("heartbeat error %d", ec)
	})
	chC := c.joinAsync()
	a.join()
	c.awaitJoin(chC)
	d.awaitJoin(chD)
	for _, m := range []*rawMember{a, c, d} {
		if m.gen != gen+1 {
			t.Errorf("member %q joined generation %d after the restart, want %d (generation continues)", m.id, m.gen, gen+1)
		}
	}
}

// TestGroupRawInternalTopic: offsets live in __consumer_offsets, created
// with group_topic_partitions partitions and reported internal, as Kafka
// does; group coordinators for many keys are spread over it but on one
// node all answer this broker.
func TestGroupRawInternalTopic(t *testing.T) {
	b := grpBroker(t, WithSet("cluster.group_topic_partitions", "5"))
	CreateTopic(t, b, "itopic", 1, nil)
	waitCoordinator(t, b, "itopic-g")
	rc := dialRaw(t, b.KafkaAddr)
	requireCommitOK(t, "simple commit", rawCommit(t, rc, 8, "itopic-g", "", -1, "itopic", map[int32]int64{0: 1}, ""))
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := rc.Do(req).(*kmsg.MetadataResponse)
	var found *kmsg.MetadataResponseTopic
	for i := range resp.Topics {
		if derefStr(resp.Topics[i].Topic) == "__consumer_offsets" {
			found = &resp.Topics[i]
		}
	}
	if found == nil {
		t.Fatalf("Metadata (all topics) does not list __consumer_offsets after a commit")
	}
	if !found.IsInternal {
		t.Errorf("__consumer_offsets is not marked internal in Metadata")
	}
	if len(found.Partitions) != 5 {
		t.Errorf("__consumer_offsets has %d partitions, want group_topic_partitions=5", len(found.Partitions))
	}
}
