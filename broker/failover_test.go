package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/raft"
)

func TestDeadLeaderRules(t *testing.T) {
	const self = 2
	liveSet := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	t.Run("known leader", func(t *testing.T) {
		live := liveSet(1, 2)
		for _, c := range []struct {
			leader string
			gone   bool
		}{
			{"1", false}, // live
			{"3", true},  // session expired
			{"2", false}, // this broker
			{"x", false}, // not a node id: leave it to Raft
		} {
			if got := brokerGone(c.leader, self, live); got != c.gone {
				t.Errorf("brokerGone(%q) = %v, want %v", c.leader, got, c.gone)
			}
		}
	})
	t.Run("no known leader", func(t *testing.T) {
		live := liveSet(1, 2)
		for _, c := range []struct {
			last      int32
			restarted bool
			gone      bool
		}{
			{1, true, false},  // live: its heartbeats will come, or Raft's timers act
			{2, true, true},   // this broker, which lost the leadership in a restart
			{2, false, false}, // this broker, whose new group's election is under way
			{3, false, true},  // not live
			{-1, false, true}, // none recorded
		} {
			cp := controller.Partition{Replicas: []int32{1, 2, 3}, Leader: c.last}
			if got := lastLeaderGone(cp, self, live, c.restarted); got != c.gone {
				t.Errorf("lastLeaderGone(leader %d, restarted %v) = %v, want %v", c.last, c.restarted, got, c.gone)
			}
		}
	})
	t.Run("standing order", func(t *testing.T) {
		for _, c := range []struct {
			replicas, isr, live, want []int32
		}{
			// The dead leader 3 is out; in-sync live replicas in replica order.
			{[]int32{3, 1, 2}, []int32{3, 1, 2}, []int32{1, 2}, []int32{1, 2}},
			// A live replica out of the ISR does not stand.
			{[]int32{3, 1, 2}, []int32{3, 2}, []int32{1, 2}, []int32{2}},
			// No ISR recorded yet: every live replica is in sync.
			{[]int32{3, 2, 1}, nil, []int32{1, 2}, []int32{2, 1}},
			// Nobody in sync is live: nobody stands (Raft's timers may).
			{[]int32{3, 1, 2}, []int32{3}, []int32{1, 2}, []int32{}},
		} {
			cp := controller.Partition{Replicas: c.replicas, ISR: c.isr}
			if got := standingOrder(cp, liveSet(c.live...)); !slices.Equal(got, c.want) {
				t.Errorf("standingOrder(replicas %v, isr %v, live %v) = %v, want %v", c.replicas, c.isr, c.live, got, c.want)
			}
		}
	})
	t.Run("refused process", func(t *testing.T) {
		// Broker 3's session is still live, but nothing listens at its
		// address any more: its process died a moment ago.
		addrOf := func(id int32) (string, bool) { return fmt.Sprintf("127.0.0.1:%d", 9000+id), id >= 1 && id <= 3 }
		asked := map[string]int{}
		refused := func(addr string) bool { asked[addr]++; return addr == "127.0.0.1:9003" }
		up := upBrokers(liveSet(1, 2, 3), self, addrOf, refused)
		cp := controller.Partition{Replicas: []int32{3, 1, 2}, ISR: []int32{3, 1, 2}, Leader: 3}
		if got, want := standingOrder(cp, up), []int32{1, 2}; !slices.Equal(got, want) {
			t.Errorf("standing order with the dead preferred leader 3 still in session: %v, want %v (it first made every survivor wait)", got, want)
		}
		if !lastLeaderGone(cp, self, up, false) {
			t.Error("a last leader whose process refuses connections is not gone")
		}
		for _, id := range []int32{1, 2, 3} {
			up(id)
		}
		if asked["127.0.0.1:9003"] != 1 || asked["127.0.0.1:9002"] != 0 {
			t.Errorf("transport asked %v: want each other broker once per sweep, never this one", asked)
		}
		if up(4) {
			t.Error("a broker that is not live is up")
		}
	})
}

func TestStandingWait(t *testing.T) {
	for _, c := range []struct {
		name                                string
		rank                                int
		leaderKnown, lastRefuses, contested bool
		want                                time.Duration
	}{
		{"first, leader known", 0, true, false, false, 0},
		{"second, leader known", 1, true, false, false, campaignStagger},
		{"no leader known: an election may be under way", 0, false, false, false, electionGrace},
		{"no leader known, the last one's process refuses connections", 0, false, true, false, 0},
		{"the same, second in line", 1, false, true, false, campaignStagger},
		{"the term moved: an election is under way", 0, false, true, true, electionGrace},
		{"the term moved with the leader known", 0, true, false, true, electionGrace},
	} {
		if got := standingWait(c.rank, c.leaderKnown, c.lastRefuses, c.contested); got != c.want {
			t.Errorf("%s: standingWait = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestControllerStandingOrder(t *testing.T) {
	servers := []raft.Server{
		{ID: "10", Addr: "127.0.0.1:9010", Voter: true},
		{ID: "2", Addr: "127.0.0.1:9002", Voter: true},
		{ID: "0", Addr: "127.0.0.1:9000", Voter: true},
		{ID: "3", Addr: "127.0.0.1:9003", Voter: false},
		{ID: "1", Addr: "127.0.0.1:9001", Voter: true},
	}
	refused := func(addr string) bool { return addr == "127.0.0.1:9000" || addr == "127.0.0.1:9002" }
	// 0 led and is gone; 2 refuses too; 3 does not vote; 10 sorts after 1.
	if got, want := controllerStandingOrder(servers, "0", refused), []string{"1", "10"}; !slices.Equal(got, want) {
		t.Errorf("controllerStandingOrder = %v, want %v", got, want)
	}
}
