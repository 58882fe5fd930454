package integration

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group-coordinator error codes used by the group tests.
const (
	errCoordinatorLoadInProgress int16 = 14
	errCoordinatorNotAvailable   int16 = 15
	errNotCoordinator            int16 = 16
	errIllegalGeneration         int16 = 22
	errInconsistentGroupProtocol int16 = 23
	errUnknownMemberID           int16 = 25
	errInvalidSessionTimeout     int16 = 26
	errRebalanceInProgress       int16 = 27
	errNonEmptyGroup             int16 = 68
	errGroupIDNotFound           int16 = 69
	errMemberIDRequired          int16 = 79
	errFencedInstanceID          int16 = 82
	errGroupSubscribedToTopic    int16 = 86
)

// Group API keys.
const (
	keyOffsetCommit    int16 = 8
	keyOffsetFetch     int16 = 9
	keyFindCoordinator int16 = 10
	keyJoinGroup       int16 = 11
	keyHeartbeat       int16 = 12
	keyLeaveGroup      int16 = 13
	keySyncGroup       int16 = 14
	keyDescribeGroups  int16 = 15
	keyListGroups      int16 = 16
	keyDeleteGroups    int16 = 42
	keyOffsetDelete    int16 = 47
)

// grpBroker starts a broker with group settings fit for tests: no initial
// rebalance delay and a 1 s minimum session timeout.
func grpBroker(t testing.TB, opts ...BrokerOption) *Broker {
	t.Helper()
	all := []BrokerOption{
		WithSet("cluster.group_initial_rebalance_delay_ms", "0"),
		WithSet("cluster.group_min_session_timeout_ms", "1000"),
	}
	return StartBroker(t, append(all, opts...)...)
}

