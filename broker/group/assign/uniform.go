package assign

import (
	"cmp"
	"slices"
)

type uniformAssignor struct{}

func (uniformAssignor) Name() string { return UniformName }

// Assign computes the uniform assignment: with one subscription shared by
// all members (homogeneous), quotas per member; otherwise a greedy
// placement followed by rounds of per-topic rebalancing.
func (uniformAssignor) Assign(members []Member, topics map[TopicID]Topic) Assignment {
	g := newGroup(members, topics, byNothing)
	if len(g.members) == 0 {
		return Assignment{}
	}
	if g.homogeneous() {
		return g.assignment(g.uniformHomogeneous())
	}
	return g.assignment(g.uniformHeterogeneous())
}

// byNothing leaves the order to newGroup's tie-break, the member ID.
func byNothing(a, b *Member) int { return 0 }

// currentTopics is m's current topics that g numbers, as topic numbers,
// ascending, appended to buf.
func (g *group) currentTopics(m *Member, buf []int32) []int32 {
	buf = buf[:0]
	for id := range m.Current {
		if t, ok := g.index[id]; ok {
			buf = append(buf, t)
		}
	}
	slices.Sort(buf)
	return buf
}

// uniformHomogeneous assigns when every member subscribes to the same
// topics. Each member has a quota, the total partition count divided by
// the member count, plus one for as many members as the division leaves
// over; a member keeps its current partitions up to its quota, and the
// partitions nobody keeps go to the members under theirs.
func (g *group) uniformHomogeneous() [][]int32 {
	owners := g.newOwners()
	n := len(g.members)
	var total int
	for _, t := range g.topics {
		total += int(t.partitions)
	}
	if total == 0 {
		return owners
	}
	minQuota, extra := total/n, total%n

	type partition struct{ topic, partition int32 }
	type unfilled struct {
		member int32
		quota  int
	}
	const revoked = -2
	var (
		revokedList []partition
		under       []unfilled
		topicsBuf   []int32
		sortBuf     []int32
	)
	for i, m := range g.members {
		quota := minQuota
		withExtra := extra > 0
		if withExtra {
			quota++
		}
		topicsBuf = g.currentTopics(m, topicsBuf)
		for _, t := range topicsBuf {
			own := owners[t]
			ps := m.Current[g.topics[t].id]
			if !slices.IsSorted(ps) {
				sortBuf = append(sortBuf[:0], ps...)
				slices.Sort(sortBuf)
				ps = sortBuf
			}
			for _, p := range ps {
				if p < 0 || int(p) >= len(own) || own[p] != unowned {
					continue
				}
				if quota > 0 {
					own[p] = int32(i)
					quota--
				} else {
					own[p] = revoked
					revokedList = append(revokedList, partition{t, p})
				}
			}
		}
		// A member that does not already fill its quota with the extra
		// partition leaves the extra to a later member, which may hold one
		// more than the base quota and would otherwise lose it: that keeps
		// a balanced assignment as it is. Once every member left must take
		// one of the remaining extras, it takes one whatever it holds.
		if quota > 0 && withExtra && n-i > extra {
			quota--
			withExtra = false
		}
		if quota > 0 {
			under = append(under, unfilled{int32(i), quota})
		}
		if withExtra {
			extra--
		}
	}

	// The partitions nobody had come first, then those taken from members
	// over their quota, each handed out in order to the members under
	// theirs. The quotas add up to the partition count, so the two agree.
	pending := make([]partition, 0, len(revokedList))
	for t, own := range owners {
		for p, m := range own {
			if m == unowned {
				pending = append(pending, partition{int32(t), int32(p)})
			}
		}
	}
	pending = append(pending, revokedList...)
	for _, u := range under {
		for range u.quota {
			if len(pending) == 0 {
				return owners
			}
			owners[pending[0].topic][pending[0].partition] = u.member
			pending = pending[1:]
		}
	}
	return owners
}

// maxBalanceRounds bounds the rebalancing rounds of the heterogeneous
// assignment, as Kafka does: each round roughly halves the imbalance
// that overlapping subscriptions leave, and identical ones converge in
// one.
const maxBalanceRounds = 16

// heterogeneous is the state of the heterogeneous uniform assignment.
type heterogeneous struct {
	g           *group
	owners      [][]int32 // topic -> partition -> member
	size        []int32   // member -> partitions assigned
	subscribers [][]int32 // topic -> members, ascending
	order       []int32   // topics in the order they are assigned and balanced
	bal         balancer

	// balanceTopic's scratch: the topic's partitions grouped by owner,
	// and each owner's range in it.
	parts      []int32
	start, end []int32
}

