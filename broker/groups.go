package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
)

// GroupTopic is the internal topic holding committed offsets and group
// metadata.
const GroupTopic = "__consumer_offsets"

// Internal reports whether clients may only read the topic.
func (t *Topic) Internal() bool { return t.Name() == GroupTopic || t.Name() == TxnTopic }

// Groups is the group coordinator.
func (b *Broker) Groups() *group.Coordinator { return b.groups.Load() }

// openGroups creates __consumer_offsets on first start, replays it and
// starts the coordinator.
func (b *Broker) openGroups() error {
	t := b.Topic(GroupTopic)
	if t == nil {
		b.awaitSeeds()
		t = b.Topic(GroupTopic)
	}
	if t == nil {
		var err error
		t, err = b.CreateTopic(CreateTopicRequest{
			Name:       GroupTopic,
			Internal:   true,
			Partitions: int32(b.props.Int("group_topic_partitions")),
			// Kafka's offsets.topic.replication.factor is 3; a cluster
			// of fewer brokers gets one replica on each.
			ReplicationFactor: int16(min(groupTopicReplicas, max(1, len(b.LiveBrokers())))),
			// Kafka's settings: compacted by key (the log cleaner keeps
			// each offset's and group's latest record), never deleted
			// by age or size; offsets.topic.segment.bytes.
			Configs: groupTopicConfigs,
		})
		if errors.Is(err, kerr.TopicAlreadyExists) {
			// Another broker starting with this one created it first;
			// this broker's view may apply that entry a moment later.
			deadline := time.Now().Add(seedsWait)
			for t = b.Topic(GroupTopic); t == nil && time.Now().Before(deadline); t = b.Topic(GroupTopic) {
				time.Sleep(50 * time.Millisecond)
			}
			if t != nil {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", GroupTopic, err)
		}
	}
	b.compactGroupTopic(t)
	store := newInternalStore(b, GroupTopic)
	store.found.Store(t)
	c := group.New(group.Options{
		Store:    store,
		Settings: b.groupSettings,
		PartitionExists: func(topic string, partition int32) bool {
			tp := b.Topic(topic)
			return tp != nil && partition >= 0 && int(partition) < len(tp.partitions())
		},
		Topics: groupCatalog{b},
		Logger: b.logger,
		Now:    b.now,
	})
	b.groups.Store(c)
	// Leadership gained before the coordinator existed is applied now;
	// later changes are applied by the replicas' leadership watchers.
	for _, p := range t.partitions() {
		if p == nil {
			continue
		}
		p.coordMu.Lock()
		if p.leading {
			b.applyGroupLeadership(c, p)
		}
		p.coordMu.Unlock()
	}
	b.done.Add(1)
	go b.offsetExpiryLoop()
	return nil
}

// groupTopicConfigs are __consumer_offsets' topic configs at creation.
var groupTopicConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}

// compactGroupTopic makes a __consumer_offsets created before the log
// cleaner existed (cleanup.policy delete, kept in bounds by its
// coordinator's own rewrites) a compacted topic, once: records keyed as
// Kafka keys them were all it ever held, so the cleaner can take over.
// While a controller of an older release refuses the change (a rolling
// upgrade), it is tried again at every offset expiry round.
func (b *Broker) compactGroupTopic(t *Topic) {
	if policyHas(configValue(b.TopicConfig(t), "cleanup.policy"), "compact") {
		return
	}
	err := b.AlterTopicConfig(GroupTopic, []ConfigOp{{Name: "cleanup.policy", Value: "compact"}}, false)
	if err != nil {
		b.logger.Warn("making __consumer_offsets compacted; will retry", "err", err)
		return
	}
	b.logger.Info("__consumer_offsets is now compacted by the log cleaner (cleanup.policy=compact)")
}

// groupTopicReplicas is the replication factor of __consumer_offsets.
const groupTopicReplicas = 3

// seedsWait bounds how long a new cluster's first broker waits for its
// seeds to register before placing __consumer_offsets.
const seedsWait = 10 * time.Second

