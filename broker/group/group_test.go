package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPartitionForMatchesJava(t *testing.T) {
	cases := map[string]int32{
		"abc":                96354 % 50, // "abc".hashCode() == 96354
		"polygenelubricants": 0,          // hashCode() == Integer.MIN_VALUE; abs clears the sign bit
		"":                   0,
	}
	for id, want := range cases {
		if got := PartitionFor(id, 50); got != want {
			t.Errorf("PartitionFor(%q) = %d, want %d", id, got, want)
		}
	}
	// Outside the BMP Java hashes UTF-16 surrogate pairs: U+1F600 is
	// 0xD83D 0xDE00, so hashCode = 0xD83D*31 + 0xDE00.
	if got, want := PartitionFor("\U0001F600", 1<<30), int32(0xD83D*31+0xDE00); got != want {
		t.Errorf("surrogate pair: %d, want %d", got, want)
	}
}

// TestJoinSyncHeartbeat: one member through the full classic handshake.
func TestJoinSyncHeartbeat(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	join := joinNew(t, c, "g", joinOpts{})
	if join.LeaderID != join.MemberID || len(join.Members) != 1 || join.Generation != 1 || *join.Protocol != "range" {
		t.Fatalf("join: %+v", join)
	}
	sync := wait(t, syncAsync(c, "g", join.MemberID, 1, map[string][]byte{join.MemberID: []byte("all")}), "sync")
	if sync.ErrorCode != 0 || string(sync.MemberAssignment) != "all" {
		t.Fatalf("sync: error %d assignment %q", sync.ErrorCode, sync.MemberAssignment)
	}
	if code := heartbeat(c, "g", join.MemberID, 1); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := heartbeat(c, "g", join.MemberID, 2); code != kerrCode("ILLEGAL_GENERATION") {
		t.Fatalf("heartbeat wrong generation: %d", code)
	}
	if code := heartbeat(c, "g", "nobody", 1); code != kerrCode("UNKNOWN_MEMBER_ID") {
		t.Fatalf("heartbeat unknown member: %d", code)
	}
	if d := describe(c, "g"); d.State != "Stable" || len(d.Members) != 1 || string(d.Members[0].MemberAssignment) != "all" {
		t.Fatalf("describe: %+v", d)
	}
}

