package group

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// Settings are the cluster properties the coordinator follows; they are
// read at each use, so changes apply without a restart.
type Settings struct {
	MinSessionTimeout     time.Duration
	MaxSessionTimeout     time.Duration
	InitialRebalanceDelay time.Duration
	OffsetRetention       time.Duration

	// Consumer-protocol (KIP-848) groups, with Kafka's group.consumer.*
	// meanings.
	ConsumerHeartbeatInterval time.Duration
	ConsumerSessionTimeout    time.Duration
	ConsumerMaxSize           int      // 0: no limit
	ConsumerAssignors         []string // the first is the default
	MigrationPolicy           MigrationPolicy
}

// defaultAssignor is the server assignor of groups whose members name
// none.
func (s Settings) defaultAssignor() string {
	if len(s.ConsumerAssignors) == 0 {
		return "uniform"
	}
	return s.ConsumerAssignors[0]
}

// Client identifies the connection a request came from.
type Client struct {
	ID   string // the request header's client id
	Host string // the remote address, as DescribeGroups shows it
}

// Options are what a Coordinator needs.
type Options struct {
	Store           Store
	Settings        func() Settings
	PartitionExists func(topic string, partition int32) bool
	// Topics resolves consumer-protocol groups' subscriptions.
	Topics Catalog
	// Owns selects the partitions of the store Load loads; nil: all.
	// Whether a group is served is decided by the loaded partitions
	// alone, so a broker may leave it nil and drive the coordinator
	// through LoadPartition and UnloadPartition.
	Owns   func(partition int32) bool
	Logger *slog.Logger
	Now    func() time.Time
}

// Coordinator owns the groups of the partitions of the store it loaded.
type Coordinator struct {
	opts   Options
	logger *slog.Logger
	now    func() time.Time

	mu sync.Mutex
	// groups holds groups of loaded partitions only: get creates none
	// elsewhere and UnloadPartition takes a partition's out, both under
	// mu, so whatever visits the table (ExpireOffsets, Compact,
	// TopicDeleted, ListGroups) touches loaded partitions alone.
	groups map[string]*group
	parts  map[int32]*partitionLoad
	closed bool

	// markers are transaction markers waiting to be settled
	// (txn_offsets.go).
	markers markerQueue

	// Rebalances started: classic groups entering PreparingRebalance,
	// consumer-protocol groups bumping their epoch.
	classicRebalances, consumerRebalances atomic.Int64
}

// New makes a coordinator that serves no group until Load or
// LoadPartition loads the group's partition.
func New(opts Options) *Coordinator {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Coordinator{
		opts: opts, logger: opts.Logger, now: opts.Now,
		groups: map[string]*group{}, parts: map[int32]*partitionLoad{},
	}
}

func (c *Coordinator) settings() Settings { return c.opts.Settings() }

// append writes a group's records and returns the offset of the first.
func (c *Coordinator) append(group string, records []log.KeyValue) (int64, error) {
	return c.opts.Store.Append(PartitionFor(group, c.opts.Store.Partitions()), records)
}

// Partition is the __consumer_offsets partition that holds a group.
func (c *Coordinator) Partition(group string) int32 {
	return PartitionFor(group, c.opts.Store.Partitions())
}

// Loaded reports whether no partition is loading: every partition the
// coordinator was asked to load is served, or its load failed. It is
// true before any load too, since a coordinator that leads no partition
// has nothing to wait for: its answer, NOT_COORDINATOR, is final.
func (c *Coordinator) Loaded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.loadingLocked()
}

// get returns a live group, creating it when create is set, or the code
// for a group whose partition is not served. The partition is checked
// under the table lock, so no group is created in a partition that is
// being unloaded or loaded.
func (c *Coordinator) get(id string, create bool) (*group, int16) {
	p := c.Partition(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.servingLocked(p); code != 0 {
		return nil, code
	}
	g := c.groups[id]
	if g == nil && create {
		g = newGroup(c, id)
		c.groups[id] = g
		go g.run()
	}
	return g, 0
}

// forget removes a group that was deleted; called on its own loop.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	mine := c.groups[g.id] == g
	if mine {
		delete(c.groups, g.id)
	}
	c.mu.Unlock()
	// Whoever takes a group out of the table stops it: Close or
	// UnloadPartition may have, and stop twice would panic.
	if mine {
		g.stop(0)
	}
}

