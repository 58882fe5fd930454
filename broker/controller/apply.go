package controller

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxPartitionsPerTopic bounds CreateTopic and CreatePartitions (as the
// single-node broker does).
const MaxPartitionsPerTopic = 10000

// MaxLicenseSize bounds a license blob.
const MaxLicenseSize = 64 << 10

// maxTopicNameLen is Kafka's limit: 249, so that <name>-<partition>
// directory names fit in 255 bytes.
const maxTopicNameLen = 249

// maxProducerIDBlock bounds one AllocateProducerIDs.
const maxProducerIDBlock = 1 << 20

// ValidateTopicName applies Kafka's rules for topic names; the controller
// refuses a topic whose name breaks them, and the broker checks a name
// with it before asking the controller.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return errorf(kerr.InvalidTopicException, "topic name is empty")
	case name == "." || name == "..":
		return errorf(kerr.InvalidTopicException, "topic name cannot be %q", name)
	case len(name) > maxTopicNameLen:
		return errorf(kerr.InvalidTopicException, "topic name is longer than %d characters", maxTopicNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return errorf(kerr.InvalidTopicException, "topic name %q contains %q; legal characters are ASCII letters, digits, '.', '_' and '-'", name, c)
		}
	}
	return nil
}

// txn builds the next View from cur, copying each part the first time it
// changes (views are shared with readers and never modified).
type txn struct {
	opts  *Options
	cur   *View
	next  *View
	index uint64
	nowMs int64

	brokersCopied, topicsCopied, propsCopied bool

	// owned is what the batch being applied may change in place; nil
	// outside a batch.
	owned *batchOwned
}

// batchOwned is what one State.ApplyBatch has copied and no published
// view or result holds: the topics a leader report copied earlier in the
// batch. A report to one of them changes it in place, so a batch of
// reports about one topic copies its partitions once rather than once per
// report (a topic of 3,000 partitions being led for the first time made
// 6,000 copies of 3,000 partitions on every controller voter).
type batchOwned struct {
	topics map[*Topic]bool
}

// disown forgets a topic a result now holds.
func (o *batchOwned) disown(t *Topic) {
	if o != nil && t != nil {
		delete(o.topics, t)
	}
}

func (t *txn) brokers() map[int32]*BrokerRegistration {
	if !t.brokersCopied {
		m := make(map[int32]*BrokerRegistration, len(t.cur.brokers)+1)
		for k, v := range t.cur.brokers {
			m[k] = v
		}
		t.next.brokers, t.brokersCopied = m, true
	}
	return t.next.brokers
}

// putTopic installs (or with nil for t, removes) a topic.
func (t *txn) putTopic(name string, id TopicID, topic *Topic) {
	if !t.topicsCopied {
		byName := make(map[string]*Topic, len(t.cur.topics)+1)
		for k, v := range t.cur.topics {
			byName[k] = v
		}
		byID := make(map[TopicID]*Topic, len(t.cur.byID)+1)
		for k, v := range t.cur.byID {
			byID[k] = v
		}
		t.next.topics, t.next.byID, t.topicsCopied = byName, byID, true
	}
	if topic == nil {
		delete(t.next.topics, name)
		delete(t.next.byID, id)
		return
	}
	t.next.topics[name] = topic
	t.next.byID[id] = topic
}

func (t *txn) props() map[string]PropertyValue {
	if !t.propsCopied {
		m := make(map[string]PropertyValue, len(t.cur.props)+1)
		for k, v := range t.cur.props {
			m[k] = v
		}
		t.next.props, t.propsCopied = m, true
	}
	return t.next.props
}

func (t *txn) live(b *BrokerRegistration) bool {
	return b.LiveAt(t.nowMs, t.next.sessionTimeout)
}

