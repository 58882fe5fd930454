package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer-group membership with kgo members: eviction after the session
// timeout, and static members (group.instance.id) rejoining without a
// rebalance.

// TestGroupSessionTimeoutEviction: a raw member that stops heartbeating
// (without LeaveGroup) is removed after its session timeout and the group
// rebalances: the remaining kgo member gets every partition. While it
// heartbeats, it stays, even past its session timeout.
func TestGroupSessionTimeoutEviction(t *testing.T) {
	b := grpBroker(t)
	const (
		topic      = "evict"
		group      = "evict-g"
		partitions = 6
	)
	CreateTopic(t, b, topic, partitions, nil)
	adm := b.Admin(t)
	waitCoordinator(t, b, group)

	k := startMember(t, b, "kgo", group, topic, memberCfg{balancer: kgo.RangeBalancer()})
	grpWait(t, 20*time.Second, "the kgo member owns every partition", func() (bool, string) {
		return len(k.ownedList()) == partitions, fmt.Sprintf("owns %v", k.ownedList())
	})
	kid, _ := k.cl.GroupMetadata()

	raw := newRawMember(t, b, group, topic)
	raw.sessionMs = 2000
	raw.rebalanceMs = 5000
	raw.join() // completes once kgo rejoins
	if raw.leader != kid || raw.leader == raw.id {
		t.Fatalf("after the raw member joined: leader %q, want the kgo member %q", raw.leader, kid)
	}
	got := decodeAssignment(t, raw.sync(nil))
	if len(got[topic]) != partitions/2 {
		t.Fatalf("raw member's range assignment %v, want %d partitions of %s", got, partitions/2, topic)
	}
	grpWait(t, 20*time.Second, "the kgo member owns the other half", func() (bool, string) {
		own := k.ownedList()
		if len(own) != partitions/2 {
			return false, fmt.Sprintf("kgo owns %v, raw %v", own, got[topic])
		}
		for _, p := range own {
			if slices.Contains(got[topic], p) {
				return false, fmt.Sprintf("kgo owns %v, overlapping raw %v", own, got[topic])
			}
		}
		return true, ""
	})

	// Heartbeating keeps the raw member for longer than its session timeout.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		if ec := raw.heartbeat(); ec != errNone {
			t.Fatalf("heartbeat of the raw member: error %d", ec)
		}
		time.Sleep(400 * time.Millisecond)
	}
	if ec := raw.heartbeat(); ec != errNone {
		t.Fatalf("heartbeat of the raw member: error %d", ec)
	}
	lastHB := time.Now()
	if d := grpDescribe(t, adm, group); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("while both heartbeat: state %q with %d members, want Stable with 2", d.State, len(d.Members))
	}

	// The raw member goes silent (its connection stays open).
	var evictedAfter time.Duration
	grpWait(t, 15*time.Second, "the silent member is evicted", func() (bool, string) {
		d := grpDescribe(t, adm, group)
		if len(d.Members) == 1 && d.Members[0].MemberID == kid && d.State == "Stable" {
			if evictedAfter == 0 {
				evictedAfter = time.Since(lastHB)
			}
			if len(k.ownedList()) == partitions {
				return true, ""
			}
		}
		return false, fmt.Sprintf("state %q, members %d, kgo owns %v, %v since the last heartbeat", d.State, len(d.Members), k.ownedList(), time.Since(lastHB))
	})
	t.Logf("silent member evicted %v after its last heartbeat", evictedAfter)
	if evictedAfter < 1700*time.Millisecond {
		t.Errorf("silent member evicted %v after its last heartbeat, before its 2 s session timeout", evictedAfter)
	}
	if ec := raw.heartbeat(); ec != errUnknownMemberID {
		t.Errorf("heartbeat of the evicted member: error %d, want UNKNOWN_MEMBER_ID (25)", ec)
	}
	if _, lost := k.eventCount(); lost > 0 {
		t.Errorf("the kgo member lost its partitions %d times", lost)
	}
}

// TestGroupStaticMemberRejoin: a static member (group.instance.id) that
// closes without LeaveGroup and rejoins within its session timeout gets its
// old assignment at the same generation, and the group does not rebalance.
//
// Run with kgo's cooperative-sticky balancer (whose subscription metadata
// carries the owned partitions and generation, so a restarted member's
// metadata differs from what it sent before) and with range (identical
// metadata).
func TestGroupStaticMemberRejoin(t *testing.T) {
	b := grpBroker(t)
	t.Run("cooperative-sticky", func(t *testing.T) {
		testStaticRejoin(t, b, "static-coop", func() kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() })
	})
	t.Run("range", func(t *testing.T) {
		testStaticRejoin(t, b, "static-range", func() kgo.GroupBalancer { return kgo.RangeBalancer() })
	})
}

