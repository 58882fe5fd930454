package group

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/group/assign"
	"github.com/weir-broker/weir/log"
)

// Catalog is what consumer-protocol groups need of the cluster's topics:
// their subscriptions are names (or a regular expression) and their
// assignments are topic ids.
type Catalog interface {
	// ByName returns a topic's id and partition count.
	ByName(name string) (id [16]byte, partitions int32, ok bool)
	// ByID returns a topic's name and partition count.
	ByID(id [16]byte) (name string, partitions int32, ok bool)
	// Names lists the topics a regular expression may match: every topic,
	// internal ones included, as Kafka's coordinator resolves them (a
	// member subscribing to __consumer_offsets by regex gets it).
	Names() []string
	// Index changes whenever the topics may have changed.
	Index() uint64
}

// ConsumerGroupHeartbeat is KIP-848's one request: a member joins,
// heartbeats, acknowledges revocations and leaves through it, and gets
// its epoch and assignment back.
func (c *Coordinator) ConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, client Client) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		return heartbeatError(resp, code, msg)
	}
	if code := c.unavailable(req.Group); code != 0 && req.Group != "" {
		return fail(code, "")
	}
	if code, msg := c.validateConsumerHeartbeat(req); code != 0 {
		return fail(code, msg)
	}
	if len(client.ID) > maxStringBytes || len(client.Host) > maxStringBytes {
		return fail(kerr.InvalidRequest.Code, "The client id is longer than the 32767 bytes __consumer_offsets records can hold.")
	}
	g, code := c.get(req.Group, req.MemberEpoch == 0)
	if code != 0 {
		return fail(code, "")
	}
	if g == nil {
		return fail(kerr.UnknownMemberID.Code, fmt.Sprintf("group %s has no member %s", req.Group, req.MemberID))
	}
	var out *kmsg.ConsumerGroupHeartbeatResponse
	if !g.do(func() { out = g.consumerHeartbeat(req, client) }) {
		return fail(g.stopErr(kerr.UnknownMemberID.Code), "")
	}
	return out
}

// heartbeatError answers code, with msg when there is one.
func heartbeatError(resp *kmsg.ConsumerGroupHeartbeatResponse, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// validateConsumerHeartbeat is Kafka's check of the request's fields.
func (c *Coordinator) validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	invalid := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	switch {
	case req.Group == "":
		return invalid("GroupId can't be empty.")
	case len(req.Group) > maxStringBytes:
		return kerr.InvalidGroupID.Code, "GroupId is too long."
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	case req.Version >= 1 && req.MemberID == "":
		return invalid("MemberId can't be empty.")
	}
	if !consumerStringsFit(req) {
		return invalid("A field is longer than the 32767 bytes __consumer_offsets records can hold.")
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == leaveEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
	case e == 0:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) != 0:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case len(req.SubscribedTopicNames) == 0 && (req.SubscribedTopicRegex == nil || *req.SubscribedTopicRegex == ""):
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case e == staticLeaveEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	default:
		return invalid("MemberEpoch is invalid.")
	}
	if req.SubscribedTopicNames != nil && req.SubscribedTopicRegex != nil {
		return invalid("SubscribedTopicNames and SubscribedTopicRegex cannot be set at the same time.")
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileTopicRegex(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex %q is not a valid regular expression: %v", *req.SubscribedTopicRegex, err)
		}
	}
	if req.ServerAssignor != nil && !slices.Contains(c.settings().ConsumerAssignors, *req.ServerAssignor) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %v.", *req.ServerAssignor, c.settings().ConsumerAssignors)
	}
	return 0, ""
}

// consumerStringsFit: every string the member's records would hold fits
// in their int16 lengths.
func consumerStringsFit(req *kmsg.ConsumerGroupHeartbeatRequest) bool {
	fits := func(s *string) bool { return s == nil || len(*s) <= maxStringBytes }
	if len(req.MemberID) > maxStringBytes || !fits(req.InstanceID) || !fits(req.RackID) || !fits(req.SubscribedTopicRegex) || !fits(req.ServerAssignor) {
		return false
	}
	for _, t := range req.SubscribedTopicNames {
		if len(t) > maxStringBytes {
			return false
		}
	}
	return true
}

