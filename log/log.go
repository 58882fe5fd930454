package log

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Config is the per-partition log configuration (Kafka topic configs).
type Config struct {
	SegmentBytes       int64            // roll when the active segment reaches this size (default 1 GiB)
	SegmentMs          int64            // roll when the active segment's first batch is older than this, ms; <=0 never (default 7 days)
	RetentionMs        int64            // delete whole segments whose newest timestamp is older; -1 unlimited (default 7 days)
	RetentionBytes     int64            // delete oldest whole segments while the log is bigger; -1 unlimited (default -1)
	IndexIntervalBytes int              // default 4096
	FS                 FS               // nil = OS
	Now                func() time.Time // nil = time.Now (tests)
	Logger             *slog.Logger     // nil = slog.Default(); used only for recovery events

	// SegmentJitterMs is the most a segment's SegmentMs is shortened by, a
	// random amount drawn for each segment at its first append, so that
	// partitions created together do not all roll at once (Kafka's
	// segment.jitter.ms); 0 none.
	SegmentJitterMs int64
	// SegmentIndexBytes rolls the active segment once its offset index
	// holds SegmentIndexBytes/8 entries or its time index
	// SegmentIndexBytes/12, the entry counts of Kafka's preallocated index
	// files of segment.index.bytes (default 10 MiB); 0 no limit.
	SegmentIndexBytes int64
	// PageCache, when set, bounds the page cache the appends keep,
	// shared by every log of the node (pagecache.go); nil leaves it to
	// the kernel.
	PageCache *PageCache
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		IndexIntervalBytes: 4096,
	}
}

// normalized fills zero values so a partially filled Config is usable.
// Retention fields are taken literally: 0 means "delete now" as in Kafka.
func (c Config) normalized() Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 1 << 30
	}
	// Index positions are u32 and Kafka caps segment.bytes at int32.
	c.SegmentBytes = min(c.SegmentBytes, math.MaxInt32)
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = 4096
	}
	if c.FS == nil {
		c.FS = OSFS{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ReadMode selects how Read treats maxBytes.
type ReadMode uint8

const (
	// Obligatory returns the first batch even if it alone exceeds maxBytes,
	// so a consumer can always make progress (Kafka fetch semantics).
	Obligatory ReadMode = iota
	// Strict never exceeds maxBytes and may return nothing.
	Strict
)

// AppendOptions are the broker-assigned fields stamped into every batch.
type AppendOptions struct {
	LeaderEpoch int32
	// LogAppendTime > 0 sets the timestamp-type bit and maxTimestamp, as
	// Kafka does for message.timestamp.type=LogAppendTime topics.
	LogAppendTime int64
}

// AppendResult describes an append. LogAppendTime is -1 for CreateTime.
type AppendResult struct {
	BaseOffset, LastOffset, LogAppendTime, LogStartOffset int64
}

// Log is one partition's log. See doc.go for the lock order.
type Log struct {
	dir  string
	fsys FS

	// appendMu serializes every mutation: Append, AppendReplicated, roll,
	// retention, DeleteRecordsBefore, TruncateTo, Reset and Close, and
	// the start and end of a Sync. It is held across file I/O, except a
	// Sync's fsync.
	appendMu sync.Mutex
	// unsynced says something changed since the last Sync (appends, a
	// truncation, the state found at Open), by appendMu: an idle log's
	// periodic Sync then costs no fsync and no checkpoint write, which
	// matters with thousands of partitions on a broker.
	unsynced bool
	// writes counts appends and cuts counts truncations and resets, by
	// appendMu: a Sync whose fsync ran while appends went on tells from
	// them what it covered.
	writes, cuts uint64
	// syncMu makes Syncs one at a time, so recovery points only move
	// forward.
	syncMu sync.Mutex

	// mu guards the fields below and every segment's published fields.
	// It is held only for short in-memory work, never across I/O, so
	// readers never wait for a write or an fsync.
	mu       sync.RWMutex
	cfg      Config
	segs     []*segment // ascending base offsets; last is active
	logStart int64
	end      int64
	size     int64
	closed   bool
	failed   error // sticky storage failure; see ErrLogFailed
	// start publishes logStart for LogStartOffset, which every fetch asks
	// of every partition it reads (an idle consumer of a thousand
	// partitions, twice per long poll): a load, not a lock. Written with
	// logStart, under mu.
	start atomic.Int64

	// cleanedTo is the cleaner checkpoint: offsets below it may have
	// holes (see clean.go). Written under appendMu and mu.
	cleanedTo int64
	// cleanMu makes Cleans one at a time. It is taken before appendMu.
	cleanMu sync.Mutex

	scratch sync.Pool // *[]byte header scan buffers for Read

	// appended counts the record bytes appended since Open; truncation
	// does not lower it.
	appended atomic.Int64
}

// AppendedBytes is the number of record bytes appended since the log was
// opened. It only grows: a waiting fetch compares two readings to learn
// how much arrived without reading it.
func (l *Log) AppendedBytes() int64 { return l.appended.Load() }

// Open opens or creates the log in dir and recovers it.
func Open(dir string, cfg Config) (*Log, error) {
	cfg = cfg.normalized()
	if err := cfg.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: create %s: %w", dir, err)
	}
	l := &Log{dir: dir, fsys: cfg.FS, cfg: cfg}
	size := min(max(2*cfg.IndexIntervalBytes, 16<<10), 1<<20)
	l.scratch.New = func() any { b := make([]byte, size); return &b }
	if err := l.recover(); err != nil {
		for _, s := range l.segs {
			s.release()
		}
		return nil, fmt.Errorf("log: recover %s: %w", dir, err)
	}
	return l, nil
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset a consumer may read.
func (l *Log) LogStartOffset() int64 {
	return l.start.Load()
}

// EndOffset is the next offset to be assigned (log end offset).
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// Size is the total bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.size
}

// NumSegments reports how many segments the log has (for metrics/tests).
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// WriteFile replaces the file name in the log's directory with data,
// atomically and durably (WriteFileAtomic), through the log's FS: state
// kept beside the log, such as a replica's Raft checkpoint, gets the
// same crash and fault coverage as the log itself.
func (l *Log) WriteFile(name string, data []byte) error {
	l.mu.RLock()
	fsys := l.cfg.FS
	l.mu.RUnlock()
	return WriteFileAtomic(fsys, filepath.Join(l.dir, name), data)
}

// SetConfig applies topic config changes. FS cannot change at runtime and
// is kept; size limits take effect on the next append or retention pass.
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg.FS = l.cfg.FS
	if cfg.Logger == nil {
		cfg.Logger = l.cfg.Logger
	}
	l.cfg = cfg.normalized()
}

