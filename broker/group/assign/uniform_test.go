package assign

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// assignHeterogeneous runs the heterogeneous uniform assignment whatever
// the subscriptions, as Kafka's tests do by naming the subscription type.
func assignHeterogeneous(ms []Member, topics map[TopicID]Topic) Assignment {
	g := newGroup(ms, topics, byNothing)
	return g.assignment(g.uniformHeterogeneous())
}

type assignCase struct {
	name    string
	topics  map[TopicID]int32
	members []Member
	want    Assignment
}

func runCases(t *testing.T, assign func([]Member, map[TopicID]Topic) Assignment, cases []assignCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topics := topicsOf(c.topics)
			got := assign(c.members, topics)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %v\nwant %v", got, c.want)
			}
			checkValid(t, c.members, topics, got)
		})
	}
}

// TestUniformHomogeneousKafkaCases are the cases of Kafka's
// UniformHomogeneousAssignmentBuilderTest whose outcome does not hang on
// the iteration order of a Java hash set. Kafka's tests list members in
// ID order, as this package always does.
func TestUniformHomogeneousKafkaCases(t *testing.T) {
	runCases(t, Uniform().Assign, []assignCase{{
		name:   "FirstAssignmentNumMembersGreaterThanTotalNumPartitions",
		topics: map[TopicID]int32{t3: 2},
		members: []Member{
			member("A", nil, t3),
			member("B", nil, t3),
			member("C", nil, t3),
		},
		// A, holding nothing, leaves the extra partitions to the members
		// after it.
		want: Assignment{"A": {}, "B": {t3: {0}}, "C": {t3: {1}}},
	}, {
		name:   "ReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment",
		topics: map[TopicID]int32{t1: 3, t2: 3},
		members: []Member{
			member("A", parts{t1: {0, 1}, t2: {0, 1}}, t1, t2),
			member("B", parts{t1: {2}, t2: {2}}, t1, t2),
		},
		want: Assignment{
			"A": {t1: {0, 1}, t2: {0}},
			"B": {t1: {2}, t2: {1, 2}},
		},
	}, {
		name:   "ReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 3, t2: 3},
		members: []Member{
			member("A", parts{t1: {0, 2}, t2: {0}}, t1, t2),
			member("B", parts{t1: {1}, t2: {1, 2}}, t1, t2),
			member("C", nil, t1, t2),
		},
		want: Assignment{
			"A": {t1: {0, 2}},
			"B": {t1: {1}, t2: {1}},
			"C": {t2: {0, 2}},
		},
	}, {
		name:   "ReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 2, t2: 2},
		members: []Member{
			member("A", parts{t1: {0}, t2: {0}}, t2),
			member("B", parts{t1: {1}, t2: {1}}, t2),
		},
		want: Assignment{"A": {t2: {0}}, "B": {t2: {1}}},
	}})
}

// TestUniformHomogeneousKafkaCasesUnordered are Kafka's cases whose exact
// outcome depends on the order of a Java hash set of topics (Kafka hands
// out the partitions nobody had in that order; this package in topic ID
// order). What does not depend on it is checked: sizes and what each
// member keeps.
func TestUniformHomogeneousKafkaCasesUnordered(t *testing.T) {
	cases := []struct {
		name    string
		topics  map[TopicID]int32
		members []Member
		sizes   map[string]int
	}{{
		// Kafka: A {t3: 0, 1}, B {t1: 0, 1, 2}.
		name:    "FirstAssignmentTwoMembersTwoTopicsNoMemberRacks",
		topics:  map[TopicID]int32{t1: 3, t3: 2},
		members: []Member{member("A", nil, t1, t3), member("B", nil, t1, t3)},
		sizes:   map[string]int{"A": 2, "B": 3},
	}, {
		// Kafka: A {t1: 0, 2; t2: 0, 3, 4}, B {t1: 1, 3, 4, 5; t2: 1, 2}.
		name:   "ReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 6, t2: 5},
		members: []Member{
			member("A", parts{t1: {0, 2}, t2: {0}}, t1, t2),
			member("B", parts{t1: {1}, t2: {1, 2}}, t1, t2),
		},
		sizes: map[string]int{"A": 5, "B": 6},
	}, {
		// Kafka: A {t1: 0; t2: 0, 2}, B {t1: 1, 2; t2: 1}.
		name:   "ReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
		topics: map[TopicID]int32{t1: 3, t2: 3},
		members: []Member{
			member("A", parts{t1: {0}, t2: {0}}, t1, t2),
			member("B", parts{t1: {1}, t2: {1}}, t1, t2),
		},
		sizes: map[string]int{"A": 3, "B": 3},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topics := topicsOf(c.topics)
			got := Uniform().Assign(c.members, topics)
			checkValid(t, c.members, topics, got)
			for _, m := range c.members {
				if n := sizeOf(got[m.ID]); n != c.sizes[m.ID] {
					t.Fatalf("%s has %d partitions, want %d: %v", m.ID, n, c.sizes[m.ID], got)
				}
				for tid, ps := range m.Current {
					for _, p := range ps {
						if !slices.Contains(got[m.ID][tid], p) {
							t.Fatalf("%s lost %x-%d: %v", m.ID, tid[:2], p, got)
						}
					}
				}
			}
		})
	}
}