// compileTopicRegex compiles a subscription as Kafka matches it (RE2J's
// matches(): the whole topic name). Go's regexp is RE2 as well.
func compileTopicRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// consumerHeartbeat runs on the group's loop.
func (g *group) consumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, client Client) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		return heartbeatError(resp, code, msg)
	}
	if g.state == Dead {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	cg := g.cg
	var conversion []log.KeyValue
	if cg == nil {
		switch {
		case req.MemberEpoch != 0:
			return fail(kerr.UnknownMemberID.Code, fmt.Sprintf("group %s has no member %s", g.id, req.MemberID))
		case g.isEmpty():
			// An empty classic group (offsets only) becomes a consumer
			// group: its metadata record goes, its offsets stay.
			cg, conversion = newConsumerGroup(), []log.KeyValue{{Key: groupKey(g.id)}}
		case g.canUpgrade():
			cg, conversion = g.upgraded()
		default:
			// Kafka's answer when its migration policy or the group's
			// embedded protocol forbids the upgrade.
			return fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", g.id))
		}
	}
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		return g.consumerLeave(req, resp)
	}
	code, msg := g.consumerJoinOrHeartbeat(req, client, resp, cg, conversion)
	if code != 0 {
		return fail(code, msg)
	}
	return resp
}

// consumerJoinOrHeartbeat handles a join (epoch 0) or a heartbeat: the
// member is created or updated, the group epoch bumped when the
// subscriptions or their topics changed, the target assignment computed
// when the group epoch is ahead of it, and the member reconciled towards
// its target. Every change is written before any of it is applied.
func (g *group) consumerJoinOrHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, client Client, resp *kmsg.ConsumerGroupHeartbeatResponse, cg *consumerGroup, records []log.KeyValue) (int16, string) {
	s := g.c.settings()
	memberID := req.MemberID
	if memberID == "" {
		memberID = newConsumerMemberID()
	}
	if s.ConsumerMaxSize > 0 && len(cg.members) >= s.ConsumerMaxSize && cg.members[memberID] == nil {
		return kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", s.ConsumerMaxSize)
	}
	old, replaced, code, msg := g.consumerMember(cg, req, memberID)
	if code != 0 {
		return code, msg
	}
	isNew := cg.members[memberID] == nil
	next, code, msg := g.applyConsumerHeartbeat(cg, req, client, old, replaced, nil, records)
	if code != 0 {
		return code, msg
	}
	resp.MemberID = &next.id
	resp.MemberEpoch = next.epoch
	resp.HeartbeatIntervalMillis = int32(s.ConsumerHeartbeatInterval.Milliseconds())
	full := req.MemberEpoch == 0 || (req.RebalanceTimeoutMillis != -1 && req.SubscribedTopicNames != nil && req.Topics != nil)
	if full || isNew || !equalPartitions(next.assigned, old.assigned) {
		resp.Assignment = responseAssignment(next.assigned)
	}
	return 0, ""
}

