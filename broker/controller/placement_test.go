package controller

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func brokersWithRacks(n, racks int) []PlacementBroker {
	out := make([]PlacementBroker, n)
	for i := range out {
		out[i] = PlacementBroker{ID: int32(i + 1)}
		if racks > 0 {
			out[i].Rack = fmt.Sprintf("rack-%c", 'a'+i%racks)
		}
	}
	return out
}

func checkDistinct(t *testing.T, reps []int32) {
	t.Helper()
	seen := map[int32]bool{}
	for _, id := range reps {
		if seen[id] {
			t.Fatalf("replicas %v: broker %d twice", reps, id)
		}
		seen[id] = true
	}
}

func spread(counts map[int32]int, brokers []PlacementBroker) int {
	lo, hi := int(^uint(0)>>1), 0
	for _, b := range brokers {
		c := counts[b.ID]
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi - lo
}

// TestPlacementBalanced: with no racks, or racks of equal size, every
// broker's leader count and replica count are within one of the others',
// for every partition count, replication factor and seed tried.
func TestPlacementBalanced(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 4, 5, 6, 7, 9, 12} {
		for _, racks := range []int{0, 1, 2, 3, 4} {
			if racks > 0 && nb%racks != 0 {
				continue // unequal racks: balance is traded for rack spread
			}
			brokers := brokersWithRacks(nb, racks)
			for rf := 1; rf <= min(nb, 4); rf++ {
				for _, parts := range []int{1, 2, 3, 5, 7, 8, 13, 24, 50} {
					for _, seed := range []uint32{0, 1, 5, 77, 1234567} {
						name := fmt.Sprintf("brokers=%d racks=%d rf=%d parts=%d seed=%d", nb, racks, rf, parts, seed)
						a, err := PlaceReplicas(brokers, parts, rf, seed, nil)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if len(a) != parts {
							t.Fatalf("%s: %d partitions placed", name, len(a))
						}
						leaders, replicas := map[int32]int{}, map[int32]int{}
						for _, reps := range a {
							if len(reps) != rf {
								t.Fatalf("%s: replicas %v", name, reps)
							}
							checkDistinct(t, reps)
							leaders[reps[0]]++
							for _, id := range reps {
								replicas[id]++
							}
						}
						if d := spread(leaders, brokers); d > 1 {
							t.Errorf("%s: leader counts %v differ by %d", name, leaders, d)
						}
						if d := spread(replicas, brokers); d > 1 {
							t.Errorf("%s: replica counts %v differ by %d", name, replicas, d)
						}
					}
				}
			}
		}
	}
}

// TestPlacementRackDistinct: when there are at least RF racks, every
// partition's replicas are on distinct racks, whatever the rack sizes.
func TestPlacementRackDistinct(t *testing.T) {
	layouts := [][]PlacementBroker{
		brokersWithRacks(6, 3),
		brokersWithRacks(9, 3),
		brokersWithRacks(8, 4),
		// uneven: a has 4 brokers, b 2, c 1
		{{1, "a"}, {2, "a"}, {3, "a"}, {4, "a"}, {5, "b"}, {6, "b"}, {7, "c"}},
		{{10, "z"}, {3, "y"}, {7, "x"}, {1, "z"}, {2, "z"}},
	}
	for li, brokers := range layouts {
		rack := map[int32]string{}
		racks := map[string]bool{}
		for _, b := range brokers {
			rack[b.ID] = b.Rack
			racks[b.Rack] = true
		}
		for rf := 1; rf <= len(racks); rf++ {
			for _, parts := range []int{1, 4, 9, 31} {
				for _, seed := range []uint32{0, 3, 999} {
					a, err := PlaceReplicas(brokers, parts, rf, seed, nil)
					if err != nil {
						t.Fatal(err)
					}
					for p, reps := range a {
						checkDistinct(t, reps)
						used := map[string]bool{}
						for _, id := range reps {
							if used[rack[id]] {
								t.Fatalf("layout %d rf=%d parts=%d seed=%d: partition %d replicas %v share rack %s", li, rf, parts, seed, p, reps, rack[id])
							}
							used[rack[id]] = true
						}
					}
				}
			}
		}
		// RF above the rack count: brokers still distinct, every rack used.
		if len(brokers) > len(racks) {
			rf := len(racks) + 1
			a, err := PlaceReplicas(brokers, 10, rf, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, reps := range a {
				checkDistinct(t, reps)
				used := map[string]bool{}
				for _, id := range reps {
					used[rack[id]] = true
				}
				if len(used) != len(racks) {
					t.Fatalf("layout %d rf=%d: replicas %v use %d of %d racks", li, rf, reps, len(used), len(racks))
				}
			}
		}
	}
}

func TestPlacementNoRacksRoundRobin(t *testing.T) {
	brokers := brokersWithRacks(3, 0)
	a, err := PlaceReplicas(brokers, 3, 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int32{{1}, {2}, {3}}; !reflect.DeepEqual(a, want) {
		t.Fatalf("got %v, want %v", a, want)
	}
	// The seed rotates the starting broker.
	a, _ = PlaceReplicas(brokers, 3, 1, 1, nil)
	if want := [][]int32{{2}, {3}, {1}}; !reflect.DeepEqual(a, want) {
		t.Fatalf("got %v, want %v", a, want)
	}
}

func TestPlacementDeterministic(t *testing.T) {
	brokers := brokersWithRacks(7, 3)
	shuffled := []PlacementBroker{brokers[4], brokers[0], brokers[6], brokers[2], brokers[1], brokers[5], brokers[3]}
	a, _ := PlaceReplicas(brokers, 20, 3, 42, nil)
	b, _ := PlaceReplicas(shuffled, 20, 3, 42, nil)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("broker order changed the placement:\n%v\n%v", a, b)
	}
}

// TestPlacementContinues: partitions added later keep the topic balanced.
func TestPlacementContinues(t *testing.T) {
	brokers := brokersWithRacks(5, 0)
	first, _ := PlaceReplicas(brokers, 3, 2, 9, nil)
	more, _ := PlaceReplicas(brokers, 4, 2, 123, first)
	leaders, replicas := map[int32]int{}, map[int32]int{}
	for _, reps := range append(first, more...) {
		checkDistinct(t, reps)
		leaders[reps[0]]++
		for _, id := range reps {
			replicas[id]++
		}
	}
	if spread(leaders, brokers) > 1 || spread(replicas, brokers) > 1 {
		t.Fatalf("leaders %v replicas %v", leaders, replicas)
	}
}

func TestPlacementErrors(t *testing.T) {
	brokers := brokersWithRacks(3, 0)
	if _, err := PlaceReplicas(brokers, 1, 4, 0, nil); err == nil {
		t.Fatal("rf > brokers accepted")
	}
	if _, err := PlaceReplicas(brokers, 1, 0, 0, nil); err == nil {
		t.Fatal("rf 0 accepted")
	}
	if _, err := PlaceReplicas([]PlacementBroker{{1, ""}, {1, "a"}}, 1, 1, 0, nil); err == nil {
		t.Fatal("duplicate ids accepted")
	}
}

func TestPlacementLarge(t *testing.T) {
	for _, layout := range [][]PlacementBroker{brokersWithRacks(50, 3), brokersWithRacks(64, 0), append(brokersWithRacks(10, 2), PlacementBroker{ID: 100, Rack: "lonely"})} {
		start := time.Now()
		a, err := PlaceReplicas(layout, 10000, 3, 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, reps := range a {
			checkDistinct(t, reps)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("placing 10000 partitions on %d brokers took %v", len(layout), d)
		}
	}
}
