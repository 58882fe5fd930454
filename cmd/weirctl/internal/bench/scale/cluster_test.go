package scale

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func testScaleMetadata() kadm.Metadata {
	part := func(leader int32, replicas, isr []int32) kadm.PartitionDetail {
		return kadm.PartitionDetail{Leader: leader, Replicas: replicas, ISR: isr}
	}
	return kadm.Metadata{
		Brokers: kadm.BrokerDetails{{NodeID: 2}, {NodeID: 0}, {NodeID: 1}},
		Topics: kadm.TopicDetails{
			"t": {Topic: "t", Partitions: kadm.PartitionDetails{
				0: part(0, []int32{0, 1, 2}, []int32{0, 1, 2}),
				1: part(1, []int32{1, 2, 0}, []int32{1, 2}),
				2: part(-1, []int32{2, 0, 1}, []int32{}),
				3: part(2, []int32{2, 0, 1}, []int32{2, 0, 1}),
			}},
			"__consumer_offsets": {Topic: "__consumer_offsets", IsInternal: true, Partitions: kadm.PartitionDetails{
				0: part(-1, []int32{0}, nil),
			}},
			"missing": {Topic: "missing", Err: kerr.UnknownTopicOrPartition},
		},
	}
}

func TestScaleViewConditions(t *testing.T) {
	v := newScaleView(testScaleMetadata(), nil)
	if got := v.brokers; len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("brokers %v, want sorted 0 1 2", got)
	}
	// Internal topics are left out unless named; an unknown topic has
	// no partitions.
	if v.partitions() != 4 {
		t.Fatalf("partitions %d, want 4", v.partitions())
	}
	if n := v.pending(0, scalePartition.settled); n != 2 {
		t.Errorf("settled pending %d, want 2 (short ISR, no leader)", n)
	}
	// Partitions the metadata does not show yet count as pending.
	if n := v.pending(10, scalePartition.settled); n != 8 {
		t.Errorf("settled pending with 10 expected %d, want 8", n)
	}
	moved := func(p scalePartition) bool { return p.leader >= 0 && p.leader != 2 }
	if n := v.pending(0, moved); n != 2 {
		t.Errorf("moved-off-2 pending %d, want 2 (led by 2, leaderless)", n)
	}
	l := v.leaders()
	if l[0] != 1 || l[1] != 1 || l[2] != 1 || l[-1] != 1 {
		t.Errorf("leaders %v", l)
	}
	if got := formatLeaders(l); got != "none:1 0:1 1:1 2:1" {
		t.Errorf("formatLeaders %q", got)
	}
	named := newScaleView(testScaleMetadata(), []string{"__consumer_offsets"})
	if named.partitions() != 5 {
		t.Errorf("a named internal topic is counted: %d partitions, want 5", named.partitions())
	}
}

func TestScalePartitionSettled(t *testing.T) {
	for _, tc := range []struct {
		p    scalePartition
		want bool
	}{
		{scalePartition{leader: 0, replicas: 3, isr: 3}, true},
		{scalePartition{leader: 0, replicas: 3, isr: 2}, false},
		{scalePartition{leader: -1, replicas: 3, isr: 3}, false},
		{scalePartition{leader: 0, replicas: 0, isr: 0}, false},
	} {
		if got := tc.p.settled(); got != tc.want {
			t.Errorf("%+v settled = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestScalePartitionOutOfISR(t *testing.T) {
	for _, tc := range []struct {
		p    scalePartition
		want bool
	}{
		{scalePartition{leader: 0, replicas: 3, isr: 2, isrIDs: []int32{0, 2}}, true},
		{scalePartition{leader: 0, replicas: 3, isr: 3, isrIDs: []int32{0, 1, 2}}, false},
		{scalePartition{leader: -1, replicas: 3, isr: 2, isrIDs: []int32{0, 2}}, false},
	} {
		if got := tc.p.outOfISR(1); got != tc.want {
			t.Errorf("%+v outOfISR(1) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestMostLeaders(t *testing.T) {
	for _, tc := range []struct {
		leaders map[int32]int
		id      int32
		n       int
	}{
		{map[int32]int{0: 3, 1: 5, 2: 4, -1: 9}, 1, 5},
		{map[int32]int{2: 4, 1: 4, 0: 1}, 1, 4}, // a tie goes to the lowest id
		{map[int32]int{-1: 7}, -1, 0},
		{map[int32]int{}, -1, 0},
	} {
		id, n := mostLeaders(tc.leaders)
		if id != tc.id || n != tc.n {
			t.Errorf("mostLeaders(%v) = %d, %d; want %d, %d", tc.leaders, id, n, tc.id, tc.n)
		}
	}
}
