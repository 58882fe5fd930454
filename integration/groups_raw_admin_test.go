package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw group-protocol tests of the coordinator and admin APIs: FindCoordinator,
// ListGroups with a state filter, and every group API over its advertised
// version range.

// TestGroupRawFindCoordinator: v4+ answers every key of a batch; v0-3 the
// single key; the coordinator is this broker.
func TestGroupRawFindCoordinator(t *testing.T) {
	b := grpBroker(t)
	waitCoordinator(t, b, "fc-warmup")
	rc := dialRaw(t, b.KafkaAddr)
	host, port := splitHostPort(t, b.KafkaAddr)
	for _, v := range []int16{4, 5, 6} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorType = 0
		keys := []string{"fc-a", "fc-b", "fc-c-" + strings.Repeat("x", 100)}
		req.CoordinatorKeys = keys
		resp := rc.Do(req).(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != len(keys) {
			t.Errorf("FindCoordinator v%d with %d keys: %d coordinators", v, len(keys), len(resp.Coordinators))
			continue
		}
		seen := map[string]bool{}
		for _, c := range resp.Coordinators {
			seen[c.Key] = true
			if c.ErrorCode != errNone || c.NodeID != int32(b.NodeID) || c.Host != host || c.Port != port {
				t.Errorf("FindCoordinator v%d key %q: error %d node %d at %s:%d, want 0 node %d at %s:%d", v, c.Key, c.ErrorCode, c.NodeID, c.Host, c.Port, b.NodeID, host, port)
			}
		}
		for _, k := range keys {
			if !seen[k] {
				t.Errorf("FindCoordinator v%d: no coordinator for key %q", v, k)
			}
		}
	}
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "fc-single"
		resp := rc.Do(req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != errNone || resp.NodeID != int32(b.NodeID) || resp.Host != host || resp.Port != port {
			t.Errorf("FindCoordinator v%d: error %d node %d at %s:%d, want 0 node %d at %s:%d", v, resp.ErrorCode, resp.NodeID, resp.Host, resp.Port, b.NodeID, host, port)
		}
	}
}

func splitHostPort(t testing.TB, addr string) (string, int32) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	var port int32
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &port); err != nil {
		t.Fatalf("port of %q: %v", addr, err)
	}
	return addr[:i], port
}

