package walstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/log"
)

const (
	defaultSegmentBytes = 64 << 20
	// maxBatchBytes caps one group commit so a burst cannot build a write
	// (and a segment overshoot) of unbounded size; the rest waits for the
	// next fsync, which is no slower than splitting it would be.
	maxBatchBytes = 8 << 20
	// maxSegmentBytes keeps offsets and lengths within the uint32 of a
	// location even after a segment's last batch overshoots.
	maxSegmentBytes = 1 << 30
)

var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("walstore: store closed")
	// ErrFailed wraps the write or fsync error that stopped the store:
	// after it nothing more is written, because the page cache can no
	// longer be trusted to hold what was written. Reopen to recover.
	ErrFailed = errors.New("walstore: store failed")
	// ErrNotContiguous is returned when StoreLogs would leave a gap or
	// overwrite entries, or DeleteRange would cut a hole in the middle.
	ErrNotContiguous = errors.New("walstore: entries not contiguous")
	// ErrInvalidGroup is returned for a group name outside
	// [A-Za-z0-9._-]{1,255}.
	ErrInvalidGroup = errors.New("walstore: invalid group name")
)

// errNotFound's text is compared by hashicorp/raft (NewRaft,
// HasExistingState, vote handling): it must stay exactly "not found".
var errNotFound = errors.New("not found")

// Options configure Open.
type Options struct {
	// FS is where the segments live; nil means log.OSFS{}.
	FS log.FS
	// SegmentBytes is the size past which the active segment is rolled;
	// 0 means 64 MiB.
	SegmentBytes int64
	// PrepareSpares has a file of SegmentBytes zeros written in the
	// background for the next roll when no emptied segment is there to be
	// reused, once the active segment is half full, if its writes
	// averaged under 1 MiB (spares.go).
	PrepareSpares bool
	// Logger receives recovery and reclamation events; nil discards.
	Logger *slog.Logger
	// Registerer, if set, gets the weir_raft_log_* collectors, which are
	// unregistered by Close.
	Registerer prometheus.Registerer
	// HandOffBytes bounds the bytes of the entries followers stored that
	// are kept for their applies (handoff.go); 0 means
	// DefaultHandOffBytes.
	HandOffBytes int64
}

// Stats are cumulative counters and current sizes, for tests, benchmarks
// and the metrics.
type Stats struct {
	Fsyncs         uint64 // File.Sync calls on segments
	Batches        uint64 // group commits (writes followed by one Sync)
	Records        uint64 // records written, relocated ones included
	BytesWritten   uint64 // segment bytes written, headers included
	RelocatedBytes uint64 // bytes copied forward out of old segments
	Segments       int    // segment files in the WAL
	Spares         int    // files kept to become new segments (spares.go)
	PreparedSpares uint64 // spares written as zeros by this Store
	ReusedSpares   uint64 // segments made from a spare rather than an empty file
	Groups         int    // groups with entries or stable keys
	DiskBytes      int64  // sum of segment sizes
	LiveBytes      int64  // bytes of records still needed by some group
	HandedOff      uint64 // entries GetLog took from a hand-off instead of reading them (handoff.go)
	HandOffBytes   int64  // entry bytes held for hand-off now
	RingReads      uint64 // entries GetLog copied from the ring (direct.go)
	FileReads      uint64 // entries GetLog read from a segment file
}

// Store is one node's Raft log and stable store, shared by every group.
// All methods are safe for concurrent use.
type Store struct {
	dir      string
	fs       log.FS
	segBytes int64
	logger   *slog.Logger
	met      *metrics

	// mu guards the index: groups, segs, and segment size/live. The writer
	// takes it for writing only to publish a synced batch; readers take it
	// for reading only to find a location, never across I/O.
	mu        sync.RWMutex
	groups    map[string]*group
	segs      []*segment // oldest first, sequences contiguous; last is active
	closed    bool
	liveBytes int64
	diskBytes int64

	// qmu guards the queue and the stop/fail state. Never held with mu.
	qmu     sync.Mutex
	queue   []*request
	closing bool
	failErr error
	wake    chan struct{} // capacity 1: "the queue changed"
	stopped chan struct{} // closed when the writer has exited

	reqs sync.Pool // *request

	// Writer goroutine only.
	wq, wqNext []*request // the batch in flight and the one being written
	wbuf       []byte     // reclaim's relocation buffer
	iov        [][]byte   // a batch's request buffers, for one vector write
	batchSeq   uint64
	fixes      []relocation
	// wseg and wend are where the next write goes: the active segment's
	// published size lags behind them while a batch waits for its fsync.
	wseg *segment
	wend int64
	// inflight is the batch written and being fsynced, by syncLoop or
	// by the writer itself, if any (writer.go).
	inflight *written
	syncReq  chan syncJob
	syncDone chan error

	// spares are files kept to become new segments (spares.go), named
	// from spareSeq; the writer takes them, retiring segments and
	// prepareLoop add them.
	spareMu     sync.Mutex
	spares      []spare
	spareSeq    uint64
	prepWake    chan struct{} // capacity 1: "make a spare if there is none"
	prepAsked   bool          // writer only: the active segment was considered for a spare
	segWrites   int           // writer only: writes to the active segment
	prepStop    chan struct{} // closed by Close
	prepStopped chan struct{} // closed when prepareLoop has exited (nil: not started)
	// fillPause is zeroFill's wait between chunks (pauseFill; a test's
	// records what it was asked instead).
	fillPause func(time.Duration) bool

	// ring is the log's newest bytes, which the writer writes
	// to the file with O_DIRECT and GetLog reads back (direct.go).
	ring *ring

	// Writer only: what of the newest segments may still be in the page
	// cache (dropcache.go).
	cached []cachedRange
	// syncStopped is closed when syncLoop has exited.
	syncStopped chan struct{}

	fsyncs, batches, records, bytesWritten, relocated atomic.Uint64
	handedOff, ringReads, fileReads                   atomic.Uint64
	preparedSpares, reusedSpares                      atomic.Uint64
	handOffBytes                                      atomic.Int64 // held by all groups' hand-offs
	handOffMax                                        int64        // bound of handOffBytes
}

