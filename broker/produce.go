package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
)

// Produce appends a partition's records from a produce request. records
// is modified in place (offsets, epoch and timestamps are stamped into
// it) and may be retained by nothing after Produce returns.
func (b *Broker) Produce(topic string, partition int32, records []byte) (AppendResult, error) {
	t := b.Topic(topic)
	if t == nil {
		var err error
		if t, err = b.autoCreate(topic); err != nil {
			return AppendResult{}, err
		}
	}
	p := t.Partition(partition)
	if p == nil {
		return AppendResult{}, fmt.Errorf("%w: %s/%d", kerr.UnknownTopicOrPartition, topic, partition)
	}
	entries := b.TopicConfig(t)
	headers, err := log.ValidateBatches(records)
	if err != nil {
		return AppendResult{}, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
	}
	maxBatch := configInt(entries, "max.message.bytes")
	for _, h := range headers {
		if int64(h.Size()) > maxBatch {
			return AppendResult{}, fmt.Errorf("%w: batch of %d bytes is above max.message.bytes %d", kerr.MessageTooLarge, h.Size(), maxBatch)
		}
		if h.Attributes&0x10 != 0 {
			return AppendResult{}, fmt.Errorf("%w: transactional batches are not supported", kerr.InvalidRecord)
		}
	}
	if seg := configInt(entries, "segment.bytes"); int64(len(records)) > seg {
		return AppendResult{}, fmt.Errorf("%w: %d bytes is above segment.bytes %d", kerr.RecordListTooLarge, len(records), seg)
	}
	opts := log.AppendOptions{LeaderEpoch: 0}
	if configValue(entries, "message.timestamp.type") == "LogAppendTime" {
		opts.LogAppendTime = b.now().UnixMilli()
	}
	return p.appendBatches(records, headers, opts)
}

// autoCreate creates a topic on first use when the cluster allows it.
func (b *Broker) autoCreate(name string) (*Topic, error) {
	if !b.props.Bool("auto_create_topics_enabled") {
		return nil, fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	t, err := b.CreateTopic(CreateTopicRequest{Name: name})
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if t = b.Topic(name); t != nil {
			return t, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// AutoCreate is autoCreate for Metadata requests that allow it.
func (b *Broker) AutoCreate(name string) (*Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	return b.autoCreate(name)
}
