package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
)

// A partition's Raft entries. Everything a replica needs to apply an
// entry exactly as every other replica does is in the entry or in the
// replica's own log: offsets come from the log end, the leader epoch is
// the entry's Raft term, LogAppendTime is chosen by the proposer.
//
//	byte   format version (1)
//	byte   kind
//	kind 1, append:          int64 LogAppendTime (0: CreateTime), record batch
//	kind 2, delete records:  int64 offset (-1: the high watermark)
//	kind 3, marker:          see txn_partition.go
const (
	entryVersion       = 1
	entryAppend        = 1
	entryDeleteRecords = 2
	entryHeaderLen     = 2 + 8
)

func encodeAppend(logAppendTime int64, batch []byte) []byte {
	var h [entryHeaderLen]byte
	putAppendHeader(h[:], logAppendTime)
	// Grown by append from a full header, the new buffer is not zeroed
	// before the batch is copied into it (make would clear it first).
	return append(h[:], batch...)
}

// putAppendHeader writes an append entry's header into e[:entryHeaderLen].
func putAppendHeader(e []byte, logAppendTime int64) {
	e[0], e[1] = entryVersion, entryAppend
	binary.BigEndian.PutUint64(e[2:entryHeaderLen], uint64(logAppendTime))
}

func encodeDeleteRecords(offset int64) []byte {
	e := make([]byte, entryHeaderLen)
	e[0], e[1] = entryVersion, entryDeleteRecords
	binary.BigEndian.PutUint64(e[2:], uint64(offset))
	return e
}

// applyResult is what Apply returns to the proposer.
type applyResult struct {
	append   AppendResult
	logStart int64 // delete records: the new log start offset
	err      error
}

// errReplayed answers entries the log already holds (a restart replays
// the Raft log from the last snapshot); no proposer waits for them.
var errReplayed = errors.New("entry already applied")

// Apply applies one committed entry to the log. It runs on the group's
// apply goroutine.
func (p *Partition) Apply(e raft.Entry) any {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if e.Index <= p.applied {
		return applyResult{err: errReplayed}
	}
	if err := p.failure(); err != nil {
		// The log is behind the group and cannot catch up in place:
		// applying later entries would assign wrong offsets.
		return applyResult{err: err}
	}
	if err := p.pinBase(); err != nil {
		return applyResult{err: err}
	}
	p.applied = e.Index
	if len(e.Data) < entryHeaderLen || e.Data[0] != entryVersion {
		return applyResult{err: fmt.Errorf("%w: malformed partition entry at index %d", kerr.CorruptMessage, e.Index)}
	}
	arg := int64(binary.BigEndian.Uint64(e.Data[2:]))
	switch e.Data[1] {
	case entryAppend:
		return p.applyAppend(int32(e.Term), arg, e.Data[entryHeaderLen:])
	case entryDeleteRecords:
		return p.applyDeleteRecords(arg)
	case entryMarker:
		return p.applyMarker(int32(e.Term), arg, e.Data[entryHeaderLen:])
	}
	return applyResult{err: fmt.Errorf("%w: unknown partition entry kind %d at index %d", kerr.CorruptMessage, e.Data[1], e.Index)}
}

func (p *Partition) applyAppend(epoch int32, logAppendTime int64, batch []byte) applyResult {
	headers, err := log.ValidateBatches(batch)
	if err != nil || len(headers) != 1 {
		return applyResult{err: fmt.Errorf("%w: %v", kerr.CorruptMessage, err)}
	}
	h := headers[0]
	if dup, ok, err := p.producers.check(h); err != nil {
		return applyResult{err: err}
	} else if ok {
		return applyResult{append: AppendResult{BaseOffset: dup, LogAppendTime: -1, LogStartOffset: p.log.LogStartOffset()}}
	}
	// The log stamps offsets, epoch and timestamps into the entry's own
	// bytes (raft.StateMachine: they are this apply's to rewrite).
	res, err := p.log.AppendValidated(batch, headers, log.AppendOptions{LeaderEpoch: epoch, LogAppendTime: logAppendTime})
	if err != nil {
		return applyResult{err: p.fail(fmt.Errorf("append: %w", err))}
	}
	h.BaseOffset = res.BaseOffset
	p.producers.record(h)
	p.epochs.observe(epoch, res.BaseOffset)
	p.publishStable()
	p.hwm.Store(p.log.EndOffset())
	p.wakeAppended()
	return applyResult{append: AppendResult{BaseOffset: res.BaseOffset, LogAppendTime: res.LogAppendTime, LogStartOffset: res.LogStartOffset}}
}

