package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
)

// topicsDir holds one directory per topic, named <name>-<topic id>, with
// one directory per partition inside, so that a topic deleted and created
// again never meets the old one's files.
const topicsDir = "topics"

// maxTopicNameLen is Kafka's limit: 249, so that <name>-<partition>
// directory names fit in 255 bytes.
const maxTopicNameLen = 249

// Topic is a named set of partitions.
type Topic struct {
	Name string
	ID   TopicID

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

// Configs returns the explicit topic configs.
func (t *Topic) Configs() map[string]string { return *t.configs.Load() }

func (t *Topic) meta() topicMeta {
	return topicMeta{Name: t.Name, ID: t.ID, Partitions: int32(len(t.partitions())), Configs: t.Configs()}
}

func (b *Broker) topicDir(name string, id TopicID) string {
	return filepath.Join(b.node.DataDir, topicsDir, name+"-"+id.String())
}

// ValidateTopicName applies Kafka's rules for topic names.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", kerr.InvalidTopicException)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", kerr.InvalidTopicException, name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("%w: topic name is longer than %d characters", kerr.InvalidTopicException, maxTopicNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q contains %q; legal characters are ASCII letters, digits, '.', '_' and '-'", kerr.InvalidTopicException, name, c)
		}
	}
	return nil
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
func (b *Broker) TopicByID(id TopicID) *Topic {
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
}

