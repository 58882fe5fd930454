package main

import (
	"fmt"
	"slices"
	"testing"
)

func TestPlanDecommission(t *testing.T) {
	brokers := []planBroker{{0, "a"}, {1, "b"}, {2, "a"}, {3, "b"}}
	parts := []planPartition{
		{"t", 0, []int32{0, 1}},
		{"t", 1, []int32{1, 0}},
		{"t", 2, []int32{1, 3}},
		{"u", 0, []int32{0, 2}},
	}
	moves, err := planDecommission(brokers, parts, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(moves)
	// Broker 0's replicas go to rack a's other broker (2) where it does
	// not hold the partition yet, else to the least loaded (3), in place.
	want := "[t/0 [0 1] → [2 1] t/1 [1 0] → [1 2] u/0 [0 2] → [3 2]]"
	if got != want {
		t.Fatalf("moves %s, want %s", got, want)
	}
	if _, err := planDecommission([]planBroker{{0, ""}, {1, ""}}, []planPartition{{"t", 0, []int32{0, 1}}}, 0); err == nil {
		t.Fatal("a decommission with nowhere to go was planned")
	}
}

func TestPlanBalance(t *testing.T) {
	brokers := []planBroker{{0, ""}, {1, ""}, {2, ""}, {3, ""}}
	var parts []planPartition
	for i := range int32(6) {
		parts = append(parts, planPartition{"t", i, []int32{i % 3, (i + 1) % 3}}) // broker 3 was added later
	}
	moves := planBalance(brokers, parts)
	load := map[int32]int{}
	after := map[int32][]int32{}
	for _, p := range parts {
		after[p.Partition] = p.Replicas
	}
	for _, m := range moves {
		after[m.Partition] = m.To
	}
	for p, rs := range after {
		if len(slices.Compact(slices.Sorted(slices.Values(rs)))) != 2 {
			t.Fatalf("partition %d got replicas %v", p, rs)
		}
		for _, r := range rs {
			load[r]++
		}
	}
	if load[3] < 2 || load[3] > 3 || len(moves) == 0 {
		t.Fatalf("load after balancing %v (moves %v)", load, moves)
	}
	if again := planBalance(brokers, func() []planPartition {
		var ps []planPartition
		for p, rs := range after {
			ps = append(ps, planPartition{"t", p, rs})
		}
		return ps
	}()); len(again) != 0 {
		t.Fatalf("a balanced cluster planned moves: %v", again)
	}
}