func (p *Partition) applyDeleteRecords(offset int64) applyResult {
	end := p.log.EndOffset()
	if offset == -1 {
		offset = end
	}
	if offset < 0 || offset > end {
		return applyResult{err: fmt.Errorf("%w: offset %d is outside [0, %d]", kerr.OffsetOutOfRange, offset, end)}
	}
	if offset <= p.log.LogStartOffset() {
		return applyResult{logStart: p.log.LogStartOffset()}
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		return applyResult{err: p.fail(fmt.Errorf("delete records: %w", err))}
	}
	p.epochs.truncateBefore(offset)
	p.aborted.dropBefore(p.log.LogStartOffset())
	// A restart truncates the log to its checkpoint; one below the new
	// log start would have to throw the whole log away.
	if err := p.checkpointLocked(); err != nil {
		return applyResult{err: err}
	}
	return applyResult{logStart: p.log.LogStartOffset()}
}

// enforceRetention applies retention.ms and retention.bytes to this
// replica's log. Each replica does so on its own, as in Kafka; offsets
// stay identical because only whole old segments go. The log is
// checkpointed first, so a restart never has to truncate below the new
// log start.
func (p *Partition) enforceRetention() (n int, err error) {
	err = p.checkpointed(func() error {
		var err error
		n, err = p.log.EnforceRetention()
		if n > 0 {
			p.epochs.truncateBefore(p.log.LogStartOffset())
			p.aborted.dropBefore(p.log.LogStartOffset())
		}
		return err
	})
	return n, err
}

// checkpointed runs fn with appendMu held right after a checkpoint of
// everything applied, for work that must never leave a restart below it
// (retention, cleaning). Most of the fsync happens first, without
// appendMu: the apply goroutine (every produce) would wait for it
// otherwise; the checkpoint then only has what was applied meanwhile to
// sync, and reports any error the first fsync hit.
func (p *Partition) checkpointed(fn func() error) error {
	_ = p.log.Sync()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.failure(); err != nil {
		return err
	}
	if err := p.checkpointLocked(); err != nil {
		return err
	}
	return fn()
}

// fail makes the replica fail-stop: after a failed write or fsync the log
// cannot be trusted to match the group, so it stops applying and the
// broker stops acknowledging writes to it.
func (p *Partition) fail(err error) error {
	err = fmt.Errorf("%w: %s/%d: %v", kerr.KafkaStorageError, p.topic.Name(), p.Index, err)
	if p.failed.CompareAndSwap(nil, &err) {
		p.signalStop()
		if p.onFail != nil {
			// Not on this goroutine: it may be the group's apply
			// goroutine, which the group's Shutdown waits for.
			go p.onFail()
		}
	}
	return err
}

func (p *Partition) failure() error {
	if e := p.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// A partition's checkpoint is the durable point a restart resumes from:
// the log was fsynced up to End when it was written, and End is the log
// end after applying the entry at Index. A restart truncates the log to
// End (what came later may be torn or lost with the page cache) and lets
// Raft replay the entries after Index, which its log store kept (it trims
// only behind snapshots, and every snapshot writes a checkpoint first).
//
// It also holds the idempotent producers' state at Index (see
// producerTable.encode), which a restart restores rather than rebuilds
// from what is left of the log.
//
// File "raft-checkpoint" in the partition directory, written atomically:
//
//	weir-partition-checkpoint 2
//	<index> <end>
//	<producer state: one line of JSON>
//
// Version 1 files (the first two lines alone) are read too: their
// producer state is rebuilt from the log, as it was written for.
const (
	checkpointFile     = "raft-checkpoint"
	checkpointHeader   = "weir-partition-checkpoint 2"
	checkpointHeaderV1 = "weir-partition-checkpoint 1"
)

type checkpoint struct {
	Index uint64
	End   int64
	// Producers is the producer table at Index (encode's form); ""
	// when the checkpoint carries none (version 1).
	Producers string
}

func readPartitionCheckpoint(dir string) (checkpoint, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, err
	}
	// The final newline is required: a file cut short inside End would
	// otherwise read as a smaller offset, and the replica would apply the
	// entries after Index on top of too short a log.
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	switch {
	case !strings.HasSuffix(string(data), "\n"):
		return checkpoint{}, false, fmt.Errorf("%s: cut short", checkpointFile)
	case len(lines) == 3 && lines[0] == checkpointHeader:
	case len(lines) == 2 && lines[0] == checkpointHeaderV1:
	default:
		return checkpoint{}, false, fmt.Errorf("%s: not a checkpoint", checkpointFile)
	}
	f := strings.Fields(lines[1])
	if len(f) != 2 {
		return checkpoint{}, false, fmt.Errorf("%s: malformed", checkpointFile)
	}
	var c checkpoint
	if c.Index, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return c, false, fmt.Errorf("%s: index: %w", checkpointFile, err)
	}
	if c.End, err = strconv.ParseInt(f[1], 10, 64); err != nil || c.End < 0 {
		return c, false, fmt.Errorf("%s: end offset %q", checkpointFile, f[1])
	}
	if len(lines) == 3 {
		if _, err := decodeProducerTable(lines[2]); err != nil {
			return c, false, fmt.Errorf("%s: %w", checkpointFile, err)
		}
		c.Producers = lines[2]
	}
	return c, true, nil
}

