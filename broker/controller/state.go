package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/raft"
	"slices"
)

// TopicID is a topic's UUID, given at creation and never reused, so a
// deleted and re-created topic is a different topic to clients (Fetch v13+
// addresses topics by ID). The controller's records and the broker's
// topic table share it.
type TopicID [16]byte

// NewTopicID draws a topic id for a proposer to put in CreateTopic (Apply
// draws nothing: it must be deterministic).
func NewTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:])
		// Kafka reserves the zero UUID and the one with only the lowest bit
		// set; skip both (and anything beginning with '-' in base64, as
		// Kafka does, so IDs never look like command-line flags).
		if id != (TopicID{}) && id != (TopicID{15: 1}) && id.String()[0] != '-' {
			return id
		}
	}
}

// String is Kafka's rendering: URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is the zero UUID.
func (id TopicID) IsZero() bool { return id == TopicID{} }

func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

func (id *TopicID) UnmarshalText(b []byte) error { return decodeUUID((*[16]byte)(id), b, "topic id") }

// IncarnationID identifies a broker's data directory: drawn when the
// directory is created and kept there, so a broker that restarts (even at
// another address) is the same broker, while a second process claiming
// the node id with other data is not (Kafka's incarnation id, made
// durable).
type IncarnationID [16]byte

func (id IncarnationID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Is reports whether s is id's String, without allocating it.
func (id IncarnationID) Is(s string) bool {
	var buf [24]byte // base64 of 16 bytes: 22
	n := base64.RawURLEncoding.EncodedLen(len(id))
	base64.RawURLEncoding.Encode(buf[:n], id[:])
	return string(buf[:n]) == s
}

// IsZero reports whether id is the zero UUID.
func (id IncarnationID) IsZero() bool { return id == IncarnationID{} }

func (id IncarnationID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

func (id *IncarnationID) UnmarshalText(b []byte) error {
	return decodeUUID((*[16]byte)(id), b, "incarnation id")
}

func decodeUUID(dst *[16]byte, b []byte, what string) error {
	var tmp [16]byte
	if base64.RawURLEncoding.DecodedLen(len(b)) != len(tmp) {
		return fmt.Errorf("%s %q: not a 16-byte base64 value", what, b)
	}
	n, err := base64.RawURLEncoding.Decode(tmp[:], b)
	if err != nil || n != len(tmp) {
		return fmt.Errorf("%s %q: not a 16-byte base64 value", what, b)
	}
	*dst = tmp
	return nil
}

// BrokerRegistration is one registered broker.
type BrokerRegistration struct {
	NodeID      int32         `json:"node_id"`
	Incarnation IncarnationID `json:"incarnation"`
	KafkaAddr   string        `json:"kafka_addr"` // advertised Kafka listener, host:port
	RPCAddr     string        `json:"rpc_addr"`   // Raft/RPC listener, host:port
	Rack        string        `json:"rack,omitempty"`
	AdminAddr   string        `json:"admin_addr,omitempty"` // admin HTTP API, host:port
	// Listeners are the broker's Kafka listeners, the first being
	// KafkaAddr's; none in registrations from before named listeners
	// (see Endpoint). Shared between copies: never modified.
	Listeners []ListenerEndpoint `json:"listeners,omitempty"`
	// Epoch is the broker epoch: the log index of the registration that
	// created this incarnation's entry. Heartbeats must carry it.
	Epoch        uint64 `json:"epoch"`
	RegisteredMs int64  `json:"registered_ms"`
	// LastHeartbeatMs is the time carried by the last applied heartbeat (or
	// the registration), in Unix milliseconds of the proposing controller.
	LastHeartbeatMs int64 `json:"last_heartbeat_ms"`
}

// LiveAt reports whether the broker's last heartbeat is within timeout of
// nowMs.
func (b BrokerRegistration) LiveAt(nowMs int64, timeout time.Duration) bool {
	return nowMs-b.LastHeartbeatMs <= timeout.Milliseconds()
}

// Partition is one partition's assignment and leadership.
type Partition struct {
	// Replicas are the node ids holding the partition; the first is the
	// preferred leader.
	Replicas []int32 `json:"replicas"`
	// Leader is the leader last reported (initially the first replica),
	// -1 when unknown.
	Leader int32 `json:"leader"`
	// LeaderEpoch is Kafka's leader epoch, as reported.
	LeaderEpoch int32 `json:"leader_epoch"`
	// LeaderTerm is the Raft term of the partition's group in which
	// Leader reported; reports with an older term are ignored. 0 until the
	// first report.
	LeaderTerm uint64 `json:"leader_term"`
	// ISR is the in-sync replicas as the leader last reported them; nil
	// until it does.
	ISR []int32 `json:"isr,omitempty"`
	// AddingReplicas and RemovingReplicas are set while a reassignment
	// runs (reassign.go); both among Replicas.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
}

// Clone returns a deep copy.
func (p Partition) Clone() Partition {
	clone := func(s []int32) []int32 {
		if len(s) == 0 {
			return nil
		}
		return slices.Clone(s)
	}
	p.Replicas = append([]int32(nil), p.Replicas...)
	p.ISR, p.AddingReplicas, p.RemovingReplicas = clone(p.ISR), clone(p.AddingReplicas), clone(p.RemovingReplicas)
	return p
}

// Topic is one topic.
type Topic struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Internal   bool              `json:"internal,omitempty"`
	Configs    map[string]string `json:"configs"` // explicit configs only
	Partitions []Partition       `json:"partitions"`
}

// Clone returns a deep copy.
func (t *Topic) Clone() *Topic {
	c := *t
	c.Configs = make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		c.Configs[k] = v
	}
	c.Partitions = make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		c.Partitions[i] = p.Clone()
	}
	return &c
}

