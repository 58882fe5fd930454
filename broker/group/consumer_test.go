package group

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeCatalog is a settable set of topics.
type fakeCatalog struct {
	mu     sync.Mutex
	topics map[string]int32 // name -> partitions
	index  uint64
}

func topicIDOf(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = 0xee
	return id
}

func (f *fakeCatalog) set(name string, partitions int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.topics == nil {
		f.topics = map[string]int32{}
	}
	f.topics[name] = partitions
	f.index++
}

func (f *fakeCatalog) ByName(name string) ([16]byte, int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.topics[name]
	return topicIDOf(name), n, ok
}

func (f *fakeCatalog) ByID(id [16]byte) (string, int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, n := range f.topics {
		if topicIDOf(name) == id {
			return name, n, true
		}
	}
	return "", 0, false
}

func (f *fakeCatalog) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name := range f.topics {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func (f *fakeCatalog) Index() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.index
}

func consumerSettings() Settings {
	s := testSettings()
	s.ConsumerHeartbeatInterval = 100 * time.Millisecond
	s.ConsumerSessionTimeout = 10 * time.Second
	s.ConsumerAssignors = []string{"uniform", "range"}
	s.MigrationPolicy = MigrationBidirectional
	return s
}

func newConsumerCoordinator(t *testing.T, store *memStore, cat *fakeCatalog, s Settings) *Coordinator {
	t.Helper()
	c := New(Options{
		Store:           store,
		Settings:        func() Settings { return s },
		PartitionExists: func(topic string, partition int32) bool { _, n, ok := cat.ByName(topic); return ok && partition < n },
		Topics:          cat,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(c.Close)
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	return c
}

// consumer plays a KIP-848 client: it owns what the coordinator last
// assigned it and reports that in every heartbeat.
type consumer struct {
	t     *testing.T
	c     *Coordinator
	group string
	id    string
	epoch int32
	owned map[string][]int32 // topic name -> partitions
	inst  *string
	subs  []string
	// full: the next heartbeat is a full one (every field), as a client
	// sends after an error or a lost answer.
	full bool
}

func newConsumer(t *testing.T, c *Coordinator, group, id string) *consumer {
	return &consumer{t: t, c: c, group: group, id: id, owned: map[string][]int32{}}
}

func (m *consumer) request() *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = m.group, m.id, m.epoch, m.inst
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, name := range sortedKeys(m.owned) {
		req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicIDOf(name), Partitions: m.owned[name]})
	}
	if m.full {
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 60000, m.subs
		m.full = false
	}
	return req
}

// join sends the first heartbeat with a subscription.
func (m *consumer) join(topics ...string) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	req := m.request()
	req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 0, 60000, topics
	m.subs = topics
	return m.send(req)
}

// beat heartbeats with what the member owns.
func (m *consumer) beat() *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	return m.send(m.request())
}

func (m *consumer) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	resp := m.c.ConsumerGroupHeartbeat(req, Client{ID: "client-" + m.id, Host: "/127.0.0.1"})
	if resp.ErrorCode != 0 {
		return resp
	}
	m.epoch = resp.MemberEpoch
	if resp.MemberID != nil {
		m.id = *resp.MemberID
	}
	if resp.Assignment != nil {
		// The client revokes what is gone and takes what is new.
		m.owned = map[string][]int32{}
		for _, t := range resp.Assignment.Topics {
			name, _, ok := m.c.opts.Topics.ByID(t.TopicID)
			if !ok {
				m.t.Fatalf("assignment names an unknown topic %x", t.TopicID)
			}
			m.owned[name] = slices.Sorted(slices.Values(t.Partitions))
		}
	}
	return resp
}

func mustOK(t *testing.T, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		t.Fatalf("heartbeat: %v %s", kerr.ErrorForCode(resp.ErrorCode), msg)
	}
	return resp
}