// writeCheckpoint records c once the log is fsynced past c.End. A
// checkpoint never goes backwards: Persist of an older snapshot may
// finish after a newer checkpoint was written.
func (p *Partition) writeCheckpoint(c checkpoint) error {
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	if c.Index < p.checkpoint.Index || c == p.checkpoint && p.ckptOnDisk {
		// Older, or already durable: an idle partition's periodic
		// checkpoint costs no file write.
		return nil
	}
	data := fmt.Sprintf("%s\n%d %d\n%s\n", checkpointHeader, c.Index, c.End, c.Producers)
	if err := p.log.WriteFile(checkpointFile, []byte(data)); err != nil {
		return p.fail(fmt.Errorf("checkpoint: %w", err))
	}
	p.checkpoint, p.ckptOnDisk = c, true
	return nil
}

// pinBase makes the checkpoint of a new partition durable before its
// first entry is applied; p.appendMu is held. Without it a crash before
// any later checkpoint would leave a log with records and no checkpoint,
// which reads as a log written before replication, and the Raft log
// replayed on top of it would append every batch a second time, at
// offsets no other replica has.
func (p *Partition) pinBase() error {
	p.ckptMu.Lock()
	onDisk := p.ckptOnDisk
	p.ckptMu.Unlock()
	if onDisk {
		return nil
	}
	return p.writeCheckpoint(p.checkpointNow())
}

// appliedEnd is the last Raft index applied and the log end it left,
// read together.
func (p *Partition) appliedEnd() (index uint64, end int64) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.applied, p.log.EndOffset()
}

// checkpointNow is what a checkpoint written now holds; p.appendMu is
// held.
func (p *Partition) checkpointNow() checkpoint {
	return checkpoint{Index: p.applied, End: p.log.EndOffset(), Producers: p.producers.encode()}
}

// checkpointLocked fsyncs the log and checkpoints what it holds now;
// p.appendMu is held.
func (p *Partition) checkpointLocked() error {
	c := p.checkpointNow()
	if err := p.log.Sync(); err != nil {
		return p.fail(fmt.Errorf("sync: %w", err))
	}
	return p.writeCheckpoint(c)
}

// recoverFromCheckpoint brings a freshly opened log back to its
// checkpoint and rebuilds the state derived from the log. sole says the
// partition has no other replica.
func (p *Partition) recoverFromCheckpoint(sole bool, logger *slog.Logger) error {
	c, ok, err := readPartitionCheckpoint(p.dir)
	if err != nil {
		return err
	}
	l := p.log
	// An empty log at offset 0 with no checkpoint is written before its
	// first entry is applied (pinBase): writing it now would cost a
	// topic of thousands of partitions seconds of fsyncs, most of them
	// before any record arrives. Anything else is made durable below.
	rewrite := !ok && (l.EndOffset() != 0 || l.LogStartOffset() != 0 || l.Size() != 0)
	if !ok {
		// A new partition, or a log written before it was replicated:
		// what it holds is the base the group's entries apply on.
		c = checkpoint{Index: 0, End: l.EndOffset()}
	}
	switch end, start := l.EndOffset(), l.LogStartOffset(); {
	case end < c.End && sole:
		// Data that was fsynced is gone (the disk lost or corrupted
		// it). With no other replica to copy it from, keep what is
		// left, as Kafka's recovery does, and go on from there; the
		// producers' state is what the batches left say.
		logger.Error("log lost fsynced batches; continuing from what is left", "log_end", end, "checkpoint_end", c.End)
		c.End, c.Producers, rewrite = end, "", true
	case end < c.End:
		// Applying the Raft log on top would give later batches other
		// offsets than on the other replicas.
		return fmt.Errorf("log ends at %d, below its checkpoint at %d: fsynced data is gone; remove this replica's data to have it copied from the others", end, c.End)
	case c.End < start:
		// Records were deleted after the checkpoint; replaying the
		// entries after it deletes them again.
		if err := l.Reset(c.End); err != nil {
			return err
		}
	case end > c.End:
		if err := l.TruncateTo(c.End); err != nil {
			return err
		}
	}
	p.applied = c.Index
	if err := p.rebuildDerived(c.Producers); err != nil {
		return err
	}
	if rewrite {
		if err := l.Sync(); err != nil {
			return err
		}
		c = p.checkpointNow()
		if err := p.writeCheckpoint(c); err != nil {
			return err
		}
	}
	p.ckptMu.Lock()
	p.checkpoint, p.ckptOnDisk = c, ok || rewrite || p.ckptOnDisk
	p.ckptMu.Unlock()
	return nil
}

