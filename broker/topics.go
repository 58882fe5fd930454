package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
)

// topicsDir holds one directory per topic, named <name>-<topic id>, with
// one directory per partition inside, so that a topic deleted and created
// again never meets the old one's files.
const topicsDir = "topics"

// Topic is a named set of partitions: the controller's record of the
// topic, and this broker's runtime side of it (the partitions it hosts).
// What the controller owns (name, id, configs, assignment, replication
// factor) is read from the record and never copied here, so that it
// cannot go stale when the controller changes it.
type Topic struct {
	// rec is the controller's record as of the last view the table
	// applied. The record is never modified once stored: a change
	// stores another, so a reader holds a consistent one.
	rec      atomic.Pointer[controller.Topic]
	parts    atomic.Pointer[[]*Partition]
	settings atomic.Pointer[produceSettings] // cache derived from rec's configs
	// rev is the controller's revision rec is a copy of, read and
	// written only by TopicTable.apply (under its mu).
	rev controller.TopicRev
}

// newTopic returns a topic of record ct with no partitions open; ct is
// the topic's from then on and must not be modified.
func newTopic(ct *controller.Topic) *Topic {
	t := &Topic{}
	t.rec.Store(ct)
	empty := []*Partition{}
	t.parts.Store(&empty)
	return t
}

// Record returns the controller's record of the topic, as of the last
// view this broker applied. It is shared: callers must not modify it.
func (t *Topic) Record() *controller.Topic { return t.rec.Load() }

// Name returns the topic's name.
func (t *Topic) Name() string { return t.rec.Load().Name }

// ID returns the topic's id.
func (t *Topic) ID() controller.TopicID { return t.rec.Load().ID }

func (t *Topic) partitions() []*Partition { return *t.parts.Load() }

// Partitions returns the topic's partitions, indexed by partition number.
func (t *Topic) Partitions() []*Partition { return t.partitions() }

// Partition returns partition i, or nil.
func (t *Topic) Partition(i int32) *Partition {
	ps := t.partitions()
	if i < 0 || int(i) >= len(ps) {
		return nil
	}
	return ps[i]
}

// LocalPartition returns partition i if this broker hosts it:
// NOT_LEADER_OR_FOLLOWER when another broker does, UNKNOWN_TOPIC_OR_PARTITION
// when there is no such partition or it is being deleted.
func (t *Topic) LocalPartition(i int32) (*Partition, error) {
	if p := t.Partition(i); p != nil && !p.deleted.Load() {
		return p, nil
	} else if p == nil && i >= 0 && int(i) < len(t.partitions()) {
		return nil, fmt.Errorf("%w: %s/%d is hosted by another broker", kerr.NotLeaderForPartition, t.Name(), i)
	}
	return nil, fmt.Errorf("%w: %s/%d", kerr.UnknownTopicOrPartition, t.Name(), i)
}

// Configs returns the explicit topic configs. They are the record's:
// callers must not modify them.
func (t *Topic) Configs() map[string]string { return t.rec.Load().Configs }

// TopicTable is this broker's materialisation of the controller's topics:
// the topics by name and id with their local partitions, the changes to
// them proposed through the controller (create, delete, grow,
// reconfigure), and the configs their logs and the produce path resolve
// from. The Broker composes it, applies the controller's views to it
// (reconcile.go) and opens the replicas it holds; what it needs of the
// rest of the broker it is handed.
type TopicTable struct {
	topicTableDeps

	// mu guards the table; partitions have their own locks for their
	// data. closed is under it too, so that Close and Ready agree.
	mu     sync.RWMutex
	byName map[string]*Topic
	byID   map[controller.TopicID]*Topic
	closed bool
}

// topicTableDeps are what a TopicTable is handed of the rest of the
// broker.
type topicTableDeps struct {
	dataDir string
	props   *config.Values
	logger  *slog.Logger
	now     func() time.Time // the logs' clock
	logFS   log.FS
	// pageCache bounds what the segments' appends keep in the page
	// cache, over every log of the node; nil leaves it to the kernel.
	pageCache *log.PageCache
	view      func() *controller.View
	propose   func(controller.Command) (controller.Result, error)
	// commit proposes without waiting for the table to reflect the
	// command: CreateTopic waits for that under its own deadline.
	commit         func(context.Context, controller.Command) (controller.Result, error)
	check          func(controller.Command) (controller.Result, error)
	waitReconciled func(ctx context.Context, index uint64) error
	stop           <-chan struct{} // closed when the broker stops
}

