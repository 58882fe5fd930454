package assign

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// kafkaID decodes a topic ID as Kafka prints it (URL-safe base64 without
// padding), so that Kafka's own test cases keep their topics' order.
func kafkaID(s string) TopicID {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		panic(fmt.Sprintf("bad topic id %q", s))
	}
	return TopicID(b)
}

// The topic IDs of Kafka's uniform assignor tests.
var (
	t1 = kafkaID("T1-A4s3VTwiI5CTbEp6POw")
	t2 = kafkaID("T2-B4s3VTwiI5YHbPp6YUe")
	t3 = kafkaID("T3-CU8fVTLCz5YMkLoDQsa")
	t4 = kafkaID("T4-Tw9fVTLCz5HbPp6YQsa")
)

type parts = map[TopicID][]int32

func topicsOf(counts map[TopicID]int32) map[TopicID]Topic {
	out := make(map[TopicID]Topic, len(counts))
	for id, n := range counts {
		out[id] = Topic{ID: id, Name: fmt.Sprintf("%x", id[:4]), Partitions: n}
	}
	return out
}

func member(id string, current parts, topics ...TopicID) Member {
	return Member{ID: id, Topics: topics, Current: current}
}

func static(id, instance string, current parts, topics ...TopicID) Member {
	return Member{ID: id, InstanceID: instance, Topics: topics, Current: current}
}

// seq is the partitions from..to, inclusive.
func seq(from, to int32) []int32 {
	var out []int32
	for p := from; p <= to; p++ {
		out = append(out, p)
	}
	return out
}

func cloneMembers(ms []Member) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = m
		out[i].Topics = slices.Clone(m.Topics)
		if m.Current != nil {
			out[i].Current = make(parts, len(m.Current))
			for t, ps := range m.Current {
				out[i].Current[t] = slices.Clone(ps)
			}
		}
	}
	return out
}

// shuffled is ms in a random order, each member's topics and current
// partitions in a random order too.
func shuffled(r *rand.Rand, ms []Member) []Member {
	out := cloneMembers(ms)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	for _, m := range out {
		r.Shuffle(len(m.Topics), func(i, j int) { m.Topics[i], m.Topics[j] = m.Topics[j], m.Topics[i] })
		for _, ps := range m.Current {
			r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		}
	}
	return out
}

// withCurrent is ms with a as their current assignment.
func withCurrent(ms []Member, a Assignment) []Member {
	out := cloneMembers(ms)
	for i := range out {
		out[i].Current = parts{}
		for t, ps := range a[out[i].ID] {
			out[i].Current[t] = slices.Clone(ps)
		}
	}
	return out
}

func sizeOf(a map[TopicID][]int32) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// subscribed is each member's subscribed topics that exist.
func subscribed(ms []Member, topics map[TopicID]Topic) map[string]map[TopicID]bool {
	out := make(map[string]map[TopicID]bool, len(ms))
	for _, m := range ms {
		s := make(map[TopicID]bool)
		for _, t := range m.Topics {
			if _, ok := topics[t]; ok {
				s[t] = true
			}
		}
		out[m.ID] = s
	}
	return out
}

// checkValid checks what every assignment must be: an entry for every
// member; partitions ascending, in range, only of topics the member
// subscribes to; every partition of every subscribed topic assigned
// exactly once.
func checkValid(t *testing.T, ms []Member, topics map[TopicID]Topic, a Assignment) {
	t.Helper()
	subs := subscribed(ms, topics)
	if len(a) != len(subs) {
		t.Fatalf("%d entries for %d members", len(a), len(subs))
	}
	owner := make(map[TopicID][]string)
	for id, s := range subs {
		got, ok := a[id]
		if !ok || got == nil {
			t.Fatalf("member %s has no entry", id)
		}
		for tid, ps := range got {
			if !s[tid] {
				t.Fatalf("member %s has topic %x it does not subscribe to", id, tid[:4])
			}
			if len(ps) == 0 {
				t.Fatalf("member %s has an empty list for topic %x", id, tid[:4])
			}
			n := topics[tid].Partitions
			for i, p := range ps {
				if p < 0 || p >= n {
					t.Fatalf("member %s has partition %d of topic %x of %d", id, p, tid[:4], n)
				}
				if i > 0 && ps[i-1] >= p {
					t.Fatalf("member %s: topic %x partitions not ascending: %v", id, tid[:4], ps)
				}
				if owner[tid] == nil {
					owner[tid] = make([]string, n)
				}
				if prev := owner[tid][p]; prev != "" {
					t.Fatalf("partition %x-%d assigned to %s and %s", tid[:4], p, prev, id)
				}
				owner[tid][p] = id
			}
		}
	}
	wanted := make(map[TopicID]bool)
	for _, s := range subs {
		for tid := range s {
			wanted[tid] = true
		}
	}
	for tid := range wanted {
		for p := range topics[tid].Partitions {
			if owner[tid] == nil || owner[tid][p] == "" {
				t.Fatalf("partition %x-%d unassigned", tid[:4], p)
			}
		}
	}
}

