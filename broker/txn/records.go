package txn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) compare(o TopicPartition) int {
	if c := strings.Compare(tp.Topic, o.Topic); c != 0 {
		return c
	}
	return int(tp.Partition) - int(o.Partition)
}

// state is one transactional id's state, as its record holds it.
type state struct {
	producerID    int64
	producerEpoch int16
	// lastProducerID and lastEpoch are what the producer held before the
	// latest InitProducerId (KIP-360): a retry of that call, or a
	// producer recovering with them, gets the current ones.
	lastProducerID int64
	lastEpoch      int16
	timeoutMs      int32
	status         kmsg.TransactionState
	partitions     []TopicPartition // sorted, no duplicates
	updateMs       int64
	startMs        int64
}

func (s state) has(tp TopicPartition) bool {
	_, found := slices.BinarySearchFunc(s.partitions, tp, TopicPartition.compare)
	return found
}

// with returns s with tps added to its partitions.
func (s state) with(tps []TopicPartition) state {
	out := slices.Clone(s.partitions)
	for _, tp := range tps {
		if i, found := slices.BinarySearchFunc(out, tp, TopicPartition.compare); !found {
			out = slices.Insert(out, i, tp)
		}
	}
	s.partitions = out
	return s
}

// Record versions of __transaction_state.
const (
	keyVersion   = 0
	valueVersion = 0
)

func stateKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

func stateValue(s state) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = s.producerID, s.producerEpoch, s.timeoutMs
	v.State, v.LastUpdateTimestamp, v.StartTimestamp = s.status, s.updateMs, s.startMs
	for _, tp := range s.partitions {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	return v.AppendTo(nil)
}

// stateRecord is the record that stores s for id.
func stateRecord(id string, s state) log.KeyValue {
	return log.KeyValue{Key: stateKey(id), Value: stateValue(s)}
}

// decodeRecord reads one record of __transaction_state: the id and its
// state, or deleted for a tombstone. Keys of other versions (none exist
// in Kafka) are an error.
func decodeRecord(key, value []byte) (id string, s state, deleted bool, err error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil || k.Version != keyVersion {
		return "", state{}, false, fmt.Errorf("transaction state key (version %d): %v", k.Version, err)
	}
	if value == nil {
		return k.TransactionalID, state{}, true, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return "", state{}, false, fmt.Errorf("transaction state of %q: %w", k.TransactionalID, err)
	}
	s = state{
		producerID: v.ProducerID, producerEpoch: v.ProducerEpoch, timeoutMs: v.TimeoutMillis,
		status: v.State, updateMs: v.LastUpdateTimestamp, startMs: v.StartTimestamp,
		lastProducerID: -1, lastEpoch: -1,
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			s.partitions = append(s.partitions, TopicPartition{t.Topic, p})
		}
	}
	slices.SortFunc(s.partitions, TopicPartition.compare)
	s.partitions = slices.Compact(s.partitions)
	return k.TransactionalID, s, false, nil
}