// uniformHeterogeneous assigns when members subscribe to different
// topics. Members keep every current partition of a topic they still
// subscribe to; the partitions nobody has go, topic by topic, to the
// topic's least loaded subscribers; then partitions move, topic by
// topic, from the topic's most loaded subscribers to its least loaded
// ones until no topic's subscribers differ by more than one partition
// (among those that have any of it to give) or the rounds run out.
func (g *group) uniformHeterogeneous() [][]int32 {
	h := &heterogeneous{
		g:           g,
		owners:      g.newOwners(),
		size:        make([]int32, len(g.members)),
		subscribers: g.subscribers,
	}
	h.bal.size = h.size

	// The topics with the most partitions per subscriber go first, as
	// they are the hardest to spread; then those with fewer subscribers.
	h.order = make([]int32, len(g.topics))
	for i := range h.order {
		h.order[i] = int32(i)
	}
	slices.SortFunc(h.order, func(a, b int32) int {
		pa, pb := int64(g.topics[a].partitions), int64(g.topics[b].partitions)
		sa, sb := int64(len(h.subscribers[a])), int64(len(h.subscribers[b]))
		// pa/sa > pb/sb, compared exactly.
		if c := cmp.Compare(pb*sa, pa*sb); c != 0 {
			return c
		}
		if c := cmp.Compare(sa, sb); c != 0 {
			return c
		}
		return compareTopicIDs(g.topics[a].id, g.topics[b].id)
	})

	h.keep()
	h.assignUnowned()
	h.balance()
	return h.owners
}

// keep gives each member its current partitions of the topics it
// subscribes to. A partition two members claim stays with the first in
// member order.
func (h *heterogeneous) keep() {
	g := h.g
	subscribed := make([]int32, len(g.topics)) // member number + 1 of the last stamp
	for i, m := range g.members {
		for _, t := range g.subs[i] {
			subscribed[t] = int32(i) + 1
		}
		for id, ps := range m.Current {
			t, ok := g.index[id]
			if !ok || subscribed[t] != int32(i)+1 {
				continue
			}
			own := h.owners[t]
			for _, p := range ps {
				if p >= 0 && int(p) < len(own) && own[p] == unowned {
					own[p] = int32(i)
					h.size[i]++
				}
			}
		}
	}
}

// assignUnowned hands each partition nobody has to its topic's least
// loaded subscriber.
func (h *heterogeneous) assignUnowned() {
	for _, t := range h.order {
		own := h.owners[t]
		initialized := false
		for p, m := range own {
			if m != unowned {
				continue
			}
			if !initialized {
				h.bal.reset(h.subscribers[t])
				initialized = true
			}
			m := h.bal.nextLeast()
			own[p] = m
			h.size[m]++
		}
	}
}

