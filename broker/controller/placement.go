package controller

import (
	"fmt"
	"sort"
)

// PlacementBroker is a broker as replica placement sees it.
type PlacementBroker struct {
	ID   int32
	Rack string // "" is a rack of its own (no rack)
}

// PlaceReplicas assigns replicas to n new partitions of a topic whose
// existing partitions (possibly none) are existing. It is deterministic in
// its arguments; the order of brokers does not matter.
//
// The shape is Kafka's rack-aware round robin
// (AdminUtils.assignReplicasToBrokersRackAware): brokers are arranged in a
// rack-alternating list (racks sorted, brokers by id within a rack, one
// from each rack in turn), the starting position rotates by one per
// partition from seed, and a partition's replicas take distinct brokers
// and, while racks without a replica remain, distinct racks. Where Kafka
// walks the list blindly, weir breaks ties by load: the leader (the first
// replica) is a broker with the fewest leaders of this topic, each
// follower a broker with the fewest replicas of it, the rotated list
// order deciding among equals. Kafka's walk leaves a topic whose
// partition count is not a multiple of the broker count with some brokers
// holding two more replicas than others; this keeps every broker's leader
// count, and (with no racks or racks of equal size) replica count, within
// one of every other's.
func PlaceReplicas(brokers []PlacementBroker, n, replicationFactor int, seed uint32, existing [][]int32) ([][]int32, error) {
	if n < 0 {
		return nil, fmt.Errorf("placement: %d partitions", n)
	}
	if replicationFactor < 1 {
		return nil, fmt.Errorf("placement: replication factor %d is below 1", replicationFactor)
	}
	if replicationFactor > len(brokers) {
		return nil, fmt.Errorf("placement: replication factor %d is larger than the %d available broker(s)", replicationFactor, len(brokers))
	}
	list := rackAlternated(brokers)
	if list == nil {
		return nil, fmt.Errorf("placement: duplicate broker ids")
	}
	nb := len(list)
	pos := make(map[int32]int, nb)
	racks := map[string]bool{}
	for i, b := range list {
		pos[b.ID] = i
		racks[b.Rack] = true
	}
	numRacks := len(racks)

	load := make([]int, nb) // replicas of this topic per list position
	lead := make([]int, nb) // leaders of this topic per list position
	for _, reps := range existing {
		for j, id := range reps {
			if i, ok := pos[id]; ok {
				load[i]++
				if j == 0 {
					lead[i]++
				}
			}
		}
	}

	start := int(seed % uint32(nb))
	shift0 := int(seed / uint32(nb))
	out := make([][]int32, 0, n)
	chosen := make([]bool, nb)
	for k := 0; k < n; k++ {
		p := len(existing) + k
		rot := (start + p) % nb
		// Leader: fewest leaders, then fewest replicas, then list order
		// from the rotated start.
		best := -1
		for o := 0; o < nb; o++ {
			i := (rot + o) % nb
			if best < 0 || lead[i] < lead[best] || lead[i] == lead[best] && load[i] < load[best] {
				best = i
			}
		}
		reps := make([]int32, 0, replicationFactor)
		for i := range chosen {
			chosen[i] = false
		}
		usedRacks := map[string]bool{}
		take := func(i int) {
			reps = append(reps, list[i].ID)
			chosen[i] = true
			usedRacks[list[i].Rack] = true
			load[i]++
		}
		take(best)
		lead[best]++
		// Followers start after the leader, shifted per round of nb
		// partitions as Kafka's nextReplicaShift does, so that the same
		// brokers do not always follow each other.
		shift := 0
		if nb > 1 {
			shift = (shift0 + p/nb) % (nb - 1)
		}
		for len(reps) < replicationFactor {
			f := -1
			fPenalty := 0
			for o := 0; o < nb; o++ {
				i := (best + 1 + shift + o) % nb
				if chosen[i] {
					continue
				}
				penalty := 0
				if usedRacks[list[i].Rack] && len(usedRacks) < numRacks {
					penalty = 1
				}
				if f < 0 || penalty < fPenalty || penalty == fPenalty && (load[i] < load[f] || load[i] == load[f] && lead[i] > lead[f]) {
					f, fPenalty = i, penalty
				}
			}
			take(f)
		}
		out = append(out, reps)
	}
	repairLoad(out, list, pos, load)
	return out, nil
}