// applyConsumerHeartbeat is the heartbeat of member old (not yet in cg
// when new; replaced is the static member it takes over from): the
// member is updated, the group epoch bumped when the subscriptions or
// their topics changed, the target assignment computed when the group
// epoch is ahead of it, and the member reconciled towards its target.
// Every change is written, after records, before any of it is applied;
// cg becomes the group's when it is not yet (a new or upgraded group).
// classic is set for a member speaking the classic protocol.
func (g *group) applyConsumerHeartbeat(cg *consumerGroup, req *kmsg.ConsumerGroupHeartbeatRequest, client Client, old *cgMember, replaced string, classic *classicMeta, records []log.KeyValue) (*cgMember, int16, string) {
	s := g.c.settings()
	now := g.c.now()
	memberID := old.id
	m := old.clone()
	m.classic = classic
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.ServerAssignor != nil {
		m.assignor = req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		m.topics = sortedUnique(req.SubscribedTopicNames)
		m.regex = nil
	}
	if req.SubscribedTopicRegex != nil {
		m.regex, m.topics = req.SubscribedTopicRegex, nil
		if *m.regex == "" {
			m.regex = nil
		}
	}
	m.clientID, m.clientHost = client.ID, client.Host

	isNew := cg.members[memberID] == nil
	subscriptionChanged := (isNew && replaced == "") || !slices.Equal(m.topics, old.topics) || !equalStringPtr(m.regex, old.regex)
	targetEpoch, target := cg.targetEpoch, cg.target
	if replaced != "" {
		// The static member's new id takes the old one's place in the
		// target too (Kafka's replaceMember).
		target = make(map[string]partitions, len(cg.target))
		for id, a := range cg.target {
			target[id] = a
		}
		target[memberID] = cg.target[replaced]
		delete(target, replaced)
		records = append(records,
			cgCurrentAssignmentRecord(g.id, replaced, nil),
			cgTargetMemberRecord(g.id, replaced, nil),
			cgMemberMetadataRecord(g.id, replaced, nil),
			cgTargetMemberRecord(g.id, memberID, &cgTargetMember{TopicPartitions: toTopicPartitions(target[memberID])}))
	}
	if isNew || !sameMemberMetadata(m, old) {
		records = append(records, cgMemberMetadataRecord(g.id, m.id, m.metadataValue()))
	}

	// The group's regexes, resolved against the topics now.
	regexes, topicsIndex, regexRecords := g.resolveRegexes(cg, replaced, m)
	records = append(records, regexRecords...)
	if len(regexRecords) > 0 {
		subscriptionChanged = true
	}

	epoch := cg.epoch
	view := &consumerGroup{regexes: regexes, members: cg.members}
	hash := metadataHashOf(view.subscribedNames(replacedOr(replaced, memberID), m), g.c.opts.Topics)
	if subscriptionChanged || hash != cg.metadataHash {
		epoch++
		records = append(records, cgMetadataRecord(g.id, &cgMetadata{Epoch: epoch, MetadataHash: hash}))
	}

	// The target assignment, when the group epoch moved past it.
	members := membersWith(cg, replaced, m)
	if epoch > cg.targetEpoch {
		var targetRecords []log.KeyValue
		target, targetRecords = g.computeTarget(target, members, regexes, epoch, s)
		targetEpoch = epoch
		records = append(records, targetRecords...)
	}

	// Reconcile the member towards its target.
	owned := req.Topics
	if req.MemberEpoch == 0 {
		owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	var others map[topicPartitionID]bool
	if !m.reconciledTo(targetEpoch) {
		// Only a member on its way needs to know what the others own: a
		// steady heartbeat costs nothing per partition of the group.
		others = heldByOthers(members, memberID)
	}
	next, code := reconcile(m, targetEpoch, target[memberID], others, owned)
	if code != 0 {
		return nil, code, "The consumer group member is in an unknown state. The member must abandon all its partitions and rejoin."
	}
	if next != m || isNew {
		records = append(records, cgCurrentAssignmentRecord(g.id, next.id, next.currentValue()))
	}
	if next.state == memberUnrevoked && next.classic == nil {
		// Classic members have join and sync timers instead.
		if m.state != memberUnrevoked || next.epoch != m.epoch || next.revokeDeadline.IsZero() {
			next.revokeDeadline = now.Add(next.rebalanceTimeout)
		}
	} else {
		next.revokeDeadline = time.Time{}
	}
	next.lastHeartbeat = now

	if len(records) > 0 {
		if _, err := g.c.append(g.id, records); err != nil {
			g.c.logger.Warn("storing consumer group state", "group", g.id, "err", err)
			return nil, kerr.CoordinatorNotAvailable.Code, ""
		}
	}

	// Written: apply.
	if g.cg == nil {
		g.installUpgrade(cg)
	}
	if replaced != "" {
		g.removeConsumerMember(replaced)
	}
	cg.members[memberID] = next
	if next.instanceID != nil {
		cg.static[*next.instanceID] = memberID
	}
	cg.regexes, cg.topicsIndex = regexes, topicsIndex
	if epoch > cg.epoch && len(cg.members) > 0 {
		g.c.consumerRebalances.Add(1)
	}
	cg.epoch, cg.metadataHash = epoch, hash
	if targetEpoch != cg.targetEpoch || replaced != "" {
		cg.target, cg.targetEpoch = target, targetEpoch
	}
	g.consumerStateChanged()
	return next, 0, ""
}

// consumerMember finds the member a heartbeat is from, or makes it: a new
// member, a member rejoining with epoch 0, or a static member taking over
// its instance id from the member that left with epoch -2 (replaced is
// then that member's id). The member returned is not yet in the group.
func (g *group) consumerMember(cg *consumerGroup, req *kmsg.ConsumerGroupHeartbeatRequest, memberID string) (m *cgMember, replaced string, code int16, msg string) {
	fresh := func() *cgMember {
		return &cgMember{id: memberID, state: memberStable, assigned: partitions{}, revoking: partitions{}}
	}
	existing := cg.members[memberID]
	if req.InstanceID == nil {
		switch {
		case existing == nil && req.MemberEpoch != 0:
			return nil, "", kerr.UnknownMemberID.Code, fmt.Sprintf("member %s is not in group %s", memberID, g.id)
		case existing == nil:
			return fresh(), "", 0, ""
		case req.MemberEpoch == 0:
			// A member that rejoins owns nothing (the request says so):
			// it starts over under the same id.
			return rejoined(existing), "", 0, ""
		}
		if code, msg := checkConsumerEpoch(existing, req.MemberEpoch, req.Topics); code != 0 {
			return nil, "", code, msg
		}
		return existing, "", 0, ""
	}
	instance := *req.InstanceID
	staticID, known := cg.static[instance]
	static := cg.members[staticID]
	if req.MemberEpoch == 0 {
		switch {
		case !known || static == nil:
			if existing != nil {
				return rejoined(existing), "", 0, ""
			}
			return fresh(), "", 0, ""
		case staticID == memberID:
			return rejoined(existing), "", 0, ""
		case static.epoch != staticLeaveEpoch:
			return nil, "", kerr.UnreleasedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, instance, staticID)
		}
		// The instance comes back under a new member id: it takes the
		// old member's place and assignment, with no rebalance.
		n := static.clone()
		n.id, n.epoch, n.prevEpoch = memberID, 0, 0
		n.assigned, n.revoking = clonePartitions(static.assigned), partitions{}
		return n, staticID, 0, ""
	}
	switch {
	case !known || static == nil:
		return nil, "", kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", instance)
	case staticID != memberID:
		return nil, "", kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", memberID, instance, staticID)
	}
	if code, msg := checkConsumerEpoch(static, req.MemberEpoch, req.Topics); code != 0 {
		return nil, "", code, msg
	}
	return static, "", 0, ""
}