// settle heartbeats every member until the group is stable, bounded.
func settle(t *testing.T, members ...*consumer) {
	t.Helper()
	for round := 0; round < 20; round++ {
		for _, m := range members {
			mustOK(t, m.beat())
		}
		if describeState(t, members[0].c, members[0].group) == "Stable" {
			return
		}
	}
	t.Fatalf("group %s not stable after 20 rounds: %s", members[0].group, describeState(t, members[0].c, members[0].group))
}

func describeGroup(t *testing.T, c *Coordinator, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{group}
	return c.ConsumerGroupDescribe(req).Groups[0]
}

func describeState(t *testing.T, c *Coordinator, group string) string {
	return describeGroup(t, c, group).State
}

// checkExclusive fails if a partition is owned twice or one of total is
// owned by nobody.
func checkExclusive(t *testing.T, topic string, total int32, members ...*consumer) {
	t.Helper()
	seen := map[int32]string{}
	for _, m := range members {
		for _, p := range m.owned[topic] {
			if other, dup := seen[p]; dup {
				t.Fatalf("%s/%d owned by %s and %s", topic, p, other, m.id)
			}
			seen[p] = m.id
		}
	}
	if int32(len(seen)) != total {
		t.Fatalf("%d of %d partitions of %s owned: %v", len(seen), total, topic, seen)
	}
}

func TestConsumerGroupJoinAssignsEverything(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("orders", 6)
	c := newConsumerCoordinator(t, newMemStore(4), cat, consumerSettings())
	a := newConsumer(t, c, "g", "member-a")
	resp := mustOK(t, a.join("orders"))
	if resp.MemberEpoch != 1 || resp.HeartbeatIntervalMillis != 100 || resp.Assignment == nil {
		t.Fatalf("first join: epoch %d interval %d assignment %v", resp.MemberEpoch, resp.HeartbeatIntervalMillis, resp.Assignment)
	}
	checkExclusive(t, "orders", 6, a)

	b := newConsumer(t, c, "g", "member-b")
	mustOK(t, b.join("orders"))
	if len(b.owned["orders"]) != 0 {
		t.Fatalf("b got %v before a revoked anything", b.owned)
	}
	// a must give partitions up before b gets them: never owned twice.
	for round := 0; round < 10 && describeState(t, c, "g") != "Stable"; round++ {
		mustOK(t, a.beat())
		checkExclusive(t, "orders", int32(len(a.owned["orders"])+len(b.owned["orders"])), a, b)
		mustOK(t, b.beat())
		checkExclusive(t, "orders", int32(len(a.owned["orders"])+len(b.owned["orders"])), a, b)
	}
	checkExclusive(t, "orders", 6, a, b)
	if len(a.owned["orders"]) != 3 || len(b.owned["orders"]) != 3 {
		t.Fatalf("not balanced: a %v b %v", a.owned, b.owned)
	}
	d := describeGroup(t, c, "g")
	if d.Epoch != 2 || d.AssignmentEpoch != 2 || d.AssignorName != "uniform" || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	for _, m := range d.Members {
		if m.MemberEpoch != 2 || m.MemberType != memberTypeConsumer || len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "orders" {
			t.Fatalf("described member: %+v", m)
		}
	}
}

func TestConsumerGroupLeaveAndFencing(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 4)
	c := newConsumerCoordinator(t, newMemStore(4), cat, consumerSettings())
	a, b := newConsumer(t, c, "g", "a"), newConsumer(t, c, "g", "b")
	mustOK(t, a.join("t"))
	mustOK(t, b.join("t"))
	settle(t, a, b)

	// An epoch ahead of the coordinator's, or an old one that is not the
	// previous epoch, is fenced.
	req := a.request()
	req.MemberEpoch = a.epoch + 1
	if code := c.ConsumerGroupHeartbeat(req, Client{}).ErrorCode; code != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %v", kerr.ErrorForCode(code))
	}
	req.MemberEpoch = 0
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicIDOf("t"), Partitions: []int32{0}}}
	req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 1000, []string{"t"}
	if code := c.ConsumerGroupHeartbeat(req, Client{}).ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("join owning partitions: %v", kerr.ErrorForCode(code))
	}
	unknown := newConsumer(t, c, "g", "nobody")
	unknown.epoch = 3
	if code := unknown.beat().ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(code))
	}

	// b leaves: a gets everything back at a new epoch.
	leave := b.request()
	leave.MemberEpoch = leaveEpoch
	if resp := c.ConsumerGroupHeartbeat(leave, Client{}); resp.ErrorCode != 0 || resp.MemberEpoch != leaveEpoch {
		t.Fatalf("leave: %v epoch %d", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch)
	}
	settle(t, a)
	checkExclusive(t, "t", 4, a)
	if d := describeGroup(t, c, "g"); len(d.Members) != 1 || d.Epoch != 3 {
		t.Fatalf("after leave: %+v", d)
	}
}

