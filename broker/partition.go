package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
)

// Partition is one partition of a topic on this node: its log, its high
// watermark, its idempotent producers and the fetches waiting for data.
type Partition struct {
	Index int32
	topic *Topic
	log   *log.Log

	// appendMu serialises appends with the producer-state checks that
	// decide whether an append happens at all.
	appendMu  sync.Mutex
	producers producerTable

	// hwm is the high watermark: on a single node, everything appended.
	// It is published after the log append returns, so a reader that
	// sees it can read every batch below it.
	hwm     atomic.Int64
	deleted atomic.Bool

	waitMu  sync.Mutex
	waiters map[chan struct{}]struct{}
}

func openPartition(t *Topic, index int32, dir string, cfg log.Config) (*Partition, error) {
	l, err := log.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	p := &Partition{Index: index, topic: t, log: l, waiters: map[chan struct{}]struct{}{}}
	p.hwm.Store(l.EndOffset())
	if err := p.producers.rebuild(l); err != nil {
		l.Close()
		return nil, fmt.Errorf("rebuild producer state: %w", err)
	}
	return p, nil
}

// Topic is the topic the partition belongs to.
func (p *Partition) Topic() *Topic { return p.topic }

// HighWatermark is the offset below which every record is committed.
func (p *Partition) HighWatermark() int64 { return p.hwm.Load() }

// LastStableOffset equals the high watermark until transactions exist.
func (p *Partition) LastStableOffset() int64 { return p.hwm.Load() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// Log gives read access to the partition's log.
func (p *Partition) Log() *log.Log { return p.log }

func (p *Partition) close() error {
	if p.log == nil {
		return nil
	}
	p.wake()
	return p.log.Close()
}

func (p *Partition) markDeleted() { p.deleted.Store(true) }

func (p *Partition) setConfig(cfg log.Config) {
	if p.log != nil {
		p.log.SetConfig(cfg)
	}
}

// addWaiter registers ch to be signalled when the high watermark moves.
// Registering before reading means no advance between the read and the
// wait is missed.
func (p *Partition) addWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	p.waiters[ch] = struct{}{}
	p.waitMu.Unlock()
}

func (p *Partition) removeWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	delete(p.waiters, ch)
	p.waitMu.Unlock()
}

func (p *Partition) wake() {
	p.waitMu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.waitMu.Unlock()
}

// AppendResult is the outcome of a produce to one partition.
type AppendResult struct {
	BaseOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
}

// appendBatch appends one validated batch (headers holds its header),
// applying the idempotent producer checks.
func (p *Partition) appendBatch(records []byte, headers []log.BatchHeader, opts log.AppendOptions) (AppendResult, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.deleted.Load() {
		return AppendResult{}, kerr.UnknownTopicOrPartition
	}
	if dup, ok, err := p.producers.check(headers[0]); err != nil {
		return AppendResult{}, err
	} else if ok {
		return AppendResult{BaseOffset: dup, LogAppendTime: -1, LogStartOffset: p.log.LogStartOffset()}, nil
	}
	res, err := p.log.AppendValidated(records, headers, opts)
	if err != nil {
		if errors.Is(err, log.ErrCorruptBatch) {
			return AppendResult{}, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
		return AppendResult{}, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	h := headers[0]
	h.BaseOffset = res.BaseOffset
	p.producers.record(h)
	p.hwm.Store(p.log.EndOffset())
	p.wake()
	return AppendResult{BaseOffset: res.BaseOffset, LogAppendTime: res.LogAppendTime, LogStartOffset: res.LogStartOffset}, nil
}
