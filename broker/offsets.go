package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Special timestamps of ListOffsets.
const (
	TimestampLatest        int64 = -1
	TimestampEarliest      int64 = -2
	TimestampMax           int64 = -3 // KIP-734
	TimestampEarliestLocal int64 = -4 // KIP-405; without tiered storage, the log start
)

// ListOffset answers one partition of ListOffsets: the offset and
// timestamp for a target timestamp, and the leader epoch of the batch
// holding that offset. No match gives offset -1.
func (b *Broker) ListOffset(p *Partition, timestamp int64, isolation int8) (offset, ts int64, epoch int32, err error) {
	offset, ts, err = b.listOffset(p, timestamp, isolation)
	if err != nil || offset < 0 {
		return offset, ts, -1, err
	}
	return offset, ts, p.epochs.epochAt(offset), nil
}

func (b *Broker) listOffset(p *Partition, timestamp int64, isolation int8) (offset, ts int64, err error) {
	end := p.HighWatermark()
	if isolation == ReadCommitted {
		end = p.LastStableOffset()
	}
	switch timestamp {
	case TimestampLatest:
		return end, -1, nil
	case TimestampEarliest, TimestampEarliestLocal:
		return p.LogStartOffset(), -1, nil
	case TimestampMax:
		off, t, ok, err := p.log.MaxTimestamp()
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
		}
		if !ok || off >= end {
			return -1, -1, nil
		}
		return off, t, nil
	}
	if timestamp < 0 {
		return -1, -1, fmt.Errorf("%w: timestamp %d", kerr.InvalidRequest, timestamp)
	}
	off, t, ok, err := p.log.OffsetForTimestamp(timestamp)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	if !ok || off >= end {
		return -1, -1, nil
	}
	return off, t, nil
}

// DeleteRecords moves a partition's log start offset to offset (-1: the
// high watermark) on every replica, through the partition's group, and
// returns the new low watermark. A topic whose cleanup.policy lacks
// delete refuses it with POLICY_VIOLATION, as Kafka does.
func (b *Broker) DeleteRecords(ctx context.Context, p *Partition, offset int64) (int64, error) {
	if !policyHas(configValue(b.TopicConfig(p.topic), "cleanup.policy"), "delete") {
		return -1, fmt.Errorf("%w: records of partition %s-%d can not be deleted due to the configured policy", kerr.PolicyViolation, p.topic.Name(), p.Index)
	}
	if hwm := p.HighWatermark(); offset < -1 || offset > hwm {
		return -1, fmt.Errorf("%w: offset %d is outside [0, %d]", kerr.OffsetOutOfRange, offset, hwm)
	}
	res, err := p.replicate(ctx, encodeDeleteRecords(offset))
	if err != nil {
		return -1, err
	}
	return res.logStart, nil
}
