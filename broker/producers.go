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
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker here, -1 before any.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of the producer's open
	// transaction here, -1 when none is open: what an operator looks for
	// when the last stable offset is stuck (kafka-transactions
	// find-hanging).
	CurrentTxnStartOffset int64
}

// Producers lists the producers the partition's leader remembers, by id.
func (rs *Replicas) Producers(p *Partition) ([]ProducerInfo, error) {
	if !p.IsLeader() {
		return nil, fmt.Errorf("%w: %s/%d is led by another broker", kerr.NotLeaderForPartition, p.topic.Name(), p.Index)
	}
	return p.describeProducers()
}

// describeProducers lists the producers the replica remembers, by id.
func (p *Partition) describeProducers() ([]ProducerInfo, error) {
	type last struct {
		ProducerInfo
		baseOffset int64
	}
	p.appendMu.Lock()
	lasts := make([]last, 0, len(p.producers.m))
	for id, e := range p.producers.m {
		info := ProducerInfo{ID: id, Epoch: e.epoch, LastSequence: -1, LastTimestamp: -1,
			CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnFirst}
		baseOffset := int64(-1)
		if e.n > 0 {
			lb := e.last()
			info.LastSequence, baseOffset = lb.lastSeq, lb.baseOffset
		}
		lasts = append(lasts, last{info, baseOffset})
	}
	p.appendMu.Unlock()
	slices.SortFunc(lasts, func(a, c last) int { return int(a.ID - c.ID) })
	out := make([]ProducerInfo, len(lasts))
	for i, l := range lasts {
		if l.baseOffset >= 0 && l.baseOffset >= p.log.LogStartOffset() {
			err := p.log.Batches(l.baseOffset, func(h log.BatchHeader) bool {
				if h.BaseOffset == l.baseOffset {
					l.LastTimestamp = h.MaxTimestamp
				}
				return h.BaseOffset < l.baseOffset
			})
			if err != nil && !errors.Is(err, log.ErrOffsetOutOfRange) {
				return nil, fmt.Errorf("%w: reading %s/%d: %w", kerr.KafkaStorageError, p.topic.Name(), p.Index, err)
			}
		}
		out[i] = l.ProducerInfo
	}
	return out, nil
}
