package integration

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers for the group tests, above all the raw group-protocol ones
// (groups_raw_*_test.go; groups_*_test.go use some too): error codes and API
// keys, a broker with test-friendly group settings, consumer-protocol
// encoding, rawMember (one classic-protocol member driven request by
// request), and raw commit, offset-fetch and describe requests.

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