// CreateTopic validates and creates a topic, returning it (a detached
// description of it when ValidateOnly).
func (b *Broker) CreateTopic(req CreateTopicRequest) (*Topic, error) {
	if err := ValidateTopicName(req.Name); err != nil {
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
	if brokers := int16(1); req.ReplicationFactor > brokers {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available broker(s)", kerr.InvalidReplicationFactor, req.ReplicationFactor, brokers)
	}
	configs := map[string]string{}
	for k, v := range req.Configs {
		if err := ValidateTopicConfig(k, v); err != nil {
			return nil, err
		}
		configs[k] = v
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, kerr.NotController
	}
	if _, exists := b.byName[req.Name]; exists {
		return nil, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, req.Name)
	}
	if err := b.checkCollisionLocked(req.Name); err != nil {
		return nil, err
	}
	tm := topicMeta{Name: req.Name, ID: newTopicID(), Partitions: req.Partitions, Configs: configs}
	if req.ValidateOnly {
		t := &Topic{Name: tm.Name, ID: tm.ID}
		t.configs.Store(&configs)
		parts := make([]*Partition, tm.Partitions)
		for i := range parts {
			parts[i] = &Partition{Index: int32(i), topic: t}
		}
		t.parts.Store(&parts)
		return t, nil
	}
	t, err := b.openTopic(tm)
	if err != nil {
		return nil, fmt.Errorf("%w: create topic %s: %v", kerr.KafkaStorageError, req.Name, err)
	}
	b.byName[t.Name] = t
	b.byID[t.ID] = t
	if err := b.persistLocked(); err != nil {
		delete(b.byName, t.Name)
		delete(b.byID, t.ID)
		for _, p := range t.partitions() {
			p.close()
		}
		os.RemoveAll(b.topicDir(t.Name, t.ID))
		return nil, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	b.logger.Info("created topic", "topic", t.Name, "id", t.ID.String(), "partitions", tm.Partitions)
	return t, nil
}

// maxPartitionsPerTopic keeps one request from opening an absurd number
// of files on a single node.
const maxPartitionsPerTopic = 10000

// checkCollisionLocked refuses names that differ only in '.' versus '_',
// as Kafka does, because metric names cannot tell them apart.
func (b *Broker) checkCollisionLocked(name string) error {
	norm := strings.ReplaceAll(name, ".", "_")
	for other := range b.byName {
		if strings.ReplaceAll(other, ".", "_") == norm {
			return fmt.Errorf("%w: topic %q collides with existing topic %q", kerr.InvalidTopicException, name, other)
		}
	}
	return nil
}

func (b *Broker) openTopic(tm topicMeta) (*Topic, error) {
	t := &Topic{Name: tm.Name, ID: tm.ID}
	configs := tm.Configs
	if configs == nil {
		configs = map[string]string{}
	}
	t.configs.Store(&configs)
	parts := make([]*Partition, 0, tm.Partitions)
	t.parts.Store(&parts)
	return t, b.growTopic(t, tm.Partitions)
}

// growTopic opens partitions up to count.
func (b *Broker) growTopic(t *Topic, count int32) error {
	cfg := b.logConfigFor(t)
	parts := append([]*Partition(nil), t.partitions()...)
	for i := int32(len(parts)); i < count; i++ {
		dir := filepath.Join(b.topicDir(t.Name, t.ID), strconv.Itoa(int(i)))
		p, err := openPartition(t, i, dir, cfg)
		if err != nil {
			for _, opened := range parts[len(t.partitions()):] {
				opened.close()
			}
			return fmt.Errorf("partition %d: %w", i, err)
		}
		parts = append(parts, p)
	}
	t.parts.Store(&parts)
	return nil
}

// DeleteTopic removes a topic and its data.
func (b *Broker) DeleteTopic(name string) error {
	b.mu.Lock()
	t := b.byName[name]
	if t == nil {
		b.mu.Unlock()
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	return b.deleteTopic(t)
}

// DeleteTopicByID removes a topic named by its ID (DeleteTopics v6+).
func (b *Broker) DeleteTopicByID(id TopicID) (string, error) {
	b.mu.Lock()
	t := b.byID[id]
	if t == nil {
		b.mu.Unlock()
		return "", fmt.Errorf("%w: %s", kerr.UnknownTopicID, id)
	}
	return t.Name, b.deleteTopic(t)
}

// deleteTopic is entered with b.mu held and releases it. Groups' offsets
// of the topic are dropped after the lock is released: the coordinator's
// loops look topics up, and waiting on them under b.mu would deadlock.
// The drop finishes before the delete is answered, so a topic created
// again under the name never has its new commits removed.
func (b *Broker) deleteTopic(t *Topic) error {
	err := b.deleteTopicLocked(t)
	b.mu.Unlock()
	if err == nil && b.groups != nil {
		b.groups.TopicDeleted(t.Name)
	}
	return err
}

func (b *Broker) deleteTopicLocked(t *Topic) error {
	if t.Internal() {
		return fmt.Errorf("%w: the internal topic %s cannot be deleted", kerr.InvalidTopicException, t.Name)
	}
	delete(b.byName, t.Name)
	delete(b.byID, t.ID)
	// The table is persisted before files go: a crash in between leaves
	// an orphan directory, removed on the next start, never a topic
	// whose data is half gone.
	if err := b.persistLocked(); err != nil {
		b.byName[t.Name] = t
		b.byID[t.ID] = t
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	for _, p := range t.partitions() {
		p.markDeleted()
		p.close()
	}
	if err := os.RemoveAll(b.topicDir(t.Name, t.ID)); err != nil {
		b.logger.Warn("removing deleted topic's files", "topic", t.Name, "err", err)
	}
	b.logger.Info("deleted topic", "topic", t.Name, "id", t.ID.String())
	return nil
}

// CreatePartitions raises a topic's partition count to total.
func (b *Broker) CreatePartitions(name string, total int32, validateOnly bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.byName[name]
	if t == nil {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	have := int32(len(t.partitions()))
	switch {
	case t.Internal():
		return fmt.Errorf("%w: the partition count of %s is fixed: groups are placed by it", kerr.InvalidRequest, name)
	case total < have:
		return fmt.Errorf("%w: topic %s has %d partitions; the count cannot decrease", kerr.InvalidPartitions, name, have)
	case total == have:
		return fmt.Errorf("%w: topic %s already has %d partitions", kerr.InvalidPartitions, name, have)
	case total > maxPartitionsPerTopic:
		return fmt.Errorf("%w: %d partitions is more than %d", kerr.InvalidPartitions, total, maxPartitionsPerTopic)
	}
	if validateOnly {
		return nil
	}
	if err := b.growTopic(t, total); err != nil {
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	if err := b.persistLocked(); err != nil {
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	return nil
}

// TopicConfig returns a topic's effective configs.
func (b *Broker) TopicConfig(t *Topic) []ConfigEntry {
	return effectiveConfig(t.Configs(), b.props)
}

func (b *Broker) logConfigFor(t *Topic) log.Config {
	c := logConfig(b.TopicConfig(t))
	c.Now = b.now
	return c
}

// ConfigOp is one IncrementalAlterConfigs operation.
type ConfigOp struct {
	Name  string
	Op    int8 // 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
	Value string
}

// AlterTopicConfig applies incremental config changes to a topic and to
// its partitions' logs at once.
func (b *Broker) AlterTopicConfig(name string, ops []ConfigOp, validateOnly bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.byName[name]
	if t == nil {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	next := map[string]string{}
	for k, v := range t.Configs() {
		next[k] = v
	}
	for _, op := range ops {
		if _, ok := lookupTopicConfig(op.Name); !ok {
			return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
		}
		switch op.Op {
		case 0:
			if err := ValidateTopicConfig(op.Name, op.Value); err != nil {
				return err
			}
			next[op.Name] = op.Value
		case 1:
			delete(next, op.Name)
		default:
			return fmt.Errorf("%w: %s: APPEND and SUBTRACT apply to list configs only", kerr.InvalidConfig, op.Name)
		}
	}
	if validateOnly {
		return nil
	}
	prev := t.configs.Load()
	t.configs.Store(&next)
	if err := b.persistLocked(); err != nil {
		t.configs.Store(prev)
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	cfg := b.logConfigFor(t)
	for _, p := range t.partitions() {
		p.setConfig(cfg)
	}
	return nil
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
