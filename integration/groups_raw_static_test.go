package integration

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw group-protocol tests of static membership (group.instance.id).

// TestGroupRawStaticFencing: a second static member with the same
// group.instance.id replaces the first, which is fenced with
// FENCED_INSTANCE_ID; the replacement gets the old assignment with no
// rebalance.
func TestGroupRawStaticFencing(t *testing.T) {
	b := grpBroker(t)
	const topic, group = "fence", "fence-g"
	CreateTopic(t, b, topic, 2, nil)
	waitCoordinator(t, b, group)

	s1 := newRawMember(t, b, group, topic)
	s1.instance = kmsg.StringPtr("inst-1")
	s1.join()
	want := consumerAssignment(topic, 0, 1)
	s1.sync(map[string][]byte{s1.id: want})
	gen := s1.gen

	s2 := newRawMember(t, b, group, topic)
	s2.instance = kmsg.StringPtr("inst-1")
	resp := s2.joinOnce() // static members get no MEMBER_ID_REQUIRED
	if resp.ErrorCode != errNone {
		t.Fatalf("JoinGroup v9 by a second static member with instance id inst-1: error %d, want 0", resp.ErrorCode)
	}
	s2.applyJoin(resp)
	if s2.id == s1.id || s2.id == "" {
		t.Errorf("replacement static member got member id %q (old %q), want a new id", s2.id, s1.id)
	}
	if s2.gen != gen {
		t.Errorf("replacement static member joined at generation %d, want the unchanged %d (no rebalance)", s2.gen, gen)
	}
	got := s2.sync(nil)
	if string(got) != string(want) {
		t.Errorf("replacement static member's assignment %v, want the old %v", decodeAssignment(t, got), decodeAssignment(t, want))
	}
	if ec := s1.heartbeat(); ec != errFencedInstanceID {
		t.Errorf("heartbeat of the replaced static member: error %d, want FENCED_INSTANCE_ID (82)", ec)
	}
	if r := s1.syncRaw(gen, nil); r.ErrorCode != errFencedInstanceID {
		t.Errorf("SyncGroup of the replaced static member: error %d, want FENCED_INSTANCE_ID (82)", r.ErrorCode)
	}
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Version = 8
	creq.Group = group
	creq.Generation = gen
	creq.MemberID = s1.id
	creq.InstanceID = s1.instance
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition = 0
	cp.Offset = 5
	cp.LeaderEpoch = -1
	ct.Partitions = append(ct.Partitions, cp)
	creq.Topics = append(creq.Topics, ct)
	cresp := s1.rc.Do(creq).(*kmsg.OffsetCommitResponse)
	if len(cresp.Topics) != 1 || len(cresp.Topics[0].Partitions) != 1 || cresp.Topics[0].Partitions[0].ErrorCode != errFencedInstanceID {
		t.Errorf("OffsetCommit v8 by the replaced static member (with its instance id): %+v, want FENCED_INSTANCE_ID (82)", cresp.Topics)
	}
	if ec := s2.heartbeat(); ec != errNone {
		t.Errorf("heartbeat of the replacement static member: error %d", ec)
	}
	g := describeGroupRaw(t, s2.rc, 5, group)
	if g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != s2.id || derefStr(g.Members[0].InstanceID) != "inst-1" {
		t.Errorf("DescribeGroups: state %q members %+v, want Stable with only %q (instance inst-1)", g.State, g.Members, s2.id)
	}

	// A restarted consumer's subscription metadata is rarely byte-identical
	// (ConsumerProtocol v1+ carries the owned partitions and generation,
	// which a restarted client no longer has). Kafka replaces the static
	// member without a rebalance as long as the group's selected protocol
	// stays the same (GroupCoordinator.updateStaticMemberAndRebalance:
	// "Static member which joins during Stable stage and doesn't affect
	// selectProtocol will not trigger rebalance").
	s3 := newRawMember(t, b, group, topic)
	s3.instance = kmsg.StringPtr("inst-1")
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 1
	md.Topics = []string{topic}
	s3.protocols[0].Metadata = md.AppendTo(nil)
	resp = s3.joinOnce()
	if resp.ErrorCode != errNone {
		t.Fatalf("JoinGroup v9 by a third static member inst-1 with new subscription metadata: error %d", resp.ErrorCode)
	}
	s3.applyJoin(resp)
	if s3.gen != gen {
		t.Errorf("static member rejoining a Stable group with the same protocol name (range) but different metadata bytes joined generation %d, want the unchanged %d: the broker rebalanced, Kafka does not (only a change of the selected protocol does)", s3.gen, gen)
	} else {
		if got := s3.sync(nil); string(got) != string(want) {
			t.Errorf("third static member's assignment %v, want the old %v", decodeAssignment(t, got), decodeAssignment(t, want))
		}
	}
	if ec := s2.heartbeat(); ec != errFencedInstanceID {
		t.Errorf("heartbeat of the second (replaced) static member: error %d, want FENCED_INSTANCE_ID (82)", ec)
	}
}