// ReplicationFactor is the length of partition 0's replica list.
func (t *Topic) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// PropertyValue is an explicitly set cluster property.
type PropertyValue struct {
	Value string `json:"value"`
	// Version is the cluster config version at which it was last set.
	Version int64 `json:"version"`
}

// License is the cluster's license as the controller stores it: an opaque
// signed blob that every broker verifies itself.
type License struct {
	Blob    []byte `json:"blob,omitempty"`
	Version int64  `json:"version"` // 0: never set; +1 per SetLicense
}

// Options configure a State. Every member of the controller group must run
// with the same options and validators, and the validators must be pure
// functions of their arguments: Apply calls them, so a validator that
// answers differently on two nodes makes their states diverge. (A rolling
// upgrade that changes what a validator accepts must gate the new values
// behind a cluster feature version; see the package doc.)
type Options struct {
	// BrokerSessionTimeout: a broker whose last heartbeat is older than
	// this, measured against the time carried by the command being
	// applied, is not live. Default 9s (Kafka's broker.session.timeout.ms).
	BrokerSessionTimeout time.Duration
	// ValidateTopicConfig checks one explicit topic config being set
	// (broker.ValidateTopicConfig) under the given rules. nil accepts
	// every value. An error not wrapping a kerr.Error becomes
	// INVALID_CONFIG.
	ValidateTopicConfig func(rules ConfigRules, name, value string) error
	// CheckTopicReplication, when set, checks the configs a CreateTopic
	// or AlterTopicConfig sets (each name's last value) against the
	// topic's replication factor, which ValidateTopicConfig does not see
	// (broker.CheckTopicReplication: min.insync.replicas at most the
	// replication factor). Only what the command sets is checked, so a
	// change of other configs is never refused for a value set before a
	// reassignment changed the replication factor.
	CheckTopicReplication func(rules ConfigRules, set map[string]string, replicationFactor int) error
	// Properties is the registry cluster properties are checked against;
	// nil means config.NewRegistry().
	Properties *config.Registry
	// ValidateLicense checks a license blob: signature and schema only,
	// never expiry (that needs a clock). nil accepts every non-empty blob.
	ValidateLicense func(blob []byte) error
}

// DefaultBrokerSessionTimeout is Options.BrokerSessionTimeout's default.
const DefaultBrokerSessionTimeout = 9 * time.Second

