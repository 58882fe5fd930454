package assign

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestRangeKafkaCases are the cases of Kafka's RangeAssignorTest.
func TestRangeKafkaCases(t *testing.T) {
	runCases(t, Range().Assign, []assignCase{{
		name:    "OneMemberNoTopic",
		topics:  map[TopicID]int32{t1: 3},
		members: []Member{member("A", nil)},
		want:    Assignment{"A": {}},
	}, {
		name:    "FirstAssignmentTwoMembersTwoTopicsSameSubscriptions",
		topics:  map[TopicID]int32{t1: 3, t3: 2},
		members: []Member{member("A", nil, t1, t3), member("B", nil, t1, t3)},
		want: Assignment{
			"A": {t1: {0, 1}, t3: {0}},
			"B": {t1: {2}, t3: {1}},
		},
	}, {
		name:   "FirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions",
		topics: map[TopicID]int32{t1: 3, t2: 3, t3: 2},
		members: []Member{
			member("A", nil, t1, t2),
			member("B", nil, t3),
			member("C", nil, t2, t3),
		},
		want: Assignment{
			"A": {t1: {0, 1, 2}, t2: {0, 1}},
			"B": {t3: {0}},
			"C": {t2: {2}, t3: {1}},
		},
	}, {
		name:   "FirstAssignmentNumMembersGreaterThanNumPartitions",
		topics: map[TopicID]int32{t1: 3, t3: 2},
		members: []Member{
			member("A", nil, t1, t3),
			member("B", nil, t1, t3),
			member("C", nil, t1, t3),
		},
		want: Assignment{
			"A": {t1: {0}, t3: {0}},
			"B": {t1: {1}, t3: {1}},
			"C": {t1: {2}},
		},
	}, {
		name:   "ReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded",
		topics: map[TopicID]int32{t1: 2, t2: 2},
		members: []Member{
			member("A", parts{t1: {0}, t2: {0}}, t1, t2),
			member("B", parts{t1: {1}, t2: {1}}, t1, t2),
			member("C", nil, t1, t2),
		},
		want: Assignment{
			"A": {t1: {0}, t2: {0}},
			"B": {t1: {1}, t2: {1}},
			"C": {},
		},
	}, {
		name:   "ReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 4, t2: 4},
		members: []Member{
			member("A", parts{t1: {0, 1}, t2: {0, 1}}, t1, t2),
			member("B", parts{t1: {2}, t2: {2}}, t1, t2),
		},
		want: Assignment{
			"A": {t1: {0, 1}, t2: {0, 1}},
			"B": {t1: {2, 3}, t2: {2, 3}},
		},
	}, {
		name:   "ReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 3, t2: 3},
		members: []Member{
			member("A", parts{t1: {0, 1}, t2: {0, 1}}, t1, t2),
			member("B", parts{t1: {2}, t2: {2}}, t1, t2),
			member("C", nil, t1, t2),
		},
		want: Assignment{
			"A": {t1: {0}, t2: {0}},
			"B": {t1: {1}, t2: {1}},
			"C": {t1: {2}, t2: {2}},
		},
	}, {
		name:   "ReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 4, t2: 3},
		members: []Member{
			member("A", parts{t1: {0, 1}, t2: {0, 1}}, t1, t2),
			member("B", parts{t1: {2}, t2: {2}}, t1, t2),
			member("C", nil, t1),
		},
		want: Assignment{
			"A": {t1: {0, 1}, t2: {0, 1}},
			"B": {t1: {2}, t2: {2}},
			"C": {t1: {3}},
		},
	}, {
		name:    "ReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
		topics:  map[TopicID]int32{t1: 3, t2: 3},
		members: []Member{member("B", parts{t1: {2}, t2: {2}}, t1, t2)},
		want:    Assignment{"B": {t1: {0, 1, 2}, t2: {0, 1, 2}}},
	}, {
		name:   "ReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
		topics: map[TopicID]int32{t1: 3, t2: 3, t3: 2},
		members: []Member{
			member("A", parts{t1: {0, 1, 2}, t2: {0}}, t1),
			member("B", parts{t2: {1}}, t1, t2, t3),
			member("C", parts{t2: {2}, t3: {0, 1}}, t2),
		},
		want: Assignment{
			"A": {t1: {0, 1}},
			"B": {t1: {2}, t2: {0, 1}, t3: {0, 1}},
			"C": {t2: {2}},
		},
	}, {
		// The group of Kafka's testMixedStaticMembership, which checks only
		// that a rejoin changes nothing; the ranges follow from the order,
		// static members first by instance ID, then the dynamic ones.
		name:   "MixedStaticMembership",
		topics: map[TopicID]int32{t1: 5},
		members: []Member{
			static("A", "instanceA", nil, t1),
			static("C", "instanceC", nil, t1),
			member("B", nil, t1),
		},
		want: Assignment{
			"A": {t1: {0, 1}},
			"C": {t1: {2, 3}},
			"B": {t1: {4}},
		},
	}})
}

