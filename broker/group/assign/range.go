package assign

import "cmp"

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return RangeName }

// Assign splits each topic's partitions into contiguous ranges, one per
// subscriber in member order, the first (partitions mod subscribers)
// subscribers taking one more. The current assignment plays no part.
func (rangeAssignor) Assign(members []Member, topics map[TopicID]Topic) Assignment {
	g := newGroup(members, topics, staticFirst)
	if len(g.members) == 0 {
		return Assignment{}
	}
	owners := g.newOwners()
	for t, subs := range g.subscribers {
		own := owners[t]
		n := int32(len(subs))
		quota, extra := int32(len(own))/n, int32(len(own))%n
		var start int32
		for i, m := range subs {
			size := quota
			if int32(i) < extra {
				size++
			}
			for p := start; p < start+size; p++ {
				own[p] = m
			}
			start += size
		}
	}
	return g.assignment(owners)
}

// staticFirst orders static members first, by instance ID, then dynamic
// ones (by member ID, newGroup's tie-break).
func staticFirst(a, b *Member) int {
	switch {
	case a.InstanceID != "" && b.InstanceID != "":
		return cmp.Compare(a.InstanceID, b.InstanceID)
	case a.InstanceID != "":
		return -1
	case b.InstanceID != "":
		return 1
	}
	return 0
}