// View is an immutable snapshot of the controller state at one applied
// index. It is shared between readers: its accessors return copies, so a
// caller may keep and modify what they return.
type View struct {
	index          uint64
	clockMs        int64
	sessionTimeout time.Duration
	clusterID      string
	createdMs      int64 // when InitCluster applied: the built-in trial's start
	brokers        map[int32]*BrokerRegistration
	topics         map[string]*Topic
	byID           map[TopicID]*Topic
	props          map[string]PropertyValue
	configVersion  int64
	license        License
	nextProducerID int64
	// scram holds SCRAM credentials by user, then mechanism. Maps are
	// copied on write: a View never changes once published.
	scram map[string]map[string]ScramCredential
	// acls is sorted by compareACLBindings and replaced, never modified;
	// aclsIndex is the index of the entry that last changed it.
	acls      []ACLBinding
	aclsIndex uint64
	// quotas holds client quotas by ClientQuotaEntity.Key, nil when
	// there are none; replaced, never modified. quotasIndex is the index
	// of the entry that last changed them.
	quotas      map[string]ClientQuota
	quotasIndex uint64
}

func emptyView(timeout time.Duration) *View {
	return &View{
		sessionTimeout: timeout,
		brokers:        map[int32]*BrokerRegistration{},
		topics:         map[string]*Topic{},
		byID:           map[TopicID]*Topic{},
		props:          map[string]PropertyValue{},
	}
}

// Index is the log index of the last applied entry.
func (v *View) Index() uint64 { return v.index }

// Clock is the logical clock: the largest time carried by an applied
// command. It never goes backwards, whatever the proposers' clocks do.
func (v *View) Clock() time.Time { return time.UnixMilli(v.clockMs) }

// ClockMs is Clock in Unix milliseconds.
func (v *View) ClockMs() int64 { return v.clockMs }

// SessionTimeout is the broker session timeout liveness is judged by.
func (v *View) SessionTimeout() time.Duration { return v.sessionTimeout }

// ClusterID is the cluster's id, "" before InitCluster.
func (v *View) ClusterID() string { return v.clusterID }

// Created is when the cluster was created: the time InitCluster carried.
// Zero before InitCluster.
func (v *View) Created() time.Time {
	if v.createdMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v.createdMs)
}

