package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// benchGroup is members members over topics topics of parts partitions
// each. Homogeneous members subscribe to every topic; otherwise member i
// to the topics t with (t+i) mod 3 != 0, so that subscriptions overlap
// without being equal.
func benchGroup(members, topics int, parts int32, homogeneous bool) ([]Member, map[TopicID]Topic) {
	r := rand.New(rand.NewPCG(uint64(members), uint64(topics)))
	ids := make([]TopicID, topics)
	ts := make(map[TopicID]Topic, topics)
	for i := range ids {
		ids[i] = randomTopicID(r)
		ts[ids[i]] = Topic{ID: ids[i], Name: fmt.Sprintf("topic-%d", i), Partitions: parts}
	}
	ms := make([]Member, members)
	for i := range ms {
		ms[i].ID = fmt.Sprintf("member-%05d", i)
		for t, id := range ids {
			if homogeneous || (t+i)%3 != 0 {
				ms[i].Topics = append(ms[i].Topics, id)
			}
		}
	}
	return ms, ts
}

// benchmarkAssign runs a over a thousand members and ten thousand
// partitions: the first assignment (fresh), the same group again with its
// assignment as current (steady), and the group after one member joins
// (join).
func benchmarkAssign(b *testing.B, a Assignor) {
	for _, homogeneous := range []bool{true, false} {
		for _, shape := range []struct{ topics, parts int }{{10, 1000}, {100, 100}, {1000, 10}} {
			ms, topics := benchGroup(1000, shape.topics, int32(shape.parts), homogeneous)
			first := a.Assign(ms, topics)
			steady := withCurrent(ms, first)
			join := append(withCurrent(ms, first), Member{ID: "member-new", Topics: slices.Clone(ms[0].Topics)})
			kind := "heterogeneous"
			if homogeneous {
				kind = "homogeneous"
			}
			for _, run := range []struct {
				name    string
				members []Member
			}{{"fresh", ms}, {"steady", steady}, {"join", join}} {
				name := fmt.Sprintf("%s/topics=%d/%s", kind, shape.topics, run.name)
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						a.Assign(run.members, topics)
					}
				})
			}
		}
	}
}

func BenchmarkUniform(b *testing.B) { benchmarkAssign(b, Uniform()) }

func BenchmarkRange(b *testing.B) { benchmarkAssign(b, Range()) }