// writable checks the sticky state; caller holds appendMu.
func (l *Log) writable() (Config, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return l.cfg, ErrClosed
	}
	if l.failed != nil {
		return l.cfg, fmt.Errorf("%w: %w", ErrLogFailed, l.failed)
	}
	return l.cfg, nil
}

// fail records a storage failure that makes further writes unsafe.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	if l.failed == nil {
		l.failed = err
	}
	l.mu.Unlock()
	return fmt.Errorf("%w: %w", ErrLogFailed, err)
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// Append validates records (one or more batches), assigns offsets, stamps
// leader epoch and LogAppendTime into the caller's buffer, and writes all
// batches or none.
func (l *Log) Append(records []byte, opts AppendOptions) (AppendResult, error) {
	hs, err := ValidateBatches(records)
	if err != nil {
		return AppendResult{}, err
	}
	return l.AppendValidated(records, hs, opts)
}

// AppendValidated is Append for records the caller has just validated:
// hs must be what ValidateBatches returned for exactly these bytes. The
// produce path validates before its idempotence checks and so would
// otherwise compute every batch's CRC twice.
func (l *Log) AppendValidated(records []byte, hs []BatchHeader, opts AppendOptions) (AppendResult, error) {
	return l.appendBatches(records, hs, true, false, opts)
}