func TestConsumerGroupSessionExpiry(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 2)
	s := consumerSettings()
	s.ConsumerSessionTimeout = 150 * time.Millisecond
	c := newConsumerCoordinator(t, newMemStore(4), cat, s)
	a := newConsumer(t, c, "g", "a")
	mustOK(t, a.join("t"))
	deadline := time.Now().Add(5 * time.Second)
	for describeState(t, c, "g") != "Empty" {
		if time.Now().After(deadline) {
			t.Fatal("member not fenced after its session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := a.beat().ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after expiry: %v", kerr.ErrorForCode(code))
	}
	// It rejoins under the same id and gets everything again.
	a.epoch, a.owned = 0, map[string][]int32{}
	mustOK(t, a.join("t"))
	checkExclusive(t, "t", 2, a)
}

func TestConsumerGroupStaticMemberRejoins(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 4)
	c := newConsumerCoordinator(t, newMemStore(4), cat, consumerSettings())
	instA, instB := "instance-a", "instance-b"
	a, b := newConsumer(t, c, "g", "a1"), newConsumer(t, c, "g", "b1")
	a.inst, b.inst = &instA, &instB
	mustOK(t, a.join("t"))
	mustOK(t, b.join("t"))
	settle(t, a, b)
	had := slices.Clone(a.owned["t"])
	epoch := describeGroup(t, c, "g").Epoch

	// Another process with the same instance id cannot join while a is in.
	dup := newConsumer(t, c, "g", "a2")
	dup.inst = &instA
	if code := dup.join("t").ErrorCode; code != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("instance id in use: %v", kerr.ErrorForCode(code))
	}
	// a leaves for a restart (-2) and comes back as a2: same partitions, no
	// new group epoch.
	leave := a.request()
	leave.MemberEpoch = staticLeaveEpoch
	if resp := c.ConsumerGroupHeartbeat(leave, Client{}); resp.ErrorCode != 0 || resp.MemberEpoch != staticLeaveEpoch {
		t.Fatalf("static leave: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	resp := mustOK(t, dup.join("t"))
	if !slices.Equal(dup.owned["t"], had) {
		t.Fatalf("rejoined static member got %v, had %v", dup.owned["t"], had)
	}
	if d := describeGroup(t, c, "g"); d.Epoch != epoch || len(d.Members) != 2 {
		t.Fatalf("after static rejoin: epoch %d (was %d), %d members", d.Epoch, epoch, len(d.Members))
	}
	// The old member id is fenced by the new one.
	if code := a.beat().ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("old static member: %v", kerr.ErrorForCode(code))
	}
	if resp.MemberEpoch <= 0 {
		t.Fatalf("rejoined epoch %d", resp.MemberEpoch)
	}
}

func TestConsumerGroupSurvivesReload(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 6)
	cat.set("u", 2)
	store := newMemStore(2)
	c := newConsumerCoordinator(t, store, cat, consumerSettings())
	a, b := newConsumer(t, c, "g", "a"), newConsumer(t, c, "g", "b")
	instB := "b-instance"
	b.inst = &instB
	mustOK(t, a.join("t", "u"))
	mustOK(t, b.join("t"))
	settle(t, a, b)
	before := describeGroup(t, c, "g")

	c2 := newConsumerCoordinator(t, store, cat, consumerSettings())
	after := describeGroup(t, c2, "g")
	for _, d := range []*kmsg.ConsumerGroupDescribeResponseGroup{&before, &after} {
		for i := range d.Members {
			if d.Members[i].InstanceID != nil {
				inst := "instance:" + *d.Members[i].InstanceID
				d.Members[i].InstanceID, d.Members[i].ClientID = nil, d.Members[i].ClientID+" "+inst
			}
		}
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("reloaded group differs:\nbefore %+v\nafter  %+v", before, after)
	}
	// The members carry on at their epochs with the new coordinator.
	a.c, b.c = c2, c2
	mustOK(t, a.beat())
	mustOK(t, b.beat())
	checkExclusive(t, "t", 6, a, b)
}