func newTopicTable(d topicTableDeps) TopicTable {
	return TopicTable{topicTableDeps: d, byName: map[string]*Topic{}, byID: map[controller.TopicID]*Topic{}}
}

func (tt *TopicTable) topicDir(name string, id controller.TopicID) string {
	return filepath.Join(tt.dataDir, topicsDir, name+"-"+id.String())
}

// Topics returns every topic, sorted by name.
func (tt *TopicTable) Topics() []*Topic {
	tt.mu.RLock()
	out := make([]*Topic, 0, len(tt.byName))
	for _, t := range tt.byName {
		out = append(out, t)
	}
	tt.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Topic looks a topic up by name.
func (tt *TopicTable) Topic(name string) *Topic {
	tt.mu.RLock()
	defer tt.mu.RUnlock()
	return tt.byName[name]
}

// TopicByID looks a topic up by ID.
func (tt *TopicTable) TopicByID(id controller.TopicID) *Topic {
	tt.mu.RLock()
	defer tt.mu.RUnlock()
	return tt.byID[id]
}

// CreateTopicRequest describes a topic to create. Partitions <= 0 and
// ReplicationFactor <= 0 take the cluster defaults.
type CreateTopicRequest struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	// Assignment, when set, places each partition on the brokers it
	// lists (the first the preferred leader); Partitions and
	// ReplicationFactor are then taken from it.
	Assignment   [][]int32
	Configs      map[string]string
	ValidateOnly bool
	Internal     bool
	// Timeout bounds the wait for the commit, for the partitions to be
	// open here and to have leaders (CreateTopics' timeout_ms). Past it
	// the answer is REQUEST_TIMED_OUT while creation carries on, as
	// Kafka's is. Zero: the commit and opening wait up to
	// proposeTimeout, the leaders up to leaderWait, and creation
	// succeeds even without them (internal topics, auto-creation).
	Timeout time.Duration
}

// CreateTopic validates the topic and creates it through the controller,
// returning it once this node serves it (a detached description of it
// when ValidateOnly).
func (tt *TopicTable) CreateTopic(req CreateTopicRequest) (*Topic, error) {
	if err := controller.ValidateTopicName(req.Name); err != nil {
		return nil, err
	}
	if len(req.Assignment) > 0 {
		req.Partitions, req.ReplicationFactor = int32(len(req.Assignment)), int16(len(req.Assignment[0]))
	}
	if req.Partitions <= 0 {
		req.Partitions = int32(tt.props.Int("default_topic_partitions"))
	}
	if req.ReplicationFactor <= 0 {
		req.ReplicationFactor = int16(tt.props.Int("default_topic_replications"))
	}
	if req.Partitions > maxPartitionsPerTopic {
		return nil, fmt.Errorf("%w: %d partitions is more than %d", kerr.InvalidPartitions, req.Partitions, maxPartitionsPerTopic)
	}
	// Configs are validated where the topic is created: in the
	// controller's apply, with ValidateTopicConfig.
	if err := tt.checkCollision(req.Name); err != nil {
		return nil, err
	}
	cmd := controller.CreateTopic{
		Name: req.Name, ID: controller.NewTopicID(), Partitions: req.Partitions,
		ReplicationFactor: req.ReplicationFactor, Configs: req.Configs, Internal: req.Internal,
		Assignment: req.Assignment, PlacementSeed: newPlacementSeed(),
	}
	if req.ValidateOnly {
		res, err := tt.check(cmd)
		if err != nil {
			return nil, err
		}
		return detachedTopic(res.Topic), nil
	}
	// The commit gets its own bound, whatever the request's timeout: a
	// creation the client stops waiting for still happens, on every
	// broker, as in Kafka; only the answer says it took too long.
	wait, bounded := req.Timeout, req.Timeout > 0
	if !bounded {
		wait = proposeTimeout
	}
	deadline := time.Now().Add(wait)
	commitCtx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := tt.commit(commitCtx, cmd)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := tt.waitReconciled(ctx, res.Index); err != nil {
		return nil, fmt.Errorf("%w: topic %s is created, but its partitions were not open here within %v", kerr.RequestTimedOut, req.Name, wait)
	}
	t := tt.Topic(req.Name)
	if t == nil {
		return nil, fmt.Errorf("%w: topic %s was created but is not served here", kerr.KafkaStorageError, req.Name)
	}
	if !bounded {
		ctx, cancel = context.WithTimeout(context.Background(), leaderWait)
		defer cancel()
	}
	if !tt.awaitLeaders(ctx, t) {
		if bounded {
			return nil, fmt.Errorf("%w: topic %s is created, but not every partition had a leader within %v", kerr.RequestTimedOut, req.Name, req.Timeout)
		}
		tt.logger.Warn("partitions still without an elected leader", "topic", t.Name(), "waited", leaderWait)
	}
	tt.logger.Info("created topic", "topic", t.Name(), "id", t.ID().String(), "partitions", req.Partitions)
	return t, nil
}

