package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/log"
)

// topicsDir holds one directory per topic, named <name>-<topic id>, with
// one directory per partition inside, so that a topic deleted and created
// again never meets the old one's files.
const topicsDir = "topics"

// Topic is a named set of partitions.
type Topic struct {
	Name string
	ID   controller.TopicID
	// ReplicationFactor is the number of replicas of each partition,
	// fixed at creation.
	ReplicationFactor int16

	parts    atomic.Pointer[[]*Partition]
	configs  atomic.Pointer[map[string]string] // explicit topic configs
	settings atomic.Pointer[produceSettings]   // cache derived from configs
}

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
		return nil, fmt.Errorf("%w: %s/%d is hosted by another broker", kerr.NotLeaderForPartition, t.Name, i)
	}
	return nil, fmt.Errorf("%w: %s/%d", kerr.UnknownTopicOrPartition, t.Name, i)
}

// Configs returns the explicit topic configs.
func (t *Topic) Configs() map[string]string { return *t.configs.Load() }

func (b *Broker) topicDir(name string, id controller.TopicID) string {
	return filepath.Join(b.node.DataDir, topicsDir, name+"-"+id.String())
}

// Topics returns every topic, sorted by name.
func (b *Broker) Topics() []*Topic {
	b.mu.RLock()
	out := make([]*Topic, 0, len(b.byName))
	for _, t := range b.byName {
		out = append(out, t)
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic looks a topic up by name.
func (b *Broker) Topic(name string) *Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byName[name]
}

// TopicByID looks a topic up by ID.
func (b *Broker) TopicByID(id controller.TopicID) *Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byID[id]
}