// rejoined is a member that came back with epoch 0: it gave up all its
// partitions before doing so.
func rejoined(m *cgMember) *cgMember {
	n := m.clone()
	n.epoch, n.prevEpoch, n.state = 0, 0, memberStable
	n.assigned, n.revoking = partitions{}, partitions{}
	return n
}

// checkConsumerEpoch is Kafka's fencing of a heartbeat's epoch: ahead of
// the coordinator's is fenced; behind it is accepted only from the
// previous epoch with owned partitions within the current assignment
// (the answer that moved the member on was lost).
func checkConsumerEpoch(m *cgMember, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) (int16, string) {
	switch {
	case epoch > m.epoch:
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.epoch)
	case epoch < m.epoch && (epoch != m.prevEpoch || !ownedWithin(owned, m.assigned)):
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.epoch)
	}
	return 0, ""
}

// membersWith is the group's members with m in place of its id and
// without replaced.
func membersWith(cg *consumerGroup, replaced string, m *cgMember) map[string]*cgMember {
	out := make(map[string]*cgMember, len(cg.members)+1)
	for id, x := range cg.members {
		if id != replaced {
			out[id] = x
		}
	}
	if m != nil {
		out[m.id] = m
	}
	return out
}

func replacedOr(replaced, id string) string {
	if replaced != "" {
		return replaced
	}
	return id
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	sort.Strings(out)
	return slices.Compact(out)
}