// AppendReplicated appends batches copied byte for byte from another
// replica's log: they already carry their offsets, leader epochs,
// timestamps and CRCs, and are stored unchanged (records is not modified).
// The batches must be valid (ValidateBatches), the first must start at
// EndOffset and each next one right after the previous one's last offset;
// otherwise nothing is written and the error wraps ErrCorruptBatch or
// ErrOffsetMismatch. Segments roll and indexes grow exactly as for Append.
// LogAppendTime in the result is the first batch's maxTimestamp if that
// batch is LogAppendTime-stamped, else -1.
func (l *Log) AppendReplicated(records []byte) (AppendResult, error) {
	hs, err := ValidateBatches(records)
	if err != nil {
		return AppendResult{}, err
	}
	for i := 1; i < len(hs); i++ {
		if want := hs[i-1].LastOffset() + 1; hs[i].BaseOffset != want {
			return AppendResult{}, fmt.Errorf("%w: batch %d starts at offset %d, want %d", ErrOffsetMismatch, i, hs[i].BaseOffset, want)
		}
	}
	return l.appendBatches(records, hs, false, false, AppendOptions{})
}

// appendBatches is the write path of AppendValidated (stamp set: assign
// offsets from the log end and stamp opts into the caller's buffer) and
// AppendReplicated (stamp unset: the batches must already start at the log
// end and are written as they are; with gaps, AppendCopied's, they may
// start past it).
func (l *Log) appendBatches(records []byte, hs []BatchHeader, stamp, gaps bool, opts AppendOptions) (AppendResult, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	cfg, err := l.writable()
	if err != nil {
		return AppendResult{}, err
	}
	// The writer is the only mutator, so reading segs/end without mu is safe.
	seg, next := l.active(), l.end
	if !stamp && len(hs) > 0 && (hs[0].BaseOffset < next || hs[0].BaseOffset > next && !gaps) {
		return AppendResult{}, fmt.Errorf("%w: replicated batches start at offset %d, log end is %d", ErrOffsetMismatch, hs[0].BaseOffset, next)
	}
	nowMs := cfg.Now().UnixMilli()
	last := next - 1
	for _, h := range hs {
		last += int64(h.LastOffsetDelta) + 1
	}
	if !stamp && len(hs) > 0 {
		last = hs[len(hs)-1].LastOffset()
	}
	if l.shouldRoll(seg, cfg, int64(len(records)), last, nowMs) {
		if seg, err = l.roll(cfg.IndexIntervalBytes); err != nil {
			return AppendResult{}, err
		}
	}

	x := seg.newIndexer(cfg.IndexIntervalBytes)
	off, pos := next, 0
	for _, h := range hs {
		if stamp {
			rewriteBatch(records[pos:pos+h.Size()], off, opts.LeaderEpoch, opts.LogAppendTime)
			h.BaseOffset = off
			if opts.LogAppendTime > 0 {
				h.MaxTimestamp = opts.LogAppendTime
			}
		}
		x.add(h, seg.size+int64(pos))
		off = h.LastOffset() + 1
		pos += h.Size()
	}
	if _, err := seg.log.WriteAt(records, seg.size); err != nil {
		// A partial write may have left whole batches behind the
		// published size; a crash must not resurrect them.
		if terr := seg.log.Truncate(seg.size); terr != nil {
			return AppendResult{}, l.fail(fmt.Errorf("append: %w (truncate: %v)", err, terr))
		}
		return AppendResult{}, fmt.Errorf("log: append: %w", err)
	}
	seg.startWriteback(seg.size+int64(len(records)), cfg.PageCache)
	if seg.size == 0 {
		seg.rollBase = nowMs
		seg.rollJitter = rollJitter(cfg)
	}
	seg.writeIndexes(&x)

	l.mu.Lock()
	seg.publish(&x, seg.size+int64(len(records)), off)
	l.end = off
	l.unsynced = true
	l.writes++
	l.size += int64(len(records))
	start := l.logStart
	l.mu.Unlock()
	l.appended.Add(int64(len(records)))

	res := AppendResult{BaseOffset: next, LastOffset: off - 1, LogAppendTime: -1, LogStartOffset: start}
	if gaps {
		res.BaseOffset = hs[0].BaseOffset
	}
	switch {
	case stamp && opts.LogAppendTime > 0:
		res.LogAppendTime = opts.LogAppendTime
	case !stamp && len(hs) > 0 && hs[0].IsLogAppendTime():
		res.LogAppendTime = hs[0].MaxTimestamp
	}
	return res, nil
}