// balance moves partitions within each topic shared by two or more
// members, round after round, until a whole round moves nothing.
func (h *heterogeneous) balance() {
	var topics []int32
	for _, t := range h.order {
		if len(h.subscribers[t]) >= 2 {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return
	}
	n := len(h.g.members)
	h.start = make([]int32, n)
	h.end = make([]int32, n)
	// The last topic that moved anything: reaching it again without
	// another move means the whole round was still.
	last := -1
	for range maxBalanceRounds {
		for i, t := range topics {
			if i == last {
				return
			}
			if h.balanceTopic(t) > 0 || last == -1 {
				last = i
			}
		}
	}
}

// balanceTopic moves partitions of topic t from its most loaded
// subscribers to its least loaded ones, and returns how many it moved.
func (h *heterogeneous) balanceTopic(t int32) int {
	subs := h.subscribers[t]
	if h.bal.reset(subs) <= 1 {
		return 0
	}
	own := h.owners[t]

	// Group the partitions by owner, owners ascending and each owner's
	// partitions ascending, so that the partition an owner gives up is
	// always its highest one still in its range. Every partition's owner
	// is a subscriber by now.
	for _, m := range subs {
		h.end[m] = 0
	}
	for _, m := range own {
		h.end[m]++
	}
	var off int32
	for _, m := range subs {
		c := h.end[m]
		h.start[m], h.end[m] = off, off
		off += c
	}
	if cap(h.parts) < len(own) {
		h.parts = make([]int32, len(own))
	}
	parts := h.parts[:len(own)]
	for p, m := range own {
		parts[h.end[m]] = int32(p)
		h.end[m]++
	}

	moved := 0
	for !h.bal.balanced() {
		// The most loaded subscriber that still has some of the topic to
		// give; one without any is put out of the running.
		from := int32(-1)
		for {
			from = h.bal.nextMost()
			if from < 0 || h.end[from] > h.start[from] {
				break
			}
			h.bal.exclude()
		}
		if from < 0 {
			break
		}
		h.end[from]--
		p := parts[h.end[from]]
		to := h.bal.nextLeast()
		if h.bal.balanced() {
			break
		}
		own[p] = to
		h.size[from]--
		h.size[to]++
		moved++
	}
	return moved
}

// balancer picks, among one topic's subscribers, the least loaded member
// to give a partition to and the most loaded to take one from, in
// amortized constant time per pick, while the picks change the loads.
//
// The members are sorted by load. The least loaded range, [0, leastEnd),
// holds members that all had the load leastLevel before the current pass
// over it; each pick gives the next of them one partition, and when the
// pass ends the level rises by one and the range grows over the members
// now at that level. The most loaded range, [mostStart, mostEnd), is the
// mirror image from the other end, at level mostLevel, falling. The
// levels are as far apart as any two members the picks would pair, so
// the topic is balanced once they are within one.
type balancer struct {
	size   []int32 // member -> load, shared with the assignment
	sorted []int32 // members by load, then by member number
	counts []int32 // reset's scratch
	keys   []uint64

	leastEnd, leastNext int
	leastLevel          int32

	mostStart, mostEnd, mostNext int
	mostLevel                    int32
}

// reset starts over with members, which must be ascending and not
// empty, and returns the difference between the most and the least
// loaded.
func (b *balancer) reset(members []int32) int32 {
	least, most := b.size[members[0]], b.size[members[0]]
	for _, m := range members[1:] {
		least = min(least, b.size[m])
		most = max(most, b.size[m])
	}
	b.sorted = b.sorted[:0]
	if spread := int(most - least); spread <= len(members) {
		// Loads are close, as they are once balanced: a counting sort by
		// load, which keeps the members' ascending order within a load.
		if cap(b.counts) < spread+2 {
			b.counts = make([]int32, spread+2)
		}
		b.counts = b.counts[:spread+2]
		clear(b.counts)
		for _, m := range members {
			b.counts[b.size[m]-least+1]++
		}
		for i := 1; i < len(b.counts); i++ {
			b.counts[i] += b.counts[i-1]
		}
		b.sorted = append(b.sorted, members...)
		for _, m := range members {
			slot := &b.counts[b.size[m]-least]
			b.sorted[*slot] = m
			*slot++
		}
	} else {
		b.keys = b.keys[:0]
		for _, m := range members {
			b.keys = append(b.keys, uint64(uint32(b.size[m]))<<32|uint64(uint32(m)))
		}
		slices.Sort(b.keys)
		for _, k := range b.keys {
			b.sorted = append(b.sorted, int32(uint32(k)))
		}
	}
	n := len(b.sorted)
	b.leastEnd, b.leastNext = 0, 0
	b.leastLevel = least - 1
	b.mostStart, b.mostEnd, b.mostNext = n, n, n-1
	b.mostLevel = most + 1
	return most - least
}

// nextLeast returns the member to give the next partition to, counting
// that partition as given.
func (b *balancer) nextLeast() int32 {
	if b.leastNext >= b.leastEnd {
		// Every member of the range has had one: raise the level and take
		// in the members already at it.
		b.leastLevel++
		for b.leastEnd < len(b.sorted) && b.size[b.sorted[b.leastEnd]] == b.leastLevel {
			b.leastEnd++
		}
		b.leastNext = 0
	}
	m := b.sorted[b.leastNext]
	b.leastNext++
	return m
}

// nextMost returns the member to take the next partition from, counting
// that partition as taken, or -1 if no member is left.
func (b *balancer) nextMost() int32 {
	if b.mostNext < b.mostStart {
		if b.mostEnd <= b.mostStart && b.mostStart > 0 {
			// Exclusions emptied the range: restart it at the load of the
			// next member down, or it would not grow.
			b.mostLevel = b.size[b.sorted[b.mostStart-1]]
		} else {
			b.mostLevel--
		}
		for b.mostStart > 0 && b.size[b.sorted[b.mostStart-1]] == b.mostLevel {
			b.mostStart--
		}
		b.mostNext = b.mostEnd - 1
	}
	if b.mostNext < 0 {
		return -1
	}
	m := b.sorted[b.mostNext]
	b.mostNext--
	return m
}

// exclude drops the member nextMost last returned from the most loaded
// range, for good: it has nothing to give.
func (b *balancer) exclude() {
	i := b.mostNext + 1
	b.sorted[i], b.sorted[b.mostEnd-1] = b.sorted[b.mostEnd-1], b.sorted[i]
	b.mostEnd--
}

// balanced reports whether the ranges' levels are within one.
func (b *balancer) balanced() bool { return b.mostLevel-b.leastLevel <= 1 }