// autoCreate creates a topic on first use when the cluster allows it.
func (tt *TopicTable) autoCreate(name string) (*Topic, error) {
	if !tt.props.Bool("auto_create_topics_enabled") {
		return nil, fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	t, err := tt.CreateTopic(CreateTopicRequest{Name: name})
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if t = tt.Topic(name); t != nil {
			return t, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// AutoCreate is autoCreate for Metadata requests that allow it.
func (tt *TopicTable) AutoCreate(name string) (*Topic, error) {
	if err := controller.ValidateTopicName(name); err != nil {
		return nil, err
	}
	return tt.autoCreate(name)
}

// leaderWait bounds how long a starting broker waits for its replicas'
// groups to elect leaders, so that it answers produce and fetch at once.
const leaderWait = 10 * time.Second

// awaitLeaders waits until the controller knows a leader for every
// partition of t, so that clients producing right after CreateTopics
// find them, or until ctx ends (false).
func (tt *TopicTable) awaitLeaders(ctx context.Context, t *Topic) bool {
	dl, _ := ctx.Deadline()
	return waitFor(tt.stop, time.Until(dl), func() bool {
		ct := tt.view().TopicByID(t.ID())
		if ct == nil {
			return true
		}
		for _, p := range ct.Partitions {
			if p.LeaderTerm == 0 {
				return false
			}
		}
		return true
	})
}

// waitFor polls done until it holds (true), timeout passes or stop is
// closed (false).
func waitFor(stop <-chan struct{}, timeout time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !done() {
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-stop:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// detachedTopic describes a topic that does not exist here (validate-only
// answers).
func detachedTopic(ct *controller.Topic) *Topic {
	t := newTopic(ct)
	parts := make([]*Partition, len(ct.Partitions))
	for i := range parts {
		parts[i] = &Partition{Index: int32(i), topic: t}
	}
	t.parts.Store(&parts)
	return t
}

// maxPartitionsPerTopic keeps one request from opening an absurd number
// of files on a single node.
const maxPartitionsPerTopic = 10000

// checkCollision refuses names that differ from an existing topic's only
// in '.' versus '_', as Kafka does, because metric names cannot tell them
// apart.
func (tt *TopicTable) checkCollision(name string) error {
	tt.mu.RLock()
	defer tt.mu.RUnlock()
	norm := strings.ReplaceAll(name, ".", "_")
	for other := range tt.byName {
		if other != name && strings.ReplaceAll(other, ".", "_") == norm {
			return fmt.Errorf("%w: topic %q collides with existing topic %q", kerr.InvalidTopicException, name, other)
		}
	}
	return nil
}

// DeleteTopic deletes a topic through the controller; its data and the
// groups' offsets of it are gone when it returns.
func (tt *TopicTable) DeleteTopic(name string) error {
	t := tt.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	return tt.deleteTopic(t)
}

// DeleteTopicByID deletes a topic named by its ID (DeleteTopics v6+).
func (tt *TopicTable) DeleteTopicByID(id controller.TopicID) (string, error) {
	t := tt.TopicByID(id)
	if t == nil {
		return "", fmt.Errorf("%w: %s", kerr.UnknownTopicID, id)
	}
	return t.Name(), tt.deleteTopic(t)
}

func (tt *TopicTable) deleteTopic(t *Topic) error {
	if t.Internal() {
		return fmt.Errorf("%w: the internal topic %s cannot be deleted", kerr.InvalidTopicException, t.Name())
	}
	_, err := tt.propose(controller.DeleteTopic{TopicRef: controller.TopicRef{Name: t.Name(), ID: t.ID()}})
	if err == nil {
		tt.logger.Info("deleted topic", "topic", t.Name(), "id", t.ID().String())
	}
	return err
}

// CreatePartitions raises a topic's partition count to total.
func (tt *TopicTable) CreatePartitions(name string, total int32, validateOnly bool) error {
	t := tt.Topic(name)
	switch {
	case t == nil:
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	case t.Internal():
		return fmt.Errorf("%w: the partition count of %s is fixed: groups are placed by it", kerr.InvalidRequest, name)
	case total > maxPartitionsPerTopic:
		return fmt.Errorf("%w: %d partitions is more than %d", kerr.InvalidPartitions, total, maxPartitionsPerTopic)
	}
	cmd := controller.CreatePartitions{TopicRef: controller.TopicRef{Name: t.Name(), ID: t.ID()}, Total: total, PlacementSeed: newPlacementSeed()}
	if validateOnly {
		_, err := tt.check(cmd)
		return err
	}
	if _, err := tt.propose(cmd); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	tt.awaitLeaders(ctx, t)
	return nil
}

// TopicConfig returns a topic's effective configs.
func (tt *TopicTable) TopicConfig(t *Topic) []ConfigEntry {
	return effectiveConfig(t.Configs(), tt.props)
}

func (tt *TopicTable) logConfigFor(t *Topic) log.Config {
	c := logConfig(tt.TopicConfig(t))
	c.Now = tt.now
	c.FS = tt.logFS
	c.PageCache = tt.pageCache
	return c
}

// ConfigOp is one IncrementalAlterConfigs operation.
type ConfigOp struct {
	Name  string
	Op    int8 // 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
	Value string
}

// AlterTopicConfig applies incremental config changes to a topic through
// the controller; the partitions' logs take them at once.
func (tt *TopicTable) AlterTopicConfig(name string, ops []ConfigOp, validateOnly bool) error {
	t := tt.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	cmd := controller.AlterTopicConfig{TopicRef: controller.TopicRef{Name: t.Name(), ID: t.ID()}}
	var current []ConfigEntry // the effective configs, for APPEND and SUBTRACT
	for _, op := range ops {
		d, ok := lookupTopicConfig(op.Name)
		if !ok {
			if why, removed := removedTopicConfig(op.Name); removed {
				return fmt.Errorf("%w: topic config %q: %s", kerr.InvalidConfig, op.Name, why)
			}
			return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
		}
		switch op.Op {
		case 0: // the value is validated in the controller's apply
			cmd.Ops = append(cmd.Ops, controller.ConfigOp{Name: op.Name, Op: controller.ConfigSet, Value: op.Value})
		case 1:
			cmd.Ops = append(cmd.Ops, controller.ConfigOp{Name: op.Name, Op: controller.ConfigDelete})
		case 2, 3:
			if d.kind != typeList {
				return fmt.Errorf("%w: %s: APPEND and SUBTRACT apply to list configs only", kerr.InvalidConfig, op.Name)
			}
			if current == nil {
				current = tt.TopicConfig(t)
			}
			// The controller sees a SET of the resulting list, as
			// Kafka's does; the list is this broker's view of it.
			cmd.Ops = append(cmd.Ops, controller.ConfigOp{Name: op.Name, Op: controller.ConfigSet, Value: editList(configValue(current, op.Name), op.Value, op.Op == 2)})
		default:
			return fmt.Errorf("%w: %s: operation %d is not SET (0), DELETE (1), APPEND (2) or SUBTRACT (3)", kerr.InvalidConfig, op.Name, op.Op)
		}
	}
	if validateOnly {
		_, err := tt.check(cmd)
		return err
	}
	_, err := tt.propose(cmd)
	return err
}

// editList appends to, or subtracts from, a comma-separated list the
// items of another (Kafka's APPEND and SUBTRACT): an item already there
// is not added twice.
func editList(list, items string, appendItems bool) string {
	split := func(s string) []string {
		var out []string
		for _, item := range strings.Split(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		return out
	}
	have := split(list)
	for _, item := range split(items) {
		switch i := slices.Index(have, item); {
		case appendItems && i < 0:
			have = append(have, item)
		case !appendItems && i >= 0:
			have = slices.DeleteFunc(have, func(h string) bool { return h == item })
		}
	}
	return strings.Join(have, ",")
}

// removeOrphanTopicDirs deletes directories of topics that are no longer
// in the table (a crash during DeleteTopics).
func (tt *TopicTable) removeOrphanTopicDirs() {
	entries, err := os.ReadDir(filepath.Join(tt.dataDir, topicsDir))
	if err != nil {
		return
	}
	want := map[string]bool{}
	for _, t := range tt.byName {
		want[filepath.Base(tt.topicDir(t.Name(), t.ID()))] = true
	}
	for _, e := range entries {
		if !want[e.Name()] {
			path := filepath.Join(tt.dataDir, topicsDir, e.Name())
			tt.logger.Warn("removing files of a deleted topic", "dir", path)
			if err := os.RemoveAll(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				tt.logger.Warn("remove orphan topic dir", "dir", path, "err", err)
			}
		}
	}
}

// apply makes the table match v's topics: it adds the new ones, hands
// the logs of a topic whose configs changed their new settings (every
// topic's when the cluster's properties changed, as they are the topic
// configs' defaults), has open open what v newly assigns here, and takes
// out the deleted topics, closing their replicas and having removeFiles
// remove those replicas' Raft state. It returns the deleted topics, whose
// files and offsets the caller removes once the lock is released.
func (tt *TopicTable) apply(v *controller.View, propsChanged bool, open func(*Topic, *controller.Topic), removeFiles func(*Partition)) (removed []*Topic) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	wanted := map[controller.TopicID]bool{}
	for _, rev := range v.TopicRevs() {
		id := rev.ID()
		wanted[id] = true
		t, topicChanged := tt.byID[id], false
		var ct *controller.Topic
		switch {
		case t == nil:
			ct = rev.Record()
			t = newTopic(ct)
			tt.byName[ct.Name] = t
			tt.byID[id] = t
		case t.rev == rev:
			// A view comes with every broker heartbeat, mostly with
			// no topic changed: nothing to copy or compare.
			ct = t.Record()
		default:
			// Only a changed record is swapped in: the produce
			// settings cached from it last until it changes.
			ct = rev.Record()
			if old := t.Record(); !reflect.DeepEqual(old, ct) {
				topicChanged = !maps.Equal(old.Configs, ct.Configs)
				t.rec.Store(ct)
			} else {
				ct = old
			}
		}
		t.rev = rev
		if topicChanged || propsChanged {
			cfg := tt.logConfigFor(t)
			for _, p := range t.partitions() {
				if p != nil {
					p.setConfig(cfg)
				}
			}
		}
		open(t, ct)
	}
	for id, t := range tt.byID {
		if !wanted[id] {
			delete(tt.byID, id)
			delete(tt.byName, t.Name())
			for _, p := range t.partitions() {
				if p != nil {
					p.markDeleted()
					p.close()
					removeFiles(p)
				}
			}
			removed = append(removed, t)
		}
	}
	return removed
}

// shut marks the table closed, false when it already was, so that the
// broker closes once.
func (tt *TopicTable) shut() bool {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.closed {
		return false
	}
	tt.closed = true
	return true
}

// isClosed reports whether the broker closed or is closing.
func (tt *TopicTable) isClosed() bool {
	tt.mu.RLock()
	defer tt.mu.RUnlock()
	return tt.closed
}

// closeReplicas stops every replica, all at once: each waits for its Raft
// group to shut down.
func (tt *TopicTable) closeReplicas() error {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, t := range tt.byName {
		for _, p := range t.partitions() {
			if p == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.close(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