// TestGroupRawListGroupsStateFilter: ListGroups v4+ filters by state and
// reports each group's state; v5 reports the classic group type.
func TestGroupRawListGroupsStateFilter(t *testing.T) {
	b := grpBroker(t)
	const topic = "lg"
	CreateTopic(t, b, topic, 2, nil)
	waitCoordinator(t, b, "lg-stable")
	m := newRawMember(t, b, "lg-stable", topic)
	m.join()
	m.sync(map[string][]byte{m.id: consumerAssignment(topic, 0, 1)})
	rc := dialRaw(t, b.KafkaAddr)
	requireCommitOK(t, "simple commit lg-empty", rawCommit(t, rc, 8, "lg-empty", "", -1, topic, map[int32]int64{0: 1}, ""))

	list := func(v int16, states, types []string) map[string]kmsg.ListGroupsResponseGroup {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		req.StatesFilter = states
		req.TypesFilter = types
		resp := rc.Do(req).(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != errNone {
			t.Fatalf("ListGroups v%d %v: error %d", v, states, resp.ErrorCode)
		}
		out := map[string]kmsg.ListGroupsResponseGroup{}
		for _, g := range resp.Groups {
			out[g.Group] = g
		}
		return out
	}
	for _, v := range []int16{4, 5} {
		all := list(v, nil, nil)
		if g, ok := all["lg-stable"]; !ok || g.GroupState != "Stable" || g.ProtocolType != "consumer" {
			t.Errorf("ListGroups v%d unfiltered: lg-stable %+v (present %v), want state Stable protocol type consumer", v, g, ok)
		}
		if g, ok := all["lg-empty"]; !ok || g.GroupState != "Empty" {
			t.Errorf("ListGroups v%d unfiltered: lg-empty %+v (present %v), want state Empty", v, g, ok)
		}
		stable := list(v, []string{"Stable"}, nil)
		if _, ok := stable["lg-stable"]; !ok {
			t.Errorf("ListGroups v%d [Stable]: lg-stable missing: %v", v, stable)
		}
		if _, ok := stable["lg-empty"]; ok {
			t.Errorf("ListGroups v%d [Stable]: lists the Empty group lg-empty", v)
		}
		empty := list(v, []string{"Empty"}, nil)
		if _, ok := empty["lg-empty"]; !ok {
			t.Errorf("ListGroups v%d [Empty]: lg-empty missing: %v", v, empty)
		}
		if _, ok := empty["lg-stable"]; ok {
			t.Errorf("ListGroups v%d [Empty]: lists the Stable group lg-stable", v)
		}
		both := list(v, []string{"Empty", "Stable"}, nil)
		if len(both) != 2 {
			t.Errorf("ListGroups v%d [Empty Stable]: %v, want both groups", v, both)
		}
		if none := list(v, []string{"Dead"}, nil); len(none) != 0 {
			t.Errorf("ListGroups v%d [Dead]: %v, want none", v, none)
		}
		if v >= 5 {
			if g := all["lg-stable"]; g.GroupType != "classic" {
				t.Errorf("ListGroups v5: lg-stable group type %q, want classic", g.GroupType)
			}
			if c := list(v, nil, []string{"classic"}); len(c) != 2 {
				t.Errorf("ListGroups v5 types [classic]: %v, want both groups", c)
			}
		}
	}
	for v := int16(0); v <= 3; v++ {
		all := list(v, nil, nil)
		if _, ok := all["lg-stable"]; !ok {
			t.Errorf("ListGroups v%d: lg-stable missing", v)
		}
		if _, ok := all["lg-empty"]; !ok {
			t.Errorf("ListGroups v%d: lg-empty missing", v)
		}
	}
}

// TestGroupRawVersions: the group APIs are advertised over the specified
// version ranges, and one member's whole life cycle works at every
// version: join, sync, heartbeat, commit, fetch, describe, list, leave,
// delete.
func TestGroupRawVersions(t *testing.T) {
	b := grpBroker(t)
	const topic = "vers"
	CreateTopic(t, b, topic, 2, nil)
	vers := apiVersions(t, b.KafkaAddr)
	spec := []struct {
		key      int16
		name     string
		min, max int16
	}{
		{keyOffsetCommit, "OffsetCommit", 2, 9},
		{keyOffsetFetch, "OffsetFetch", 1, 9},
		{keyFindCoordinator, "FindCoordinator", 0, 6},
		{keyJoinGroup, "JoinGroup", 0, 9},
		{keyHeartbeat, "Heartbeat", 0, 4},
		{keyLeaveGroup, "LeaveGroup", 0, 5},
		{keySyncGroup, "SyncGroup", 0, 5},
		{keyDescribeGroups, "DescribeGroups", 0, 6},
		{keyListGroups, "ListGroups", 0, 5},
		{keyDeleteGroups, "DeleteGroups", 0, 2},
		{keyOffsetDelete, "OffsetDelete", 0, 0},
	}
	for _, s := range spec {
		r, ok := vers[s.key]
		if !ok || r[0] > s.min || r[1] < s.max {
			t.Errorf("ApiVersions: %s (key %d) advertised %v (present %v), want at least v%d-v%d", s.name, s.key, r, ok, s.min, s.max)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	waitCoordinator(t, b, "vers-warmup")
	rc := dialRaw(t, b.KafkaAddr)
	for jv := int16(0); jv <= 9; jv++ {
		group := fmt.Sprintf("vers-%d", jv)
		m := newRawMember(t, b, group, topic)
		m.joinV = jv
		m.syncV = min(jv, 5)
		m.hbV = min(jv, 4)
		if jv < 4 {
			r := m.joinOnce()
			if r.ErrorCode != errNone {
				t.Fatalf("JoinGroup v%d: error %d", jv, r.ErrorCode)
			}
			m.applyJoin(r)
		} else {
			m.join()
		}
		if m.gen != 1 || m.leader != m.id || m.id == "" {
			t.Errorf("JoinGroup v%d: generation %d leader %q member %q, want generation 1 led by the member", jv, m.gen, m.leader, m.id)
		}
		assign := consumerAssignment(topic, 0, 1)
		if got := m.sync(map[string][]byte{m.id: assign}); string(got) != string(assign) {
			t.Errorf("SyncGroup v%d: assignment %x, want %x", m.syncV, got, assign)
		}
		if ec := m.heartbeat(); ec != errNone {
			t.Errorf("Heartbeat v%d: error %d", m.hbV, ec)
		}
		cv := min(max(jv, 2), 9)
		requireCommitOK(t, fmt.Sprintf("OffsetCommit v%d", cv), rawCommit(t, rc, cv, group, m.id, m.gen, topic, map[int32]int64{0: int64(jv) + 1, 1: int64(jv) + 2}, "md"))
		fv := min(max(jv, 1), 7)
		if got := rawFetchOffsets(t, rc, fv, group, topic, 0, 1); got[0] != int64(jv)+1 || got[1] != int64(jv)+2 {
			t.Errorf("OffsetFetch v%d after OffsetCommit v%d: %v, want 0:%d 1:%d", fv, cv, got, jv+1, jv+2)
		}
		dv := min(jv, 6)
		g := describeGroupRaw(t, rc, dv, group)
		if g.ErrorCode != errNone || g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != m.id ||
			string(g.Members[0].MemberAssignment) != string(assign) || string(g.Members[0].ProtocolMetadata) != string(consumerMeta(topic)) {
			t.Errorf("DescribeGroups v%d: %+v, want Stable with member %q, its metadata and assignment", dv, g, m.id)
		}
		if g.Members[0].ClientID != "weir-integration" {
			t.Errorf("DescribeGroups v%d: client id %q, want weir-integration", dv, g.Members[0].ClientID)
		}
		lv := min(jv, 5)
		lreq := kmsg.NewPtrLeaveGroupRequest()
		lreq.Version = lv
		lreq.Group = group
		if lv >= 3 {
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = m.id
			lreq.Members = append(lreq.Members, lm)
		} else {
			lreq.MemberID = m.id
		}
		if resp := rc.Do(lreq).(*kmsg.LeaveGroupResponse); resp.ErrorCode != errNone || (lv >= 3 && (len(resp.Members) != 1 || resp.Members[0].ErrorCode != errNone)) {
			t.Errorf("LeaveGroup v%d: %+v", lv, resp)
		}
		if g := describeGroupRaw(t, rc, dv, group); g.State != "Empty" || len(g.Members) != 0 {
			t.Errorf("DescribeGroups v%d after leave: state %q with %d members, want Empty", dv, g.State, len(g.Members))
		}
		// Offsets survive the member leaving.
		if got := rawFetchOffsets(t, rc, fv, group, topic, 0, 1); got[0] != int64(jv)+1 {
			t.Errorf("OffsetFetch v%d after leave: %v", fv, got)
		}
	}
	for lv := int16(0); lv <= 5; lv++ {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = lv
		resp := rc.Do(req).(*kmsg.ListGroupsResponse)
		names := map[string]bool{}
		for _, g := range resp.Groups {
			names[g.Group] = true
		}
		for jv := 0; jv <= 9; jv++ {
			if !names[fmt.Sprintf("vers-%d", jv)] {
				t.Errorf("ListGroups v%d: vers-%d missing", lv, jv)
			}
		}
	}
	// OffsetDelete v0 on an empty group; DeleteGroups v0-2.
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "vers-9"
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = topic
	odp := kmsg.NewOffsetDeleteRequestTopicPartition()
	odp.Partition = 0
	odt.Partitions = append(odt.Partitions, odp)
	od.Topics = append(od.Topics, odt)
	odr := rc.Do(od).(*kmsg.OffsetDeleteResponse)
	if odr.ErrorCode != errNone || len(odr.Topics) != 1 || len(odr.Topics[0].Partitions) != 1 || odr.Topics[0].Partitions[0].ErrorCode != errNone {
		t.Errorf("OffsetDelete v0 on an empty group: %+v", odr)
	}
	if got := rawFetchOffsets(t, rc, 7, "vers-9", topic, 0, 1); got[0] != -1 || got[1] != 11 {
		t.Errorf("after OffsetDelete of partition 0: %v, want 0:-1 1:11", got)
	}
	for dv := int16(0); dv <= 2; dv++ {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = dv
		req.Groups = []string{fmt.Sprintf("vers-%d", dv), "vers-never-existed"}
		resp := rc.Do(req).(*kmsg.DeleteGroupsResponse)
		got := map[string]int16{}
		for _, g := range resp.Groups {
			got[g.Group] = g.ErrorCode
		}
		want := map[string]int16{fmt.Sprintf("vers-%d", dv): 0, "vers-never-existed": errGroupIDNotFound}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("DeleteGroups v%d: %v, want %v", dv, got, want)
		}
		if got := rawFetchOffsets(t, rc, 7, fmt.Sprintf("vers-%d", dv), topic, 0, 1); got[0] != -1 || got[1] != -1 {
			t.Errorf("offsets of deleted group vers-%d: %v, want none", dv, got)
		}
	}
	// DescribeGroups of a deleted group: Dead before v6, GROUP_ID_NOT_FOUND
	// from v6 (KIP-1043).
	if g := describeGroupRaw(t, rc, 5, "vers-0"); g.ErrorCode != errNone || g.State != "Dead" {
		t.Errorf("DescribeGroups v5 of a deleted group: error %d state %q, want 0 Dead", g.ErrorCode, g.State)
	}
	if g := describeGroupRaw(t, rc, 6, "vers-0"); g.ErrorCode != errGroupIDNotFound {
		t.Errorf("DescribeGroups v6 of a deleted group: error %d state %q, want GROUP_ID_NOT_FOUND (69)", g.ErrorCode, g.State)
	}
}
