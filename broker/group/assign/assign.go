package assign

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// TopicID is a topic's UUID, as Kafka's Uuid: the most significant half
// first, big-endian.
type TopicID = [16]byte

// Member is one member of a consumer group as the assignor sees it.
type Member struct {
	ID         string
	InstanceID string    // "" when not static
	Rack       string    // "" when unknown
	Topics     []TopicID // subscribed topics that exist (resolved by the coordinator), any order
	// Current is the member's assignment in the group's current target assignment, for stickiness.
	Current map[TopicID][]int32
}

// Topic is a subscribed topic's metadata.
type Topic struct {
	ID         TopicID
	Name       string
	Partitions int32
}

// Assignment is member id -> topic -> partitions (sorted ascending). Every member of the input
// has an entry, possibly empty.
type Assignment map[string]map[TopicID][]int32

// Assignor computes a group's target assignment.
type Assignor interface {
	Name() string // "uniform" or "range", as clients name them in group.remote.assignor
	Assign(members []Member, topics map[TopicID]Topic) Assignment
}

// The assignors' names, as clients give them in group.remote.assignor.
const (
	UniformName = "uniform"
	RangeName   = "range"
)

// Uniform is Kafka's uniform assignor: balanced and sticky.
func Uniform() Assignor { return uniformAssignor{} }

// Range is Kafka's range assignor: contiguous, co-partitioned ranges per
// topic.
func Range() Assignor { return rangeAssignor{} }

// ByName returns the assignor of that name, or nil.
func ByName(name string) Assignor {
	switch name {
	case UniformName:
		return Uniform()
	case RangeName:
		return Range()
	}
	return nil
}

// Names lists the assignors' names, the default (Kafka's
// group.consumer.assignors default, uniform) first.
func Names() []string { return []string{UniformName, RangeName} }

// compareTopicIDs orders topic IDs as Kafka's Uuid.compareTo does: each
// half as a signed 64-bit number.
func compareTopicIDs(a, b TopicID) int {
	if c := cmp.Compare(int64(binary.BigEndian.Uint64(a[:8])), int64(binary.BigEndian.Uint64(b[:8]))); c != 0 {
		return c
	}
	return cmp.Compare(int64(binary.BigEndian.Uint64(a[8:])), int64(binary.BigEndian.Uint64(b[8:])))
}

// group is the input as both assignors work on it: members in the
// assignor's order and numbered by it, the subscribed topics that exist
// numbered in topic ID order, and the subscriptions both ways as
// numbers.
type group struct {
	members     []*Member
	topics      []topicInfo
	index       map[TopicID]int32 // topic ID -> number
	subs        [][]int32         // member -> topics, ascending, no repeats
	subscribers [][]int32         // topic -> members, ascending
}

type topicInfo struct {
	id         TopicID
	partitions int32
}

// newGroup numbers the members in the order order gives (ties broken by
// member ID, and after that by input order) and the topics any member
// subscribes to that are in topics.
func newGroup(members []Member, topics map[TopicID]Topic, order func(a, b *Member) int) *group {
	g := &group{members: make([]*Member, len(members))}
	for i := range members {
		g.members[i] = &members[i]
	}
	slices.SortStableFunc(g.members, func(a, b *Member) int {
		if c := order(a, b); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})

	// Each subscription is looked up once: numbered in the order the
	// topics turn up (-1 for one that does not exist), then renumbered in
	// topic ID order.
	var nsubs int
	for _, m := range g.members {
		nsubs += len(m.Topics)
	}
	g.index = make(map[TopicID]int32)
	flat := make([]int32, 0, nsubs)
	var found []TopicID
	for _, m := range g.members {
		for _, id := range m.Topics {
			t, ok := g.index[id]
			if !ok {
				t = -1
				if _, exists := topics[id]; exists {
					t = int32(len(found))
					found = append(found, id)
				}
				g.index[id] = t
			}
			flat = append(flat, t)
		}
	}
	g.topics = make([]topicInfo, len(found))
	for i, id := range found {
		// The key, not Topic.ID, names the topic: it is what members
		// subscribe by.
		g.topics[i] = topicInfo{id: id, partitions: max(topics[id].Partitions, 0)}
	}
	slices.SortFunc(g.topics, func(a, b topicInfo) int { return compareTopicIDs(a.id, b.id) })
	renumber := make([]int32, len(found))
	for i, t := range g.topics {
		renumber[g.index[t.id]] = int32(i)
	}
	for id, t := range g.index {
		if t < 0 {
			delete(g.index, id)
		} else {
			g.index[id] = renumber[t]
		}
	}

	// Subscribers per topic, in member order; a member naming a topic
	// twice counts once.
	nt := len(g.topics)
	count := make([]int32, nt)
	seen := make([]int32, nt) // member number + 1 that last named the topic
	var total int32
	k := 0
	for i, m := range g.members {
		for range m.Topics {
			if t := flat[k]; t >= 0 {
				t = renumber[t]
				flat[k] = t
				if seen[t] != int32(i)+1 {
					seen[t] = int32(i) + 1
					count[t]++
					total++
				} else {
					flat[k] = -1
				}
			}
			k++
		}
	}
	g.subscribers = carve(count, total)
	perMember := make([]int32, len(g.members))
	k = 0
	for i, m := range g.members {
		for range m.Topics {
			if t := flat[k]; t >= 0 {
				g.subscribers[t] = append(g.subscribers[t], int32(i))
				perMember[i]++
			}
			k++
		}
	}
	// And the other way round: walking the topics in order makes each
	// member's list ascending.
	g.subs = carve(perMember, total)
	for t, ms := range g.subscribers {
		for _, m := range ms {
			g.subs[m] = append(g.subs[m], int32(t))
		}
	}
	return g
}

