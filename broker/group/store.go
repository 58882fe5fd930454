package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// Store is where the coordinator keeps its records: the partitions of
// __consumer_offsets.
type Store interface {
	// Partitions is the number of partitions, fixed at creation.
	Partitions() int32
	// Append writes the records to a partition and returns the offset of
	// the first; it returns once they are as durable as the partition
	// makes any acknowledged write.
	Append(partition int32, records []log.KeyValue) (int64, error)
	// AppendTxn writes records as part of a producer's transaction (a
	// transactional batch of its id and epoch, which its marker later
	// commits or aborts) and returns the offset of the first.
	AppendTxn(partition int32, producerID int64, epoch int16, records []log.KeyValue) (int64, error)
	// Replay calls fn for every record of a partition, oldest first.
	Replay(partition int32, fn func(StoredRecord)) error
}

// StoredRecord is one record of a partition as Replay reads it, with
// what its batch says of it.
type StoredRecord struct {
	Key, Value []byte
	Offset     int64
	ProducerID int64 // -1 for none
	// Transactional: the record belongs to ProducerID's transaction,
	// which a later marker decides. Control: the record is such a
	// marker, Commit saying which.
	Transactional, Control, Commit bool
}

// PartitionFor is Kafka's mapping of a group id to a partition of
// __consumer_offsets, and of a transactional id to a partition of
// __transaction_state: abs(String.hashCode) mod partitions, where abs
// clears the sign bit.
func PartitionFor(id string, partitions int32) int32 {
	var h int32
	for _, c := range utf16Units(id) {
		h = 31*h + int32(c)
	}
	return (h & 0x7fffffff) % partitions
}

// utf16Units are the code units Java's String.hashCode iterates.
func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}

// Record key versions in __consumer_offsets.
const (
	offsetKeyVersion = 1 // offset commit (0 and 1 share a format)
	groupKeyVersion  = 2 // group metadata
)

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func offsetValue(o offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = 3
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.offset, o.leaderEpoch, o.metadata, o.commitTime
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// replayed is what one record says.
type replayed struct {
	group     string
	topic     string // offset records only
	partition int32
	offset    *offset                  // nil: offset tombstone
	meta      *kmsg.GroupMetadataValue // nil: group tombstone
	isOffset  bool
	// consumer is a record of a KIP-848 (consumer protocol) group, set
	// alone with group.
	consumer *consumerRecord
}

// decodeRecord parses one __consumer_offsets record: classic groups'
// records, and KIP-848 groups' (r.consumer). Records of other kinds (the
// keys of other group protocols) are skipped with ok=false.
func decodeRecord(key, value []byte) (r replayed, ok bool, err error) {
	if len(key) < 2 {
		return r, false, fmt.Errorf("key of %d bytes", len(key))
	}
	switch version := int16(key[0])<<8 | int16(key[1]); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return r, false, fmt.Errorf("offset key: %w", err)
		}
		r = replayed{group: k.Group, topic: k.Topic, partition: k.Partition, isOffset: true}
		if value != nil {
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(value); err != nil {
				return r, false, fmt.Errorf("offset value: %w", err)
			}
			r.offset = &offset{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitTime: v.CommitTimestamp}
			if v.Version < 3 {
				r.offset.leaderEpoch = -1
			}
		}
		return r, true, nil
	case groupKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return r, false, fmt.Errorf("group key: %w", err)
		}
		r = replayed{group: k.Group}
		if value != nil {
			v := new(kmsg.GroupMetadataValue)
			if err := v.ReadFrom(value); err != nil {
				return r, false, fmt.Errorf("group value: %w", err)
			}
			r.meta = v
		}
		return r, true, nil
	default:
		if !isConsumerRecordType(version) {
			return r, false, nil
		}
		cr, err := decodeConsumerRecord(key, value)
		if err != nil {
			return r, false, err
		}
		return replayed{group: cr.Group, consumer: &cr}, true, nil
	}
}