// rebuildDerived restores the producer table from producers (a
// checkpoint's or snapshot's; "" rebuilds it from the log's batches) and
// recomputes the epoch cache and the high watermark from the log;
// p.appendMu is held or the replica is not running yet.
func (p *Partition) rebuildDerived(producers string) error {
	if producers != "" {
		t, err := decodeProducerTable(producers)
		if err != nil {
			return err
		}
		p.producers = t
	} else {
		p.producers = producerTable{}
		if err := p.producers.rebuild(p.log); err != nil {
			return fmt.Errorf("rebuild producer state: %w", err)
		}
	}
	if err := p.epochs.rebuild(p.log); err != nil {
		return fmt.Errorf("rebuild leader epochs: %w", err)
	}
	if err := p.rebuildAborted(); err != nil {
		return fmt.Errorf("rebuild aborted transactions: %w", err)
	}
	p.publishStable()
	p.hwm.Store(p.log.EndOffset())
	return nil
}

// snapshotMeta is a partition snapshot. It carries no records: a replica
// installing it copies the batches it lacks from the leader's log
// (pullRecords), which holds them because its own checkpoint is at least
// this far.
//
// Version 2 adds the producer table at Index (producerTable.encode), which
// an installing replica takes as it is; a version 1 snapshot's is rebuilt
// from the log.
type snapshotMeta struct {
	Version   int             `json:"version"`
	Index     uint64          `json:"index"`
	End       int64           `json:"end"`
	LogStart  int64           `json:"log_start"`
	Producers json.RawMessage `json:"producers,omitempty"`
}

// snapshotVersion is the version Snapshot writes.
const snapshotVersion = 2

// maxSnapshotMeta bounds a partition snapshot: a producer table of a few
// hundred thousand producers.
const maxSnapshotMeta = 64 << 20

type partitionSnapshot struct {
	p    *Partition
	meta snapshotMeta
}

// Snapshot captures the applied position; Persist makes it durable.
func (p *Partition) Snapshot() (raft.Snapshot, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.failure(); err != nil {
		return nil, err
	}
	c := p.checkpointNow()
	return &partitionSnapshot{p: p, meta: snapshotMeta{Version: snapshotVersion, Index: c.Index, End: c.End,
		LogStart: p.log.LogStartOffset(), Producers: json.RawMessage(c.Producers)}}, nil
}

func (s *partitionSnapshot) Persist(w io.Writer) error {
	// Raft trims its log behind this snapshot once Persist returns, so
	// the entries up to it must be durable in the segment log first.
	if err := s.p.log.Sync(); err != nil {
		return s.p.fail(fmt.Errorf("sync: %w", err))
	}
	if err := s.p.writeCheckpoint(checkpoint{Index: s.meta.Index, End: s.meta.End, Producers: string(s.meta.Producers)}); err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(s.meta)
}

func (s *partitionSnapshot) Release() {}