// shouldRoll: an empty segment is never rolled, which is also what lets a
// single batch larger than SegmentBytes land in a fresh segment.
func (l *Log) shouldRoll(s *segment, cfg Config, n, lastOffset, nowMs int64) bool {
	if s.size == 0 {
		return false
	}
	return s.size+n > cfg.SegmentBytes ||
		(cfg.SegmentMs > 0 && nowMs-s.rollBase > cfg.SegmentMs-s.rollJitter) ||
		!s.relOffsetFits(lastOffset) ||
		indexFull(s, cfg.SegmentIndexBytes)
}

// Entry sizes of Kafka's offset and time index files, by which
// segment.index.bytes counts entries.
const (
	kafkaOffsetIndexEntry = 8
	kafkaTimeIndexEntry   = 12
)

// indexFull reports whether one of s's indexes holds as many entries as
// Kafka's index files of maxBytes hold. Only the writer, which holds
// appendMu, changes the entries, so it reads them without mu.
func indexFull(s *segment, maxBytes int64) bool {
	return maxBytes > 0 &&
		(int64(len(s.idx.entries)) >= maxBytes/kafkaOffsetIndexEntry || int64(len(s.tidx.entries)) >= maxBytes/kafkaTimeIndexEntry)
}

// rollJitter draws a segment's share of cfg.SegmentJitterMs, as Kafka
// does: uniform below the smaller of the jitter and segment.ms.
func rollJitter(cfg Config) int64 {
	if cfg.SegmentJitterMs <= 0 || cfg.SegmentMs <= 0 {
		return 0
	}
	return rand.Int64N(min(cfg.SegmentJitterMs, cfg.SegmentMs))
}

// roll seals the active segment (final time index entry, fsync) and starts
// a new one at the end offset. Caller holds appendMu.
func (l *Log) roll(indexInterval int) (*segment, error) {
	old := l.active()
	x := old.newIndexer(indexInterval)
	x.maybeTime()
	old.writeIndexes(&x)
	l.mu.Lock()
	old.publish(&x, old.size, old.next)
	l.mu.Unlock()
	old.markTimeIndex(true)
	// Syncing here is what lets the recovery point skip sealed segments.
	if err := old.sync(); err != nil {
		return nil, l.fail(fmt.Errorf("sync rolled segment %d: %w", old.base, err))
	}
	s, err := createSegment(l.fsys, l.dir, l.end, 0)
	if err != nil {
		return nil, fmt.Errorf("log: roll: %w", err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	return s, nil
}

// Sync makes everything appended before it was called durable: it fsyncs
// the active segment and its indexes and then records the end offset it
// found as the recovery point, so the next Open validates only newer data.
// Appends go on during the fsync (a sealed segment was fsynced when it was
// rolled, so the active one at the start holds everything unsynced); a
// log truncated or reset meanwhile keeps the recovery point that wrote.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.appendMu.Lock()
	if _, err := l.writable(); err != nil {
		l.appendMu.Unlock()
		return err
	}
	if !l.unsynced {
		l.appendMu.Unlock()
		return nil
	}
	seg, end, writes, cuts := l.active(), l.end, l.writes, l.cuts
	seg.acquire() // its files stay open even if it is deleted meanwhile
	files := seg.files()
	l.appendMu.Unlock()

	err := syncFiles(files)
	seg.release()

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err != nil {
		return l.fail(fmt.Errorf("fsync: %w", err))
	}
	if _, err := l.writable(); err != nil {
		return err // closed meanwhile: Close wrote a later recovery point
	}
	if l.cuts != cuts {
		return nil
	}
	if err := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, end); err != nil {
		return fmt.Errorf("log: write recovery point: %w", err)
	}
	if l.writes == writes {
		l.unsynced = false
	}
	return nil
}

func (l *Log) syncLocked() error {
	if !l.unsynced {
		return nil
	}
	if err := l.active().sync(); err != nil {
		return l.fail(fmt.Errorf("fsync: %w", err))
	}
	if err := writeCheckpoint(l.fsys, l.dir, recoveryPointFile, l.end); err != nil {
		return fmt.Errorf("log: write recovery point: %w", err)
	}
	l.unsynced = false
	return nil
}

// Close syncs and closes the log. Readers still in flight keep their
// segments open until they finish.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	closed, failed := l.closed, l.failed
	l.mu.RUnlock()
	if closed {
		return nil
	}
	var err error
	if failed == nil {
		err = l.syncLocked()
	}
	l.mu.Lock()
	l.closed = true
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
	return err
}