// randomTopicID is random, including IDs whose halves are negative as
// Kafka compares them.
func randomTopicID(r *rand.Rand) TopicID {
	var id TopicID
	for i := range id {
		id[i] = byte(r.Uint32())
	}
	return id
}

// randomGroup is a group of up to maxMembers members over up to
// maxTopics topics of up to maxParts partitions each. Homogeneous groups
// all subscribe to the same topics; otherwise each member picks a random
// subset (possibly empty). Some subscriptions name topics that do not
// exist.
func randomGroup(r *rand.Rand, maxMembers, maxTopics, maxParts int, homogeneous bool) ([]Member, map[TopicID]Topic) {
	nt := 1 + r.IntN(maxTopics)
	topics := make(map[TopicID]Topic, nt)
	ids := make([]TopicID, 0, nt)
	for range nt {
		id := randomTopicID(r)
		topics[id] = Topic{ID: id, Partitions: int32(r.IntN(maxParts + 1))}
		ids = append(ids, id)
	}
	missing := randomTopicID(r)
	nm := 1 + r.IntN(maxMembers)
	ms := make([]Member, nm)
	var common []TopicID
	for _, id := range ids {
		if r.IntN(3) > 0 {
			common = append(common, id)
		}
	}
	for i := range ms {
		ms[i].ID = fmt.Sprintf("m%03d-%d", r.IntN(1000), i)
		if homogeneous {
			ms[i].Topics = slices.Clone(common)
		} else {
			for _, id := range ids {
				if r.IntN(2) == 0 {
					ms[i].Topics = append(ms[i].Topics, id)
				}
			}
		}
		if r.IntN(4) == 0 {
			ms[i].Topics = append(ms[i].Topics, missing)
		}
	}
	return ms, topics
}

func TestByName(t *testing.T) {
	for _, name := range Names() {
		a := ByName(name)
		if a == nil || a.Name() != name {
			t.Fatalf("ByName(%q) = %v", name, a)
		}
	}
	if Uniform().Name() != "uniform" || Range().Name() != "range" {
		t.Fatal("names")
	}
	for _, name := range []string{"", "Uniform", "RANGE", "sticky", "simple"} {
		if a := ByName(name); a != nil {
			t.Fatalf("ByName(%q) = %v", name, a)
		}
	}
}

