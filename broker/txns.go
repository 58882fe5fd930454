package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/txn"
)

// TxnTopic is the internal topic holding the transaction coordinator's
// state.
const TxnTopic = "__transaction_state"

// serviceTxnMarkers writes transaction markers to partitions this broker
// leads, for the coordinator of another broker (Kafka's WriteTxnMarkers
// between brokers).
const serviceTxnMarkers = "txn.markers"

// markerTimeout bounds one round of marker writes; the coordinator
// retries a round that failed.
const markerTimeout = 10 * time.Second

// openTransactions starts the transaction coordinator. It serves nothing
// until __transaction_state exists (created at the first transactional
// request, as Kafka creates it) and this broker leads some of it.
func (b *Broker) openTransactions() {
	c := txn.New(txn.Options{
		Store:   newInternalStore(b, TxnTopic),
		Markers: markerWriter{b: b},
		NewProducerID: func(context.Context) (int64, error) {
			id, _, err := b.InitProducerID()
			return id, err
		},
		GroupPartitions: func() int32 {
			if t := b.Topic(GroupTopic); t != nil {
				return int32(len(t.partitions()))
			}
			return int32(b.props.Int("group_topic_partitions"))
		},
		Settings: func() txn.Settings {
			return txn.Settings{
				MaxTimeout:   time.Duration(b.props.Int("transaction_max_timeout_ms")) * time.Millisecond,
				IDExpiration: time.Duration(b.props.Int("transactional_id_expiration_ms")) * time.Millisecond,
			}
		},
		Logger: b.logger,
		Now:    b.now,
	})
	b.txns.Store(c)
	if t := b.Topic(TxnTopic); t != nil {
		for _, p := range t.partitions() {
			if p == nil {
				continue
			}
			p.coordMu.Lock()
			if p.leading {
				b.applyTxnLeadership(c, p)
			}
			p.coordMu.Unlock()
		}
	}
	b.every(time.Duration(b.props.Int("transaction_abort_timed_out_transaction_cleanup_interval_ms"))*time.Millisecond, c.Expire)
}

// Transactions returns the transaction coordinator once
// __transaction_state exists, creating the topic on the first call as
// Kafka does (COORDINATOR_NOT_AVAILABLE until its partitions have
// leaders; clients retry).
func (b *Broker) Transactions() (*txn.Coordinator, error) {
	if b.Topic(TxnTopic) == nil {
		if err := b.createTxnTopic(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s is being created", kerr.CoordinatorNotAvailable, TxnTopic)
	}
	return b.txns.Load(), nil
}

// ExistingTransactions returns the transaction coordinator once
// __transaction_state exists, never creating it: requests that only read
// transactions (DescribeTransactions, ListTransactions) leave that to the
// first transactional client, as Kafka does.
func (b *Broker) ExistingTransactions() (*txn.Coordinator, bool) {
	if b.Topic(TxnTopic) == nil {
		return nil, false
	}
	return b.txns.Load(), true
}

func (b *Broker) createTxnTopic() error {
	_, err := b.CreateTopic(CreateTopicRequest{
		Name:              TxnTopic,
		Internal:          true,
		Partitions:        int32(b.props.Int("transaction_state_log_num_partitions")),
		ReplicationFactor: int16(min(b.props.Int("transaction_state_log_replication_factor"), int64(max(1, len(b.LiveBrokers()))))),
		// Kafka's: compacted by key, 100 MiB segments.
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"},
	})
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("%w: creating %s: %v", kerr.CoordinatorNotAvailable, TxnTopic, err)
	}
	return nil
}

// TransactionCoordinator is the broker hosting a transactional id's
// partition of __transaction_state (FindCoordinator key type 1).
func (b *Broker) TransactionCoordinator(id string) (BrokerInfo, error) {
	c, err := b.Transactions()
	if err != nil {
		return BrokerInfo{}, err
	}
	return b.leaderOf(TxnTopic, c.Partition(id))
}