// TestSecondMemberTriggersRebalance: the first member learns of the
// rebalance by heartbeat, rejoins, and both get the new generation; the
// follower's sync waits for the leader's.
func TestSecondMemberTriggersRebalance(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	a := joinNew(t, c, "g", joinOpts{})
	wait(t, syncAsync(c, "g", a.MemberID, 1, map[string][]byte{a.MemberID: []byte("a")}), "sync a")

	first := wait(t, joinAsync(c, joinReq("g", joinOpts{})), "b's first join")
	bJoin := joinAsync(c, joinReq("g", joinOpts{memberID: first.MemberID}))
	waitState(t, c, "g", "PreparingRebalance")
	if code := heartbeat(c, "g", a.MemberID, 1); code != kerrCode("REBALANCE_IN_PROGRESS") {
		t.Fatalf("a's heartbeat during rebalance: %d", code)
	}
	aJoin := wait(t, joinAsync(c, joinReq("g", joinOpts{memberID: a.MemberID})), "a's rejoin")
	b := wait(t, bJoin, "b's join")
	if aJoin.Generation != 2 || b.Generation != 2 || aJoin.LeaderID != b.LeaderID {
		t.Fatalf("generations %d/%d leaders %s/%s", aJoin.Generation, b.Generation, aJoin.LeaderID, b.LeaderID)
	}
	leader, follower := aJoin, b
	if b.MemberID == b.LeaderID {
		leader, follower = b, aJoin
	}
	if len(leader.Members) != 2 || len(follower.Members) != 0 {
		t.Fatalf("leader sees %d members, follower %d", len(leader.Members), len(follower.Members))
	}
	followerSync := syncAsync(c, "g", follower.MemberID, 2, nil)
	select {
	case r := <-followerSync:
		t.Fatalf("follower synced before the leader: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	wait(t, syncAsync(c, "g", leader.MemberID, 2, map[string][]byte{leader.MemberID: []byte("L"), follower.MemberID: []byte("F")}), "leader sync")
	if r := wait(t, followerSync, "follower sync"); r.ErrorCode != 0 || string(r.MemberAssignment) != "F" {
		t.Fatalf("follower sync: %d %q", r.ErrorCode, r.MemberAssignment)
	}
}

func TestSessionTimeoutRemovesMember(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	a := joinNew(t, c, "g", joinOpts{session: 200 * time.Millisecond})
	wait(t, syncAsync(c, "g", a.MemberID, 1, map[string][]byte{a.MemberID: nil}), "sync")
	waitState(t, c, "g", "Empty")
	if code := heartbeat(c, "g", a.MemberID, 1); code != kerrCode("UNKNOWN_MEMBER_ID") {
		t.Fatalf("heartbeat after eviction: %d", code)
	}
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	a := joinNew(t, c, "g", joinOpts{instanceID: "i1"})
	wait(t, syncAsync(c, "g", a.MemberID, 1, map[string][]byte{a.MemberID: []byte("mine")}), "sync")

	again := wait(t, joinAsync(c, joinReq("g", joinOpts{instanceID: "i1"})), "static rejoin")
	if again.ErrorCode != 0 || again.Generation != 1 || again.MemberID == a.MemberID || !again.SkipAssignment {
		t.Fatalf("static rejoin: %+v", again)
	}
	if d := describe(c, "g"); d.State != "Stable" {
		t.Fatalf("state after static rejoin: %s", d.State)
	}
	if r := wait(t, syncAsync(c, "g", again.MemberID, 1, nil), "sync"); string(r.MemberAssignment) != "mine" {
		t.Fatalf("assignment after static rejoin: %q", r.MemberAssignment)
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = "g", a.MemberID, 1
	id := "i1"
	req.InstanceID = &id
	if code := c.Heartbeat(req).ErrorCode; code != kerrCode("FENCED_INSTANCE_ID") {
		t.Fatalf("old member id of the static member: %d", code)
	}
}

func TestInconsistentProtocol(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	joinNew(t, c, "g", joinOpts{})
	other := []kmsg.JoinGroupRequestProtocol{{Name: "sticky-only"}}
	if r := wait(t, joinAsync(c, joinReq("g", joinOpts{protocols: other})), "join"); r.ErrorCode != kerrCode("INCONSISTENT_GROUP_PROTOCOL") {
		t.Fatalf("error %d", r.ErrorCode)
	}
}

func TestSessionTimeoutBounds(t *testing.T) {
	s := testSettings()
	s.MinSessionTimeout = time.Second
	c := newTestCoordinator(t, newMemStore(4), s)
	if r := wait(t, joinAsync(c, joinReq("g", joinOpts{session: 500 * time.Millisecond})), "join"); r.ErrorCode != kerrCode("INVALID_SESSION_TIMEOUT") {
		t.Fatalf("error %d", r.ErrorCode)
	}
}

func TestOffsetsSurviveReload(t *testing.T) {
	store := newMemStore(4)
	c := newTestCoordinator(t, store, testSettings())
	if codes := commit(c, "standalone", "", -1, "t", map[int32]int64{0: 5, 1: 7}); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("standalone commit: %v", codes)
	}
	if codes := commit(c, "standalone", "", -1, "missing", map[int32]int64{0: 1}); codes[0] != kerrCode("UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("commit to a missing topic: %v", codes)
	}
	a := joinNew(t, c, "members", joinOpts{instanceID: "s1"})
	wait(t, syncAsync(c, "members", a.MemberID, 1, map[string][]byte{a.MemberID: []byte("x")}), "sync")
	if codes := commit(c, "members", a.MemberID, 1, "t", map[int32]int64{2: 9}); codes[2] != 0 {
		t.Fatalf("member commit: %v", codes)
	}
	if codes := commit(c, "members", "", -1, "t", map[int32]int64{2: 1}); codes[2] != kerrCode("UNKNOWN_MEMBER_ID") {
		t.Fatalf("standalone commit to a live group: %v", codes)
	}
	c.Close()

	c2 := newTestCoordinator(t, store, testSettings())
	if got := fetchOffsets(c2, "standalone")["t"]; got[0] != 5 || got[1] != 7 {
		t.Fatalf("standalone offsets after reload: %v", got)
	}
	if got := fetchOffsets(c2, "members")["t"]; got[2] != 9 {
		t.Fatalf("member offsets after reload: %v", got)
	}
	d := describe(c2, "members")
	if d.State != "Stable" || len(d.Members) != 1 || string(d.Members[0].MemberAssignment) != "x" {
		t.Fatalf("group after reload: %+v", d)
	}
	// The restored static member rejoins without a rebalance.
	again := wait(t, joinAsync(c2, joinReq("members", joinOpts{instanceID: "s1", protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerProtocols("t")[0].Metadata}}})), "rejoin")
	if again.ErrorCode != 0 || again.Generation != 1 {
		t.Fatalf("static rejoin after reload: %+v", again)
	}
}

