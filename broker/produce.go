package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/broker/memory"
	"github.com/weir-broker/weir/broker/txn"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
)

// ProduceOptions carry what the request's version allows and asks.
type ProduceOptions struct {
	// AllowZstd is false below Produce v7, which predates zstd (KIP-110).
	AllowZstd bool
	// TransactionalID is the request's; transactional batches need one.
	TransactionalID string
	// Acks is the request's acks: -1 (all) is refused with
	// NOT_ENOUGH_REPLICAS while fewer replicas than min.insync.replicas
	// are live and in sync.
	Acks int16
	// Version is the Produce request's: a transactional batch refused by
	// its coordinator's verification is TRANSACTION_ABORTABLE from v11,
	// INVALID_TXN_STATE before.
	Version int16
	// Entry, when set, is the buffer from ProduceBuffer that records was
	// read into (records is Entry[EntryHeadroom:]): the batch's Raft
	// entry is built in it in place instead of in a copy. StartProduce
	// takes it, whatever its outcome.
	Entry []byte
}

// EntryHeadroom is how many bytes a produced batch's Raft entry holds
// before the records: ProduceBuffer's buffers leave them free.
const EntryHeadroom = entryHeaderLen

// ProduceBuffer returns a buffer for n bytes of records read straight
// from a produce request, at [EntryHeadroom:]; it goes to StartProduce as
// ProduceOptions.Entry, or back with ReleaseProduceBuffer. Reading the
// records there saves copying every produced byte once more into its
// Raft entry (docs/replication.md, "Copies of the record bytes").
func (pp *ProducePath) ProduceBuffer(n int) []byte {
	return pp.entries.Get(EntryHeadroom + n)
}

// ReleaseProduceBuffer takes back a ProduceBuffer that StartProduce was
// not given.
func (pp *ProducePath) ReleaseProduceBuffer(buf []byte) {
	pp.entries.Recycle(buf)
}

// ProducePath is how records are written: checking a produced batch
// against its topic's settings and proposing it to the partition's
// group, and handing idempotent producers their ids (producer.go). The
// Broker composes it; what it needs of the rest of the broker it is
// handed.
type ProducePath struct {
	producePathDeps

	// producerMu is held across the controller proposal that allocates
	// a block of ids, so that one block serves everyone waiting.
	producerMu sync.Mutex
	producer   producerIDs
	// compressors re-encode batches for compression.type.
	compressors log.Compressors
	// entries recycles the Raft entries of produced batches (see
	// newAppendEntry).
	entries *memory.Buffers
	// acksOne counts how acks=1 batches were answered (metrics.go).
	acksOne acksOneCounts
	// acksOneSolo answers acks=1 from the leader's log on a sole replica
	// too: tests only, which run one broker.
	acksOneSolo bool
}

// acksOneCounts counts acks=1 batches by what answered them: the
// leader's log (produce_acks.go) or their commit.
type acksOneCounts struct {
	leaderLog, commit atomic.Uint64
}

// pooledEntryMin is the smallest entry taken from ProducePath.entries:
// smaller ones cost less to allocate than the free list's lock, and a
// small batch in a 4 KiB buffer would hold more memory than it needs.
const pooledEntryMin = 4 << 10

// producePathDeps are what a ProducePath is handed of the rest of the
// broker.
type producePathDeps struct {
	nodeID int32
	now    func() time.Time // the logs' clock, for LogAppendTime
	// heldEntryBytes bounds the produced batches' Raft entries kept for
	// reuse between produce requests: the node's queued_max_request_bytes,
	// which also bounds the entries in flight (a produce request holds its
	// bytes of it until it is answered), so under a steady load every
	// entry is a reused buffer. A fresh one costs the first touch of each
	// of its pages (a fault and zeroing, per 4 KiB); with a 32 MiB bound,
	// ten producers on one broker faulted in 1.2–1.4 GiB per 2 GB produced.
	heldEntryBytes int64
	// topic and autoCreate find a produced topic, creating it on first
	// use when the cluster allows.
	topic           func(name string) *Topic
	autoCreate      func(name string) (*Topic, error)
	produceSettings func(*Topic) *produceSettings
	// inSyncReplicas lists a partition led here's live in-sync replicas.
	inSyncReplicas func(*Partition) []int32
	propose        func(controller.Command) (controller.Result, error)
	// brokerEpoch is the registration's, which the controller checks
	// before it allocates producer ids.
	brokerEpoch func() uint64
	// verifyTxn asks a transactional id's coordinator whether a
	// partition is in the producer's ongoing transaction, answering its
	// code, when verifyTxnEnabled (txn_verify.go); verifications counts
	// the answers.
	verifyTxn        func(ctx context.Context, id string, pid int64, epoch int16, tp txn.TopicPartition) int16
	verifyTxnEnabled func() bool
	verifications    *verifyResults
}

func newProducePath(d producePathDeps) ProducePath {
	held := d.heldEntryBytes
	if held <= 0 {
		held = config.DefaultQueuedMaxRequestBytes
	}
	return ProducePath{producePathDeps: d, entries: &memory.Buffers{MaxHeld: held}}
}