// leaderOf is the live broker leading partition i of an internal topic.
func (b *Broker) leaderOf(topic string, i int32) (BrokerInfo, error) {
	t := b.Topic(topic)
	if t == nil {
		return BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	infos := b.PartitionInfos(t)
	if int(i) >= len(infos) || infos[i].Leader < 0 {
		return BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	bi, ok := b.Broker(infos[i].Leader)
	if !ok {
		return BrokerInfo{}, kerr.CoordinatorNotAvailable
	}
	return bi, nil
}

// applyTxnLeadership makes the transaction coordinator match p's
// leadership; p.coordMu is held.
func (rs *Replicas) applyTxnLeadership(c *txn.Coordinator, p *Partition) {
	if !p.leading {
		c.UnloadPartition(p.Index)
		return
	}
	if err := c.LoadPartition(p.Index, p.leaderEpoch.Load()); err != nil {
		rs.logger.Error("loading transactions of a led __transaction_state partition", "partition", p.Index, "err", err)
	}
}

// markerWriter writes a transaction's markers: to the partitions this
// broker leads directly, to the others through their leaders.
type markerWriter struct{ b *Broker }

// markerRequest is serviceTxnMarkers' request: one transaction's markers
// for partitions the receiving broker leads.
type markerRequest struct {
	ProducerID       int64                `json:"producer_id"`
	ProducerEpoch    int16                `json:"producer_epoch"`
	Commit           bool                 `json:"commit"`
	CoordinatorEpoch int32                `json:"coordinator_epoch"`
	Partitions       []txn.TopicPartition `json:"partitions"`
}

func (w markerWriter) WriteMarkers(ctx context.Context, m txn.Marker) error {
	ctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	byLeader := map[int32][]txn.TopicPartition{}
	for _, tp := range m.Partitions {
		t := w.b.Topic(tp.Topic)
		if t == nil || int(tp.Partition) >= len(w.b.PartitionInfos(t)) {
			continue // deleted meanwhile: nothing to mark
		}
		leader := w.b.PartitionInfos(t)[tp.Partition].Leader
		if leader < 0 {
			return fmt.Errorf("%s/%d has no leader", tp.Topic, tp.Partition)
		}
		byLeader[leader] = append(byLeader[leader], tp)
	}
	// Every leader at once: the transaction stays preparing (its
	// producer's next transaction answered CONCURRENT_TRANSACTIONS) until
	// the slowest is done, not until the sum of them.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for leader, tps := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := markerRequest{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch, Partitions: tps}
			var err error
			if leader == w.b.node.NodeID {
				err = errors.Join(w.b.WriteTxnMarkers(ctx, req.ProducerID, req.ProducerEpoch, req.Commit, req.CoordinatorEpoch, tps)...)
			} else {
				err = w.remote(ctx, leader, req)
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w markerWriter) remote(ctx context.Context, leader int32, req markerRequest) error {
	reg, ok := w.b.ctrl.state.View().Broker(leader)
	if !ok {
		return fmt.Errorf("broker %d is not registered", leader)
	}
	data, _ := json.Marshal(req)
	resp, err := w.b.ctrl.mux.Call(ctx, reg.RPCAddr, serviceTxnMarkers, data)
	if err != nil {
		return fmt.Errorf("markers through broker %d: %w", leader, err)
	}
	if len(resp) > 0 {
		return fmt.Errorf("markers through broker %d: %s", leader, resp)
	}
	return nil
}

// serveTxnMarkers answers serviceTxnMarkers: an empty answer when every
// marker is written, else why not.
func (b *Broker) serveTxnMarkers(ctx context.Context, _ string, data []byte) ([]byte, error) {
	var req markerRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	if err := errors.Join(b.WriteTxnMarkers(ctx, req.ProducerID, req.ProducerEpoch, req.Commit, req.CoordinatorEpoch, req.Partitions)...); err != nil {
		return []byte(err.Error()), nil
	}
	return nil, nil
}

// WriteTxnMarkers writes one transaction's marker to each partition
// (this broker must lead them): nil for each that has it, or why not. A
// topic this broker does not know is UNKNOWN_TOPIC_OR_PARTITION, as in
// Kafka: the coordinator decides whether it was deleted. Every partition's marker
// is proposed before any is waited for, so the markers of a transaction
// over many partitions commit together, as Kafka appends the partitions
// of one WriteTxnMarkers request together, rather than one after the
// other.
func (b *Broker) WriteTxnMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, tps []txn.TopicPartition) []error {
	errs := make([]error, len(tps))
	ts := b.now().UnixMilli()
	type proposed struct {
		i  int
		pe proposedEntry
	}
	waits := make([]proposed, 0, len(tps))
	for i, tp := range tps {
		t := b.Topic(tp.Topic)
		if t == nil {
			// Deleted, or not yet in this broker's table: a restarted
			// broker answers the RPC mux before its first reconcile.
			// Only the coordinator can tell; it drops a deleted
			// topic's partitions itself (WriteMarkers) and retries the
			// rest, so answering "written" here would lose the marker.
			errs[i] = fmt.Errorf("%s/%d: %w", tp.Topic, tp.Partition, kerr.UnknownTopicOrPartition)
			continue
		}
		p, err := t.LeaderPartition(tp.Partition, -1)
		if err == nil {
			var pe proposedEntry
			if pe, err = p.proposeMarker(ctx, producerID, encodeMarker(ts, producerID, epoch, commit, coordinatorEpoch)); err == nil {
				waits = append(waits, proposed{i, pe})
				continue
			}
		}
		errs[i] = fmt.Errorf("%s/%d: %w", tp.Topic, tp.Partition, err)
	}
	for _, w := range waits {
		if _, err := w.pe.wait(ctx); err != nil {
			errs[w.i] = fmt.Errorf("%s/%d: %w", tps[w.i].Topic, tps[w.i].Partition, err)
		}
	}
	return errs
}

// internalStore keeps a coordinator's records in an internal topic,
// through the same partition append path as any produce.
type internalStore struct {
	b    *Broker
	name string
	// found is the topic once it exists. Internal topics are never
	// deleted, and the coordinators call the store while the topic
	// table is locked for closing the replicas, so it is looked up once.
	found *atomic.Pointer[Topic]
}

func newInternalStore(b *Broker, name string) internalStore {
	return internalStore{b: b, name: name, found: &atomic.Pointer[Topic]{}}
}

func (s internalStore) topic() *Topic {
	if t := s.found.Load(); t != nil {
		return t
	}
	t := s.b.Topic(s.name)
	if t != nil {
		s.found.Store(t)
	}
	return t
}

func (s internalStore) Partitions() int32 {
	if t := s.topic(); t != nil {
		return int32(len(t.partitions()))
	}
	return 0
}