// apply computes the View after entry e at index, and the answer. It
// reads no clock and no randomness, and every iteration over a map whose
// order could show in the output goes through sorted keys.
//
// owned, when set, is the batch's: apply may change what it holds in
// place, and records what it copies there.
func apply(opts *Options, cur *View, index uint64, e Entry, owned *batchOwned) (*View, Result) {
	next := *cur
	next.index = index
	if e.TimeMs > next.clockMs {
		next.clockMs = e.TimeMs
	}
	t := &txn{opts: opts, cur: cur, next: &next, index: index, nowMs: next.clockMs, owned: owned}
	var r Result
	switch c := e.Cmd.(type) {
	case InitCluster:
		r = t.initCluster(c)
	case RegisterBroker:
		r = t.registerBroker(c)
	case Heartbeat:
		r = t.heartbeat(c)
	case UnregisterBroker:
		r = t.unregisterBroker(c)
	case CreateTopic:
		r = t.createTopic(c)
	case DeleteTopic:
		r = t.deleteTopic(c)
	case CreatePartitions:
		r = t.createPartitions(c)
	case AlterTopicConfig:
		r = t.alterTopicConfig(c)
	case SetClusterProperties:
		r = t.setClusterProperties(c)
	case SetLicense:
		r = t.setLicense(c)
	case ReportLeader:
		r = t.reportLeader(c)
	case AllocateProducerIDs:
		r = t.allocateProducerIDs(c)
	case AlterScramCredentials:
		r = t.alterScramCredentials(c)
	case CreateACLs:
		r = t.createACLs(c)
	case DeleteACLs:
		r = t.deleteACLs(c)
	case ReassignPartition:
		r = t.reassignPartition(c)
	case CompleteReassignment:
		r = t.completeReassignment(c)
	case AlterClientQuotas:
		r = t.alterClientQuotas(c)
	default:
		r = Result{Err: errorf(kerr.UnsupportedVersion, "unknown command %T", e.Cmd)}
	}
	r.Index = index
	if r.Err != nil {
		// A refusal changes nothing but the index and the clock.
		failed := *cur
		failed.index = index
		failed.clockMs = next.clockMs
		r.Changed = false
		return &failed, r
	}
	return &next, r
}

func (t *txn) initCluster(c InitCluster) Result {
	switch {
	case c.ClusterID == "":
		return Result{Err: errorf(kerr.InvalidRequest, "empty cluster id")}
	case t.next.clusterID == c.ClusterID:
		return Result{}
	case t.next.clusterID != "":
		return Result{Err: errorf(kerr.InconsistentClusterID, "the cluster id is %q already; refusing %q", t.next.clusterID, c.ClusterID)}
	}
	t.next.clusterID = c.ClusterID
	t.next.createdMs = t.nowMs
	return Result{Changed: true}
}

func (t *txn) registerBroker(c RegisterBroker) Result {
	switch {
	case c.NodeID < 0:
		return Result{Err: errorf(kerr.InvalidRegistration, "node id %d is negative", c.NodeID)}
	case c.Incarnation.IsZero():
		return Result{Err: errorf(kerr.InvalidRegistration, "node %d: no incarnation id", c.NodeID)}
	case c.KafkaAddr == "" || c.RPCAddr == "":
		return Result{Err: errorf(kerr.InvalidRegistration, "node %d: the Kafka and RPC addresses are both required", c.NodeID)}
	case c.ClusterID != "" && t.next.clusterID != "" && c.ClusterID != t.next.clusterID:
		return Result{Err: errorf(kerr.InconsistentClusterID, "node %d belongs to cluster %q; this is cluster %q", c.NodeID, c.ClusterID, t.next.clusterID)}
	}
	if err := checkListeners(c.NodeID, c.Listeners); err != nil {
		return Result{Err: err}
	}
	reg := BrokerRegistration{
		NodeID: c.NodeID, Incarnation: c.Incarnation, KafkaAddr: c.KafkaAddr, RPCAddr: c.RPCAddr,
		Rack: c.Rack, AdminAddr: c.AdminAddr, Epoch: t.index, RegisteredMs: t.nowMs, LastHeartbeatMs: t.nowMs,
		Listeners: slices.Clone(c.Listeners),
	}
	if old, ok := t.cur.brokers[c.NodeID]; ok {
		if old.Incarnation != c.Incarnation && t.live(old) {
			timeout := t.next.sessionTimeout
			return Result{Err: &NodeIDConflictError{
				NodeID: c.NodeID, Existing: *old, Incarnation: c.Incarnation, RPCAddr: c.RPCAddr,
				ExpiresIn:      time.Duration(old.LastHeartbeatMs+timeout.Milliseconds()-t.nowMs+1) * time.Millisecond,
				SessionTimeout: timeout,
			}}
		}
		if old.Incarnation == c.Incarnation {
			// A retried registration of the same process keeps its
			// epoch, so its heartbeats stay valid.
			reg.Epoch, reg.RegisteredMs = old.Epoch, old.RegisteredMs
		}
	}
	t.brokers()[c.NodeID] = &reg
	return Result{Changed: true, BrokerEpoch: reg.Epoch}
}

