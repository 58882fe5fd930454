package broker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
)

// ProducerInfo is one idempotent producer a partition remembers, as
// DescribeProducers (kafka-transactions describe-producers) shows it.
type ProducerInfo struct {
	ID           int64
	Epoch        int16
	LastSequence int32
	// LastTimestamp is the max timestamp of its last batch, -1 when that
	// batch is no longer in the log (retention, DeleteRecords).
	LastTimestamp int64
	// TxnStartOffset is the first offset of its open transaction, -1
	// for none; CoordinatorEpoch its last marker's, -1 before any.
	TxnStartOffset   int64
	CoordinatorEpoch int32
}

// Producers lists the producers the partition's leader remembers, by id,
// with where each one's open transaction began.
func (rs *Replicas) Producers(p *Partition) ([]ProducerInfo, error) {
	if !p.IsLeader() {
		return nil, fmt.Errorf("%w: %s/%d is led by another broker", kerr.NotLeaderForPartition, p.topic.Name, p.Index)
	}
	type last struct {
		ProducerInfo
		baseOffset int64
	}
	p.appendMu.Lock()
	lasts := make([]last, 0, len(p.producers.m))
	for id, e := range p.producers.m {
		lb := e.last()
		lasts = append(lasts, last{ProducerInfo{ID: id, Epoch: e.epoch, LastSequence: lb.lastSeq, LastTimestamp: -1,
			TxnStartOffset: e.txnFirst, CoordinatorEpoch: e.coordinatorEpoch}, lb.baseOffset})
	}
	p.appendMu.Unlock()
	slices.SortFunc(lasts, func(a, c last) int { return int(a.ID - c.ID) })
	out := make([]ProducerInfo, len(lasts))
	for i, l := range lasts {
		if l.baseOffset >= p.log.LogStartOffset() {
			err := p.log.Batches(l.baseOffset, func(h log.BatchHeader) bool {
				if h.BaseOffset == l.baseOffset {
					l.LastTimestamp = h.MaxTimestamp
				}
				return h.BaseOffset < l.baseOffset
			})
			if err != nil && !errors.Is(err, log.ErrOffsetOutOfRange) {
				return nil, fmt.Errorf("%w: reading %s/%d: %w", kerr.KafkaStorageError, p.topic.Name, p.Index, err)
			}
		}
		out[i] = l.ProducerInfo
	}
	return out, nil
}