// TestUniformHeterogeneousKafkaCases are the cases of Kafka's
// UniformHeterogeneousAssignmentBuilderTest. Its members are in ID order,
// and its topics tie-break in Kafka's UUID order, as here, so every
// outcome is exact.
func TestUniformHeterogeneousKafkaCases(t *testing.T) {
	runCases(t, Uniform().Assign, []assignCase{{
		name:   "TwoMembersNoTopicSubscription",
		topics: map[TopicID]int32{t1: 3},
		// Kafka returns no entries; this package an empty one per member.
		members: []Member{member("A", nil), member("B", nil)},
		want:    Assignment{"A": {}, "B": {}},
	}, {
		name:    "FirstAssignmentTwoMembersTwoTopics",
		topics:  map[TopicID]int32{t1: 3, t3: 6},
		members: []Member{member("A", nil, t1, t3), member("B", nil, t3)},
		want: Assignment{
			"A": {t1: {0, 1, 2}, t3: {4}},
			"B": {t3: {0, 1, 2, 3, 5}},
		},
	}, {
		name:   "FirstAssignmentNumMembersGreaterThanTotalNumPartitions",
		topics: map[TopicID]int32{t3: 1, t1: 2},
		members: []Member{
			member("A", nil, t3),
			member("B", nil, t3),
			member("C", nil, t1),
		},
		want: Assignment{"A": {t3: {0}}, "B": {}, "C": {t1: {0, 1}}},
	}, {
		name:   "ReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment",
		topics: map[TopicID]int32{t1: 6, t2: 4, t3: 4},
		members: []Member{
			member("A", parts{t1: {0, 1, 2}}, t1),
			member("B", parts{t1: {3}, t2: {0}}, t1, t2),
			member("C", parts{t1: {4, 5}, t2: {1, 2, 3}, t3: {0, 1, 2, 3}}, t1, t2, t3),
		},
		want: Assignment{
			"A": {t1: {0, 1, 2, 5}},
			"B": {t1: {3}, t2: {0, 1, 2, 3}},
			"C": {t1: {4}, t3: {0, 1, 2, 3}},
		},
	}, {
		name:   "ReassignmentWhenPartitionsAreAddedForTwoMembers",
		topics: map[TopicID]int32{t1: 6, t2: 5, t3: 3, t4: 3},
		members: []Member{
			member("A", parts{t1: {0, 1, 2, 3}, t3: {0, 1}}, t1, t3),
			member("B", parts{t2: {0, 1, 2}, t4: {0, 1, 2}}, t1, t2, t3, t4),
		},
		want: Assignment{
			"A": {t1: seq(0, 5), t3: {0, 1, 2}},
			"B": {t2: seq(0, 4), t4: {0, 1, 2}},
		},
	}, {
		name:   "ReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 6, t2: 7},
		members: []Member{
			member("A", parts{t1: {0, 2}, t2: {0}}, t1),
			member("B", parts{t1: {1}, t2: {1, 2}}, t1, t2),
			member("C", nil, t1, t2),
		},
		want: Assignment{
			"A": {t1: {0, 2, 3, 4, 5}},
			"B": {t1: {1}, t2: {1, 2, 6}},
			"C": {t2: {0, 3, 4, 5}},
		},
	}, {
		name:   "ReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics",
		topics: map[TopicID]int32{t1: 3, t2: 8, t3: 3},
		members: []Member{
			member("A", parts{t1: {0, 1, 2}, t3: {0, 1}}, t1, t3),
			member("B", parts{t2: {3, 4, 5, 6}}, t2),
		},
		want: Assignment{
			"A": {t1: {0, 1, 2}, t3: {0, 1, 2}},
			"B": {t2: seq(0, 7)},
		},
	}, {
		name:   "ReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
		topics: map[TopicID]int32{t1: 3, t2: 5},
		members: []Member{
			member("A", parts{t1: {0, 2}, t2: {1, 3}}, t1),
			member("B", parts{t1: {1}, t2: {0, 2, 4}}, t1, t2),
		},
		want: Assignment{
			"A": {t1: {0, 1, 2}},
			"B": {t2: seq(0, 4)},
		},
	}, {
		name:    "FirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions",
		topics:  map[TopicID]int32{t1: 3},
		members: []Member{member("A", nil, t1), member("B", nil)},
		want:    Assignment{"A": {t1: {0, 1, 2}}, "B": {}},
	}})

	// Kafka runs this one through the heterogeneous builder although both
	// members subscribe to the same topics.
	runCases(t, assignHeterogeneous, []assignCase{{
		name:   "ReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions",
		topics: map[TopicID]int32{t1: 2, t2: 2, t3: 2},
		members: []Member{
			member("A", parts{t1: {0, 1}, t2: {0, 1}, t3: {0, 1}}, t1, t2, t3),
			member("B", nil, t1, t2, t3),
		},
		want: Assignment{
			"A": {t2: {0}, t3: {0, 1}},
			"B": {t1: {0, 1}, t2: {1}},
		},
	}})
}