func TestConsumerGroupOffsetCommitByEpoch(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 2)
	c := newConsumerCoordinator(t, newMemStore(4), cat, consumerSettings())
	a := newConsumer(t, c, "g", "a")
	mustOK(t, a.join("t"))
	commit := func(version int16, member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = version, "g", member, epoch
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
		return c.OffsetCommit(req).Topics[0].Partitions[0].ErrorCode
	}
	for _, tc := range []struct {
		name    string
		version int16
		member  string
		epoch   int32
		want    int16
	}{
		{"current epoch", 9, "a", a.epoch, 0},
		{"stale epoch", 9, "a", a.epoch - 1, kerr.StaleMemberEpoch.Code},
		{"unknown member", 9, "x", a.epoch, kerr.UnknownMemberID.Code},
		{"v8 from a consumer-protocol member", 8, "a", a.epoch, kerr.UnsupportedVersion.Code},
		{"admin commit while members are in", 9, "", -1, kerr.UnknownMemberID.Code},
	} {
		if got := commit(tc.version, tc.member, tc.epoch); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	stale := "a"
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberID: &stale, MemberEpoch: a.epoch + 5}}
	if code := c.OffsetFetch(fetch).Groups[0].ErrorCode; code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("fetch at a stale epoch: %v", kerr.ErrorForCode(code))
	}
	fetch.Groups[0].MemberEpoch = a.epoch
	if g := c.OffsetFetch(fetch).Groups[0]; g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("fetch: %+v", g)
	}
}

func TestConsumerGroupRegexSubscription(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("logs-a", 2)
	cat.set("metrics", 2)
	c := newConsumerCoordinator(t, newMemStore(4), cat, consumerSettings())
	a := newConsumer(t, c, "g", "a")
	req := a.request()
	re := "logs-.*"
	req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicRegex = 0, 1000, &re
	mustOK(t, a.send(req))
	if len(a.owned) != 1 || len(a.owned["logs-a"]) != 2 {
		t.Fatalf("regex assignment: %v", a.owned)
	}
	// A topic created later is picked up by the next heartbeat.
	cat.set("logs-b", 3)
	settle(t, a)
	if len(a.owned["logs-b"]) != 3 || a.owned["metrics"] != nil {
		t.Fatalf("after logs-b was created: %v", a.owned)
	}
	bad := newConsumer(t, c, "g", "b").request()
	badRe := "logs-("
	bad.MemberEpoch, bad.RebalanceTimeoutMillis, bad.SubscribedTopicRegex = 0, 1000, &badRe
	if code := c.ConsumerGroupHeartbeat(bad, Client{}).ErrorCode; code != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %v", kerr.ErrorForCode(code))
	}
}