// Close stops every group; parked requests get COORDINATOR_NOT_AVAILABLE,
// as do later ones, and loads in progress end with ErrClosed.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	groups := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	c.groups = map[string]*group{}
	for _, pl := range c.parts {
		pl.gen++
		pl.state = unloaded
	}
	c.mu.Unlock()
	stopGroups(groups, kerr.CoordinatorNotAvailable.Code)
}

// stopGroups stops groups already out of the table, all at once, and
// waits for their loops to end.
func stopGroups(groups []*group, code int16) {
	for _, g := range groups {
		g.stop(code)
	}
	for _, g := range groups {
		<-g.stopped
	}
}

// all returns the live groups; callers visit them without the table lock.
func (c *Coordinator) all() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	groups := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	return groups
}

// ExpireOffsets applies the offset retention to every empty group of the
// loaded partitions; the others are their leaders' to expire.
func (c *Coordinator) ExpireOffsets() {
	retention := c.settings().OffsetRetention
	for _, g := range c.all() {
		g.do(func() { g.expireOffsets(c.now(), retention) })
	}
}

// unavailable is the code for requests about a group the coordinator
// cannot take: its partition is loading (COORDINATOR_LOAD_IN_PROGRESS),
// not loaded here (NOT_COORDINATOR), or the coordinator closed
// (COORDINATOR_NOT_AVAILABLE). Requests check it before validating their
// fields, as Kafka does; get checks again when it looks the group up.
func (c *Coordinator) unavailable(group string) int16 {
	p := c.Partition(group)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servingLocked(p)
}

// JoinGroup answers when the group's rebalance completes, or nil if ctx
// ends first (the connection is gone).
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest, client Client) *kmsg.JoinGroupResponse {
	fail := func(code int16) *kmsg.JoinGroupResponse { return errorJoin(req, code) }
	s := c.settings()
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if req.Group == "" || len(req.Group) > maxStringBytes {
		return fail(kerr.InvalidGroupID.Code)
	}
	if !joinStringsFit(req) {
		return fail(kerr.InvalidRequest.Code)
	}
	// Read once: a partition's state changes under concurrent loads.
	unavailable := c.unavailable(req.Group)
	switch {
	case unavailable != 0:
		return fail(unavailable)
	case session < s.MinSessionTimeout || session > s.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout.Code)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	reply := make(chan *kmsg.JoinGroupResponse, 1)
	g, code := c.get(req.Group, true)
	if code != 0 {
		return fail(code)
	}
	if !g.do(func() { g.join(req, client, reply) }) {
		return fail(g.stopErr(kerr.CoordinatorNotAvailable.Code))
	}
	select {
	case resp := <-reply:
		return resp
	case <-ctx.Done():
		return nil
	}
}

// SyncGroup answers when the leader's assignment is stored.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	fail := func(code int16) *kmsg.SyncGroupResponse {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.Version = req.Version
		resp.ErrorCode = code
		return resp
	}
	g, code := c.get(req.Group, false)
	if code != 0 {
		return fail(code)
	}
	if g == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	reply := make(chan *kmsg.SyncGroupResponse, 1)
	if !g.do(func() { g.sync(req, reply) }) {
		return fail(g.stopErr(kerr.CoordinatorNotAvailable.Code))
	}
	select {
	case resp := <-reply:
		return resp
	case <-ctx.Done():
		return nil
	}
}

// Heartbeat keeps a member alive and tells it about rebalances.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g, code := c.get(req.Group, false)
	switch {
	case code != 0:
		resp.ErrorCode = code
	case g == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case !g.do(func() { resp.ErrorCode = g.heartbeat(req) }):
		resp.ErrorCode = g.stopErr(kerr.CoordinatorNotAvailable.Code)
	}
	return resp
}

