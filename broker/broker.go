package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/config"
)

// Options are what a Broker needs from the process that runs it.
type Options struct {
	Node   config.Node
	Logger *slog.Logger
	// RetentionCheckInterval is how often logs are checked against
	// retention.ms and retention.bytes (Kafka's
	// log.retention.check.interval.ms). Zero means 30 seconds.
	RetentionCheckInterval time.Duration
	// Now is the clock; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Broker is one weir node.
type Broker struct {
	node   config.Node
	logger *slog.Logger
	props  *config.Values
	now    func() time.Time

	// mu guards the topic table and the metadata file. Partitions have
	// their own locks for their data.
	mu       sync.RWMutex
	meta     metaState
	byName   map[string]*Topic
	byID     map[TopicID]*Topic
	closed   bool
	producer producerIDs

	groups *group.Coordinator

	stop chan struct{}
	done sync.WaitGroup
}

// Open loads (or creates) the node's data directory and opens every
// partition log, recovering what a crash left behind.
func Open(opts Options) (*Broker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetentionCheckInterval <= 0 {
		opts.RetentionCheckInterval = 30 * time.Second
	}
	dir := opts.Node.DataDir
	if err := os.MkdirAll(filepath.Join(dir, topicsDir), 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	m, found, err := readMeta(dir)
	if err != nil {
		return nil, err
	}
	if !found {
		m = metaState{ClusterID: newClusterID(), Properties: opts.Node.Cluster, NextProducerID: 1}
	}
	props, err := config.NewValues(config.NewRegistry(), m.Properties)
	if err != nil {
		return nil, fmt.Errorf("cluster properties: %w", err)
	}
	b := &Broker{
		node:   opts.Node,
		logger: opts.Logger,
		props:  props,
		now:    opts.Now,
		meta:   m,
		byName: map[string]*Topic{},
		byID:   map[TopicID]*Topic{},
		stop:   make(chan struct{}),
	}
	b.producer.next = m.NextProducerID
	b.producer.reserved = m.NextProducerID
	if !found {
		if err := writeMeta(dir, m); err != nil {
			return nil, err
		}
		b.logger.Info("created new cluster", "cluster_id", m.ClusterID, "data_dir", dir)
	}
	for _, tm := range m.Topics {
		t, err := b.openTopic(tm)
		if err != nil {
			b.closeTopics()
			return nil, fmt.Errorf("open topic %s: %w", tm.Name, err)
		}
		b.byName[t.Name] = t
		b.byID[t.ID] = t
	}
	b.removeOrphanTopicDirs()
	if err := b.openGroups(); err != nil {
		close(b.stop)
		b.done.Wait()
		b.closeTopics()
		return nil, fmt.Errorf("group coordinator: %w", err)
	}
	b.done.Add(1)
	go b.retentionLoop(opts.RetentionCheckInterval)
	return b, nil
}

func newClusterID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Close stops background work and closes every log, flushing it.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.stop)
	b.mu.Unlock()
	b.done.Wait()
	b.groups.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closeTopics()
}

func (b *Broker) closeTopics() error {
	var errs []error
	for _, t := range b.byName {
		for _, p := range t.partitions() {
			errs = append(errs, p.close())
		}
	}
	return errors.Join(errs...)
}

// NodeID is this broker's id.
func (b *Broker) NodeID() int32 { return b.node.NodeID }

// ClusterID is the cluster's id, fixed at creation.
func (b *Broker) ClusterID() string { return b.meta.ClusterID }

// Node returns the node config the broker runs with.
func (b *Broker) Node() config.Node { return b.node }

// Properties are the cluster properties.
func (b *Broker) Properties() *config.Values { return b.props }

// Ready reports whether the broker serves requests.
func (b *Broker) Ready() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return !b.closed
}

// persistLocked writes the topic table and counters; b.mu must be held.
func (b *Broker) persistLocked() error {
	m := b.meta
	m.Topics = m.Topics[:0:0]
	for _, t := range b.byName {
		m.Topics = append(m.Topics, t.meta())
	}
	m.NextProducerID = b.producer.reserved
	if err := writeMeta(b.node.DataDir, m); err != nil {
		return err
	}
	b.meta = m
	return nil
}

func (b *Broker) retentionLoop(every time.Duration) {
	defer b.done.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			b.EnforceRetention(context.Background())
		}
	}
}

// EnforceRetention applies retention.ms and retention.bytes to every
// partition now.
func (b *Broker) EnforceRetention(ctx context.Context) {
	for _, t := range b.Topics() {
		for _, p := range t.partitions() {
			if ctx.Err() != nil {
				return
			}
			n, err := p.log.EnforceRetention()
			if err != nil {
				b.logger.Warn("retention", "topic", t.Name, "partition", p.Index, "err", err)
			} else if n > 0 {
				b.logger.Info("retention removed segments", "topic", t.Name, "partition", p.Index, "segments", n, "log_start_offset", p.log.LogStartOffset())
			}
		}
	}
}