// Produce appends a partition's records from a produce request through
// the partition's Raft group: it returns once the batch is committed (on
// a majority of the replicas' disks) and applied here; with acks=1, a
// batch without a producer id may be answered sooner, once it is on the
// leader's disk (produce_acks.go). records is copied; ctx bounds the wait
// (the request's timeout).
func (pp *ProducePath) Produce(ctx context.Context, topic string, partition int32, records []byte, opts ProduceOptions) (AppendResult, error) {
	pa, err := pp.StartProduce(ctx, topic, partition, records, opts)
	if err != nil {
		return AppendResult{}, err
	}
	return pa.Wait(ctx)
}

// PendingAppend is a produced batch in its partition's Raft log queue
// (StartProduce).
type PendingAppend struct {
	entry proposedEntry
	// early, for acks=1, is answered once the leader's log holds the
	// batch (produce_acks.go); counts counts how.
	early  *leaderWrite
	counts *acksOneCounts
}

// StartProduce is Produce without the wait for the commit: it checks the
// batch and proposes it, and returns once the partition's group took it.
// Batches one goroutine starts one after the other are applied in that
// order, so a connection can start its next produce request while the
// previous one waits (pipelining) and the idempotence checks, made when
// each batch is applied, see them in request order. records is copied
// before StartProduce returns.
func (pp *ProducePath) StartProduce(ctx context.Context, topic string, partition int32, records []byte, opts ProduceOptions) (_ PendingAppend, err error) {
	if owned := opts.Entry; owned != nil {
		defer func() {
			// Not in the proposed entry (refused, or re-encoded into
			// another buffer): nothing else holds it.
			if err != nil || opts.Entry == nil {
				pp.entries.Recycle(owned)
			}
		}()
		if len(owned) != EntryHeadroom+len(records) || len(records) == 0 || &owned[EntryHeadroom] != &records[0] {
			opts.Entry = nil // not records' buffer: copy as usual
		}
	}
	t := pp.topic(topic)
	if t == nil {
		if t, err = pp.autoCreate(topic); err != nil {
			return PendingAppend{}, err
		}
	}
	if t.Internal() {
		return PendingAppend{}, fmt.Errorf("%w: clients cannot write to the internal topic %s", kerr.InvalidTopicException, topic)
	}
	p, err := t.LeaderPartition(partition, -1)
	if err != nil {
		return PendingAppend{}, err
	}
	settings := pp.produceSettings(t)
	// As Kafka does, before looking at the records.
	if opts.Acks == -1 && settings.minInsyncReplicas > 1 {
		if isr := pp.inSyncReplicas(p); int64(len(isr)) < settings.minInsyncReplicas {
			return PendingAppend{}, fmt.Errorf("%w: %s-%d has %d live in-sync replicas %v, fewer than min.insync.replicas=%d", kerr.NotEnoughReplicas, t.Name(), partition, len(isr), isr, settings.minInsyncReplicas)
		}
	}
	// Framing only: every replica checks the CRC before it appends the
	// entry (applyAppend), and a batch that fails it is answered
	// CORRUPT_MESSAGE from there. checkRecords checks it here first when
	// it reads or re-encodes the records.
	headers, err := log.ParseBatches(records)
	if err != nil {
		return PendingAppend{}, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
	}
	if err := checkProducedBatches(headers, settings.maxMessageBytes, opts); err != nil {
		return PendingAppend{}, err
	}
	if seg := settings.segmentBytes; int64(len(records)) > seg {
		return PendingAppend{}, fmt.Errorf("%w: %d bytes is above segment.bytes %d", kerr.RecordListTooLarge, len(records), seg)
	}
	checked, err := pp.checkRecords(t.Name(), partition, records, headers[0], settings)
	if err != nil {
		return PendingAppend{}, err
	}
	if len(checked) != len(records) || &checked[0] != &records[0] {
		opts.Entry = nil // re-encoded: the entry is built from the new batch
	}
	records = checked
	var logAppendTime int64
	if settings.logAppendTime {
		logAppendTime = pp.now().UnixMilli()
	}
	var data []byte
	var recycle *memory.Buffers
	if opts.Entry != nil {
		data, recycle = opts.Entry, pp.entries
		putAppendHeader(data, logAppendTime)
	} else {
		data, recycle = pp.newAppendEntry(logAppendTime, records)
	}
	h := headers[0]
	var early *leaderWrite
	// A sole replica commits as soon as its log holds the batch: an
	// early answer would gain nothing, and would come before the high
	// watermark moves, where Kafka's single replica moves it at once.
	if opts.Acks == 1 && h.ProducerID < 0 && (!p.solo || pp.acksOneSolo) {
		// Its apply must append it for sure: checked here in full, as
		// every replica will check it.
		if err := log.CheckCRC(records); err != nil {
			return PendingAppend{}, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
		early = p.writes.register(data, int64(h.LastOffsetDelta)+1, logAppendTime)
	}
	var entry proposedEntry
	if h.IsTransactional() && pp.verifyTxnEnabled != nil && pp.verifyTxnEnabled() {
		entry, err = pp.proposeTxnBatch(ctx, p, h, data, opts)
	} else {
		entry, err = p.propose(ctx, data)
	}
	if err != nil {
		if early != nil {
			p.writes.forget(early)
		}
		return PendingAppend{}, err
	}
	entry.recycle, entry.data = recycle, data
	return PendingAppend{entry: entry, early: early, counts: &pp.acksOne}, nil
}

// newAppendEntry is encodeAppend's entry for a produced batch, in a
// buffer from pp.entries when it is large enough to be worth one; recycle
// is then the free list, to which the entry goes back once its apply on
// this broker has returned (proposedEntry.wait). Until then the entry is
// Raft's: its log store writes large entries from it, and the apply
// stamps offsets into it. A fresh buffer for every batch was nearly all
// the memory the produce path allocated (docs/replication.md, "Copies of
// the record bytes").
func (pp *ProducePath) newAppendEntry(logAppendTime int64, records []byte) (data []byte, recycle *memory.Buffers) {
	n := entryHeaderLen + len(records)
	if n < pooledEntryMin || pp.entries == nil {
		return encodeAppend(logAppendTime, records), nil
	}
	data = pp.entries.Get(n)
	putAppendHeader(data, logAppendTime)
	copy(data[entryHeaderLen:], records)
	return data, pp.entries
}

// Wait returns the batch's offsets once it is committed and applied on
// this broker (with acks=1, possibly once it is on the leader's disk), or
// why it was not; ctx bounds the wait, after which the batch may still
// commit. It is Then for a caller with a goroutine to block. Call it at
// most once.
func (pa PendingAppend) Wait(ctx context.Context) (AppendResult, error) {
	type outcome struct {
		res AppendResult
		err error
	}
	ch := make(chan outcome, 1)
	pa.Then(func(res AppendResult, err error) { ch <- outcome{res, err} })
	select {
	case o := <-ch:
		return o.res, o.err
	case <-ctx.Done():
		return AppendResult{}, pa.entry.p.replicationError(ctx.Err())
	}
}

// Then calls fn once with what Wait would return, without a goroutine
// waiting: on the goroutine that learns the outcome (the partition
// group's, or with acks=1 the one that sees the leader's log write), so fn
// must not block; at once if it is known already. Call Then or Wait, once.
// A caller that stops waiting (its request timed out) answers the batch
// with Expired and ignores fn's late call.
func (pa PendingAppend) Then(fn func(AppendResult, error)) {
	if pa.early == nil {
		pa.entry.then(func(res applyResult, err error) { fn(res.append, err) })
		return
	}
	var answered atomic.Bool
	answer := func(res AppendResult, err error) bool {
		if !answered.CompareAndSwap(false, true) {
			return false
		}
		fn(res, err)
		return true
	}
	lw, writes := pa.early, &pa.entry.p.writes
	writes.onAnswer(lw, func() {
		if answer(lw.result, nil) {
			pa.counts.leaderLog.Add(1)
		}
	})
	pa.entry.then(func(res applyResult, err error) {
		writes.forget(lw)
		if answer(res.append, err) && err == nil {
			pa.counts.commit.Add(1)
		}
	})
}

// Expired is the error of a batch whose request ended before its outcome
// was known, as Wait returns it when its context ends: the batch may
// still commit.
func (pa PendingAppend) Expired() error {
	return pa.entry.p.replicationError(context.DeadlineExceeded)
}

// checkProducedBatches applies the rules Kafka applies to batches from
// clients (ProduceRequest.validateRecords, LogValidator), beyond framing
// and CRC.
func checkProducedBatches(headers []log.BatchHeader, maxBatch int64, opts ProduceOptions) error {
	if len(headers) != 1 {
		return fmt.Errorf("%w: produce v3+ carries exactly one record batch per partition, got %d", kerr.InvalidRecord, len(headers))
	}
	h := headers[0]
	switch {
	case int64(h.Size()) > maxBatch:
		return fmt.Errorf("%w: batch of %d bytes is above max.message.bytes %d", kerr.MessageTooLarge, h.Size(), maxBatch)
	case h.IsControl():
		return fmt.Errorf("%w: clients may not write control batches", kerr.InvalidRecord)
	case h.IsTransactional() && opts.TransactionalID == "":
		return fmt.Errorf("%w: a transactional batch in a request without a transactional id", kerr.InvalidRecord)
	case h.IsTransactional() && h.ProducerID < 0:
		return fmt.Errorf("%w: a transactional batch without a producer id", kerr.InvalidRecord)
	case h.ProducerID >= 0 && h.BaseSequence < 0:
		return fmt.Errorf("%w: producer %d sent base sequence %d", kerr.InvalidRecord, h.ProducerID, h.BaseSequence)
	case h.Compression() == log.CompressionZstd && !opts.AllowZstd:
		return fmt.Errorf("%w: zstd needs produce v7 or later", kerr.UnsupportedCompressionType)
	}
	return nil
}
