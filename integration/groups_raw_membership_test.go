package integration

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw group-protocol tests of membership: the JoinGroup/SyncGroup/Heartbeat
// handshake, the error codes Kafka answers with, batched LeaveGroup and the
// rebalance timeout.

// TestGroupRawMemberIDRequired: JoinGroup v4+ with an empty member id is
// answered MEMBER_ID_REQUIRED with an assigned id; joining with that id
// makes the member the leader of generation 1 (v9 also names the protocol
// type and protocol); SyncGroup hands it its assignment back; the group is
// Stable with that member.
func TestGroupRawMemberIDRequired(t *testing.T) {
	b := grpBroker(t)
	CreateTopic(t, b, "mir", 2, nil)
	for _, v := range []int16{4, 6, 9} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			group := fmt.Sprintf("mir-v%d", v)
			waitCoordinator(t, b, group)
			m := newRawMember(t, b, group, "mir")
			m.joinV = v
			first := m.joinOnce()
			if first.ErrorCode != errMemberIDRequired {
				t.Fatalf("JoinGroup v%d with empty member id: error %d, want MEMBER_ID_REQUIRED (79)", v, first.ErrorCode)
			}
			if first.MemberID == "" {
				t.Fatalf("MEMBER_ID_REQUIRED response has an empty member id")
			}
			m.id = first.MemberID
			resp := m.joinOnce()
			if resp.ErrorCode != errNone {
				t.Fatalf("JoinGroup v%d with the assigned id %q: error %d", v, m.id, resp.ErrorCode)
			}
			if resp.MemberID != first.MemberID {
				t.Errorf("JoinGroup answered member id %q, want the assigned %q", resp.MemberID, first.MemberID)
			}
			if resp.Generation != 1 {
				t.Errorf("generation %d, want 1 for a new group's first rebalance", resp.Generation)
			}
			if resp.LeaderID != resp.MemberID {
				t.Errorf("leader %q, want the only member %q", resp.LeaderID, resp.MemberID)
			}
			if derefStr(resp.Protocol) != "range" {
				t.Errorf("protocol %q, want range", derefStr(resp.Protocol))
			}
			if v >= 7 && derefStr(resp.ProtocolType) != "consumer" {
				t.Errorf("v%d protocol type %q, want consumer", v, derefStr(resp.ProtocolType))
			}
			if len(resp.Members) != 1 || resp.Members[0].MemberID != m.id || string(resp.Members[0].ProtocolMetadata) != string(consumerMeta("mir")) {
				t.Errorf("leader's member list %+v, want just itself with its metadata", resp.Members)
			}
			m.applyJoin(resp)
			want := consumerAssignment("mir", 0, 1)
			got := m.sync(map[string][]byte{m.id: want})
			if string(got) != string(want) {
				t.Errorf("SyncGroup returned assignment %x, want %x", got, want)
			}
			if ec := m.heartbeat(); ec != errNone {
				t.Errorf("heartbeat after sync: error %d", ec)
			}
			g := describeGroupRaw(t, m.rc, 5, group)
			if g.ErrorCode != errNone || g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != "range" {
				t.Errorf("DescribeGroups: error %d state %q protocol type %q protocol %q, want 0 Stable consumer range", g.ErrorCode, g.State, g.ProtocolType, g.Protocol)
			}
			if len(g.Members) != 1 || g.Members[0].MemberID != m.id || string(g.Members[0].MemberAssignment) != string(want) {
				t.Errorf("DescribeGroups members %+v, want %q with the synced assignment", g.Members, m.id)
			}

			// An id the coordinator never handed out is unknown.
			bogus := newRawMember(t, b, group, "mir")
			bogus.joinV = v
			bogus.id = "never-assigned-id"
			if r := bogus.joinOnce(); r.ErrorCode != errUnknownMemberID {
				t.Errorf("JoinGroup v%d with a member id the coordinator never assigned: error %d, want UNKNOWN_MEMBER_ID (25)", v, r.ErrorCode)
			}
		})
	}
	// Before v4 no MEMBER_ID_REQUIRED round trip: the first join completes.
	t.Run("v3", func(t *testing.T) {
		group := "mir-v3"
		waitCoordinator(t, b, group)
		m := newRawMember(t, b, group, "mir")
		m.joinV, m.syncV, m.hbV = 3, 2, 2
		resp := m.joinOnce()
		if resp.ErrorCode != errNone || resp.MemberID == "" {
			t.Fatalf("JoinGroup v3 with an empty member id: error %d member id %q, want 0 and an assigned id", resp.ErrorCode, resp.MemberID)
		}
		m.applyJoin(resp)
		m.sync(map[string][]byte{m.id: consumerAssignment("mir", 0, 1)})
		if ec := m.heartbeat(); ec != errNone {
			t.Errorf("heartbeat v2: error %d", ec)
		}
	})
}