func TestDeleteGroupsAndOffsets(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	a := joinNew(t, c, "g", joinOpts{protocols: consumerProtocols("t")})
	wait(t, syncAsync(c, "g", a.MemberID, 1, map[string][]byte{a.MemberID: nil}), "sync")
	commit(c, "g", a.MemberID, 1, "t", map[int32]int64{0: 1})
	commit(c, "g", a.MemberID, 1, "u", map[int32]int64{0: 2})

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{"g", "nope"}
	resp := c.DeleteGroups(del)
	if resp.Groups[0].ErrorCode != kerrCode("NON_EMPTY_GROUP") || resp.Groups[1].ErrorCode != kerrCode("GROUP_ID_NOT_FOUND") {
		t.Fatalf("delete groups: %+v", resp.Groups)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}, {Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	odr := c.OffsetDelete(od)
	if odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != kerrCode("GROUP_SUBSCRIBED_TO_TOPIC") || odr.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", odr)
	}
	if got := fetchOffsets(c, "g"); got["t"][0] != 1 || len(got["u"]) != 0 {
		t.Fatalf("offsets after delete: %v", got)
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 5
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a.MemberID}, {MemberID: "ghost"}}
	lr := c.LeaveGroup(leave)
	if lr.ErrorCode != 0 || lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != kerrCode("UNKNOWN_MEMBER_ID") {
		t.Fatalf("leave: %+v", lr)
	}
	del.Groups = []string{"g"}
	if resp := c.DeleteGroups(del); resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty group: %d", resp.Groups[0].ErrorCode)
	}
	if got := fetchOffsets(c, "g"); len(got) != 0 {
		t.Fatalf("offsets of a deleted group: %v", got)
	}
}

func TestOffsetExpiry(t *testing.T) {
	s := testSettings()
	s.OffsetRetention = 100 * time.Millisecond
	c := newTestCoordinator(t, newMemStore(4), s)
	commit(c, "g", "", -1, "t", map[int32]int64{0: 3})
	c.ExpireOffsets()
	if got := fetchOffsets(c, "g"); got["t"][0] != 3 {
		t.Fatalf("offsets expired early: %v", got)
	}
	time.Sleep(150 * time.Millisecond)
	c.ExpireOffsets()
	if got := fetchOffsets(c, "g"); len(got) != 0 {
		t.Fatalf("offsets not expired: %v", got)
	}
	lg := c.ListGroups(kmsg.NewPtrListGroupsRequest())
	if len(lg.Groups) != 0 {
		t.Fatalf("expired group still listed: %+v", lg.Groups)
	}
}

func TestStoreFailureIsRetriable(t *testing.T) {
	store := newMemStore(4)
	c := newTestCoordinator(t, store, testSettings())
	store.mu.Lock()
	store.fail = true
	store.mu.Unlock()
	if codes := commit(c, "g", "", -1, "t", map[int32]int64{0: 1}); codes[0] != kerrCode("COORDINATOR_NOT_AVAILABLE") {
		t.Fatalf("commit with a failing store: %v", codes)
	}
}

// TestCompactionKeepsState: the coordinator's records are compactable by
// key: a replay of the partition compacted as the log cleaner does it
// (each key's latest record) gives the same offsets and members.
func TestCompactionKeepsState(t *testing.T) {
	store := newMemStore(1)
	c := newTestCoordinator(t, store, testSettings())
	for i := int64(0); i < 100; i++ {
		commit(c, "g", "", -1, "t", map[int32]int64{0: i, 1: 2 * i})
	}
	commit(c, "gone", "", -1, "t", map[int32]int64{0: 1})
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"gone"}
	c.DeleteGroups(del)
	a := joinNew(t, c, "m", joinOpts{instanceID: "s"})
	wait(t, syncAsync(c, "m", a.MemberID, 1, map[string][]byte{a.MemberID: []byte("x")}), "sync")

	store.compactByKey(0)
	store.mu.Lock()
	live := len(store.parts[0])
	store.mu.Unlock()
	if live >= 100 {
		t.Fatalf("%d records after compaction", live)
	}
	c.Close()
	c2 := newTestCoordinator(t, store, testSettings())
	if got := fetchOffsets(c2, "g")["t"]; got[0] != 99 || got[1] != 198 {
		t.Fatalf("offsets after compaction and reload: %v", got)
	}
	if got := fetchOffsets(c2, "gone"); len(got) != 0 {
		t.Fatalf("deleted group came back: %v", got)
	}
	if d := describe(c2, "m"); d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("group after compaction and reload: %+v", d)
	}
}

// TestStaticRejoinWithNewMetadata: a cooperative client restarting sends
// other metadata bytes (no owned partitions) for the same protocol; that
// is no reason to rebalance.
func TestStaticRejoinWithNewMetadata(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	a := joinNew(t, c, "g", joinOpts{instanceID: "i1", protocols: consumerProtocols("t")})
	wait(t, syncAsync(c, "g", a.MemberID, 1, map[string][]byte{a.MemberID: []byte("mine")}), "sync")
	again := wait(t, joinAsync(c, joinReq("g", joinOpts{instanceID: "i1", protocols: consumerProtocols("t", "other")})), "rejoin")
	if again.ErrorCode != 0 || again.Generation != 1 {
		t.Fatalf("rejoin with new metadata: %+v", again)
	}
	// Preferring another protocol changes the group's choice: rebalance.
	changed := wait(t, joinAsync(c, joinReq("g", joinOpts{instanceID: "i1", protocols: []kmsg.JoinGroupRequestProtocol{{Name: "sticky"}, {Name: "roundrobin"}}})), "rejoin with another protocol")
	if changed.ErrorCode != 0 || changed.Generation != 2 || *changed.Protocol != "sticky" {
		t.Fatalf("rejoin with another protocol: %+v", changed)
	}
}