func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// sameMemberMetadata reports whether the member's stored metadata would
// be the same record.
func sameMemberMetadata(a, b *cgMember) bool {
	return equalStringPtr(a.instanceID, b.instanceID) && equalStringPtr(a.rackID, b.rackID) &&
		a.clientID == b.clientID && a.clientHost == b.clientHost &&
		slices.Equal(a.topics, b.topics) && equalStringPtr(a.regex, b.regex) &&
		a.rebalanceTimeout == b.rebalanceTimeout && equalStringPtr(a.assignor, b.assignor) &&
		sameClassicMeta(a.classic, b.classic)
}

func sameClassicMeta(a, b *classicMeta) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.sessionTimeout != b.sessionTimeout || len(a.protocols) != len(b.protocols) {
		return false
	}
	for i := range a.protocols {
		if a.protocols[i].Name != b.protocols[i].Name || string(a.protocols[i].Metadata) != string(b.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

func responseAssignment(a partitions) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	for _, t := range sortedTopicIDs(a) {
		out.Topics = append(out.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t, Partitions: slices.Clone(a[t])})
	}
	if out.Topics == nil {
		out.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	}
	return &out
}

func sortedTopicIDs(a partitions) []assign.TopicID {
	out := make([]assign.TopicID, 0, len(a))
	for t := range a {
		out = append(out, t)
	}
	slices.SortFunc(out, func(x, y assign.TopicID) int {
		for i := range x {
			if x[i] != y[i] {
				return int(x[i]) - int(y[i])
			}
		}
		return 0
	})
	return out
}

func toTopicPartitions(a partitions) []topicPartitions {
	out := make([]topicPartitions, 0, len(a))
	for _, t := range sortedTopicIDs(a) {
		out = append(out, topicPartitions{TopicID: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

func fromTopicPartitions(tps []topicPartitions) partitions {
	out := make(partitions, len(tps))
	for _, tp := range tps {
		if len(tp.Partitions) == 0 {
			continue
		}
		ps := slices.Clone(tp.Partitions)
		slices.Sort(ps)
		out[tp.TopicID] = ps
	}
	return out
}

func (m *cgMember) metadataValue() *cgMemberMetadata {
	v := &cgMemberMetadata{
		InstanceID: m.instanceID, RackID: m.rackID,
		ClientID: m.clientID, ClientHost: m.clientHost,
		SubscribedTopicNames: slices.Clone(m.topics),
		SubscribedTopicRegex: m.regex,
		RebalanceTimeoutMs:   int32(m.rebalanceTimeout.Milliseconds()),
		ServerAssignor:       m.assignor,
	}
	if m.classic != nil {
		v.Classic = &cgClassicMemberMetadata{SessionTimeoutMs: int32(m.classic.sessionTimeout.Milliseconds())}
		for _, p := range m.classic.protocols {
			v.Classic.SupportedProtocols = append(v.Classic.SupportedProtocols, cgClassicProtocol{Name: p.Name, Metadata: p.Metadata})
		}
	}
	if v.SubscribedTopicNames == nil {
		v.SubscribedTopicNames = []string{}
	}
	return v
}

func (m *cgMember) currentValue() *cgCurrentAssignment {
	return &cgCurrentAssignment{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: int8(m.state),
		AssignedPartitions:          toTopicPartitions(m.assigned),
		PartitionsPendingRevocation: toTopicPartitions(m.revoking),
	}
}