// TestGroupRawErrors: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// REBALANCE_IN_PROGRESS and INCONSISTENT_GROUP_PROTOCOL where Kafka gives
// them.
func TestGroupRawErrors(t *testing.T) {
	b := grpBroker(t)
	const topic = "rawerr"
	CreateTopic(t, b, topic, 4, nil)
	const group = "rawerr-g"
	waitCoordinator(t, b, group)

	a := newRawMember(t, b, group, topic)
	a.join()
	a.sync(map[string][]byte{a.id: consumerAssignment(topic, 0, 1, 2, 3)})

	t.Run("SyncGroupWrongGeneration", func(t *testing.T) {
		for _, gen := range []int32{a.gen + 1, a.gen - 1} {
			if r := a.syncRaw(gen, nil); r.ErrorCode != errIllegalGeneration {
				t.Errorf("SyncGroup at generation %d (group at %d): error %d, want ILLEGAL_GENERATION (22)", gen, a.gen, r.ErrorCode)
			}
		}
	})
	t.Run("HeartbeatWrongGeneration", func(t *testing.T) {
		if ec := a.heartbeatGen(a.gen + 5); ec != errIllegalGeneration {
			t.Errorf("Heartbeat at generation %d (group at %d): error %d, want ILLEGAL_GENERATION (22)", a.gen+5, a.gen, ec)
		}
	})
	t.Run("HeartbeatUnknownMember", func(t *testing.T) {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 4
		req.Group = group
		req.Generation = a.gen
		req.MemberID = "no-such-member"
		if ec := a.rc.Do(req).(*kmsg.HeartbeatResponse).ErrorCode; ec != errUnknownMemberID {
			t.Errorf("Heartbeat from an unknown member: error %d, want UNKNOWN_MEMBER_ID (25)", ec)
		}
		// And a SyncGroup from an unknown member.
		other := newRawMember(t, b, group, topic)
		other.id = "no-such-member"
		if r := other.syncRaw(a.gen, nil); r.ErrorCode != errUnknownMemberID {
			t.Errorf("SyncGroup from an unknown member: error %d, want UNKNOWN_MEMBER_ID (25)", r.ErrorCode)
		}
	})
	t.Run("InconsistentProtocol", func(t *testing.T) {
		// Same protocol type, no protocol in common.
		c := newRawMember(t, b, group, topic)
		c.protocols[0].Name = "roundrobin"
		r := c.joinOnce()
		if r.ErrorCode == errMemberIDRequired {
			t.Errorf("JoinGroup with no protocol in common with the group: MEMBER_ID_REQUIRED, want INCONSISTENT_GROUP_PROTOCOL (23) before any member id is handed out (Kafka checks protocols first)")
			c.id = r.MemberID
			r = c.joinOnce()
		}
		if r.ErrorCode != errInconsistentGroupProtocol {
			t.Errorf("JoinGroup with protocols [roundrobin] into a range group: error %d, want INCONSISTENT_GROUP_PROTOCOL (23)", r.ErrorCode)
		}
		// A different protocol type.
		d := newRawMember(t, b, group, topic)
		d.protoType = "connect"
		r = d.joinOnce()
		if r.ErrorCode == errMemberIDRequired {
			d.id = r.MemberID
			r = d.joinOnce()
		}
		if r.ErrorCode != errInconsistentGroupProtocol {
			t.Errorf("JoinGroup with protocol type connect into a consumer group: error %d, want INCONSISTENT_GROUP_PROTOCOL (23)", r.ErrorCode)
		}
		// The group is undisturbed.
		if ec := a.heartbeat(); ec != errNone {
			t.Errorf("heartbeat of the existing member after rejected joins: error %d, want 0 (no rebalance)", ec)
		}
		// An empty member list in the join: INCONSISTENT_GROUP_PROTOCOL too.
		e := newRawMember(t, b, group, topic)
		e.protocols = nil
		r = e.joinOnce()
		if r.ErrorCode != errInconsistentGroupProtocol {
			t.Errorf("JoinGroup with no protocols: error %d, want INCONSISTENT_GROUP_PROTOCOL (23)", r.ErrorCode)
		}
	})
	t.Run("SessionTimeoutBounds", func(t *testing.T) {
		// group_min_session_timeout_ms=1000 (grpBroker), max default 1800000.
		for _, ms := range []int32{999, 1800001} {
			c := newRawMember(t, b, "rawerr-bounds", topic)
			c.sessionMs = ms
			if r := c.joinOnce(); r.ErrorCode != errInvalidSessionTimeout {
				t.Errorf("JoinGroup with session timeout %d ms (bounds 1000..1800000): error %d, want INVALID_SESSION_TIMEOUT (26)", ms, r.ErrorCode)
			}
		}
		c := newRawMember(t, b, group, topic)
		c.sessionMs = 500
		if r := c.joinOnce(); r.ErrorCode != errInvalidSessionTimeout {
			t.Errorf("JoinGroup into an existing group with session timeout 500 ms: error %d, want INVALID_SESSION_TIMEOUT (26)", r.ErrorCode)
		}
		if ec := a.heartbeat(); ec != errNone {
			t.Errorf("heartbeat of the existing member after the refused join: error %d", ec)
		}
	})
	t.Run("OffsetCommitValidation", func(t *testing.T) {
		rc := dialRaw(t, b.KafkaAddr)
		one := map[int32]int64{0: 3}
		if e := rawCommit(t, rc, 8, group, "", -1, topic, one, ""); e[0] != errUnknownMemberID {
			t.Errorf("simple commit (generation -1, no member) to a non-empty group: error %d, want UNKNOWN_MEMBER_ID (25): only members may commit", e[0])
		}
		if e := rawCommit(t, rc, 8, group, "no-such-member", a.gen, topic, one, ""); e[0] != errUnknownMemberID {
			t.Errorf("commit by an unknown member: error %d, want UNKNOWN_MEMBER_ID (25)", e[0])
		}
		if e := rawCommit(t, rc, 8, group, a.id, a.gen+1, topic, one, ""); e[0] != errIllegalGeneration {
			t.Errorf("commit by a member at the wrong generation: error %d, want ILLEGAL_GENERATION (22)", e[0])
		}
		requireCommitOK(t, "commit by the member", rawCommit(t, rc, 8, group, a.id, a.gen, topic, one, ""))
		if got := rawFetchOffsets(t, rc, 7, group, topic, 0); got[0] != 3 {
			t.Errorf("after the member's commit: %v, want 0:3", got)
		}
		// A commit with a generation to a group that does not exist is
		// refused (and does not create the group).
		if e := rawCommit(t, rc, 8, "rawerr-nogroup", "ghost", 4, topic, one, ""); e[0] != errIllegalGeneration {
			t.Errorf("OffsetCommit v8 with generation 4 to a group that does not exist: error %d, want ILLEGAL_GENERATION (22)", e[0])
		}
		if e := rawCommit(t, rc, 9, "rawerr-nogroup", "ghost", 4, topic, one, ""); e[0] != errIllegalGeneration && e[0] != errGroupIDNotFound {
			t.Errorf("OffsetCommit v9 with generation 4 to a group that does not exist: error %d, want GROUP_ID_NOT_FOUND (69) or ILLEGAL_GENERATION (22)", e[0])
		}
		if g := describeGroupRaw(t, rc, 5, "rawerr-nogroup"); g.State != "Dead" {
			t.Errorf("the refused commits created group rawerr-nogroup: state %q", g.State)
		}
	})
	t.Run("HeartbeatDuringRebalance", func(t *testing.T) {
		c := newRawMember(t, b, group, topic)
		ch := c.joinAsync()
		// c's join with its id starts a rebalance: a's heartbeat must say so.
		var ec int16
		grpWait(t, 5*time.Second, "heartbeat REBALANCE_IN_PROGRESS", func() (bool, string) {
			ec = a.heartbeat()
			return ec == errRebalanceInProgress, fmt.Sprintf("heartbeat error %d", ec)
		})
		g := describeGroupRaw(t, a.rc, 5, group)
		if g.State != "PreparingRebalance" {
			t.Errorf("DescribeGroups during the rebalance: state %q, want PreparingRebalance", g.State)
		}
		// A commit by a current-generation member is still accepted while
		// the group prepares to rebalance (Kafka accepts it in
		// PreparingRebalance).
		requireCommitOK(t, "OffsetCommit during PreparingRebalance", rawCommit(t, a.rc, 8, group, a.id, a.gen, topic, map[int32]int64{0: 1}, ""))
		old := a.gen
		a.join()
		c.awaitJoin(ch)
		if a.gen != old+1 || c.gen != a.gen {
			t.Fatalf("generations after the rebalance: %d and %d, want %d", a.gen, c.gen, old+1)
		}
		// Between join and sync (CompletingRebalance) a heartbeat of the new
		// generation is a normal heartbeat, but a commit is refused with
		// REBALANCE_IN_PROGRESS.
		if a.leader != a.id {
			t.Fatalf("leader %q, want the first member %q", a.leader, a.id)
		}
		if ec := c.heartbeat(); ec != errNone {
			t.Errorf("heartbeat between JoinGroup and SyncGroup (CompletingRebalance): error %d, want 0 (Kafka treats it as a normal heartbeat)", ec)
		}
		errs := rawCommit(t, c.rc, 8, group, c.id, c.gen, topic, map[int32]int64{3: 1}, "")
		if errs[3] != errRebalanceInProgress {
			t.Errorf("OffsetCommit during CompletingRebalance: error %d, want REBALANCE_IN_PROGRESS (27)", errs[3])
		}
		// A sync at the old generation is refused.
		if r := a.syncRaw(old, nil); r.ErrorCode != errIllegalGeneration {
			t.Errorf("SyncGroup at the previous generation %d: error %d, want ILLEGAL_GENERATION (22)", old, r.ErrorCode)
		}
		a.sync(map[string][]byte{a.id: consumerAssignment(topic, 0, 1), c.id: consumerAssignment(topic, 2, 3)})
		got := decodeAssignment(t, c.sync(nil))
		if !slices.Equal(got[topic], []int32{2, 3}) {
			t.Errorf("follower's assignment %v, want %s [2 3]", got, topic)
		}
		for _, m := range []*rawMember{a, c} {
			if ec := m.heartbeat(); ec != errNone {
				t.Errorf("heartbeat of %q after the rebalance: error %d", m.id, ec)
			}
		}
		g = describeGroupRaw(t, a.rc, 5, group)
		if g.State != "Stable" || len(g.Members) != 2 {
			t.Errorf("after the rebalance: state %q with %d members, want Stable with 2", g.State, len(g.Members))
		}
	})
}

