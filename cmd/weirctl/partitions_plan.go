package main

import (
	"cmp"
	"fmt"
	"slices"
)

// Planning of replica moves for weirctl cluster partitions: pure
// functions of the partitions' replica sets and the live brokers, so they
// are tested without a cluster.

// planBroker is a live broker a replica may move to.
type planBroker struct {
	ID   int32
	Rack string
}

// planPartition is one partition's current replicas.
type planPartition struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// move is one partition's new replica set.
type move struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

func (m move) String() string {
	return fmt.Sprintf("%s/%d %v → %v", m.Topic, m.Partition, m.From, m.To)
}

// replicaLoad counts the replicas each live broker holds, as moves are
// planned.
type replicaLoad map[int32]int

func newReplicaLoad(brokers []planBroker, parts []planPartition) replicaLoad {
	load := replicaLoad{}
	for _, b := range brokers {
		load[b.ID] = 0
	}
	for _, p := range parts {
		for _, r := range p.Replicas {
			if _, live := load[r]; live {
				load[r]++
			}
		}
	}
	return load
}

// pickTarget chooses where a replica leaving from goes: a live broker not
// already holding the partition, preferring from's rack (so the
// partition's spread over racks is kept), then the least loaded, then the
// lowest id.
func pickTarget(brokers []planBroker, load replicaLoad, replicas []int32, from int32, fromRack string) (int32, bool) {
	var best *planBroker
	better := func(a, b *planBroker) bool {
		if sa, sb := a.Rack == fromRack, b.Rack == fromRack; sa != sb {
			return sa
		}
		return cmp.Or(cmp.Compare(load[a.ID], load[b.ID]), cmp.Compare(a.ID, b.ID)) < 0
	}
	for i := range brokers {
		b := &brokers[i]
		if b.ID == from || slices.Contains(replicas, b.ID) {
			continue
		}
		if best == nil || better(b, best) {
			best = b
		}
	}
	if best == nil {
		return 0, false
	}
	return best.ID, true
}

// planDecommission moves every replica off node, each to the broker
// pickTarget chooses, keeping the replica's position in the list (so a
// partition led by its first replica keeps a preferred leader).
func planDecommission(brokers []planBroker, parts []planPartition, node int32) ([]move, error) {
	live := slices.DeleteFunc(slices.Clone(brokers), func(b planBroker) bool { return b.ID == node })
	load := newReplicaLoad(live, parts)
	rackOf := func(id int32) string {
		for _, b := range brokers {
			if b.ID == id {
				return b.Rack
			}
		}
		return ""
	}
	var moves []move
	for _, p := range parts {
		i := slices.Index(p.Replicas, node)
		if i < 0 {
			continue
		}
		to, ok := pickTarget(live, load, p.Replicas, node, rackOf(node))
		if !ok {
			return nil, fmt.Errorf("%s/%d has %d replicas and no other broker can take its replica on broker %d", p.Topic, p.Partition, len(p.Replicas), node)
		}
		target := slices.Clone(p.Replicas)
		target[i] = to
		load[to]++
		moves = append(moves, move{Topic: p.Topic, Partition: p.Partition, From: p.Replicas, To: target})
	}
	return moves, nil
}

// planBalance moves replicas from the most to the least loaded live
// brokers until no two differ by more than one replica (or no move
// helps): a replica of a partition on the most loaded broker goes to the
// least loaded one that does not hold it. Rack spread is kept where the
// choice allows: a same-rack target is preferred.
func planBalance(brokers []planBroker, parts []planPartition) []move {
	if len(brokers) < 2 {
		return nil
	}
	load := newReplicaLoad(brokers, parts)
	rack := map[int32]string{}
	for _, b := range brokers {
		rack[b.ID] = b.Rack
	}
	current := make([][]int32, len(parts))
	for i, p := range parts {
		current[i] = slices.Clone(p.Replicas)
	}
	moved := map[int]bool{}
	for range len(parts) * 4 { // bounded: each round moves one replica or stops
		ids := make([]int32, 0, len(load))
		for id := range load {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b int32) int { return cmp.Or(cmp.Compare(load[b], load[a]), cmp.Compare(a, b)) })
		most := ids[0]
		if load[most]-load[ids[len(ids)-1]] <= 1 {
			break
		}
		done := false
		for i := range parts {
			j := slices.Index(current[i], most)
			if j < 0 {
				continue
			}
			to, ok := pickTarget(brokers, load, current[i], most, rack[most])
			if !ok || load[to]+1 >= load[most] {
				continue
			}
			current[i][j] = to
			load[most]--
			load[to]++
			moved[i], done = true, true
			break
		}
		if !done {
			break
		}
	}
	var moves []move
	for i, p := range parts {
		if moved[i] && !slices.Equal(current[i], p.Replicas) {
			moves = append(moves, move{Topic: p.Topic, Partition: p.Partition, From: p.Replicas, To: current[i]})
		}
	}
	return moves
}