// TestRangeStaticMembership is Kafka's testStaticMembership and
// testMixedStaticMembership: a static member rejoining under a new member
// ID keeps its ranges, and so does everyone else.
func TestRangeStaticMembership(t *testing.T) {
	for _, c := range []struct {
		partitions int32
		members    []Member
	}{
		{3, []Member{static("A", "instanceA", nil, t1), static("B", "instanceB", nil, t1)}},
		{5, []Member{static("A", "instanceA", nil, t1), static("C", "instanceC", nil, t1), member("B", nil, t1)}},
	} {
		topics := topicsOf(map[TopicID]int32{t1: c.partitions})
		before := Range().Assign(c.members, topics)
		rejoined := cloneMembers(c.members)
		rejoined[0].ID = "memberA1"
		after := Range().Assign(rejoined, topics)
		if !reflect.DeepEqual(after["memberA1"], before["A"]) {
			t.Fatalf("rejoined static member got %v, had %v", after["memberA1"], before["A"])
		}
		for _, m := range c.members[1:] {
			if !reflect.DeepEqual(after[m.ID], before[m.ID]) {
				t.Fatalf("%s got %v, had %v", m.ID, after[m.ID], before[m.ID])
			}
		}
	}
}

// rangeOrder is the order the range assignor gives members: static ones
// first by instance ID, then dynamic ones by member ID.
func rangeOrder(ms []Member) []Member {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b Member) int {
		if (a.InstanceID == "") != (b.InstanceID == "") {
			if a.InstanceID != "" {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// TestRangeProperties checks random groups: validity; per topic, the
// subscribers in member order hold consecutive ranges from partition 0,
// sizes differing by at most one and the larger ones first; topics with
// the same subscribers and partition count are co-partitioned; neither
// the order of the input nor the current assignment changes anything.
func TestRangeProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 848))
	for i := range 400 {
		ms, topics := randomGroup(r, 12, 6, 20, i%2 == 0)
		for j := range ms {
			if r.IntN(3) == 0 {
				ms[j].InstanceID = fmt.Sprintf("instance-%d", r.IntN(100)) + ms[j].ID
			}
		}
		a := Range().Assign(ms, topics)
		checkValid(t, ms, topics, a)
		subs := subscribed(ms, topics)
		ordered := rangeOrder(ms)

		for tid, tp := range topics {
			var holders []string
			for _, m := range ordered {
				if subs[m.ID][tid] {
					holders = append(holders, m.ID)
				}
			}
			if len(holders) == 0 {
				continue
			}
			next := int32(0)
			prev := -1
			for k, id := range holders {
				ps := a[id][tid]
				want := int(tp.Partitions) / len(holders)
				if k < int(tp.Partitions)%len(holders) {
					want++
				}
				if len(ps) != want {
					t.Fatalf("%d: %s has %d partitions of %x, want %d", i, id, len(ps), tid[:2], want)
				}
				if prev >= 0 && len(ps) > prev {
					t.Fatalf("%d: a later subscriber of %x has more", i, tid[:2])
				}
				prev = len(ps)
				for _, p := range ps {
					if p != next {
						t.Fatalf("%d: %s's range of %x is not contiguous: %v", i, id, tid[:2], ps)
					}
					next++
				}
			}
		}

		// Co-partitioning: equal subscribers and partition counts, equal
		// partitions per member.
		for x, tx := range topics {
			for y, ty := range topics {
				if x == y || tx.Partitions != ty.Partitions {
					continue
				}
				same := true
				for _, s := range subs {
					if s[x] != s[y] {
						same = false
						break
					}
				}
				if !same {
					continue
				}
				for id := range subs {
					if !slices.Equal(a[id][x], a[id][y]) {
						t.Fatalf("%d: %s: %x %v but %x %v", i, id, x[:2], a[id][x], y[:2], a[id][y])
					}
				}
			}
		}

		// Any order and any current assignment give the same.
		prior := Uniform().Assign(shuffled(r, ms), topics)
		for range 3 {
			again := Range().Assign(shuffled(r, withCurrent(ms, prior)), topics)
			if !reflect.DeepEqual(again, a) {
				t.Fatalf("%d: input order or current assignment changed the result:\n%v\n%v", i, a, again)
			}
		}
	}
}