// carve cuts one array of total elements into empty lists with the
// given capacities.
func carve(caps []int32, total int32) [][]int32 {
	buf := make([]int32, total)
	out := make([][]int32, len(caps))
	var off int32
	for i, c := range caps {
		out[i] = buf[off : off : off+c]
		off += c
	}
	return out
}

// homogeneous reports whether every member subscribes to the same
// topics: whether every topic any member subscribes to has them all.
func (g *group) homogeneous() bool {
	for _, ms := range g.subscribers {
		if len(ms) != len(g.members) {
			return false
		}
	}
	return true
}

// unowned marks a partition no member has (yet) in owners.
const unowned = -1

// newOwners is, for every topic, an owner per partition, all unowned.
func (g *group) newOwners() [][]int32 {
	var total int
	for _, t := range g.topics {
		total += int(t.partitions)
	}
	buf := make([]int32, total)
	for i := range buf {
		buf[i] = unowned
	}
	out := make([][]int32, len(g.topics))
	off := 0
	for i, t := range g.topics {
		n := int(t.partitions)
		out[i] = buf[off : off+n : off+n]
		off += n
	}
	return out
}

// assignment turns owners (topic number -> partition -> member number,
// or a negative number for none) into the result: an entry for every
// member, partitions ascending, no empty lists.
func (g *group) assignment(owners [][]int32) Assignment {
	n := len(g.members)
	count := make([]int32, n)   // partitions of the current topic per member
	ntopics := make([]int32, n) // topics with partitions per member
	last := make([]int32, n)    // the last topic counted in ntopics, plus one
	var total int
	for t, own := range owners {
		for _, m := range own {
			if m < 0 {
				continue
			}
			total++
			if last[m] != int32(t)+1 {
				last[m] = int32(t) + 1
				ntopics[m]++
			}
		}
	}

	out := make(Assignment, n)
	maps := make([]map[TopicID][]int32, n)
	for i, m := range g.members {
		maps[i] = make(map[TopicID][]int32, ntopics[i])
		out[m.ID] = maps[i]
	}

	// Every list is a piece of one array, capped at its length so that
	// appending to one does not write into the next.
	buf := make([]int32, total)
	lists := make([][]int32, n)
	var touched []int32
	off := int32(0)
	for t, own := range owners {
		touched = touched[:0]
		for _, m := range own {
			if m < 0 {
				continue
			}
			if count[m] == 0 {
				touched = append(touched, m)
			}
			count[m]++
		}
		for _, m := range touched {
			lists[m] = buf[off : off : off+count[m]]
			off += count[m]
		}
		for p, m := range own {
			if m >= 0 {
				lists[m] = append(lists[m], int32(p))
			}
		}
		for _, m := range touched {
			maps[m][g.topics[t].id] = lists[m]
			lists[m] = nil
			count[m] = 0
		}
	}
	return out
}