// grpWait polls cond every 100 ms until it returns true or timeout passes,
// then fails with the last description cond gave.
func grpWait(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := "never checked"
	for {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last state: %s", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consumerMeta encodes "consumer" protocol subscription metadata.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

// consumerAssignment encodes a "consumer" protocol assignment of partitions
// of one topic.
func consumerAssignment(topic string, partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 0
	if topic != "" {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic = topic
		at.Partitions = partitions
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// decodeAssignment decodes a "consumer" protocol assignment into
// topic -> sorted partitions.
func decodeAssignment(t testing.TB, raw []byte) map[string][]int32 {
	t.Helper()
	out := map[string][]int32{}
	if len(raw) == 0 {
		return out
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(raw); err != nil {
		t.Fatalf("decoding member assignment %x: %v", raw, err)
	}
	for _, at := range a.Topics {
		ps := append([]int32(nil), at.Partitions...)
		slices.Sort(ps)
		out[at.Topic] = append(out[at.Topic], ps...)
	}
	return out
}

// waitCoordinator waits (≤20 s) until FindCoordinator v3 answers group with
// no error: the broker may answer COORDINATOR_NOT_AVAILABLE while it creates
// __consumer_offsets, as Kafka does.
func waitCoordinator(t testing.TB, b *Broker, group string) kmsg.FindCoordinatorResponse {
	t.Helper()
	rc := dialRaw(t, b.KafkaAddr)
	defer rc.Close()
	var resp *kmsg.FindCoordinatorResponse
	grpWait(t, 20*time.Second, "FindCoordinator for "+group, func() (bool, string) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 3
		req.CoordinatorKey = group
		req.CoordinatorType = 0
		resp = rc.Do(req).(*kmsg.FindCoordinatorResponse)
		switch resp.ErrorCode {
		case errNone:
			return true, ""
		case errCoordinatorNotAvailable, errCoordinatorLoadInProgress:
			return false, fmt.Sprintf("error %d (%s)", resp.ErrorCode, derefStr(resp.ErrorMessage))
		default:
			t.Fatalf("FindCoordinator v3 %q: unexpected error %d (%s)", group, resp.ErrorCode, derefStr(resp.ErrorMessage))
			return false, ""
		}
	})
	return *resp
}

// ---------------------------------------------------------------------------
// rawMember: one classic-protocol group member driven request by request on
// its own connection (JoinGroup blocks its connection until the rebalance
// completes, so members do not share connections).

type rawMember struct {
	t        testing.TB
	rc       *rawConn
	group    string
	id       string
	instance *string
	gen      int32
	leader   string
	members  []kmsg.JoinGroupResponseMember // as leader, from the last join

	protoType string
	protocols []kmsg.JoinGroupRequestProtocol

	sessionMs, rebalanceMs int32
	joinV, syncV, hbV      int16
}

func newRawMember(t testing.TB, b *Broker, group string, topics ...string) *rawMember {
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	p.Metadata = consumerMeta(topics...)
	return &rawMember{
		t:           t,
		rc:          dialRaw(t, b.KafkaAddr),
		group:       group,
		gen:         -1,
		protoType:   "consumer",
		protocols:   []kmsg.JoinGroupRequestProtocol{p},
		sessionMs:   10000,
		rebalanceMs: 10000,
		joinV:       9,
		syncV:       5,
		hbV:         4,
	}
}

func (m *rawMember) joinReq() *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = m.joinV
	req.Group = m.group
	req.SessionTimeoutMillis = m.sessionMs
	req.RebalanceTimeoutMillis = m.rebalanceMs
	req.MemberID = m.id
	req.InstanceID = m.instance
	req.ProtocolType = m.protoType
	req.Protocols = m.protocols
	return req
}

// joinOnce sends one JoinGroup with the member's current id and returns the
// response without interpreting it.
func (m *rawMember) joinOnce() *kmsg.JoinGroupResponse {
	m.t.Helper()
	return m.rc.Do(m.joinReq()).(*kmsg.JoinGroupResponse)
}

// obtainID does the v4+ MEMBER_ID_REQUIRED round trip for a dynamic member:
// the first join must fail with MEMBER_ID_REQUIRED and carry the id.
func (m *rawMember) obtainID() {
	m.t.Helper()
	if m.id != "" || m.joinV < 4 || m.instance != nil {
		return
	}
	resp := m.joinOnce()
	if resp.ErrorCode != errMemberIDRequired {
		m.t.Fatalf("group %s: JoinGroup v%d with an empty member id: error %d, want MEMBER_ID_REQUIRED (%d)", m.group, m.joinV, resp.ErrorCode, errMemberIDRequired)
	}
	if resp.MemberID == "" {
		m.t.Fatalf("group %s: MEMBER_ID_REQUIRED response carries no member id", m.group)
	}
	m.id = resp.MemberID
}

func (m *rawMember) applyJoin(resp *kmsg.JoinGroupResponse) {
	m.t.Helper()
	if resp.ErrorCode != errNone {
		m.t.Fatalf("group %s member %q: JoinGroup v%d error %d", m.group, m.id, m.joinV, resp.ErrorCode)
	}
	if m.id != "" && m.instance == nil && resp.MemberID != m.id {
		m.t.Fatalf("group %s: JoinGroup with member id %q answered member id %q", m.group, m.id, resp.MemberID)
	}
	m.id = resp.MemberID
	m.gen = resp.Generation
	m.leader = resp.LeaderID
	m.members = resp.Members
}

// join joins (with the MEMBER_ID_REQUIRED round trip if needed) and blocks
// until the join completes.
func (m *rawMember) join() *kmsg.JoinGroupResponse {
	m.t.Helper()
	m.obtainID()
	resp := m.joinOnce()
	m.applyJoin(resp)
	return resp
}

type asyncResp struct {
	resp kmsg.Response
	err  error
}

// joinAsync obtains the member id synchronously, then sends the JoinGroup and
// returns a channel delivering its response (the join blocks in the
// coordinator until the rebalance completes).
func (m *rawMember) joinAsync() <-chan asyncResp {
	m.t.Helper()
	m.obtainID()
	req := m.joinReq()
	corr := m.rc.Send(req)
	ch := make(chan asyncResp, 1)
	go func() {
		frame, err := m.rc.ReadFrame(requestTimeout)
		if err != nil {
			ch <- asyncResp{err: err}
			return
		}
		resp, err := parseResponse(req, frame, corr, req.Version)
		ch <- asyncResp{resp: resp, err: err}
	}()
	return ch
}

// awaitJoin waits for a joinAsync response and applies it.
func (m *rawMember) awaitJoin(ch <-chan asyncResp) *kmsg.JoinGroupResponse {
	m.t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			m.t.Fatalf("group %s member %q: async JoinGroup: %v", m.group, m.id, r.err)
		}
		resp := r.resp.(*kmsg.JoinGroupResponse)
		m.applyJoin(resp)
		return resp
	case <-time.After(requestTimeout + time.Second):
		m.t.Fatalf("group %s member %q: async JoinGroup got no response within %v", m.group, m.id, requestTimeout)
		return nil
	}
}

func (m *rawMember) syncReq(gen int32, assignments map[string][]byte) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = m.syncV
	req.Group = m.group
	req.Generation = gen
	req.MemberID = m.id
	req.InstanceID = m.instance
	if m.syncV >= 5 {
		req.ProtocolType = kmsg.StringPtr(m.protoType)
		req.Protocol = kmsg.StringPtr(m.protocols[0].Name)
	}
	ids := make([]string, 0, len(assignments))
	for id := range assignments {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID = id
		a.MemberAssignment = assignments[id]
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	return req
}

// syncRaw sends SyncGroup with an explicit generation and returns the
// response uninterpreted.
func (m *rawMember) syncRaw(gen int32, assignments map[string][]byte) *kmsg.SyncGroupResponse {
	m.t.Helper()
	return m.rc.Do(m.syncReq(gen, assignments)).(*kmsg.SyncGroupResponse)
}

// sync syncs at the member's generation and fails unless it succeeds;
// it returns the member's assignment bytes.
func (m *rawMember) sync(assignments map[string][]byte) []byte {
	m.t.Helper()
	resp := m.syncRaw(m.gen, assignments)
	if resp.ErrorCode != errNone {
		m.t.Fatalf("group %s member %q gen %d: SyncGroup v%d error %d", m.group, m.id, m.gen, m.syncV, resp.ErrorCode)
	}
	return resp.MemberAssignment
}

func (m *rawMember) heartbeatGen(gen int32) int16 {
	m.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = m.hbV
	req.Group = m.group
	req.Generation = gen
	req.MemberID = m.id
	req.InstanceID = m.instance
	return m.rc.Do(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func (m *rawMember) heartbeat() int16 {
	m.t.Helper()
	return m.heartbeatGen(m.gen)
}

// describeGroupRaw describes one group on rc at version v.
func describeGroupRaw(t testing.TB, rc *rawConn, v int16, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = v
	req.Groups = []string{group}
	resp := rc.Do(req).(*kmsg.DescribeGroupsResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].Group != group {
		t.Fatalf("DescribeGroups v%d %q: %d groups in the response: %+v", v, group, len(resp.Groups), resp.Groups)
	}
	return resp.Groups[0]
}

func memberIDs(g kmsg.DescribeGroupsResponseGroup) []string {
	ids := make([]string, 0, len(g.Members))
	for _, m := range g.Members {
		ids = append(ids, m.MemberID)
	}
	sort.Strings(ids)
	return ids
}

// rawCommit commits offsets (partition -> offset) of topic for group at
// OffsetCommit v, as member id at generation gen (-1 and "" for a simple,
// group-less commit), and returns partition -> error code.
func rawCommit(t testing.TB, rc *rawConn, v int16, group, memberID string, gen int32, topic string, offsets map[int32]int64, metadata string) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = v
	req.Group = group
	req.Generation = gen
	req.MemberID = memberID
	req.RetentionTimeMillis = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	ps := make([]int32, 0, len(offsets))
	for p := range offsets {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = offsets[p]
		rp.LeaderEpoch = -1
		rp.Metadata = kmsg.StringPtr(metadata)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := rc.Do(req).(*kmsg.OffsetCommitResponse)
	out := map[int32]int16{}
	for _, rt := range resp.Topics {
		if rt.Topic != topic {
			t.Fatalf("OffsetCommit v%d: response names topic %q, want %q", v, rt.Topic, topic)
		}
		for _, rp := range rt.Partitions {
			out[rp.Partition] = rp.ErrorCode
		}
	}
	if len(out) != len(offsets) {
		t.Fatalf("OffsetCommit v%d group %s: %d partition results for %d partitions: %+v", v, group, len(out), len(offsets), resp.Topics)
	}
	return out
}

func requireCommitOK(t testing.TB, what string, errs map[int32]int16) {
	t.Helper()
	for p, ec := range errs {
		if ec != errNone {
			t.Fatalf("%s: partition %d error %d", what, p, ec)
		}
	}
}

// rawFetchOffsets fetches committed offsets of group for topic partitions
// with OffsetFetch v (1..7, single group) and returns partition -> offset
// (-1: none), failing on any error.
func rawFetchOffsets(t testing.TB, rc *rawConn, v int16, group, topic string, partitions ...int32) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = v
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = partitions
	req.Topics = append(req.Topics, rt)
	resp := rc.Do(req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != errNone {
		t.Fatalf("OffsetFetch v%d group %s: error %d", v, group, resp.ErrorCode)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != errNone {
				t.Fatalf("OffsetFetch v%d group %s %s/%d: error %d", v, group, rt.Topic, rp.Partition, rp.ErrorCode)
			}
			if rt.Topic == topic {
				out[rp.Partition] = rp.Offset
			}
		}
	}
	for _, p := range partitions {
		if _, ok := out[p]; !ok {
			t.Fatalf("OffsetFetch v%d group %s: no answer for requested partition %s/%d: %+v", v, group, topic, p, resp.Topics)
		}
	}
	return out
}

// twoMemberGroup builds a Stable group of two raw members a (leader) and b
// subscribed to topic (with `partitions` partitions): a joins alone, b's join
// triggers a rebalance that a notices by heartbeat (REBALANCE_IN_PROGRESS),
// a rejoins, a syncs the range assignment, b syncs. It returns the members
// and their assignments.
func twoMemberGroup(t testing.TB, b *Broker, group, topic string, partitions int32, tweak ...func(*rawMember)) (a, c *rawMember) {
	t.Helper()
	a = newRawMember(t, b, group, topic)
	for _, f := range tweak {
		f(a)
	}
	a.join()
	if a.leader != a.id {
		t.Fatalf("group %s: the only member %q is not the leader (leader %q)", group, a.id, a.leader)
	}
	a.sync(map[string][]byte{a.id: consumerAssignment(topic, seqPartitions(0, partitions)...)})
	gen1 := a.gen

	c = newRawMember(t, b, group, topic)
	for _, f := range tweak {
		f(c)
	}
	ch := c.joinAsync()
	var hb int16
	grpWait(t, 10*time.Second, "the first member sees the rebalance", func() (bool, string) {
		hb = a.heartbeat()
		return hb == errRebalanceInProgress, fmt.Sprintf("heartbeat error %d", hb)
	})
	a.join()
	c.awaitJoin(ch)
	if a.gen != c.gen || a.gen <= gen1 {
		t.Fatalf("group %s: after the second join generations are %d and %d (first generation %d); want equal and greater", group, a.gen, c.gen, gen1)
	}
	if a.leader != c.leader {
		t.Fatalf("group %s: members disagree on the leader: %q vs %q", group, a.leader, c.leader)
	}
	leader, follower := a, c
	if c.leader == c.id {
		leader, follower = c, a
	} else if a.leader != a.id {
		t.Fatalf("group %s: leader %q is neither member (%q, %q)", group, a.leader, a.id, c.id)
	}
	if len(leader.members) != 2 {
		t.Fatalf("group %s: leader's JoinGroup response lists %d members, want 2", group, len(leader.members))
	}
	if len(follower.members) != 0 {
		t.Errorf("group %s: follower's JoinGroup response lists %d members, want 0 (only the leader gets them)", group, len(follower.members))
	}
	half := partitions / 2
	assign := map[string][]byte{
		a.id: consumerAssignment(topic, seqPartitions(0, half)...),
		c.id: consumerAssignment(topic, seqPartitions(half, partitions)...),
	}
	leader.sync(assign)
	follower.sync(nil)
	return a, c
}

func seqPartitions(from, to int32) []int32 {
	var ps []int32
	for p := from; p < to; p++ {
		ps = append(ps, p)
	}
	return ps
}

// ---------------------------------------------------------------------------
// Tests.

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

// TestGroupRawStaticFencing: a second static member with the same
// group.instance.id replaces the first, which is fenced with
// FENCED_INSTANCE_ID; the replacement gets the old assignment with no
// rebalance.
func TestGroupRawStaticFencing(t *testing.T) {
	b := grpBroker(t)
	const topic, group = "fence", "fence-g"
	CreateTopic(t, b, topic, 2, nil)
	waitCoordinator(t, b, group)

	s1 := newRawMember(t, b, group, topic)
	s1.instance = kmsg.StringPtr("inst-1")
	s1.join()
	want := consumerAssignment(topic, 0, 1)
	s1.sync(map[string][]byte{s1.id: want})
	gen := s1.gen

	s2 := newRawMember(t, b, group, topic)
	s2.instance = kmsg.StringPtr("inst-1")
	resp := s2.joinOnce() // static members get no MEMBER_ID_REQUIRED
	if resp.ErrorCode != errNone {
		t.Fatalf("JoinGroup v9 by a second static member with instance id inst-1: error %d, want 0", resp.ErrorCode)
	}
	s2.applyJoin(resp)
	if s2.id == s1.id || s2.id == "" {
		t.Errorf("replacement static member got member id %q (old %q), want a new id", s2.id, s1.id)
	}
	if s2.gen != gen {
		t.Errorf("replacement static member joined at generation %d, want the unchanged %d (no rebalance)", s2.gen, gen)
	}
	got := s2.sync(nil)
	if string(got) != string(want) {
		t.Errorf("replacement static member's assignment %v, want the old %v", decodeAssignment(t, got), decodeAssignment(t, want))
	}
	if ec := s1.heartbeat(); ec != errFencedInstanceID {
		t.Errorf("heartbeat of the replaced static member: error %d, want FENCED_INSTANCE_ID (82)", ec)
	}
	if r := s1.syncRaw(gen, nil); r.ErrorCode != errFencedInstanceID {
		t.Errorf("SyncGroup of the replaced static member: error %d, want FENCED_INSTANCE_ID (82)", r.ErrorCode)
	}
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Version = 8
	creq.Group = group
	creq.Generation = gen
	creq.MemberID = s1.id
	creq.InstanceID = s1.instance
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition = 0
	cp.Offset = 5
	cp.LeaderEpoch = -1
	ct.Partitions = append(ct.Partitions, cp)
	creq.Topics = append(creq.Topics, ct)
	cresp := s1.rc.Do(creq).(*kmsg.OffsetCommitResponse)
	if len(cresp.Topics) != 1 || len(cresp.Topics[0].Partitions) != 1 || cresp.Topics[0].Partitions[0].ErrorCode != errFencedInstanceID {
		t.Errorf("OffsetCommit v8 by the replaced static member (with its instance id): %+v, want FENCED_INSTANCE_ID (82)", cresp.Topics)
	}
	if ec := s2.heartbeat(); ec != errNone {
		t.Errorf("heartbeat of the replacement static member: error %d", ec)
	}
	g := describeGroupRaw(t, s2.rc, 5, group)
	if g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != s2.id || derefStr(g.Members[0].InstanceID) != "inst-1" {
		t.Errorf("DescribeGroups: state %q members %+v, want Stable with only %q (instance inst-1)", g.State, g.Members, s2.id)
	}

	// A restarted consumer's subscription metadata is rarely byte-identical
	// (ConsumerProtocol v1+ carries the owned partitions and generation,
	// which a restarted client no longer has). Kafka replaces the static
	// member without a rebalance as long as the group's selected protocol
	// stays the same (GroupCoordinator.updateStaticMemberAndRebalance:
	// "Static member which joins during Stable stage and doesn't affect
	// selectProtocol will not trigger rebalance").
	s3 := newRawMember(t, b, group, topic)
	s3.instance = kmsg.StringPtr("inst-1")
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 1
	md.Topics = []string{topic}
	s3.protocols[0].Metadata = md.AppendTo(nil)
	resp = s3.joinOnce()
	if resp.ErrorCode != errNone {
		t.Fatalf("JoinGroup v9 by a third static member inst-1 with new subscription metadata: error %d", resp.ErrorCode)
	}
	s3.applyJoin(resp)
	if s3.gen != gen {
		t.Errorf("static member rejoining a Stable group with the same protocol name (range) but different metadata bytes joined generation %d, want the unchanged %d: the broker rebalanced, Kafka does not (only a change of the selected protocol does)", s3.gen, gen)
	} else {
		if got := s3.sync(nil); string(got) != string(want) {
			t.Errorf("third static member's assignment %v, want the old %v", decodeAssignment(t, got), decodeAssignment(t, want))
		}
	}
	if ec := s2.heartbeat(); ec != errFencedInstanceID {
		t.Errorf("heartbeat of the second (replaced) static member: error %d, want FENCED_INSTANCE_ID (82)", ec)
	}
}

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

// TestGroupRawOffsetFetchMultiGroup: OffsetFetch v8 answers several groups
// in one request, each with its own offsets; a group with no offsets
// answers -1 for requested partitions and nothing for "all topics".
func TestGroupRawOffsetFetchMultiGroup(t *testing.T) {
	b := grpBroker(t)
	const topic = "ofmg"
	CreateTopic(t, b, topic, 3, nil)
	waitCoordinator(t, b, "ofmg-1")
	rc := dialRaw(t, b.KafkaAddr)
	requireCommitOK(t, "simple commit ofmg-1", rawCommit(t, rc, 8, "ofmg-1", "", -1, topic, map[int32]int64{0: 5, 1: 7}, "meta-1"))
	requireCommitOK(t, "simple commit ofmg-2", rawCommit(t, rc, 8, "ofmg-2", "", -1, topic, map[int32]int64{2: 3}, "meta-2"))

	for _, v := range []int16{8, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = v
		g1 := kmsg.NewOffsetFetchRequestGroup()
		g1.Group = "ofmg-1"
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic = topic
		gt.Partitions = []int32{0, 1, 2}
		g1.Topics = append(g1.Topics, gt)
		g2 := kmsg.NewOffsetFetchRequestGroup()
		g2.Group = "ofmg-2" // Topics nil: all committed offsets
		g3 := kmsg.NewOffsetFetchRequestGroup()
		g3.Group = "ofmg-none"
		g3.Topics = append(g3.Topics, gt)
		g4 := kmsg.NewOffsetFetchRequestGroup()
		g4.Group = "ofmg-none-all"
		req.Groups = []kmsg.OffsetFetchRequestGroup{g1, g2, g3, g4}
		resp := rc.Do(req).(*kmsg.OffsetFetchResponse)

		got := map[string]map[int32]int64{}
		meta := map[string]map[int32]string{}
		for _, g := range resp.Groups {
			if g.ErrorCode != errNone {
				t.Errorf("OffsetFetch v%d group %s: error %d", v, g.Group, g.ErrorCode)
			}
			if got[g.Group] != nil {
				t.Errorf("OffsetFetch v%d: group %s answered twice", v, g.Group)
			}
			got[g.Group] = map[int32]int64{}
			meta[g.Group] = map[int32]string{}
			for _, gt := range g.Topics {
				if gt.Topic != topic {
					t.Errorf("OffsetFetch v%d group %s: unexpected topic %q", v, g.Group, gt.Topic)
				}
				for _, p := range gt.Partitions {
					if p.ErrorCode != errNone {
						t.Errorf("OffsetFetch v%d group %s partition %d: error %d", v, g.Group, p.Partition, p.ErrorCode)
					}
					got[g.Group][p.Partition] = p.Offset
					meta[g.Group][p.Partition] = derefStr(p.Metadata)
				}
			}
		}
		want := map[string]map[int32]int64{
			"ofmg-1":        {0: 5, 1: 7, 2: -1},
			"ofmg-2":        {2: 3},
			"ofmg-none":     {0: -1, 1: -1, 2: -1},
			"ofmg-none-all": {},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("OffsetFetch v%d with four groups: offsets %v, want %v", v, got, want)
		}
		if meta["ofmg-1"][0] != "meta-1" || meta["ofmg-1"][1] != "meta-1" || meta["ofmg-2"][2] != "meta-2" {
			t.Errorf("OffsetFetch v%d: metadata %v, want meta-1 for ofmg-1 partitions 0-1 and meta-2 for ofmg-2 partition 2", v, meta)
		}
	}
	// The same through the single-group versions.
	for v := int16(1); v <= 7; v++ {
		if got := rawFetchOffsets(t, rc, v, "ofmg-1", topic, 0, 1, 2); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 5, 1: 7, 2: -1}) {
			t.Errorf("OffsetFetch v%d ofmg-1: %v, want 0:5 1:7 2:-1", v, got)
		}
	}
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

// TestGroupRawOffsetExpiry: with group_offset_retention_sec=2 the offsets
// of an empty group disappear within a bounded wait, while those of a
// group with a live (heartbeating) member stay; once that member leaves,
// its group's offsets expire too.
func TestGroupRawOffsetExpiry(t *testing.T) {
	b := grpBroker(t,
		WithSet("cluster.group_offset_retention_sec", "2"),
		WithSet("cluster.group_offset_retention_check_ms", "500"),
	)
	const topic = "expiry"
	CreateTopic(t, b, topic, 2, nil)
	waitCoordinator(t, b, "exp-empty")
	rc := dialRaw(t, b.KafkaAddr)

	live := newRawMember(t, b, "exp-live", topic)
	live.sessionMs = 6000
	live.join()
	live.sync(map[string][]byte{live.id: consumerAssignment(topic, 0, 1)})
	requireCommitOK(t, "commit by the live member", rawCommit(t, live.rc, 8, "exp-live", live.id, live.gen, topic, map[int32]int64{0: 11, 1: 12}, ""))

	committed := time.Now()
	requireCommitOK(t, "simple commit exp-empty", rawCommit(t, rc, 8, "exp-empty", "", -1, topic, map[int32]int64{0: 21, 1: 22}, ""))
	if got := rawFetchOffsets(t, rc, 7, "exp-empty", topic, 0, 1); got[0] != 21 || got[1] != 22 {
		t.Fatalf("right after the commit exp-empty has %v, want 0:21 1:22", got)
	}

	var gone time.Duration
	grpWait(t, 15*time.Second, "offsets of the empty group expire", func() (bool, string) {
		if ec := live.heartbeat(); ec != errNone {
			t.Fatalf("heartbeat of the live member: error %d", ec)
		}
		if got := rawFetchOffsets(t, rc, 7, "exp-live", topic, 0, 1); got[0] != 11 || got[1] != 12 {
			t.Fatalf("offsets of the group with a live member changed to %v after %v, want 0:11 1:12 (only empty groups' offsets expire)", got, time.Since(committed))
		}
		got := rawFetchOffsets(t, rc, 7, "exp-empty", topic, 0, 1)
		if got[0] == -1 && got[1] == -1 {
			gone = time.Since(committed)
			return true, ""
		}
		return false, fmt.Sprintf("exp-empty offsets %v after %v", got, time.Since(committed))
	})
	if gone < 1500*time.Millisecond {
		t.Errorf("offsets of the empty group vanished %v after the commit, before the 2 s retention", gone)
	}
	t.Logf("empty group's offsets expired %v after the commit", gone)

	// Keep the live member alive past another retention period: its
	// offsets stay.
	until := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(until) {
		if ec := live.heartbeat(); ec != errNone {
			t.Fatalf("heartbeat of the live member: error %d", ec)
		}
		if got := rawFetchOffsets(t, rc, 7, "exp-live", topic, 0, 1); got[0] != 11 || got[1] != 12 {
			t.Fatalf("offsets of the group with a live member changed to %v, want 0:11 1:12", got)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// The member leaves: the group is empty and its offsets expire.
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Version = 5
	lreq.Group = "exp-live"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = live.id
	lreq.Members = append(lreq.Members, lm)
	if resp := rc.Do(lreq).(*kmsg.LeaveGroupResponse); resp.ErrorCode != errNone || len(resp.Members) != 1 || resp.Members[0].ErrorCode != errNone {
		t.Fatalf("LeaveGroup v5: %+v", resp)
	}
	left := time.Now()
	grpWait(t, 15*time.Second, "offsets of the group that became empty expire", func() (bool, string) {
		got := rawFetchOffsets(t, rc, 7, "exp-live", topic, 0, 1)
		return got[0] == -1 && got[1] == -1, fmt.Sprintf("exp-live offsets %v %v after the leave", got, time.Since(left))
	})
	// Kafka (KIP-211) counts the retention of a consumer group's offsets
	// from when the group became empty, not from the (older) commit.
	if d := time.Since(left); d < 1500*time.Millisecond {
		t.Errorf("offsets of the group that became empty vanished %v after it became empty, before the 2 s retention (retention counted from the commit, not from when the group emptied)", d)
	}
	t.Logf("offsets of the group that became empty expired %v after the leave", time.Since(left))
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

// TestGroupRawMetadataSurvivesRestart: a Stable group's members,
// generation, protocol and assignments are rebuilt from __consumer_offsets
// after a restart: the members keep heartbeating with their ids and
// generation, and the next rebalance continues the generation sequence.
func TestGroupRawMetadataSurvivesRestart(t *testing.T) {
	b := grpBroker(t)
	const topic, group = "rstmeta", "rstmeta-g"
	CreateTopic(t, b, topic, 4, nil)
	waitCoordinator(t, b, group)
	tweak := func(m *rawMember) { m.sessionMs, m.rebalanceMs = 30000, 10000 }
	a, c := twoMemberGroup(t, b, group, topic, 4, tweak)
	gen := a.gen
	requireCommitOK(t, "commit by a", rawCommit(t, a.rc, 8, group, a.id, a.gen, topic, map[int32]int64{0: 4, 1: 5}, "x"))
	before := describeGroupRaw(t, a.rc, 5, group)

	b.Restart(t)
	for _, m := range []*rawMember{a, c} {
		m.rc = dialRaw(t, b.KafkaAddr)
	}
	waitCoordinator(t, b, group)
	for _, m := range []*rawMember{a, c} {
		var ec int16
		grpWait(t, 15*time.Second, "heartbeat after the restart", func() (bool, string) {
			ec = m.heartbeat()
			return ec != errCoordinatorLoadInProgress && ec != errCoordinatorNotAvailable && ec != errNotCoordinator, fmt.Sprintf("error %d", ec)
		})
		if ec != errNone {
			t.Errorf("heartbeat of member %q at generation %d after the restart: error %d, want 0 (group metadata rebuilt)", m.id, m.gen, ec)
		}
	}
	after := describeGroupRaw(t, a.rc, 5, group)
	if after.State != "Stable" || after.Protocol != before.Protocol || after.ProtocolType != before.ProtocolType || fmt.Sprint(memberIDs(after)) != fmt.Sprint(memberIDs(before)) {
		t.Errorf("after the restart: state %q protocol %q/%q members %v; before: %q %q/%q %v", after.State, after.ProtocolType, after.Protocol, memberIDs(after), before.State, before.ProtocolType, before.Protocol, memberIDs(before))
	}
	assigned := func(g kmsg.DescribeGroupsResponseGroup) map[string]string {
		out := map[string]string{}
		for _, m := range g.Members {
			out[m.MemberID] = fmt.Sprint(decodeAssignment(t, m.MemberAssignment))
		}
		return out
	}
	if fmt.Sprint(assigned(after)) != fmt.Sprint(assigned(before)) {
		t.Errorf("assignments after the restart %v, before %v", assigned(after), assigned(before))
	}
	if got := rawFetchOffsets(t, a.rc, 7, group, topic, 0, 1); got[0] != 4 || got[1] != 5 {
		t.Errorf("offsets after the restart %v, want 0:4 1:5", got)
	}
	// Members can still commit at their generation.
	requireCommitOK(t, "commit by c after the restart", rawCommit(t, c.rc, 8, group, c.id, c.gen, topic, map[int32]int64{2: 6}, ""))

	// A new member starts the next generation.
	d := newRawMember(t, b, group, topic)
	tweak(d)
	chD := d.joinAsync()
	grpWait(t, 5*time.Second, "the rebalance starts", func() (bool, string) {
		ec := a.heartbeat()
		return ec == errRebalanceInProgress, fmt.Sprintf("heartbeat error %d", ec)
	})
	chC := c.joinAsync()
	a.join()
	c.awaitJoin(chC)
	d.awaitJoin(chD)
	for _, m := range []*rawMember{a, c, d} {
		if m.gen != gen+1 {
			t.Errorf("member %q joined generation %d after the restart, want %d (generation continues)", m.id, m.gen, gen+1)
		}
	}
}

// TestGroupRawInternalTopic: offsets live in __consumer_offsets, created
// with group_topic_partitions partitions and reported internal, as Kafka
// does; group coordinators for many keys are spread over it but on one
// node all answer this broker.
func TestGroupRawInternalTopic(t *testing.T) {
	b := grpBroker(t, WithSet("cluster.group_topic_partitions", "5"))
	CreateTopic(t, b, "itopic", 1, nil)
	waitCoordinator(t, b, "itopic-g")
	rc := dialRaw(t, b.KafkaAddr)
	requireCommitOK(t, "simple commit", rawCommit(t, rc, 8, "itopic-g", "", -1, "itopic", map[int32]int64{0: 1}, ""))
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := rc.Do(req).(*kmsg.MetadataResponse)
	var found *kmsg.MetadataResponseTopic
	for i := range resp.Topics {
		if derefStr(resp.Topics[i].Topic) == "__consumer_offsets" {
			found = &resp.Topics[i]
		}
	}
	if found == nil {
		t.Fatalf("Metadata (all topics) does not list __consumer_offsets after a commit")
	}
	if !found.IsInternal {
		t.Errorf("__consumer_offsets is not marked internal in Metadata")
	}
	if len(found.Partitions) != 5 {
		t.Errorf("__consumer_offsets has %d partitions, want group_topic_partitions=5", len(found.Partitions))
	}
}