// CreateTopicRequest describes a topic to create. Partitions <= 0 and
// ReplicationFactor <= 0 take the cluster defaults.
type CreateTopicRequest struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
	ValidateOnly      bool
	Internal          bool
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
func (b *Broker) CreateTopic(req CreateTopicRequest) (*Topic, error) {
	if err := controller.ValidateTopicName(req.Name); err != nil {
		return nil, err
	}
	if req.Partitions <= 0 {
		req.Partitions = int32(b.props.Int("default_topic_partitions"))
	}
	if req.ReplicationFactor <= 0 {
		req.ReplicationFactor = int16(b.props.Int("default_topic_replications"))
	}
	if req.Partitions > maxPartitionsPerTopic {
		return nil, fmt.Errorf("%w: %d partitions is more than %d", kerr.InvalidPartitions, req.Partitions, maxPartitionsPerTopic)
	}
	// Configs are validated where the topic is created: in the
	// controller's apply, with ValidateTopicConfig.
	if err := b.checkCollision(req.Name); err != nil {
		return nil, err
	}
	cmd := controller.CreateTopic{
		Name: req.Name, ID: controller.NewTopicID(), Partitions: req.Partitions,
		ReplicationFactor: req.ReplicationFactor, Configs: req.Configs, Internal: req.Internal,
		PlacementSeed: newPlacementSeed(),
	}
	if req.ValidateOnly {
		res, err := b.check(cmd)
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
	res, err := b.proposeCtx(commitCtx, cmd, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := b.ctrl.waitReconciled(ctx, res.Index, b.stop); err != nil {
		return nil, fmt.Errorf("%w: topic %s is created, but its partitions were not open here within %v", kerr.RequestTimedOut, req.Name, wait)
	}
	t := b.Topic(req.Name)
	if t == nil {
		return nil, fmt.Errorf("%w: topic %s was created but is not served here", kerr.KafkaStorageError, req.Name)
	}
	if !bounded {
		ctx, cancel = context.WithTimeout(context.Background(), leaderWait)
		defer cancel()
	}
	if !b.awaitLeaders(ctx, t) {
		if bounded {
			return nil, fmt.Errorf("%w: topic %s is created, but not every partition had a leader within %v", kerr.RequestTimedOut, req.Name, req.Timeout)
		}
		b.logger.Warn("partitions still without an elected leader", "topic", t.Name, "waited", leaderWait)
	}
	b.logger.Info("created topic", "topic", t.Name, "id", t.ID.String(), "partitions", req.Partitions)
	return t, nil
}

// leaderWait bounds how long a starting broker waits for its replicas'
// groups to elect leaders, so that it answers produce and fetch at once.
const leaderWait = 10 * time.Second

// awaitLeaders waits until the controller knows a leader for every
// partition of t, so that clients producing right after CreateTopics
// find them, or until ctx ends (false).
func (b *Broker) awaitLeaders(ctx context.Context, t *Topic) bool {
	dl, _ := ctx.Deadline()
	return b.waitFor(time.Until(dl), func() bool {
		ct := b.ctrl.state.View().TopicByID(t.ID)
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

// waitFor polls done until it holds (true), timeout passes or the broker
// stops (false).
func (b *Broker) waitFor(timeout time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !done() {
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-b.stop:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// detachedTopic describes a topic that does not exist here (validate-only
// answers).
func detachedTopic(ct *controller.Topic) *Topic {
	t := &Topic{Name: ct.Name, ID: ct.ID, ReplicationFactor: int16(ct.ReplicationFactor())}
	configs := ct.Configs
	if configs == nil {
		configs = map[string]string{}
	}
	t.configs.Store(&configs)
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
func (b *Broker) checkCollision(name string) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	norm := strings.ReplaceAll(name, ".", "_")
	for other := range b.byName {
		if other != name && strings.ReplaceAll(other, ".", "_") == norm {
			return fmt.Errorf("%w: topic %q collides with existing topic %q", kerr.InvalidTopicException, name, other)
		}
	}
	return nil
}

// DeleteTopic deletes a topic through the controller; its data and the
// groups' offsets of it are gone when it returns.
func (b *Broker) DeleteTopic(name string) error {
	t := b.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	return b.deleteTopic(t)
}

// DeleteTopicByID deletes a topic named by its ID (DeleteTopics v6+).
func (b *Broker) DeleteTopicByID(id controller.TopicID) (string, error) {
	t := b.TopicByID(id)
	if t == nil {
		return "", fmt.Errorf("%w: %s", kerr.UnknownTopicID, id)
	}
	return t.Name, b.deleteTopic(t)
}

func (b *Broker) deleteTopic(t *Topic) error {
	if t.Internal() {
		return fmt.Errorf("%w: the internal topic %s cannot be deleted", kerr.InvalidTopicException, t.Name)
	}
	_, err := b.propose(controller.DeleteTopic{TopicRef: controller.TopicRef{Name: t.Name, ID: t.ID}})
	if err == nil {
		b.logger.Info("deleted topic", "topic", t.Name, "id", t.ID.String())
	}
	return err
}

// CreatePartitions raises a topic's partition count to total.
func (b *Broker) CreatePartitions(name string, total int32, validateOnly bool) error {
	t := b.Topic(name)
	switch {
	case t == nil:
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	case t.Internal():
		return fmt.Errorf("%w: the partition count of %s is fixed: groups are placed by it", kerr.InvalidRequest, name)
	case total > maxPartitionsPerTopic:
		return fmt.Errorf("%w: %d partitions is more than %d", kerr.InvalidPartitions, total, maxPartitionsPerTopic)
	}
	cmd := controller.CreatePartitions{TopicRef: controller.TopicRef{Name: t.Name, ID: t.ID}, Total: total, PlacementSeed: newPlacementSeed()}
	if validateOnly {
		_, err := b.check(cmd)
		return err
	}
	if _, err := b.propose(cmd); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	b.awaitLeaders(ctx, t)
	return nil
}

// TopicConfig returns a topic's effective configs.
func (b *Broker) TopicConfig(t *Topic) []ConfigEntry {
	return effectiveConfig(t.Configs(), b.props)
}

func (b *Broker) logConfigFor(t *Topic) log.Config {
	c := logConfig(b.TopicConfig(t))
	c.Now = b.now
	c.FS = b.logFS
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
func (b *Broker) AlterTopicConfig(name string, ops []ConfigOp, validateOnly bool) error {
	t := b.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	cmd := controller.AlterTopicConfig{TopicRef: controller.TopicRef{Name: t.Name, ID: t.ID}}
	for _, op := range ops {
		if _, ok := lookupTopicConfig(op.Name); !ok {
			return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
		}
		switch op.Op {
		case 0: // the value is validated in the controller's apply
			cmd.Ops = append(cmd.Ops, controller.ConfigOp{Name: op.Name, Op: controller.ConfigSet, Value: op.Value})
		case 1:
			cmd.Ops = append(cmd.Ops, controller.ConfigOp{Name: op.Name, Op: controller.ConfigDelete})
		default:
			return fmt.Errorf("%w: %s: APPEND and SUBTRACT apply to list configs only", kerr.InvalidConfig, op.Name)
		}
	}
	if validateOnly {
		_, err := b.check(cmd)
		return err
	}
	_, err := b.propose(cmd)
	return err
}

// removeOrphanTopicDirs deletes directories of topics that are no longer
// in the table (a crash during DeleteTopics).
func (b *Broker) removeOrphanTopicDirs() {
	entries, err := os.ReadDir(filepath.Join(b.node.DataDir, topicsDir))
	if err != nil {
		return
	}
	want := map[string]bool{}
	for _, t := range b.byName {
		want[filepath.Base(b.topicDir(t.Name, t.ID))] = true
	}
	for _, e := range entries {
		if !want[e.Name()] {
			path := filepath.Join(b.node.DataDir, topicsDir, e.Name())
			b.logger.Warn("removing files of a deleted topic", "dir", path)
			if err := os.RemoveAll(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				b.logger.Warn("remove orphan topic dir", "dir", path, "err", err)
			}
		}
	}
}