func TestCompareTopicIDs(t *testing.T) {
	// Kafka compares each half as a signed long: a set top bit sorts
	// first.
	neg := TopicID{0x80}
	pos := TopicID{0x7f}
	zero := TopicID{}
	lowNeg := TopicID{8: 0x80}
	for _, c := range []struct {
		a, b TopicID
		want int
	}{
		{neg, pos, -1},
		{neg, zero, -1},
		{zero, pos, -1},
		{lowNeg, zero, -1},
		{pos, pos, 0},
		{t1, t2, -1},
		{t2, t3, -1},
		{t3, t4, -1},
	} {
		if got := compareTopicIDs(c.a, c.b); got != c.want {
			t.Errorf("compare(%x, %x) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := compareTopicIDs(c.b, c.a); got != -c.want {
			t.Errorf("compare(%x, %x) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

// TestEdgeCases runs both assignors over inputs at the edges.
func TestEdgeCases(t *testing.T) {
	missing := TopicID{0xee}
	topics := topicsOf(map[TopicID]int32{t1: 3, t2: 0})
	cases := []struct {
		name    string
		members []Member
		want    Assignment
	}{
		{"no members", nil, Assignment{}},
		{"no subscriptions", []Member{member("A", nil), member("B", nil)},
			Assignment{"A": {}, "B": {}}},
		{"only a missing topic", []Member{member("A", nil, missing)},
			Assignment{"A": {}}},
		{"a topic without partitions", []Member{member("A", nil, t2), member("B", nil, t2)},
			Assignment{"A": {}, "B": {}}},
		{"missing topic ignored", []Member{member("A", nil, t1, missing)},
			Assignment{"A": {t1: {0, 1, 2}}}},
		{"repeated subscription", []Member{member("A", nil, t1, t1, t1)},
			Assignment{"A": {t1: {0, 1, 2}}}},
		{"one subscriber", []Member{member("A", nil), member("B", nil, t1)},
			Assignment{"A": {}, "B": {t1: {0, 1, 2}}}},
	}
	for _, a := range []Assignor{Uniform(), Range()} {
		for _, c := range cases {
			t.Run(a.Name()+"/"+c.name, func(t *testing.T) {
				got := a.Assign(c.members, topics)
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("got %v, want %v", got, c.want)
				}
				checkValid(t, c.members, topics, got)
			})
		}
	}
}

// TestInputUntouched checks that the assignors neither change their input
// nor return slices that share memory with it.
func TestInputUntouched(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, a := range []Assignor{Uniform(), Range()} {
		for i := range 50 {
			ms, topics := randomGroup(r, 8, 4, 10, i%2 == 0)
			ms = withCurrent(ms, a.Assign(ms, topics))
			// Unsorted current lists, as a caller might keep them.
			for _, m := range ms {
				for _, ps := range m.Current {
					slices.Reverse(ps)
				}
			}
			before := cloneMembers(ms)
			topicsBefore := maps.Clone(topics)
			got := a.Assign(ms, topics)
			if !reflect.DeepEqual(ms, before) || !reflect.DeepEqual(topics, topicsBefore) {
				t.Fatalf("%s changed its input", a.Name())
			}
			for _, m := range got {
				for _, ps := range m {
					for j := range ps {
						ps[j] = -1
					}
				}
			}
			if !reflect.DeepEqual(ms, before) {
				t.Fatalf("%s returned the input's memory", a.Name())
			}
		}
	}
}

// TestDamagedCurrent feeds current assignments no coordinator should
// pass: partitions out of range, repeated, claimed by two members, of
// topics the member does not subscribe to or that do not exist. The
// result is still valid, and a partition two members claim stays with
// the first by member ID.
func TestDamagedCurrent(t *testing.T) {
	missing := TopicID{0xee}
	topics := topicsOf(map[TopicID]int32{t1: 4, t2: 4})
	homog := []Member{
		member("A", parts{t1: {0, 0, 1, 9, -1}, missing: {0}}, t1, t2),
		member("B", parts{t1: {1, 2}, t2: {0}}, t1, t2),
	}
	heterog := []Member{
		member("A", parts{t1: {0, 0, 1, 9, -1}, t2: {0, 1}, missing: {0}}, t1),
		member("B", parts{t1: {1, 2}, t2: {0}}, t1, t2),
	}
	for _, ms := range [][]Member{homog, heterog} {
		got := Uniform().Assign(ms, topics)
		checkValid(t, ms, topics, got)
		if !slices.Contains(got["A"][t1], 1) {
			t.Fatalf("partition 1 claimed by A and B not kept by A: %v", got)
		}
		// Any order of the members and of their lists gives the same.
		r := rand.New(rand.NewPCG(1, 2))
		for range 20 {
			if again := Uniform().Assign(shuffled(r, ms), topics); !reflect.DeepEqual(again, got) {
				t.Fatalf("order changed the result: %v, then %v", got, again)
			}
		}
	}
}