func (t *txn) heartbeat(c Heartbeat) Result {
	old, ok := t.cur.brokers[c.NodeID]
	if !ok {
		return Result{Err: errorf(kerr.BrokerIDNotRegistered, "node %d is not registered", c.NodeID)}
	}
	if c.Epoch != old.Epoch {
		return Result{Err: errorf(kerr.StaleBrokerEpoch, "node %d: heartbeat for epoch %d, registered epoch is %d", c.NodeID, c.Epoch, old.Epoch)}
	}
	reg := *old
	reg.LastHeartbeatMs = t.nowMs
	t.brokers()[c.NodeID] = &reg
	return Result{Changed: true, BrokerEpoch: reg.Epoch}
}

func (t *txn) unregisterBroker(c UnregisterBroker) Result {
	old, ok := t.cur.brokers[c.NodeID]
	if !ok {
		return Result{Err: errorf(kerr.BrokerIDNotRegistered, "node %d is not registered", c.NodeID)}
	}
	if c.Epoch != 0 && c.Epoch != old.Epoch {
		return Result{Err: errorf(kerr.StaleBrokerEpoch, "node %d: unregister for epoch %d, registered epoch is %d", c.NodeID, c.Epoch, old.Epoch)}
	}
	delete(t.brokers(), c.NodeID)
	return Result{Changed: true}
}

// liveBrokers lists the brokers live at the command's time, by node id.
func (t *txn) liveBrokers() []BrokerRegistration { return t.next.liveAt(t.nowMs) }

func (t *txn) validateConfigs(rules ConfigRules, configs map[string]string) error {
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" {
			return errorf(kerr.InvalidConfig, "empty config name")
		}
		if t.opts.ValidateTopicConfig != nil {
			if err := t.opts.ValidateTopicConfig(rules.orCurrent(), k, configs[k]); err != nil {
				return kerrOr(err, kerr.InvalidConfig)
			}
		}
	}
	return nil
}