// TestGroupRawLeaveGroupBatch: LeaveGroup v3+ removes several members in
// one request, answering each; an unknown member in the batch gets
// UNKNOWN_MEMBER_ID without failing the others.
func TestGroupRawLeaveGroupBatch(t *testing.T) {
	b := grpBroker(t)
	const topic, group = "leave", "leave-g"
	CreateTopic(t, b, topic, 4, nil)
	waitCoordinator(t, b, group)
	a, c := twoMemberGroup(t, b, group, topic, 4)
	rc := dialRaw(t, b.KafkaAddr)
	if g := describeGroupRaw(t, rc, 5, group); g.State != "Stable" || len(g.Members) != 2 {
		t.Fatalf("before leaving: state %q with %d members, want Stable with 2", g.State, len(g.Members))
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 3
	req.Group = group
	for _, id := range []string{a.id, c.id, "not-a-member"} {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = id
		req.Members = append(req.Members, lm)
	}
	resp := rc.Do(req).(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode != errNone {
		t.Errorf("LeaveGroup v3 batch: top-level error %d, want 0", resp.ErrorCode)
	}
	got := map[string]int16{}
	for _, m := range resp.Members {
		got[m.MemberID] = m.ErrorCode
	}
	want := map[string]int16{a.id: 0, c.id: 0, "not-a-member": errUnknownMemberID}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("LeaveGroup v3 per-member errors %v, want %v", got, want)
	}
	g := describeGroupRaw(t, rc, 5, group)
	if g.State != "Empty" || len(g.Members) != 0 {
		t.Errorf("after both members left: state %q with %d members, want Empty with none", g.State, len(g.Members))
	}
	if ec := a.heartbeat(); ec != errUnknownMemberID {
		t.Errorf("heartbeat of a member that left: error %d, want UNKNOWN_MEMBER_ID (25)", ec)
	}

	// v0-2: one member per request.
	m := newRawMember(t, b, group, topic)
	m.join()
	m.sync(map[string][]byte{m.id: consumerAssignment(topic, 0, 1, 2, 3)})
	old := kmsg.NewPtrLeaveGroupRequest()
	old.Version = 2
	old.Group = group
	old.MemberID = m.id
	if ec := rc.Do(old).(*kmsg.LeaveGroupResponse).ErrorCode; ec != errNone {
		t.Errorf("LeaveGroup v2: error %d", ec)
	}
	if ec := rc.Do(old).(*kmsg.LeaveGroupResponse).ErrorCode; ec != errUnknownMemberID {
		t.Errorf("LeaveGroup v2 of a member that already left: error %d, want UNKNOWN_MEMBER_ID (25)", ec)
	}
	if g := describeGroupRaw(t, rc, 5, group); g.State != "Empty" {
		t.Errorf("after LeaveGroup v2: state %q, want Empty", g.State)
	}
}

// TestGroupRawRebalanceTimeout: a member that does not rejoin within the
// rebalance timeout is dropped from the new generation (though its session
// has not expired); the members that rejoined complete the join without it.
func TestGroupRawRebalanceTimeout(t *testing.T) {
	b := grpBroker(t)
	const topic, group = "rbt", "rbt-g"
	CreateTopic(t, b, topic, 2, nil)
	waitCoordinator(t, b, group)
	tweak := func(m *rawMember) { m.sessionMs, m.rebalanceMs = 20000, 2000 }
	a, c := twoMemberGroup(t, b, group, topic, 2, tweak)
	gen := a.gen

	d := newRawMember(t, b, group, topic)
	tweak(d)
	chD := d.joinAsync()
	start := time.Now()
	grpWait(t, 5*time.Second, "the rebalance starts", func() (bool, string) {
		ec := a.heartbeat()
		return ec == errRebalanceInProgress, fmt.Sprintf("heartbeat error %d", ec)
	})
	chA := a.joinAsync()
	// c stays silent: it neither rejoins nor heartbeats.
	a.awaitJoin(chA)
	d.awaitJoin(chD)
	took := time.Since(start)
	t.Logf("join completed %v after the rebalance started", took)
	if took < 1500*time.Millisecond {
		t.Errorf("join completed %v after the rebalance started, before the 2 s rebalance timeout, although member %q had not rejoined", took, c.id)
	}
	if took > 10*time.Second {
		t.Errorf("join completed only after %v: not bounded by the 2 s rebalance timeout", took)
	}
	if a.gen != gen+1 || d.gen != gen+1 {
		t.Errorf("generations after the rebalance %d and %d, want %d", a.gen, d.gen, gen+1)
	}
	leader := a
	if d.leader == d.id {
		leader = d
	}
	var ids []string
	for _, m := range leader.members {
		ids = append(ids, m.MemberID)
	}
	sort.Strings(ids)
	want := []string{a.id, d.id}
	sort.Strings(want)
	if !slices.Equal(ids, want) {
		t.Errorf("leader's member list %v, want %v (without the member that did not rejoin)", ids, want)
	}
	if ec := c.heartbeat(); ec != errUnknownMemberID {
		t.Errorf("heartbeat of the member dropped by the rebalance timeout: error %d, want UNKNOWN_MEMBER_ID (25)", ec)
	}
}