// TestUniformHomogeneousExtraPartitions pins down who takes the partitions
// left over by the division: members that already hold one more than the
// base quota keep it, so a balanced assignment is stable.
func TestUniformHomogeneousExtraPartitions(t *testing.T) {
	runCases(t, Uniform().Assign, []assignCase{{
		name:   "balanced stays",
		topics: map[TopicID]int32{t1: 4},
		members: []Member{
			member("A", parts{t1: {0}}, t1),
			member("B", parts{t1: {1}}, t1),
			member("C", parts{t1: {2, 3}}, t1),
		},
		want: Assignment{"A": {t1: {0}}, "B": {t1: {1}}, "C": {t1: {2, 3}}},
	}, {
		name:   "the last members must take the extras",
		topics: map[TopicID]int32{t1: 5},
		members: []Member{
			member("A", parts{t1: {0, 1, 2, 3, 4}}, t1),
			member("B", nil, t1),
			member("C", nil, t1),
		},
		// B, holding nothing, leaves the extra to C; C, the last, must
		// take it.
		want: Assignment{"A": {t1: {0, 1}}, "B": {t1: {2}}, "C": {t1: {3, 4}}},
	}, {
		name:   "over quota keeps the lowest partitions",
		topics: map[TopicID]int32{t1: 6},
		members: []Member{
			member("A", parts{t1: {5, 3, 1, 0}}, t1),
			member("B", nil, t1),
		},
		want: Assignment{"A": {t1: {0, 1, 3}}, "B": {t1: {2, 4, 5}}},
	}})
}

// TestUniformProperties checks random groups, homogeneous and not, from
// scratch and from the previous result after members join and leave:
// every partition once and only to a subscriber; balance; determinism
// whatever the order of the input.
func TestUniformProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 848))
	for i := range 400 {
		homogeneous := i%2 == 0
		ms, topics := randomGroup(r, 12, 6, 16, homogeneous)
		name := fmt.Sprintf("%d/homogeneous=%v", i, homogeneous)
		a := Uniform().Assign(ms, topics)
		checkUniform(t, name+"/first", ms, topics, a, homogeneous)

		// Members come and go; the rest keep the result as current.
		next := withCurrent(ms, a)
		if len(next) > 1 && r.IntN(2) == 0 {
			k := r.IntN(len(next))
			next = slices.Delete(next, k, k+1)
		}
		if r.IntN(2) == 0 {
			m := Member{ID: fmt.Sprintf("new-%d", i)}
			if homogeneous {
				m.Topics = slices.Clone(next[0].Topics)
			} else {
				for id := range topics {
					if r.IntN(2) == 0 {
						m.Topics = append(m.Topics, id)
					}
				}
			}
			next = append(next, m)
		}
		b := Uniform().Assign(next, topics)
		checkUniform(t, name+"/next", next, topics, b, homogeneous)
		for range 3 {
			if again := Uniform().Assign(shuffled(r, next), topics); !reflect.DeepEqual(again, b) {
				t.Fatalf("%s: shuffled input changed the result:\n%v\n%v", name, b, again)
			}
		}
	}
}