// checkAssignment validates explicit replica lists: rf each (rf 0: the
// first list's length), distinct, live brokers.
func (t *txn) checkAssignment(a [][]int32, rf int) error {
	live := map[int32]bool{}
	for _, b := range t.liveBrokers() {
		live[b.NodeID] = true
	}
	if rf == 0 && len(a) > 0 {
		rf = len(a[0])
	}
	for p, reps := range a {
		if len(reps) == 0 || len(reps) != rf {
			return errorf(kerr.InvalidReplicaAssignment, "partition %d has %d replicas; every partition needs %d", p, len(reps), rf)
		}
		seen := map[int32]bool{}
		for _, id := range reps {
			if seen[id] {
				return errorf(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice", p, id)
			}
			seen[id] = true
			if !live[id] {
				return errorf(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not a live registered broker", p, id)
			}
		}
	}
	return nil
}

func (t *txn) place(n, rf int, seed uint32, existing [][]int32) ([][]int32, error) {
	live := t.liveBrokers()
	if rf > len(live) {
		return nil, errorf(kerr.InvalidReplicationFactor, "replication factor %d is larger than the %d live broker(s)", rf, len(live))
	}
	pb := make([]PlacementBroker, len(live))
	for i, b := range live {
		pb[i] = PlacementBroker{ID: b.NodeID, Rack: b.Rack}
	}
	a, err := PlaceReplicas(pb, n, rf, seed, existing)
	if err != nil {
		return nil, errorf(kerr.InvalidReplicationFactor, "%v", err)
	}
	return a, nil
}

func newPartitions(a [][]int32) []Partition {
	ps := make([]Partition, len(a))
	for i, reps := range a {
		ps[i] = Partition{Replicas: append([]int32(nil), reps...), Leader: reps[0]}
	}
	return ps
}

func (t *txn) createTopic(c CreateTopic) Result {
	if err := ValidateTopicName(c.Name); err != nil {
		return Result{Err: err}
	}
	if _, ok := t.cur.topics[c.Name]; ok {
		return Result{Err: errorf(kerr.TopicAlreadyExists, "topic %q already exists", c.Name)}
	}
	norm := strings.ReplaceAll(c.Name, ".", "_")
	for _, other := range t.cur.TopicNames() {
		if strings.ReplaceAll(other, ".", "_") == norm {
			return Result{Err: errorf(kerr.InvalidTopicException, "topic %q collides with existing topic %q: names may not differ only in '.' and '_'", c.Name, other)}
		}
	}
	switch {
	case c.ID.IsZero() || c.ID == (TopicID{15: 1}):
		return Result{Err: errorf(kerr.InvalidRequest, "topic %q: reserved topic id %s", c.Name, c.ID)}
	case t.cur.byID[c.ID] != nil:
		return Result{Err: errorf(kerr.TopicAlreadyExists, "topic %q: topic id %s is in use by %q", c.Name, c.ID, t.cur.byID[c.ID].Name)}
	}
	var assignment [][]int32
	if len(c.Assignment) > 0 {
		if c.Partitions != 0 && int(c.Partitions) != len(c.Assignment) {
			return Result{Err: errorf(kerr.InvalidRequest, "topic %q: %d partitions requested with an assignment of %d", c.Name, c.Partitions, len(c.Assignment))}
		}
		if len(c.Assignment) > MaxPartitionsPerTopic {
			return Result{Err: errorf(kerr.InvalidPartitions, "topic %q: %d partitions is more than %d", c.Name, len(c.Assignment), MaxPartitionsPerTopic)}
		}
		if c.ReplicationFactor != 0 && int(c.ReplicationFactor) != len(c.Assignment[0]) {
			return Result{Err: errorf(kerr.InvalidRequest, "topic %q: replication factor %d requested with an assignment of %d replicas", c.Name, c.ReplicationFactor, len(c.Assignment[0]))}
		}
		if err := t.checkAssignment(c.Assignment, 0); err != nil {
			return Result{Err: err}
		}
		assignment = c.Assignment
	} else {
		switch {
		case c.Partitions < 1:
			return Result{Err: errorf(kerr.InvalidPartitions, "topic %q: %d partitions; at least 1 is needed", c.Name, c.Partitions)}
		case c.Partitions > MaxPartitionsPerTopic:
			return Result{Err: errorf(kerr.InvalidPartitions, "topic %q: %d partitions is more than %d", c.Name, c.Partitions, MaxPartitionsPerTopic)}
		case c.ReplicationFactor < 1:
			return Result{Err: errorf(kerr.InvalidReplicationFactor, "topic %q: replication factor %d is below 1", c.Name, c.ReplicationFactor)}
		}
	}
	if err := t.validateConfigs(c.ConfigRules, c.Configs); err != nil {
		return Result{Err: err}
	}
	if t.opts.CheckTopicReplication != nil {
		rf := int(c.ReplicationFactor)
		if assignment != nil {
			rf = len(assignment[0])
		}
		if err := t.opts.CheckTopicReplication(c.ConfigRules.orCurrent(), c.Configs, rf); err != nil {
			return Result{Err: kerrOr(err, kerr.InvalidConfig)}
		}
	}
	if assignment == nil {
		a, err := t.place(int(c.Partitions), int(c.ReplicationFactor), c.PlacementSeed, nil)
		if err != nil {
			return Result{Err: fmt.Errorf("topic %q: %w", c.Name, err)}
		}
		assignment = a
	}
	configs := make(map[string]string, len(c.Configs))
	for k, v := range c.Configs {
		configs[k] = v
	}
	topic := &Topic{Name: c.Name, ID: c.ID, Internal: c.Internal, Configs: configs, Partitions: newPartitions(assignment)}
	t.putTopic(c.Name, c.ID, topic)
	return Result{Changed: true, Topic: topic.Clone()}
}

// resolve finds the topic a TopicRef names.
func (t *txn) resolve(ref TopicRef) (*Topic, error) {
	if !ref.ID.IsZero() {
		topic := t.cur.byID[ref.ID]
		if topic == nil {
			return nil, errorf(kerr.UnknownTopicID, "no topic has id %s", ref.ID)
		}
		if ref.Name != "" && ref.Name != topic.Name {
			return nil, errorf(kerr.UnknownTopicOrPartition, "topic id %s is %q, not %q", ref.ID, topic.Name, ref.Name)
		}
		return topic, nil
	}
	topic := t.cur.topics[ref.Name]
	if topic == nil {
		return nil, errorf(kerr.UnknownTopicOrPartition, "no topic %q", ref.Name)
	}
	return topic, nil
}

func (t *txn) deleteTopic(c DeleteTopic) Result {
	topic, err := t.resolve(c.TopicRef)
	if err != nil {
		return Result{Err: err}
	}
	if topic.Internal {
		return Result{Err: errorf(kerr.InvalidTopicException, "the internal topic %s cannot be deleted", topic.Name)}
	}
	t.putTopic(topic.Name, topic.ID, nil)
	return Result{Changed: true, Topic: topic.Clone()}
}

func (t *txn) createPartitions(c CreatePartitions) Result {
	topic, err := t.resolve(c.TopicRef)
	if err != nil {
		return Result{Err: err}
	}
	have := int32(len(topic.Partitions))
	switch {
	case topic.Internal:
		return Result{Err: errorf(kerr.InvalidRequest, "the partition count of %s is fixed: groups are placed by it", topic.Name)}
	case c.Total < have:
		return Result{Err: errorf(kerr.InvalidPartitions, "topic %s has %d partitions; the count cannot decrease", topic.Name, have)}
	case c.Total == have:
		return Result{Err: errorf(kerr.InvalidPartitions, "topic %s already has %d partitions", topic.Name, have)}
	case c.Total > MaxPartitionsPerTopic:
		return Result{Err: errorf(kerr.InvalidPartitions, "%d partitions is more than %d", c.Total, MaxPartitionsPerTopic)}
	}
	add := int(c.Total - have)
	rf := topic.ReplicationFactor()
	var assignment [][]int32
	if len(c.Assignment) > 0 {
		if len(c.Assignment) != add {
			return Result{Err: errorf(kerr.InvalidReplicaAssignment, "topic %s: %d new partitions with an assignment of %d", topic.Name, add, len(c.Assignment))}
		}
		if err := t.checkAssignment(c.Assignment, rf); err != nil {
			return Result{Err: err}
		}
		assignment = c.Assignment
	} else {
		existing := make([][]int32, len(topic.Partitions))
		for i, p := range topic.Partitions {
			existing[i] = p.Replicas
		}
		a, err := t.place(add, rf, c.PlacementSeed, existing)
		if err != nil {
			return Result{Err: fmt.Errorf("topic %s: %w", topic.Name, err)}
		}
		assignment = a
	}
	nt := topic.Clone()
	nt.Partitions = append(nt.Partitions, newPartitions(assignment)...)
	t.putTopic(nt.Name, nt.ID, nt)
	return Result{Changed: true, Topic: nt.Clone()}
}

func (t *txn) alterTopicConfig(c AlterTopicConfig) Result {
	topic, err := t.resolve(c.TopicRef)
	if err != nil {
		return Result{Err: err}
	}
	next := map[string]string{}
	if !c.Replace {
		for k, v := range topic.Configs {
			next[k] = v
		}
	}
	for _, op := range c.Ops {
		if op.Name == "" {
			return Result{Err: errorf(kerr.InvalidConfig, "empty config name")}
		}
		switch op.Op {
		case ConfigSet:
			if t.opts.ValidateTopicConfig != nil {
				if err := t.opts.ValidateTopicConfig(c.ConfigRules.orCurrent(), op.Name, op.Value); err != nil {
					return Result{Err: kerrOr(err, kerr.InvalidConfig)}
				}
			}
			next[op.Name] = op.Value
		case ConfigDelete:
			delete(next, op.Name)
		default:
			return Result{Err: errorf(kerr.InvalidConfig, "%s: operation %d: only SET (0) and DELETE (1) reach the controller", op.Name, op.Op)}
		}
	}
	if t.opts.CheckTopicReplication != nil {
		set := map[string]string{}
		for _, op := range c.Ops {
			if op.Op == ConfigSet {
				set[op.Name] = op.Value
			}
		}
		if err := t.opts.CheckTopicReplication(c.ConfigRules.orCurrent(), set, topic.ReplicationFactor()); err != nil {
			return Result{Err: kerrOr(err, kerr.InvalidConfig)}
		}
	}
	if mapsEqual(next, topic.Configs) {
		return Result{Topic: topic.Clone()}
	}
	nt := *topic // partitions are shared, unchanged
	nt.Configs = next
	t.putTopic(nt.Name, nt.ID, &nt)
	return Result{Changed: true, Topic: nt.Clone()}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (t *txn) setClusterProperties(c SetClusterProperties) Result {
	if c.ExpectedVersion >= 0 && c.ExpectedVersion != t.cur.configVersion {
		return Result{Err: errorf(kerr.InvalidUpdateVersion, "cluster config is at version %d, not %d: read it again and retry", t.cur.configVersion, c.ExpectedVersion)}
	}
	if c.ExpectedVersion < -1 {
		return Result{Err: errorf(kerr.InvalidRequest, "expected version %d", c.ExpectedVersion)}
	}
	seen := map[string]bool{}
	for _, ch := range c.Changes {
		if seen[ch.Name] {
			return Result{Err: errorf(kerr.InvalidRequest, "cluster property %q changed twice in one batch", ch.Name)}
		}
		seen[ch.Name] = true
		p, ok := t.opts.Properties.Lookup(ch.Name)
		if !ok {
			return Result{Err: errorf(kerr.InvalidConfig, "unknown cluster property %q", ch.Name)}
		}
		if !ch.Reset {
			if err := p.Validate(ch.Value); err != nil {
				return Result{Err: errorf(kerr.InvalidConfig, "%v", err)}
			}
		}
	}
	version := t.cur.configVersion + 1
	changed := false
	for _, ch := range c.Changes {
		old, had := t.cur.props[ch.Name]
		switch {
		case ch.Reset && had:
			delete(t.props(), ch.Name)
			changed = true
		case !ch.Reset && (!had || old.Value != ch.Value):
			t.props()[ch.Name] = PropertyValue{Value: ch.Value, Version: version}
			changed = true
		}
	}
	if !changed {
		return Result{ConfigVersion: t.cur.configVersion}
	}
	t.next.configVersion = version
	return Result{Changed: true, ConfigVersion: version}
}

func (t *txn) setLicense(c SetLicense) Result {
	switch {
	case len(c.Blob) == 0:
		return Result{Err: errorf(kerr.InvalidRequest, "empty license")}
	case len(c.Blob) > MaxLicenseSize:
		return Result{Err: errorf(kerr.InvalidRequest, "license of %d bytes is larger than %d", len(c.Blob), MaxLicenseSize)}
	}
	if t.opts.ValidateLicense != nil {
		if err := t.opts.ValidateLicense(c.Blob); err != nil {
			return Result{Err: kerrOr(err, kerr.InvalidRequest)}
		}
	}
	t.next.license = License{Blob: append([]byte(nil), c.Blob...), Version: t.cur.license.Version + 1}
	return Result{Changed: true, LicenseVersion: t.next.license.Version}
}

func (t *txn) reportLeader(c ReportLeader) Result {
	topic, p, err := t.partitionByID(c.TopicID, c.Partition)
	if err != nil {
		return Result{Err: err}
	}
	switch {
	case c.Term < p.LeaderTerm:
		return Result{Err: errorf(kerr.FencedLeaderEpoch, "%s/%d: report of term %d is older than term %d (leader %d)", topic.Name, c.Partition, c.Term, p.LeaderTerm, p.Leader)}
	case c.Term == p.LeaderTerm && c.Term != 0 && c.Leader != p.Leader:
		return Result{Err: errorf(kerr.FencedLeaderEpoch, "%s/%d: node %d reports leading term %d, which node %d reported", topic.Name, c.Partition, c.Leader, c.Term, p.Leader)}
	case c.LeaderEpoch < p.LeaderEpoch:
		return Result{Err: errorf(kerr.FencedLeaderEpoch, "%s/%d: leader epoch %d is older than %d", topic.Name, c.Partition, c.LeaderEpoch, p.LeaderEpoch)}
	case c.Term == 0:
		return Result{Err: errorf(kerr.InvalidRequest, "%s/%d: term 0", topic.Name, c.Partition)}
	case !contains(p.Replicas, c.Leader):
		return Result{Err: errorf(kerr.NotLeaderForPartition, "%s/%d: node %d is not a replica (replicas %v)", topic.Name, c.Partition, c.Leader, p.Replicas)}
	}
	for _, r := range c.ISR {
		if !contains(p.Replicas, r) {
			return Result{Err: errorf(kerr.InvalidRequest, "%s/%d: in-sync replica %d is not a replica (replicas %v)", topic.Name, c.Partition, r, p.Replicas)}
		}
	}
	if c.Term == p.LeaderTerm && c.LeaderEpoch == p.LeaderEpoch && (c.ISR == nil || slices.Equal(c.ISR, p.ISR)) {
		return Result{} // a repeated report
	}
	np := p
	np.Leader, np.LeaderEpoch, np.LeaderTerm = c.Leader, c.LeaderEpoch, c.Term
	if c.ISR != nil {
		np.ISR = slices.Clone(c.ISR)
	} else if c.Term != p.LeaderTerm {
		np.ISR = nil // a new leader's ISR is unknown until it reports one
	}
	if t.owned != nil && t.owned.topics[topic] {
		// Copied earlier in this batch and held by nothing else: the
		// report is accepted, so nothing after this can refuse it.
		topic.Partitions[c.Partition] = np
		return Result{Changed: true}
	}
	nt := *topic
	nt.Partitions = append([]Partition(nil), topic.Partitions...) // replica slices shared, unchanged
	nt.Partitions[c.Partition] = np
	t.putTopic(nt.Name, nt.ID, &nt)
	if t.owned != nil {
		t.owned.topics[&nt] = true
	}
	return Result{Changed: true}
}

func (t *txn) allocateProducerIDs(c AllocateProducerIDs) Result {
	b, ok := t.cur.brokers[c.NodeID]
	switch {
	case !ok:
		return Result{Err: errorf(kerr.BrokerIDNotRegistered, "node %d is not registered", c.NodeID)}
	case c.Epoch != 0 && c.Epoch != b.Epoch:
		return Result{Err: errorf(kerr.StaleBrokerEpoch, "node %d: epoch %d, registered epoch is %d", c.NodeID, c.Epoch, b.Epoch)}
	case c.Count < 1 || c.Count > maxProducerIDBlock:
		return Result{Err: errorf(kerr.InvalidRequest, "producer id block of %d; 1..%d", c.Count, maxProducerIDBlock)}
	case t.cur.nextProducerID > math.MaxInt64-int64(c.Count):
		return Result{Err: errorf(kerr.UnknownServerError, "producer ids exhausted")}
	}
	first := t.cur.nextProducerID
	t.next.nextProducerID = first + int64(c.Count)
	return Result{Changed: true, FirstProducerID: first}
}