func testStaticRejoin(t *testing.T, b *Broker, topic string, bal func() kgo.GroupBalancer) {
	group := topic + "-g"
	const partitions = 4
	CreateTopic(t, b, topic, partitions, nil)
	adm := b.Admin(t)

	dyn := startMember(t, b, "dynamic", group, topic, memberCfg{balancer: bal()})
	grpWait(t, 20*time.Second, "the dynamic member owns every partition", func() (bool, string) {
		return len(dyn.ownedList()) == partitions, fmt.Sprintf("owns %v", dyn.ownedList())
	})
	cfgStatic := memberCfg{instanceID: "static-a", session: 10 * time.Second, balancer: bal()}
	st := startMember(t, b, "static", group, topic, cfgStatic)
	grpWait(t, 30*time.Second, "the members share the partitions", func() (bool, string) {
		return balanced([]*grpMember{dyn, st}, partitions)
	})
	// Settled: no further generation for a while.
	var oldID string
	var gen int32
	grpWait(t, 10*time.Second, "the group settles", func() (bool, string) {
		id1, g1 := st.cl.GroupMetadata()
		_, g2 := dyn.cl.GroupMetadata()
		d := grpDescribe(t, adm, group)
		time.Sleep(time.Second)
		id1b, g1b := st.cl.GroupMetadata()
		ok := g1 == g2 && g1 == g1b && id1 == id1b && d.State == "Stable" && len(d.Members) == 2
		oldID, gen = id1, g1
		return ok, fmt.Sprintf("generations %d/%d/%d, state %q, %d members", g1, g2, g1b, d.State, len(d.Members))
	})
	oldOwned := st.ownedList()
	dynOwned := dyn.ownedList()
	dynEvents, _ := dyn.eventCount()
	before := describedAssignment(grpDescribe(t, adm, group), topic)
	if !slices.Equal(before["static-a"], oldOwned) {
		t.Fatalf("DescribeGroups assigns static-a %v, the member owns %v", before["static-a"], oldOwned)
	}

	// Close: kgo sends no LeaveGroup for a static member.
	st.stop()
	d := grpDescribe(t, adm, group)
	ids := []string{}
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
	}
	if len(d.Members) != 2 || !slices.Contains(ids, oldID) {
		t.Fatalf("after the static member closed: %d members %v, want 2 including %s (no LeaveGroup for static members)", len(d.Members), ids, oldID)
	}

	st2 := startMember(t, b, "static-again", group, topic, cfgStatic)
	grpWait(t, 20*time.Second, "the restarted static member gets partitions", func() (bool, string) {
		return len(st2.ownedList()) > 0, fmt.Sprintf("owns %v", st2.ownedList())
	})
	newID, newGen := st2.cl.GroupMetadata()
	if !slices.Equal(st2.ownedList(), oldOwned) {
		t.Errorf("restarted static member owns %v, want its old assignment %v", st2.ownedList(), oldOwned)
	}
	if newGen != gen {
		t.Errorf("restarted static member joined generation %d, want the unchanged %d (no rebalance)", newGen, gen)
	}
	if newID == oldID {
		t.Errorf("restarted static member kept member id %q; the coordinator should hand it a new id and fence the old one", newID)
	}

	// Nothing moves for a while (several heartbeat intervals).
	time.Sleep(2 * time.Second)
	if ev, _ := dyn.eventCount(); ev != dynEvents {
		t.Errorf("the dynamic member saw %d assignment changes during the static rejoin, want none", ev-dynEvents)
	}
	if !slices.Equal(dyn.ownedList(), dynOwned) {
		t.Errorf("the dynamic member owns %v after the static rejoin, want unchanged %v", dyn.ownedList(), dynOwned)
	}
	if _, g := dyn.cl.GroupMetadata(); g != gen {
		t.Errorf("the dynamic member is at generation %d, want the unchanged %d", g, gen)
	}
	if _, g := st2.cl.GroupMetadata(); g != gen {
		t.Errorf("the restarted static member is at generation %d, want the unchanged %d", g, gen)
	}
	d = grpDescribe(t, adm, group)
	ids = ids[:0]
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
	}
	if d.State != "Stable" || len(d.Members) != 2 || slices.Contains(ids, oldID) || !slices.Contains(ids, newID) {
		t.Errorf("after the static rejoin: state %q members %v, want Stable with %s replacing %s", d.State, ids, newID, oldID)
	}
	if after := describedAssignment(d, topic); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("DescribeGroups assignment after the static rejoin %v, want unchanged %v", after, before)
	}

	// The replaced member id is fenced.
	rc := dialRaw(t, b.KafkaAddr)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group = group
	hb.Generation = gen
	hb.MemberID = oldID
	hb.InstanceID = kmsg.StringPtr("static-a")
	if ec := rc.Do(hb).(*kmsg.HeartbeatResponse).ErrorCode; ec != errFencedInstanceID {
		t.Errorf("heartbeat with the replaced member id and instance id static-a: error %d, want FENCED_INSTANCE_ID (82)", ec)
	}
}