// LeaveGroup removes members: one (v0-v2) or a batch (v3+).
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	var codes []int16
	g, code := c.get(req.Group, false)
	if resp.ErrorCode = code; code != 0 {
		return resp
	}
	if g == nil {
		for range members {
			codes = append(codes, kerr.UnknownMemberID.Code)
		}
	} else if !g.do(func() { resp.ErrorCode, codes = g.leave(members) }) {
		resp.ErrorCode = g.stopErr(kerr.CoordinatorNotAvailable.Code)
	}
	if req.Version < 3 {
		// One member, reported at the top level.
		if resp.ErrorCode == 0 && len(codes) == 1 {
			resp.ErrorCode = codes[0]
		}
		return resp
	}
	for i, code := range codes {
		resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{
			MemberID: members[i].MemberID, InstanceID: members[i].InstanceID, ErrorCode: code,
		})
	}
	return resp
}

// OffsetCommit stores offsets durably before answering.
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	failAll := func(code int16) *kmsg.OffsetCommitResponse {
		for _, rt := range req.Topics {
			st := kmsg.OffsetCommitResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				st.Partitions = append(st.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: rp.Partition, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	if req.Group == "" || len(req.Group) > maxStringBytes {
		return failAll(kerr.InvalidGroupID.Code)
	}
	if code := c.unavailable(req.Group); code != 0 {
		return failAll(code)
	}
	// Only a standalone commit (generation -1) may create a group; a
	// member's commit for a group that is gone is from a stale
	// generation.
	g, code := c.get(req.Group, req.Generation < 0)
	if code != 0 {
		return failAll(code)
	}
	if g == nil {
		return failAll(kerr.IllegalGeneration.Code)
	}
	if !g.do(func() { g.commit(req, resp) }) {
		resp.Topics = nil
		return failAll(g.stopErr(kerr.CoordinatorNotAvailable.Code))
	}
	return resp
}

// OffsetFetch answers committed offsets: one group (v0-v7) or several
// (v8+).
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []kmsg.OffsetFetchRequestGroupTopic
		for _, t := range req.Topics {
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		fetched := c.fetchGroup(req.Group, nil, -1, topics, req.Topics == nil, req.RequireStable)
		resp.ErrorCode = fetched.ErrorCode
		for _, t := range fetched.Topics {
			rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{
					Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode,
				})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, rg := range req.Groups {
		epoch := rg.MemberEpoch
		if req.Version < 9 {
			epoch = -1
		}
		resp.Groups = append(resp.Groups, c.fetchGroup(rg.Group, rg.MemberID, epoch, rg.Topics, rg.Topics == nil, req.RequireStable))
	}
	return resp
}

func (c *Coordinator) fetchGroup(id string, memberID *string, memberEpoch int32, topics []kmsg.OffsetFetchRequestGroupTopic, all, requireStable bool) kmsg.OffsetFetchResponseGroup {
	out := kmsg.OffsetFetchResponseGroup{Group: id}
	g, code := c.get(id, false)
	if out.ErrorCode = code; code != 0 {
		return out
	}
	fill := func(g *group) {
		if all {
			topics = topics[:0]
			if g != nil {
				for t, ps := range g.committedTopics() {
					topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t, Partitions: ps})
				}
			}
		}
		for _, rt := range topics {
			ft := kmsg.OffsetFetchResponseGroupTopic{Topic: rt.Topic}
			for _, p := range rt.Partitions {
				fp := kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1}
				metadata := ""
				if g != nil {
					fp.Offset, fp.LeaderEpoch, metadata = g.fetchedPartition(rt.Topic, p)
					if requireStable && g.txn.pendingFor(rt.Topic, p) {
						// KIP-447: an open transaction may still
						// move it; the consumer asks again.
						fp.Offset, fp.LeaderEpoch, metadata = -1, -1, ""
						fp.ErrorCode = kerr.UnstableOffsetCommit.Code
					}
				}
				fp.Metadata = &metadata
				ft.Partitions = append(ft.Partitions, fp)
			}
			out.Topics = append(out.Topics, ft)
		}
	}
	if g != nil && !g.do(func() {
		if out.ErrorCode = g.consumerFetchCode(memberID, memberEpoch); out.ErrorCode == 0 {
			fill(g)
		}
	}) {
		// A deleted group has no offsets; an unloaded one has offsets
		// this coordinator can no longer vouch for, and answering -1
		// would send the consumer to its reset policy.
		if out.ErrorCode = g.stopErr(0); out.ErrorCode != 0 {
			return out
		}
		g = nil
	}
	if g == nil {
		fill(nil)
	}
	return out
}