func TestConsumerGroupProtocolConversions(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 2)
	c := newConsumerCoordinator(t, newMemStore(4), cat, consumerSettings())

	// A classic group of another embedded protocol (Connect's) cannot be
	// joined with the consumer protocol.
	connect := joinReq("classic", joinOpts{instanceID: "worker-1"})
	connect.ProtocolType = "connect"
	if r := wait(t, joinAsync(c, connect), "connect join"); r.ErrorCode != 0 {
		t.Fatalf("connect join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := newConsumer(t, c, "classic", "a").join("t").ErrorCode; code != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer join of a Connect group: %v", kerr.ErrorForCode(code))
	}

	// An empty classic group with offsets becomes a consumer group and
	// keeps them.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 9, "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 42}}}}
	if code := c.OffsetCommit(commit).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("standalone commit: %v", kerr.ErrorForCode(code))
	}
	a := newConsumer(t, c, "g", "a")
	mustOK(t, a.join("t"))
	if code, ids := listGroups(c); code != 0 || !ids["g"] {
		t.Fatalf("list: %v %v", code, ids)
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version, lreq.TypesFilter = 5, []string{"consumer"}
	lresp := c.ListGroups(lreq)
	if len(lresp.Groups) != 1 || lresp.Groups[0].Group != "g" || lresp.Groups[0].GroupState != "Stable" || lresp.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("consumer groups listed: %+v", lresp.Groups)
	}
	if d := describeGroup(t, c, "classic"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	// A classic member of another protocol type cannot join it.
	other := joinReq("g", joinOpts{instanceID: "worker-1"})
	other.ProtocolType = "connect"
	if r := wait(t, joinAsync(c, other), "connect join"); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("connect join of a consumer group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Once empty it becomes classic again, offsets kept.
	leave := a.request()
	leave.MemberEpoch = leaveEpoch
	mustOK(t, c.ConsumerGroupHeartbeat(leave, Client{}))
	stableMember(t, c, "g")
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 9
	f.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{1}}}}}
	if got := c.OffsetFetch(f).Groups[0].Topics[0].Partitions[0].Offset; got != 42 {
		t.Fatalf("offset after two conversions: %d", got)
	}
}