// Brokers returns every registered broker, sorted by node id.
func (v *View) Brokers() []BrokerRegistration {
	out := make([]BrokerRegistration, 0, len(v.brokers))
	for _, b := range v.brokers {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// Broker returns one broker's registration.
func (v *View) Broker(id int32) (BrokerRegistration, bool) {
	b, ok := v.brokers[id]
	if !ok {
		return BrokerRegistration{}, false
	}
	return *b, true
}

// Live reports whether broker id is registered and heartbeated within the
// session timeout before now. Readers pass their own clock; Apply uses the
// command's time.
func (v *View) Live(id int32, now time.Time) bool {
	b, ok := v.brokers[id]
	return ok && b.LiveAt(now.UnixMilli(), v.sessionTimeout)
}

// LiveBrokers returns the brokers live at now, sorted by node id.
func (v *View) LiveBrokers(now time.Time) []BrokerRegistration {
	return v.liveAt(now.UnixMilli())
}

func (v *View) liveAt(nowMs int64) []BrokerRegistration {
	var out []BrokerRegistration
	for _, b := range v.brokers {
		if b.LiveAt(nowMs, v.sessionTimeout) {
			out = append(out, *b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// TopicNames returns every topic's name, sorted.
func (v *View) TopicNames() []string {
	out := make([]string, 0, len(v.topics))
	for n := range v.topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TopicRev is one revision of a topic's record. The state machine never
// changes a record in place: a change installs a new one (txn.putTopic),
// so two views hold the same record of a topic exactly when their
// revisions of it are equal, and a reader that keeps a copy compares
// revisions instead of copying and comparing records.
type TopicRev struct{ t *Topic }

// ID is the topic's id; zero for the zero TopicRev.
func (r TopicRev) ID() TopicID {
	if r.t == nil {
		return TopicID{}
	}
	return r.t.ID
}

// Record returns a copy of the revision's record.
func (r TopicRev) Record() *Topic { return r.t.Clone() }

// TopicRevs returns every topic's current revision, sorted by name.
func (v *View) TopicRevs() []TopicRev {
	out := make([]TopicRev, 0, len(v.topics))
	for _, n := range v.TopicNames() {
		out = append(out, TopicRev{v.topics[n]})
	}
	return out
}

// Topics returns a copy of every topic, sorted by name.
func (v *View) Topics() []*Topic {
	out := make([]*Topic, 0, len(v.topics))
	for _, n := range v.TopicNames() {
		out = append(out, v.topics[n].Clone())
	}
	return out
}

// Topic returns a copy of the topic called name, or nil.
func (v *View) Topic(name string) *Topic {
	if t := v.topics[name]; t != nil {
		return t.Clone()
	}
	return nil
}

// TopicByID returns a copy of the topic with the given id, or nil.
func (v *View) TopicByID(id TopicID) *Topic {
	if t := v.byID[id]; t != nil {
		return t.Clone()
	}
	return nil
}

// Partition returns a copy of one partition of the topic with the given id.
func (v *View) Partition(id TopicID, partition int32) (Partition, bool) {
	t := v.byID[id]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return Partition{}, false
	}
	return t.Partitions[partition].Clone(), true
}

// NumPartitions returns the partition count of the topic called name, or
// -1 if there is none.
func (v *View) NumPartitions(name string) int {
	if t := v.topics[name]; t != nil {
		return len(t.Partitions)
	}
	return -1
}

// Properties returns the explicitly set cluster properties.
func (v *View) Properties() map[string]PropertyValue {
	out := make(map[string]PropertyValue, len(v.props))
	for k, p := range v.props {
		out[k] = p
	}
	return out
}

// Property returns one explicitly set cluster property.
func (v *View) Property(name string) (PropertyValue, bool) {
	p, ok := v.props[name]
	return p, ok
}

// ConfigVersion counts applied changes to the cluster properties.
func (v *View) ConfigVersion() int64 { return v.configVersion }

// License returns a copy of the stored license.
func (v *View) License() License {
	l := v.license
	l.Blob = append([]byte(nil), l.Blob...)
	if len(l.Blob) == 0 {
		l.Blob = nil
	}
	return l
}

// NextProducerID is the first producer id not yet handed out.
func (v *View) NextProducerID() int64 { return v.nextProducerID }

// Change tells subscribers about one applied entry (or a restore).
type Change struct {
	Index  uint64
	Type   CommandType // 0 after Restore
	Result Result
	Prev   *View // the state before
	View   *View // the state after
}

// State is the controller's replicated state machine, free of Raft types:
// entries go in through Apply in log order, readers take immutable Views.
// Apply, Advance and Restore must be called from one goroutine at a time
// (they serialise on a mutex); View, WaitIndex and Check may be called from
// any goroutine.
type State struct {
	opts Options

	applyMu sync.Mutex
	view    atomic.Pointer[View]

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced at every publish

	subsMu  sync.Mutex
	subs    map[uint64]func(Change)
	nextSub uint64
}

// New returns an empty state.
func New(opts Options) *State {
	if opts.BrokerSessionTimeout <= 0 {
		opts.BrokerSessionTimeout = DefaultBrokerSessionTimeout
	}
	if opts.Properties == nil {
		opts.Properties = config.NewRegistry()
	}
	s := &State{opts: opts, notify: make(chan struct{}), subs: map[uint64]func(Change){}}
	s.view.Store(emptyView(opts.BrokerSessionTimeout))
	return s
}

// View returns the current state. It never blocks.
func (s *State) View() *View { return s.view.Load() }

// WaitIndex returns a View whose Index is at least index, waiting for it
// until ctx ends.
func (s *State) WaitIndex(ctx context.Context, index uint64) (*View, error) {
	for {
		s.notifyMu.Lock()
		ch := s.notify
		s.notifyMu.Unlock()
		if v := s.view.Load(); v.index >= index {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Subscribe calls fn after every applied entry and every restore, in log
// order, on the applying goroutine, after the new View is published. fn
// must return quickly and must not wait for a later index (it would wait
// for itself). The returned func unsubscribes.
func (s *State) Subscribe(fn func(Change)) (unsubscribe func()) {
	s.subsMu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = fn
	s.subsMu.Unlock()
	return func() {
		s.subsMu.Lock()
		delete(s.subs, id)
		s.subsMu.Unlock()
	}
}

// Apply decodes and applies the entry at log index index. An entry that
// does not decode changes nothing but the index and answers
// UNSUPPORTED_VERSION or INVALID_REQUEST: every node running the same code
// refuses it alike. An index not above the applied one is ignored.
func (s *State) Apply(index uint64, data []byte) Result {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.view.Load()
	if index <= cur.index {
		return Result{Index: index, Err: errStaleIndex(index, cur.index)}
	}
	next, r, typ := s.applyEncoded(cur, index, data, nil)
	s.publish(cur, next, typ, r)
	return r
}

// applyEncoded applies the encoded entry at index to cur (Apply's rules)
// and returns the next view, the answer and the command's type (0 for
// an entry that does not decode).
func (s *State) applyEncoded(cur *View, index uint64, data []byte, owned *batchOwned) (*View, Result, CommandType) {
	e, err := Decode(data)
	if err != nil {
		next := *cur
		next.index = index
		return &next, Result{Index: index, Err: decodeError(err)}, 0
	}
	next, r := apply(&s.opts, cur, index, e, owned)
	return next, r, typeOf(e.Cmd)
}

// applyBatch applies entries committed together, in index order, and
// returns what Apply would have returned for each, applied one after
// another. The views between them are never published: readers, waiters
// and subscribers see the view after the last one (one Change, for the
// last entry), and the batch changes in place what it copied itself
// (batchOwned), so a run of leader reports about one topic copies it
// once.
func (s *State) applyBatch(entries []raft.Entry) []Result {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	first := s.view.Load()
	cur := first
	owned := &batchOwned{topics: map[*Topic]bool{}}
	results := make([]Result, len(entries))
	var typ CommandType
	for i, e := range entries {
		if e.Index <= cur.index {
			results[i] = Result{Index: e.Index, Err: errStaleIndex(e.Index, cur.index)}
			continue
		}
		cur, results[i], typ = s.applyEncoded(cur, e.Index, e.Data, owned)
		owned.disown(results[i].Topic)
	}
	if cur != first {
		s.publish(first, cur, typ, results[len(results)-1])
	}
	return results
}

// ApplyEntry applies a decoded entry at log index index.
func (s *State) ApplyEntry(index uint64, e Entry) Result {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.view.Load()
	if index <= cur.index {
		return Result{Index: index, Err: errStaleIndex(index, cur.index)}
	}
	next, r := apply(&s.opts, cur, index, e, nil)
	s.publish(cur, next, typeOf(e.Cmd), r)
	return r
}

// Check runs an entry against the current state without applying it: the
// answer Apply would give now. For validate-only requests and for
// proposers that want to refuse early; the log still decides.
//
// The entry goes through the log's encoding first, so that the dry run
// sees what Apply would: the encoding does not carry everything a
// command struct can hold (an empty list and a missing one read the
// same).
func (s *State) Check(e Entry) Result {
	data, err := Encode(e)
	if err != nil {
		return Result{Err: decodeError(err)}
	}
	if e, err = Decode(data); err != nil {
		return Result{Err: decodeError(err)}
	}
	cur := s.view.Load()
	_, r := apply(&s.opts, cur, cur.index+1, e, nil)
	r.Index = 0
	return r
}

// Advance records that the log reached index through an entry the state
// does not see (a Raft configuration change), so WaitIndex(index) returns.
func (s *State) Advance(index uint64) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.view.Load()
	if index <= cur.index {
		return
	}
	next := *cur
	next.index = index
	s.publish(cur, &next, 0, Result{Index: index})
}

// publish installs next and tells waiters and subscribers. Called with
// applyMu held, so subscribers see changes in order.
func (s *State) publish(prev, next *View, typ CommandType, r Result) {
	s.view.Store(next)
	s.notifyMu.Lock()
	close(s.notify)
	s.notify = make(chan struct{})
	s.notifyMu.Unlock()

	s.subsMu.Lock()
	ids := make([]uint64, 0, len(s.subs))
	for id := range s.subs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	fns := make([]func(Change), 0, len(ids))
	for _, id := range ids {
		fns = append(fns, s.subs[id])
	}
	s.subsMu.Unlock()
	ch := Change{Index: next.index, Type: typ, Result: r, Prev: prev, View: next}
	for _, fn := range fns {
		fn(ch)
	}
}