// awaitSeeds waits, briefly, until the brokers this one was started with
// are registered (or another broker created __consumer_offsets), so the
// topic's partitions spread over all of them rather than landing on the
// first broker up.
func (b *Broker) awaitSeeds() {
	if len(b.node.Seeds) == 0 {
		return
	}
	deadline := time.Now().Add(seedsWait)
	for time.Now().Before(deadline) && len(b.LiveBrokers()) <= len(b.node.Seeds) && b.Topic(GroupTopic) == nil {
		select {
		case <-b.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (b *Broker) groupSettings() group.Settings {
	ms := func(name string) time.Duration { return time.Duration(b.props.Int(name)) * time.Millisecond }
	return group.Settings{
		MinSessionTimeout:     ms("group_min_session_timeout_ms"),
		MaxSessionTimeout:     ms("group_max_session_timeout_ms"),
		InitialRebalanceDelay: ms("group_initial_rebalance_delay_ms"),
		OffsetRetention:       time.Duration(b.props.Int("group_offset_retention_sec")) * time.Second,

		ConsumerHeartbeatInterval: ms("group_consumer_heartbeat_interval_ms"),
		ConsumerSessionTimeout:    ms("group_consumer_session_timeout_ms"),
		ConsumerMaxSize:           int(b.props.Int("group_consumer_max_size")),
		ConsumerAssignors:         config.ConsumerAssignors(b.props.String("group_consumer_assignors")),
		MigrationPolicy:           group.MigrationPolicy(b.props.String("group_consumer_migration_policy")),
	}
}

// groupCatalog is the topics as consumer-protocol groups see them: the
// controller's view, which every broker holds.
type groupCatalog struct{ b *Broker }

func (gc groupCatalog) ByName(name string) ([16]byte, int32, bool) {
	t := gc.b.ctrl.state.View().Topic(name)
	if t == nil {
		return [16]byte{}, 0, false
	}
	return t.ID, int32(len(t.Partitions)), true
}

func (gc groupCatalog) ByID(id [16]byte) (string, int32, bool) {
	t := gc.b.ctrl.state.View().TopicByID(controller.TopicID(id))
	if t == nil {
		return "", 0, false
	}
	return t.Name, int32(len(t.Partitions)), true
}

func (gc groupCatalog) Names() []string {
	return gc.b.ctrl.state.View().TopicNames()
}

func (gc groupCatalog) Index() uint64 { return gc.b.ctrl.state.View().Index() }

// offsetExpiryLoop removes expired offsets of empty groups, re-reading
// the interval each round so a property change takes effect. (The log
// cleaner compacts __consumer_offsets.)
func (b *Broker) offsetExpiryLoop() {
	defer b.done.Done()
	for {
		timer := time.NewTimer(time.Duration(b.props.Int("group_offset_retention_check_ms")) * time.Millisecond)
		select {
		case <-b.stop:
			timer.Stop()
			return
		case <-timer.C:
			c := b.groups.Load()
			c.ExpireOffsets()
			if t := b.Topic(GroupTopic); t != nil {
				b.compactGroupTopic(t)
			}
		}
	}
}

// Append writes records as a plain batch and returns the offset of the
// first.
func (s internalStore) Append(partition int32, records []log.KeyValue) (int64, error) {
	t := s.topic()
	if t == nil {
		return 0, fmt.Errorf("%w: %s does not exist", kerr.NotCoordinator, s.name)
	}
	p, err := t.LeaderPartition(partition, -1)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupWriteTimeout)
	defer cancel()
	res, err := p.replicate(ctx, encodeAppend(0, log.BuildBatch(s.b.now().UnixMilli(), records)))
	if errors.Is(err, kerr.NotLeaderForPartition) {
		return 0, fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
	}
	if err == nil && res.err != nil {
		err = res.err
	}
	return res.append.BaseOffset, err
}

// AppendTxn writes records as a transactional batch of producer id at
// epoch, with no sequence (the coordinator writes on the producer's
// behalf, as Kafka's does), and returns the offset of the first.
func (s internalStore) AppendTxn(partition int32, producerID int64, epoch int16, records []log.KeyValue) (int64, error) {
	t := s.topic()
	if t == nil {
		return 0, fmt.Errorf("%w: %s does not exist", kerr.NotCoordinator, s.name)
	}
	p, err := t.LeaderPartition(partition, -1)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupWriteTimeout)
	defer cancel()
	res, err := p.replicate(ctx, encodeAppend(0, log.BuildTxnBatch(s.b.now().UnixMilli(), producerID, epoch, records)))
	if errors.Is(err, kerr.NotLeaderForPartition) {
		return 0, fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
	}
	if err == nil && res.err != nil {
		err = res.err
	}
	return res.append.BaseOffset, err
}

// groupWriteTimeout bounds one write of the coordinator (Kafka's
// offsets.commit.timeout.ms).
const groupWriteTimeout = 5 * time.Second

// replayReadBytes bounds one read while replaying a partition.
const replayReadBytes = 4 << 20

func (s internalStore) Replay(partition int32, fn func(group.StoredRecord)) error {
	var p *Partition
	if t := s.topic(); t != nil {
		p = t.Partition(partition)
	}
	if p == nil {
		return fmt.Errorf("%w: %s/%d", kerr.UnknownTopicOrPartition, s.name, partition)
	}
	start, end := p.LogStartOffset(), p.HighWatermark()
	for next := start; next < end; {
		data, err := p.log.Read(next, replayReadBytes, log.Obligatory, end)
		if err != nil {
			return err
		}
		headers, err := log.ValidateStored(data)
		if err != nil {
			return err
		}
		if len(headers) == 0 {
			if next < p.log.FirstDirtyOffset() {
				return nil // the cleaner removed everything up to the end
			}
			return fmt.Errorf("no batch at offset %d below the high watermark %d", next, end)
		}
		for _, h := range headers {
			batch := data[:h.Size()]
			sr := group.StoredRecord{ProducerID: h.ProducerID, Transactional: h.IsTransactional() && !h.IsControl(), Control: h.IsControl()}
			if sr.Control {
				sr.Commit, _ = log.MarkerType(batch)
			}
			err := log.ForEachRecord(batch, func(r log.Record) bool {
				if r.Offset >= start {
					sr.Key, sr.Value, sr.Offset = r.Key, r.Value, r.Offset
					fn(sr)
				}
				return true
			})
			if err != nil {
				return err
			}
			data = data[h.Size():]
			next = h.LastOffset() + 1
		}
	}
	return nil
}

// GroupCoordinator is the broker hosting a group's partition of
// __consumer_offsets.
func (b *Broker) GroupCoordinator(group string) (BrokerInfo, error) {
	c := b.groups.Load()
	if c == nil {
		return BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	return b.leaderOf(GroupTopic, c.Partition(group))
}