// Open opens (creating if need be) the store in dir, replays it and starts
// the writer.
func Open(dir string, opts Options) (*Store, error) {
	s := &Store{
		dir:        dir,
		fs:         opts.FS,
		segBytes:   opts.SegmentBytes,
		logger:     opts.Logger,
		handOffMax: opts.HandOffBytes,
		groups:     make(map[string]*group),
		wake:       make(chan struct{}, 1),
		stopped:    make(chan struct{}),
		syncReq:    make(chan syncJob),
		syncDone:   make(chan error, 1),

		syncStopped: make(chan struct{}),
		ring:        newRing(),
		prepWake:    make(chan struct{}, 1),
		prepStop:    make(chan struct{}),
	}
	s.fillPause = s.pauseFill
	if s.fs == nil {
		s.fs = log.OSFS{}
	}
	if s.segBytes <= 0 {
		s.segBytes = defaultSegmentBytes
	}
	s.segBytes = min(s.segBytes, maxSegmentBytes)
	if s.handOffMax <= 0 {
		s.handOffMax = DefaultHandOffBytes
	}
	if s.logger == nil {
		s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.reqs.New = func() any { return &request{done: make(chan struct{}, 1)} }
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("walstore: creating %s: %w", dir, err)
	}
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if opts.Registerer != nil {
		m, err := newMetrics(opts.Registerer, s)
		if err != nil {
			s.closeFiles()
			return nil, err
		}
		s.met = m
	}
	if opts.PrepareSpares {
		s.prepStopped = make(chan struct{}) // before the writer reads it
		go s.prepareLoop()
	}
	go s.syncLoop()
	go s.run()
	return s, nil
}

// Group returns the view of one group. Creating it costs nothing until
// something is stored through it. An invalid name gives a view whose every
// method fails with ErrInvalidGroup.
func (s *Store) Group(name string) *GroupStore {
	g := &GroupStore{s: s, name: name}
	if !validName(name) {
		g.err = fmt.Errorf("%w: %q", ErrInvalidGroup, name)
	}
	return g
}

// HasGroup reports whether any entry or stable key is stored for name.
func (s *Store) HasGroup(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[name]
	return g != nil && !g.empty()
}

// Groups lists the groups with entries or stable keys, sorted.
func (s *Store) Groups() []string {
	s.mu.RLock()
	out := make([]string, 0, len(s.groups))
	for name, g := range s.groups {
		if !g.empty() {
			out = append(out, name)
		}
	}
	s.mu.RUnlock()
	slices.Sort(out)
	return out
}

// DropGroup durably forgets name's entries and stable keys; a later use of
// the same name starts empty. It returns once the drop is fsynced.
func (s *Store) DropGroup(name string) error {
	if !validName(name) {
		return fmt.Errorf("%w: %q", ErrInvalidGroup, name)
	}
	r := s.getRequest(kindDrop, name)
	r.buf = appendDropRecord(r.buf, name)
	return s.submit(r)
}

// Stats returns the counters and sizes.
func (s *Store) Stats() Stats {
	st := Stats{
		Fsyncs:         s.fsyncs.Load(),
		Batches:        s.batches.Load(),
		Records:        s.records.Load(),
		BytesWritten:   s.bytesWritten.Load(),
		RelocatedBytes: s.relocated.Load(),
		HandedOff:      s.handedOff.Load(),
		HandOffBytes:   s.handOffBytes.Load(),
		RingReads:      s.ringReads.Load(),
		FileReads:      s.fileReads.Load(),
		PreparedSpares: s.preparedSpares.Load(),
		ReusedSpares:   s.reusedSpares.Load(),
	}
	s.mu.RLock()
	st.Segments = len(s.segs)
	for _, g := range s.groups {
		if !g.empty() {
			st.Groups++
		}
	}
	st.DiskBytes, st.LiveBytes = s.diskBytes, s.liveBytes
	s.mu.RUnlock()
	st.Spares = s.spareCount()
	return st
}

// Close lets the writer finish what is queued, stops it and closes the
// files. Every later call returns ErrClosed.
func (s *Store) Close() error {
	s.qmu.Lock()
	if s.closing {
		s.qmu.Unlock()
		return ErrClosed
	}
	s.closing = true
	s.qmu.Unlock()
	s.signal()
	<-s.stopped
	<-s.syncStopped
	close(s.prepStop)
	if s.prepStopped != nil {
		<-s.prepStopped
	}
	var err error
	if s.ring.wf != nil && s.failed() == nil {
		// A clean stop leaves no padding after the last record, so the
		// next Open has no torn tail to report.
		sg := s.activeSegment()
		err = s.seal(sg, sg.size)
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.closeFiles()
	if s.met != nil {
		s.met.unregister()
	}
	return err
}

// closeFiles drops the store's reference to every segment; files close
// once in-flight reads finish.
func (s *Store) closeFiles() {
	s.mu.Lock()
	segs := s.segs
	s.segs = nil
	s.mu.Unlock()
	for _, sg := range segs {
		sg.release()
	}
	s.ring.free()
}