// repairLoad moves followers of the new partitions from a broker to one
// holding at least two fewer replicas, where the partition keeps distinct
// brokers and as many distinct racks, until no such move remains. Leaders
// do not move. Each move lowers the sum of squared loads, so it ends.
func repairLoad(out [][]int32, list []PlacementBroker, pos map[int32]int, load []int) {
	nb := len(list)
	for moved := true; moved; {
		moved = false
		for _, reps := range out {
			for j := 1; j < len(reps); j++ {
				a := pos[reps[j]]
				if load[a]-minOf(load) < 2 {
					continue
				}
				before := distinctRacks(reps, list, pos, -1, 0)
				b := -1
				for i := 0; i < nb; i++ {
					if load[a]-load[i] < 2 || contains(reps, list[i].ID) {
						continue
					}
					if distinctRacks(reps, list, pos, j, i) < before {
						continue
					}
					if b < 0 || load[i] < load[b] {
						b = i
					}
				}
				if b >= 0 {
					reps[j] = list[b].ID
					load[a]--
					load[b]++
					moved = true
				} else if chainMove(out, list, pos, load, reps, j) {
					moved = true
				}
			}
		}
	}
}

// chainMove moves reps[j] (broker a) to a broker c one replica lighter,
// and a follower of c in another partition to a broker b at least two
// replicas lighter than a: a loses one, b gains one, c is unchanged. For
// racks that forbid the direct move from a to b.
func chainMove(out [][]int32, list []PlacementBroker, pos map[int32]int, load []int, reps []int32, j int) bool {
	nb := len(list)
	a := pos[reps[j]]
	before := distinctRacks(reps, list, pos, -1, 0)
	for c := 0; c < nb; c++ {
		if load[c] != load[a]-1 || contains(reps, list[c].ID) || distinctRacks(reps, list, pos, j, c) < before {
			continue
		}
		for _, other := range out {
			if &other[0] == &reps[0] {
				continue
			}
			for k := 1; k < len(other); k++ {
				if pos[other[k]] != c {
					continue
				}
				otherBefore := distinctRacks(other, list, pos, -1, 0)
				for b := 0; b < nb; b++ {
					if load[a]-load[b] < 2 || contains(other, list[b].ID) || distinctRacks(other, list, pos, k, b) < otherBefore {
						continue
					}
					reps[j] = list[c].ID
					other[k] = list[b].ID
					load[a]--
					load[b]++
					return true
				}
			}
		}
	}
	return false
}

// distinctRacks counts the racks of reps, with reps[j] replaced by list[i]
// when j >= 0.
func distinctRacks(reps []int32, list []PlacementBroker, pos map[int32]int, j, i int) int {
	seen := make(map[string]bool, len(reps))
	for k, id := range reps {
		if k == j {
			seen[list[i].Rack] = true
		} else {
			seen[list[pos[id]].Rack] = true
		}
	}
	return len(seen)
}

func minOf(s []int) int {
	m := s[0]
	for _, v := range s[1:] {
		m = min(m, v)
	}
	return m
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// rackAlternated arranges brokers as Kafka's getRackAlternatedBrokerList
// does: racks sorted, brokers sorted by id within their rack, taking one
// from each rack in turn. nil if an id repeats.
func rackAlternated(brokers []PlacementBroker) []PlacementBroker {
	byRack := map[string][]PlacementBroker{}
	seen := map[int32]bool{}
	for _, b := range brokers {
		if seen[b.ID] {
			return nil
		}
		seen[b.ID] = true
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	racks := make([]string, 0, len(byRack))
	for r, bs := range byRack {
		racks = append(racks, r)
		sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	}
	sort.Strings(racks)
	out := make([]PlacementBroker, 0, len(brokers))
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}