func TestConsumerGroupHeartbeatValidation(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 1)
	c := newConsumerCoordinator(t, newMemStore(4), cat, consumerSettings())
	empty, bogus := "", "sticky"
	for _, tc := range []struct {
		name string
		edit func(*kmsg.ConsumerGroupHeartbeatRequest)
		want int16
	}{
		{"no group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest.Code},
		{"v1 without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = &empty }, kerr.InvalidRequest.Code},
		{"join without rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest.Code},
		{"join without subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest.Code},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest.Code},
		{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = staticLeaveEpoch }, kerr.InvalidRequest.Code},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = &bogus }, kerr.UnsupportedAssignor.Code},
	} {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", "m", 1000
		req.SubscribedTopicNames, req.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		tc.edit(req)
		if got := c.ConsumerGroupHeartbeat(req, Client{}).ErrorCode; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	// v0: the coordinator makes the member id.
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.RebalanceTimeoutMillis = 0, "g0", 1000
	req.SubscribedTopicNames, req.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := c.ConsumerGroupHeartbeat(req, Client{}); resp.ErrorCode != 0 || resp.MemberID == nil || *resp.MemberID == "" {
		t.Fatalf("v0 join: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.MemberID)
	}
}

// TestConsumerGroupNeverOwnedTwice drives a group through random joins,
// leaves, subscription changes, topic growth and lost answers, and
// checks after every step that no partition is assigned to, or being
// revoked by, two members at once; then, with everyone heartbeating,
// that the group settles with every subscribed partition owned once.
func TestConsumerGroupNeverOwnedTwice(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		cat := &fakeCatalog{}
		cat.set("a", 6)
		cat.set("b", 3)
		c := newConsumerCoordinator(t, newMemStore(2), cat, consumerSettings())
		group := fmt.Sprintf("g%d", seed)
		var members []*consumer
		subs := [][]string{{"a"}, {"b"}, {"a", "b"}}
		for step := 0; step < 120; step++ {
			switch op := rng.IntN(10); {
			case op == 0 && len(members) < 6:
				m := newConsumer(t, c, group, fmt.Sprintf("m%d", step))
				mustOK(t, m.join(subs[rng.IntN(len(subs))]...))
				members = append(members, m)
			case op == 1 && len(members) > 0:
				i := rng.IntN(len(members))
				leave := members[i].request()
				leave.MemberEpoch = leaveEpoch
				mustOK(t, c.ConsumerGroupHeartbeat(leave, Client{}))
				members = append(members[:i], members[i+1:]...)
			case op == 2 && len(members) > 0:
				m := members[rng.IntN(len(members))]
				req := m.request()
				req.SubscribedTopicNames = subs[rng.IntN(len(subs))]
				m.subs = req.SubscribedTopicNames
				rejoinIfFenced(t, m, m.send(req))
			case op == 3:
				_, n, _ := cat.ByName("a")
				if n < 12 {
					cat.set("a", n+1)
				}
			case op == 4 && len(members) > 0:
				// An answer lost: the coordinator moved on, the member
				// did not.
				m := members[rng.IntN(len(members))]
				epoch, owned := m.epoch, m.owned
				m.beat()
				m.epoch, m.owned, m.full = epoch, owned, true
			case len(members) > 0:
				m := members[rng.IntN(len(members))]
				rejoinIfFenced(t, m, m.beat())
			}
			checkCoordinatorExclusive(t, c, group)
		}
		if len(members) == 0 {
			continue
		}
		// Clients whose last answer was lost hear it at their next
		// heartbeat: everyone heartbeats at least twice.
		for round := 0; round < 30 && (round < 2 || describeState(t, c, group) != "Stable"); round++ {
			for _, m := range members {
				rejoinIfFenced(t, m, m.beat())
			}
			checkCoordinatorExclusive(t, c, group)
		}
		d := describeGroup(t, c, group)
		if d.State != "Stable" {
			t.Fatalf("seed %d: group not stable: %+v", seed, d)
		}
		wanted := map[string]bool{}
		for _, m := range d.Members {
			for _, topic := range m.SubscribedTopics {
				wanted[topic] = true
			}
		}
		for topic := range wanted {
			_, n, _ := cat.ByName(topic)
			checkExclusive(t, topic, n, members...)
		}
	}
}

// checkCoordinatorExclusive fails if the coordinator has a partition
// assigned to or pending revocation by two members.
func checkCoordinatorExclusive(t *testing.T, c *Coordinator, group string) {
	t.Helper()
	g, _ := c.get(group, false)
	if g == nil {
		return
	}
	var problem string
	g.do(func() { // no t.Fatal on the group's loop: it would end the loop
		if g.cg == nil {
			return
		}
		owner := map[topicPartitionID]string{}
		for id, m := range g.cg.members {
			for _, a := range []partitions{m.assigned, m.revoking} {
				for tid, ps := range a {
					for _, p := range ps {
						k := topicPartitionID{tid, p}
						if other, ok := owner[k]; ok && other != id && problem == "" {
							problem = fmt.Sprintf("partition %x/%d held by %s and %s", tid[:2], p, other, id)
						}
						owner[k] = id
					}
				}
			}
		}
	})
	if problem != "" {
		t.Fatal(problem)
	}
}

// rejoinIfFenced does what a client does with FENCED_MEMBER_EPOCH: it
// gives everything up and rejoins; any other error fails the test.
func rejoinIfFenced(t *testing.T, m *consumer, r *kmsg.ConsumerGroupHeartbeatResponse) {
	t.Helper()
	if r.ErrorCode == kerr.FencedMemberEpoch.Code {
		m.epoch, m.owned = 0, map[string][]int32{}
		r = m.join(m.subs...)
	}
	mustOK(t, r)
}

func TestGroupCountsAndRebalances(t *testing.T) {
	cat := &fakeCatalog{}
	cat.set("t", 2)
	c := newConsumerCoordinator(t, newMemStore(2), cat, consumerSettings())
	stableMember(t, c, "classic")
	a, b := newConsumer(t, c, "g", "a"), newConsumer(t, c, "g", "b")
	mustOK(t, a.join("t"))
	mustOK(t, b.join("t"))
	settle(t, a, b)
	counts := c.GroupCounts()
	if counts[GroupKey{"classic", "Stable"}] != 1 || counts[GroupKey{"consumer", "Stable"}] != 1 || len(counts) != 2 {
		t.Fatalf("counts %v", counts)
	}
	classic, consumer := c.Rebalances()
	if classic != 1 || consumer != 2 {
		t.Fatalf("rebalances: classic %d consumer %d; want 1 (the first join) and 2 (two joins)", classic, consumer)
	}
}