// OffsetDelete removes offsets of topics the group does not consume.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g, code := c.get(req.Group, false)
	switch {
	case code != 0:
		resp.ErrorCode = code
	case g == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case !g.do(func() { g.deleteOffsets(req, resp) }):
		resp.ErrorCode = g.stopErr(kerr.GroupIDNotFound.Code)
	}
	return resp
}

// ListGroups lists the groups of loaded partitions, filtered by state
// (v4+) and type (v5+). While any partition loads the list would be
// partial, so it is COORDINATOR_LOAD_IN_PROGRESS then, as in Kafka.
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loadingLocked() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	for id, g := range c.groups {
		s := g.pub.Load()
		if s.state == string(Dead) || !match(req.StatesFilter, s.state) || !match(req.TypesFilter, s.groupType) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, s.protocolType, s.state, s.groupType
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DescribeGroups describes each group; an unknown one is Dead (v0-v5) or
// GROUP_ID_NOT_FOUND (v6+), as in Kafka.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		g, code := c.get(id, false)
		consumer := false
		if code == 0 && g != nil && !g.do(func() { d, consumer = g.describe(), g.cg != nil }) {
			code, g = g.stopErr(0), nil
		}
		if consumer {
			// Kafka describes only classic groups here; its admin
			// client asks ConsumerGroupDescribe first.
			d, g = kmsg.NewDescribeGroupsResponseGroup(), nil
			d.Group = id
		}
		switch {
		case code != 0:
			d.ErrorCode = code
		case g == nil:
			d.State = string(Dead)
			if req.Version >= 6 {
				d.ErrorCode = kerr.GroupIDNotFound.Code
				msg := fmt.Sprintf("group %s not found", id)
				d.ErrorMessage = &msg
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// DeleteGroups deletes empty groups with their offsets.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		d := kmsg.NewDeleteGroupsResponseGroup()
		d.Group = id
		d.ErrorCode = c.deleteGroup(id)
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

func (c *Coordinator) deleteGroup(id string) int16 {
	g, code := c.get(id, false)
	if code != 0 {
		return code
	}
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	code = kerr.GroupIDNotFound.Code
	ran := g.do(func() {
		switch {
		case g.state == Dead:
		case !g.isEmpty():
			code = kerr.NonEmptyGroup.Code
		case g.delete() != nil:
			code = kerr.CoordinatorNotAvailable.Code
		default:
			code = 0
		}
	})
	if !ran {
		return g.stopErr(kerr.GroupIDNotFound.Code)
	}
	return code
}

// TopicDeleted drops every group's offsets for a deleted topic, as Kafka
// does, so a topic created again under the name starts uncommitted. Only
// groups of loaded partitions are here to visit.
func (c *Coordinator) TopicDeleted(topic string) {
	for _, g := range c.all() {
		g.do(func() { g.dropTopic(topic) })
	}
}

// GroupKey is a group type ("classic" or "consumer") and state, as
// ListGroups names them.
type GroupKey struct{ Type, State string }

// GroupCounts counts the live groups of the loaded partitions by type
// and state (Kafka's group-count and consumer-group-count metrics).
func (c *Coordinator) GroupCounts() map[GroupKey]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[GroupKey]int{}
	for _, g := range c.groups {
		if s := g.pub.Load(); s.state != string(Dead) {
			out[GroupKey{s.groupType, s.state}]++
		}
	}
	return out
}

// Rebalances counts the rebalances this coordinator started, by group
// type: a classic group preparing a rebalance, a consumer-protocol group
// bumping its epoch (Kafka's consumer-group-rebalance-count).
func (c *Coordinator) Rebalances() (classic, consumer int64) {
	return c.classicRebalances.Load(), c.consumerRebalances.Load()
}