// Restore installs a snapshot the leader sent because this replica is
// too far behind for the leader's Raft log: it copies the batches it
// lacks, up to the snapshot's end, from the leader.
func (p *Partition) Restore(r io.Reader) error {
	var meta snapshotMeta
	if err := json.NewDecoder(io.LimitReader(r, maxSnapshotMeta)).Decode(&meta); err != nil {
		return fmt.Errorf("partition snapshot: %w", err)
	}
	if meta.Version != 1 && meta.Version != snapshotVersion {
		return fmt.Errorf("partition snapshot version %d", meta.Version)
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.failure(); err != nil {
		return err
	}
	if meta.Index <= p.applied {
		return nil
	}
	if err := p.catchUp(meta); err != nil {
		return err
	}
	p.applied = meta.Index
	// The leader's producer table at the snapshot, not one rebuilt from
	// the batches copied: those may no longer show every producer the
	// other replicas know.
	if err := p.rebuildDerived(string(meta.Producers)); err != nil {
		return p.fail(err)
	}
	if err := p.checkpointLocked(); err != nil {
		return err
	}
	p.wake()
	return nil
}

// catchUp makes the log end at meta.End with the leader's batches.
// Everything this replica applied is committed, so its log is a prefix
// of the leader's and only the missing suffix is copied.
func (p *Partition) catchUp(meta snapshotMeta) error {
	l := p.log
	if l.EndOffset() > meta.End {
		return fmt.Errorf("log ends at %d, past the snapshot's end %d", l.EndOffset(), meta.End)
	}
	for l.EndOffset() < meta.End {
		from := l.EndOffset()
		chunk, err := p.pull(from, meta.End)
		if err != nil {
			return fmt.Errorf("copy records from %d: %w", from, err)
		}
		if chunk.LogStart > from {
			// The leader no longer has what this log lacks. Offsets are
			// assigned from the log end, so the log must still end at
			// meta.End: start empty there, or at the leader's start.
			if err := l.Reset(min(chunk.LogStart, meta.End)); err != nil {
				return p.fail(err)
			}
			continue
		}
		if len(chunk.Records) == 0 {
			// The leader's cleaner removed everything up to meta.End.
			if err := l.SkipTo(meta.End, chunk.Cleaned); err != nil {
				return fmt.Errorf("leader returned no records at %d (its log %d..%d, cleaned below %d): %w", from, chunk.LogStart, chunk.End, chunk.Cleaned, err)
			}
			continue
		}
		if _, err := l.AppendCopied(chunk.Records, chunk.Cleaned); err != nil {
			return p.fail(err)
		}
	}
	return nil
}

// recordChunk is a run of batches read from another replica's log, which
// may have holes below Cleaned, that replica's cleaner checkpoint (each
// replica compacts on its own).
type recordChunk struct {
	LogStart, End, Cleaned int64
	Records                []byte
}

// Encoding of partition.read responses: int64 -2 (a log start is never
// negative, which tells this form from the older one), int64 log start,
// int64 log end, int64 cleaner checkpoint, then whole batches. The older
// form, without the marker and the checkpoint, comes from a replica
// running a release without compaction, whose log has no holes.
const chunkWithCleaned = -2

// chunkWithCleanedBits is chunkWithCleaned as written on the wire.
const chunkWithCleanedBits = 1<<64 - 2

func (c recordChunk) encode() []byte {
	out := make([]byte, 32, 32+len(c.Records))
	binary.BigEndian.PutUint64(out, chunkWithCleanedBits)
	binary.BigEndian.PutUint64(out[8:], uint64(c.LogStart))
	binary.BigEndian.PutUint64(out[16:], uint64(c.End))
	binary.BigEndian.PutUint64(out[24:], uint64(c.Cleaned))
	return append(out, c.Records...)
}

func decodeRecordChunk(b []byte) (recordChunk, error) {
	if len(b) < 16 {
		return recordChunk{}, errors.New("short partition.read response")
	}
	var c recordChunk
	if int64(binary.BigEndian.Uint64(b)) == chunkWithCleaned {
		if len(b) < 32 {
			return recordChunk{}, errors.New("short partition.read response")
		}
		c = recordChunk{LogStart: int64(binary.BigEndian.Uint64(b[8:])), End: int64(binary.BigEndian.Uint64(b[16:])),
			Cleaned: int64(binary.BigEndian.Uint64(b[24:])), Records: b[32:]}
	} else {
		c = recordChunk{LogStart: int64(binary.BigEndian.Uint64(b)), End: int64(binary.BigEndian.Uint64(b[8:])), Records: b[16:]}
		c.Cleaned = c.LogStart
	}
	if len(c.Records) > 0 {
		if _, err := log.ValidateStored(c.Records); err != nil {
			return recordChunk{}, err
		}
	}
	return c, nil
}