// checkUniform checks validity and balance: with one subscription for
// all, counts within one of each other; otherwise no member holding a
// partition of a topic has two or more partitions more than another of
// the topic's subscribers (the point at which Kafka's rebalancing rounds
// stop moving).
func checkUniform(t *testing.T, name string, ms []Member, topics map[TopicID]Topic, a Assignment, homogeneous bool) {
	t.Helper()
	checkValid(t, ms, topics, a)
	if homogeneous {
		lo, hi := -1, -1
		for _, m := range a {
			n := sizeOf(m)
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
		if hi-lo > 1 {
			t.Fatalf("%s: sizes from %d to %d: %v", name, lo, hi, a)
		}
		return
	}
	subs := subscribed(ms, topics)
	size := make(map[string]int, len(a))
	for id, m := range a {
		size[id] = sizeOf(m)
	}
	for tid := range topics {
		least, most := "", ""
		for id, s := range subs {
			if !s[tid] {
				continue
			}
			if least == "" || size[id] < size[least] {
				least = id
			}
			if len(a[id][tid]) > 0 && (most == "" || size[id] > size[most]) {
				most = id
			}
		}
		if most != "" && size[most]-size[least] > 1 {
			t.Fatalf("%s: %s (%d) could give a partition of %x to %s (%d): %v",
				name, most, size[most], tid[:2], least, size[least], a)
		}
	}
}

// TestUniformStable checks that an assignment fed back as the current one
// comes back unchanged, whatever the order of the members.
func TestUniformStable(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 848))
	for i := range 300 {
		ms, topics := randomGroup(r, 12, 6, 16, i%2 == 0)
		a := Uniform().Assign(ms, topics)
		again := Uniform().Assign(shuffled(r, withCurrent(ms, a)), topics)
		if !reflect.DeepEqual(again, a) {
			t.Fatalf("%d: not stable:\n%v\n%v", i, a, again)
		}
	}
}

// moved counts the partitions whose owner differs from before to after,
// among those both assign.
func moved(before, after Assignment) int {
	owner := make(map[TopicID]map[int32]string)
	for id, m := range before {
		for tid, ps := range m {
			if owner[tid] == nil {
				owner[tid] = make(map[int32]string)
			}
			for _, p := range ps {
				owner[tid][p] = id
			}
		}
	}
	n := 0
	for id, m := range after {
		for tid, ps := range m {
			for _, p := range ps {
				if prev, ok := owner[tid][p]; ok && prev != id {
					n++
				}
			}
		}
	}
	return n
}

// TestUniformHomogeneousStickiness checks that from a balanced group a
// member joining takes no more than its share and nothing else moves,
// and a member leaving moves only its own partitions.
func TestUniformHomogeneousStickiness(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 848))
	for i := range 300 {
		ms, topics := randomGroup(r, 20, 5, 40, true)
		ms = withCurrent(ms, Uniform().Assign(ms, topics))
		var total int
		for _, id := range ms[0].Topics {
			total += int(topics[id].Partitions)
		}
		before := Uniform().Assign(ms, topics)

		joined := append(cloneMembers(ms), Member{ID: fmt.Sprintf("m%03d-new", r.IntN(1000)), Topics: slices.Clone(ms[0].Topics)})
		after := Uniform().Assign(joined, topics)
		checkUniform(t, "join", joined, topics, after, true)
		share := (total + len(joined) - 1) / len(joined)
		if n := moved(before, after); n > share {
			t.Fatalf("%d: a join moved %d partitions, more than a share of %d/%d", i, n, total, len(joined))
		}
		for _, m := range ms {
			for tid, ps := range after[m.ID] {
				for _, p := range ps {
					if !slices.Contains(before[m.ID][tid], p) {
						t.Fatalf("%d: on a join %s gained %x-%d", i, m.ID, tid[:2], p)
					}
				}
			}
		}

		if len(ms) < 2 {
			continue
		}
		k := r.IntN(len(ms))
		left := slices.Delete(cloneMembers(ms), k, k+1)
		after = Uniform().Assign(left, topics)
		checkUniform(t, "leave", left, topics, after, true)
		stayed := maps.Clone(before)
		delete(stayed, ms[k].ID)
		if n := moved(stayed, after); n != 0 {
			t.Fatalf("%d: a leave moved %d partitions between the members who stayed", i, n)
		}
	}
}

// TestUniformLarge runs a thousand members over ten thousand partitions,
// homogeneous and not, fresh and after a member joins.
func TestUniformLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	for _, homogeneous := range []bool{true, false} {
		ms, topics := benchGroup(1000, 100, 100, homogeneous)
		a := Uniform().Assign(ms, topics)
		checkUniform(t, "large", ms, topics, a, homogeneous)
		next := append(withCurrent(ms, a), Member{ID: "zz-new", Topics: slices.Clone(ms[0].Topics)})
		b := Uniform().Assign(next, topics)
		checkUniform(t, "large/join", next, topics, b, homogeneous)
	}
}
