package group

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// memStore keeps records in memory, per partition, in append order.
type memStore struct {
	mu    sync.Mutex
	parts [][]log.KeyValue
	// txn says, per partition and record offset, what AppendTxn and
	// appendMarker wrote (plain records have none).
	txn      map[int32]map[int]StoredRecord
	fail     bool
	txnErr   error         // AppendTxn's answer while set
	onReplay func(p int32) // called as a replay starts, to hold it up
	replays  map[int32]int
}

func newMemStore(partitions int) *memStore {
	return &memStore{parts: make([][]log.KeyValue, partitions)}
}

func (s *memStore) Partitions() int32 { return int32(len(s.parts)) }

func (s *memStore) Append(p int32, records []log.KeyValue) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return 0, io.ErrClosedPipe
	}
	off := int64(len(s.parts[p]))
	s.parts[p] = append(s.parts[p], records...)
	return off, nil
}

// AppendTxn stores records of producer pid's transaction.
func (s *memStore) AppendTxn(p int32, pid int64, _ int16, records []log.KeyValue) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return 0, io.ErrClosedPipe
	}
	if s.txnErr != nil {
		return 0, s.txnErr
	}
	off := int64(len(s.parts[p]))
	for _, r := range records {
		s.markTxn(p, StoredRecord{ProducerID: pid, Transactional: true})
		s.parts[p] = append(s.parts[p], r)
	}
	return off, nil
}

// appendMarker appends a transaction marker of pid and returns its offset.
func (s *memStore) appendMarker(p int32, pid int64, commit bool) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markTxn(p, StoredRecord{ProducerID: pid, Control: true, Commit: commit})
	s.parts[p] = append(s.parts[p], log.KeyValue{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}})
	return int64(len(s.parts[p]) - 1)
}

// markTxn records what the record about to be appended to p is; s.mu is
// held.
func (s *memStore) markTxn(p int32, sr StoredRecord) {
	if s.txn == nil {
		s.txn = map[int32]map[int]StoredRecord{}
	}
	if s.txn[p] == nil {
		s.txn[p] = map[int]StoredRecord{}
	}
	s.txn[p][len(s.parts[p])] = sr
}

func (s *memStore) Replay(p int32, fn func(StoredRecord)) error {
	s.mu.Lock()
	hook := s.onReplay
	if s.replays == nil {
		s.replays = map[int32]int{}
	}
	s.replays[p]++
	s.mu.Unlock()
	if hook != nil {
		hook(p)
	}
	s.mu.Lock()
	records := append([]log.KeyValue(nil), s.parts[p]...)
	meta := map[int]StoredRecord{}
	for i, sr := range s.txn[p] {
		meta[i] = sr
	}
	s.mu.Unlock()
	for i, r := range records {
		sr, ok := meta[i]
		if !ok {
			sr.ProducerID = -1
		}
		sr.Key, sr.Value, sr.Offset = r.Key, r.Value, int64(i)
		fn(sr)
	}
	return nil
}

func testSettings() Settings {
	return Settings{MinSessionTimeout: 10 * time.Millisecond, MaxSessionTimeout: time.Minute, OffsetRetention: time.Hour}
}

func (s *memStore) setOnReplay(hook func(p int32)) {
	s.mu.Lock()
	s.onReplay = hook
	s.mu.Unlock()
}

func (s *memStore) replayCount(p int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replays[p]
}

func (s *memStore) records(p int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.parts[p])
}

func newTestCoordinator(t *testing.T, store *memStore, settings Settings) *Coordinator {
	t.Helper()
	c := newIdleCoordinator(t, store, settings, nil)
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	return c
}

// newIdleCoordinator makes a coordinator that has loaded nothing.
func newIdleCoordinator(t *testing.T, store *memStore, settings Settings, owns func(int32) bool) *Coordinator {
	t.Helper()
	c := New(Options{
		Store:           store,
		Settings:        func() Settings { return settings },
		PartitionExists: func(topic string, partition int32) bool { return topic != "missing" && partition < 8 },
		Owns:            owns,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(c.Close)
	return c
}

// groupIn is a group id that lives in partition p.
func groupIn(t *testing.T, c *Coordinator, p int32, prefix string) string {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); c.Partition(id) == p {
			return id
		}
	}
	t.Fatalf("no group id with prefix %s in partition %d", prefix, p)
	return ""
}

// groupsOf are the groups of partition p in the coordinator's table.
func groupsOf(c *Coordinator, p int32) []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*group
	for id, g := range c.groups {
		if c.Partition(id) == p {
			out = append(out, g)
		}
	}
	return out
}

func fetchCode(c *Coordinator, group string) int16 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	return c.OffsetFetch(req).Groups[0].ErrorCode
}

func listGroups(c *Coordinator) (code int16, ids map[string]bool) {
	resp := c.ListGroups(kmsg.NewPtrListGroupsRequest())
	ids = map[string]bool{}
	for _, g := range resp.Groups {
		ids[g.Group] = true
	}
	return resp.ErrorCode, ids
}

// stableMember puts one member in group and completes its rebalance.
func stableMember(t *testing.T, c *Coordinator, group string) *kmsg.JoinGroupResponse {
	t.Helper()
	a := joinNew(t, c, group, joinOpts{})
	if r := wait(t, syncAsync(c, group, a.MemberID, a.Generation, map[string][]byte{a.MemberID: []byte("a")}), "sync"); r.ErrorCode != 0 {
		t.Fatalf("sync: %d", r.ErrorCode)
	}
	return a
}

// parkedJoin leaves a second member's JoinGroup waiting in group for the
// first member, which is stable and has not rejoined.
func parkedJoin(t *testing.T, c *Coordinator, group string) chan *kmsg.JoinGroupResponse {
	t.Helper()
	stableMember(t, c, group)
	first := wait(t, joinAsync(c, joinReq(group, joinOpts{})), "second member's first join")
	parked := joinAsync(c, joinReq(group, joinOpts{memberID: first.MemberID}))
	waitState(t, c, group, "PreparingRebalance")
	return parked
}

// parkedSync leaves a follower's SyncGroup waiting in group for the
// leader's assignment.
func parkedSync(t *testing.T, c *Coordinator, group string) chan *kmsg.SyncGroupResponse {
	t.Helper()
	a := stableMember(t, c, group)
	first := wait(t, joinAsync(c, joinReq(group, joinOpts{})), "second member's first join")
	bJoin := joinAsync(c, joinReq(group, joinOpts{memberID: first.MemberID}))
	waitState(t, c, group, "PreparingRebalance")
	aJoin := wait(t, joinAsync(c, joinReq(group, joinOpts{memberID: a.MemberID})), "first member's rejoin")
	b := wait(t, bJoin, "second member's join")
	follower := b
	if b.MemberID == b.LeaderID {
		follower = aJoin
	}
	parked := syncAsync(c, group, follower.MemberID, follower.Generation, nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var waiting bool
		c.mu.Lock()
		g := c.groups[group]
		c.mu.Unlock()
		g.do(func() { waiting = g.members[follower.MemberID].syncReply != nil })
		if waiting {
			return parked
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower's sync never parked")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func consumerProtocols(topics ...string) []kmsg.JoinGroupRequestProtocol {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	return []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}, {Name: "roundrobin", Metadata: meta.AppendTo(nil)}}
}

type joinOpts struct {
	version    int16
	memberID   string
	instanceID string
	session    time.Duration
	rebalance  time.Duration
	protocols  []kmsg.JoinGroupRequestProtocol
}

func joinReq(group string, o joinOpts) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = o.version
	if req.Version == 0 {
		req.Version = 9
	}
	req.Group, req.MemberID, req.ProtocolType = group, o.memberID, "consumer"
	if o.instanceID != "" {
		id := o.instanceID
		req.InstanceID = &id
	}
	req.SessionTimeoutMillis = int32(max(o.session, 10*time.Second).Milliseconds())
	if o.session > 0 {
		req.SessionTimeoutMillis = int32(o.session.Milliseconds())
	}
	req.RebalanceTimeoutMillis = int32(max(o.rebalance, 0).Milliseconds())
	if o.rebalance == 0 {
		req.RebalanceTimeoutMillis = 10_000
	}
	req.Protocols = o.protocols
	if req.Protocols == nil {
		req.Protocols = consumerProtocols("t")
	}
	return req
}

// joinAsync starts a JoinGroup and returns where its answer arrives.
func joinAsync(c *Coordinator, req *kmsg.JoinGroupRequest) chan *kmsg.JoinGroupResponse {
	out := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { out <- c.JoinGroup(context.Background(), req, Client{ID: "test", Host: "/127.0.0.1"}) }()
	return out
}

func wait[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// joinNew does the KIP-394 round trip and returns the completed join.
func joinNew(t *testing.T, c *Coordinator, group string, o joinOpts) *kmsg.JoinGroupResponse {
	t.Helper()
	resp := wait(t, joinAsync(c, joinReq(group, o)), "first join")
	if o.instanceID == "" {
		if resp.ErrorCode != kerrCode("MEMBER_ID_REQUIRED") {
			t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", resp.ErrorCode)
		}
		o.memberID = resp.MemberID
		resp = wait(t, joinAsync(c, joinReq(group, o)), "second join")
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("join: error %d", resp.ErrorCode)
	}
	return resp
}

func syncAsync(c *Coordinator, group, member string, generation int32, assignments map[string][]byte) chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, generation
	for id, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	out := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { out <- c.SyncGroup(context.Background(), req) }()
	return out
}

func heartbeat(c *Coordinator, group, member string, generation int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, member, generation
	return c.Heartbeat(req).ErrorCode
}

func commit(c *Coordinator, group, member string, generation int32, topic string, offsets map[int32]int64) map[int32]int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.MemberID, req.Generation = group, member, generation
	rt := kmsg.OffsetCommitRequestTopic{Topic: topic}
	for p, o := range offsets {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: o, LeaderEpoch: -1})
	}
	req.Topics = append(req.Topics, rt)
	out := map[int32]int16{}
	for _, p := range c.OffsetCommit(req).Topics[0].Partitions {
		out[p.Partition] = p.ErrorCode
	}
	return out
}

func fetchOffsets(c *Coordinator, group string) map[string]map[int32]int64 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	out := map[string]map[int32]int64{}
	for _, t := range c.OffsetFetch(req).Groups[0].Topics {
		out[t.Topic] = map[int32]int64{}
		for _, p := range t.Partitions {
			out[t.Topic][p.Partition] = p.Offset
		}
	}
	return out
}

func describe(c *Coordinator, group string) kmsg.DescribeGroupsResponseGroup {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	return c.DescribeGroups(req).Groups[0]
}

func waitState(t *testing.T, c *Coordinator, group, state string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for describe(c, group).State != state {
		if time.Now().After(deadline) {
			t.Fatalf("group %s never reached %s: %+v", group, state, describe(c, group))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// compactByKey does to partition p what the log cleaner does to
// __consumer_offsets: only each key's latest record stays, tombstones
// included (they go only after delete.retention.ms), in offset order.
func (s *memStore) compactByKey(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	latest := map[string]int{}
	for i, r := range s.parts[p] {
		latest[string(r.Key)] = i
	}
	var kept []log.KeyValue
	for i, r := range s.parts[p] {
		if latest[string(r.Key)] == i {
			kept = append(kept, r)
		}
	}
	s.parts[p] = kept
}
