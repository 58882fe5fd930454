package walstore

import (
	"fmt"
	"slices"
	"time"
)

// request is one caller's mutation, encoded by the caller (so CRC work
// runs in parallel) and written by the writer. Requests are pooled: the
// hot path of StoreLogs allocates nothing once the pool is warm.
type request struct {
	kind   byte
	name   string
	lo, hi uint64 // kindEntry: first and last index; kindDelete: min, max
	key    string // kindStable
	val    []byte // kindStable
	buf    []byte // encoded records, or their headers (parts)

	// kindEntry: the length of each entry's record, in order. When parts
	// is not empty, the records are parts concatenated, not buf: an entry's
	// data of inlineDataMin bytes or more is written from the caller's
	// own slice (StoreLogs' caller keeps it until submit returns) after
	// its header in buf, instead of being copied in.
	lens  []uint32
	parts [][]byte
	size  int // bytes of the records

	// Set by the writer.
	g    *group
	skip bool // nothing to write (e.g. DeleteRange outside the log)
	off  int  // position of buf in the batch
	err  error
	done chan struct{} // capacity 1, reused across uses
}

func (s *Store) getRequest(kind byte, name string) *request {
	r := s.reqs.Get().(*request)
	r.kind, r.name = kind, name
	r.buf = r.buf[:0]
	return r
}

// records returns r's encoded records as the buffers to write, in order,
// appended to iov.
func (r *request) records(iov [][]byte) [][]byte {
	if len(r.parts) > 0 {
		return append(iov, r.parts...)
	}
	return append(iov, r.buf)
}

// bytes is the length of r's encoded records.
func (r *request) bytes() int {
	if len(r.parts) > 0 {
		return r.size
	}
	return len(r.buf)
}

func (s *Store) putRequest(r *request) {
	if cap(r.buf) > 1<<20 {
		r.buf = nil // do not pin a large StoreLogs' buffer in the pool
	}
	if cap(r.val) > 64<<10 {
		r.val = nil
	}
	r.g, r.err, r.key, r.skip, r.lo, r.hi = nil, nil, "", false, 0, 0
	r.val = r.val[:0]
	r.lens = r.lens[:0]
	clear(r.parts) // the callers' data is theirs again
	r.parts, r.size = r.parts[:0], 0
	s.reqs.Put(r)
}

// submit queues r and waits until the writer has fsynced it (or failed).
// There is no timer: the writer takes whatever is queued when it comes
// round, so batches grow exactly while the previous fsync is in flight.
func (s *Store) submit(r *request) error {
	s.qmu.Lock()
	switch {
	case s.closing:
		s.qmu.Unlock()
		s.putRequest(r)
		return ErrClosed
	case s.failErr != nil:
		err := s.failErr
		s.qmu.Unlock()
		s.putRequest(r)
		return err
	}
	s.queue = append(s.queue, r)
	s.qmu.Unlock()
	s.signal()
	<-r.done
	err := r.err
	s.putRequest(r)
	return err
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the writer goroutine: the only code that writes segments or
// changes the index. Under load it writes a batch while the one before
// it is being fsynced (syncLoop), so a batch costs the longer of its
// write and the previous fsync rather than their sum; a batch is still
// published and acknowledged only once an fsync that began after its
// write returned.
func (s *Store) run() {
	defer close(s.stopped)
	defer close(s.syncReq)
	defer s.forgetCached()
	for {
		batch, closing, failed := s.take()
		if len(batch) > 0 {
			if failed != nil {
				s.settle()
				s.finish(batch, failed)
				clear(batch)
			} else {
				s.commit(batch)
			}
			continue
		}
		if s.inflight != nil {
			// Nothing to write yet: finish the batch in flight, unless
			// new work comes first (it is written during the fsync).
			select {
			case <-s.wake:
			case err := <-s.syncDone:
				s.settleWith(err)
			}
			continue
		}
		if closing {
			return
		}
		if failed == nil && s.reclaimStep() {
			continue
		}
		<-s.wake
	}
}

// take moves up to one batch's worth of queued requests into the batch
// slice not in flight.
func (s *Store) take() ([]*request, bool, error) {
	limit := int(min(maxBatchBytes, s.segBytes/2))
	s.qmu.Lock()
	defer s.qmu.Unlock()
	n, bytes := 0, 0
	for n < len(s.queue) && (n == 0 || bytes+s.queue[n].bytes() <= limit) {
		bytes += s.queue[n].bytes()
		n++
	}
	s.wqNext = append(s.wqNext[:0], s.queue[:n]...)
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	return s.wqNext, s.closing, s.failErr
}

// written is a batch on disk, not yet known durable.
type written struct {
	batch          []*request
	sg             *segment
	base           int64
	bytes, records int
}

// syncJob is an fsync of a segment (and of the directory, after a roll).
type syncJob struct {
	sg     *segment
	rolled bool
}

// syncLoop fsyncs for the writer, one job at a time, so that the writer
// can write the next batch meanwhile.
func (s *Store) syncLoop() {
	defer close(s.syncStopped)
	for job := range s.syncReq {
		s.syncDone <- s.fsync(job)
	}
}

// fsync makes job's write durable: the segment, and after a roll the
// directory that names it.
func (s *Store) fsync(job syncJob) error {
	start := time.Now()
	err := job.sg.f.Sync()
	s.fsyncs.Add(1)
	if s.met != nil {
		s.met.fsyncs.Inc()
		s.met.syncSeconds.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		return fmt.Errorf("walstore: syncing %s: %w", job.sg.path, err)
	}
	if job.rolled {
		return s.syncDir()
	}
	return nil
}

// commit validates and writes one batch, then, once the batch before it
// is durable and acknowledged, has it fsynced; it returns with the batch
// in flight. Nothing is published or acknowledged before its fsync.
func (s *Store) commit(batch []*request) {
	bytes, records := 0, 0
	for _, r := range batch {
		if r.err = s.validate(r); r.err != nil || r.skip {
			continue
		}
		r.off = bytes
		bytes += r.bytes()
		if r.kind == kindEntry {
			records += int(r.hi - r.lo + 1)
		} else {
			records++
		}
	}
	if bytes == 0 {
		// Acknowledged in order, after what is in flight.
		s.settle()
		s.finish(batch, nil)
		clear(batch)
		return
	}
	// Each request's records go to the file from its own buffer, in one
	// pwritev, rather than through a copy into one.
	s.iov = s.iov[:0]
	for _, r := range batch {
		if r.err == nil && !r.skip {
			s.iov = r.records(s.iov)
		}
	}
	sg, base, rolled, err := s.writeOnly(s.iov, bytes)
	clear(s.iov)
	s.settle()
	if err == nil {
		err = s.failed()
	}
	if err != nil {
		s.fail(err)
		s.finish(batch, s.failed())
		clear(batch)
		return
	}
	// The batch slices swap roles: this one is in flight now.
	s.wq, s.wqNext = batch, s.wq
	s.inflight = &written{batch: batch, sg: sg, base: base, bytes: bytes, records: records}
	job := syncJob{sg: sg, rolled: rolled}
	if s.queued() {
		s.syncReq <- job
		return
	}
	// Nothing waits to be written behind this batch: handing its fsync
	// to syncLoop would buy no overlap, only two goroutine hand-offs
	// (each one waking a parked thread when the other P is idle), which
	// at a few thousand batches a second cost the broker more CPU than
	// the fsyncs. A request that comes in meanwhile is written after it
	// and goes back to the overlapped path.
	s.settleWith(s.fsync(job))
}

// queued says whether a request waits to be taken.
func (s *Store) queued() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.queue) > 0
}

// settle waits for the batch in flight to be fsynced, then publishes it
// and wakes its callers (or fails the store and them).
func (s *Store) settle() {
	if s.inflight != nil {
		s.settleWith(<-s.syncDone)
	}
}

// settleWith is settle once the fsync of the batch in flight returned err.
func (s *Store) settleWith(err error) {
	w := s.inflight
	s.inflight = nil
	defer clear(w.batch)
	if err != nil {
		s.fail(err)
		s.finish(w.batch, s.failed())
		return
	}
	s.track(w.sg, w.base+int64(w.bytes))
	s.batchSeq++
	groups := 0
	s.mu.Lock()
	w.sg.size += int64(w.bytes)
	s.diskBytes += int64(w.bytes)
	for _, r := range w.batch {
		if r.err != nil || r.skip {
			continue
		}
		if r.g.mark != s.batchSeq {
			r.g.mark = s.batchSeq
			groups++
		}
		s.apply(r, w.sg, w.base+int64(r.off))
	}
	for _, r := range w.batch {
		// A group left with nothing (dropped, fully deleted) leaves the
		// map so that idle names cost nothing.
		if g := r.g; g != nil && g.empty() && g.wlast == 0 && s.groups[r.name] == g {
			delete(s.groups, r.name)
		}
	}
	s.mu.Unlock()
	s.batches.Add(1)
	s.records.Add(uint64(w.records))
	if s.met != nil {
		s.met.batchRecords.Observe(float64(w.records))
		s.met.batchGroups.Observe(float64(groups))
	}
	s.finish(w.batch, nil)
	s.dropBehind() // after the answer: not on the batch's way to its callers
}

// finish wakes every caller in batch. A request is the caller's again
// once done is sent, so it is not touched afterwards.
func (s *Store) finish(batch []*request, err error) {
	for _, r := range batch {
		if err != nil {
			r.err = err
		}
		r.done <- struct{}{}
	}
}

// validate checks r against the group as it will be once everything
// before r is applied, and advances that view.
func (s *Store) validate(r *request) error {
	g := s.groups[r.name] // the writer is the map's only mutator
	if g == nil && (r.kind == kindEntry || r.kind == kindStable) {
		g = &group{}
		s.mu.Lock()
		s.groups[r.name] = g
		s.mu.Unlock()
	}
	r.g = g
	switch r.kind {
	case kindEntry:
		if g.wlast != 0 && r.lo != g.wlast+1 {
			return fmt.Errorf("%w: group %q: StoreLogs from index %d, last index is %d", ErrNotContiguous, r.name, r.lo, g.wlast)
		}
		if g.wlast == 0 {
			g.wfirst = r.lo
		}
		g.wlast = r.hi
	case kindDelete:
		if g == nil || g.wlast == 0 || r.hi < g.wfirst || r.lo > g.wlast {
			r.skip = true
			return nil
		}
		switch {
		case r.lo <= g.wfirst && r.hi >= g.wlast:
			g.wfirst, g.wlast = 0, 0
		case r.lo <= g.wfirst:
			g.wfirst = r.hi + 1
		case r.hi >= g.wlast:
			g.wlast = r.lo - 1
		default:
			return fmt.Errorf("%w: group %q: DeleteRange(%d, %d) inside %d..%d would leave a gap", ErrNotContiguous, r.name, r.lo, r.hi, g.wfirst, g.wlast)
		}
	case kindDrop:
		if g == nil {
			r.skip = true
			return nil
		}
		g.wfirst, g.wlast = 0, 0
	}
	return nil
}

// write appends buf to the active segment, rolling first if it would
// overflow, and fsyncs (the writer's own writes, when nothing is in
// flight). A new segment's directory entry is fsynced too before anything
// in it is acknowledged.
func (s *Store) write(buf []byte) (*segment, int64, error) {
	sg, base, rolled, err := s.writeOnly([][]byte{buf}, len(buf))
	if err != nil {
		return nil, 0, err
	}
	if err := s.fsync(syncJob{sg: sg, rolled: rolled}); err != nil {
		return nil, 0, err
	}
	s.track(sg, base+int64(len(buf)))
	s.mu.Lock()
	sg.size += int64(len(buf))
	s.diskBytes += int64(len(buf))
	s.mu.Unlock()
	return sg, base, nil
}

// writeOnly appends buf at the write position, rolling to a new segment
// first if it would overflow; nothing is fsynced or published.
func (s *Store) writeOnly(bufs [][]byte, n int) (sg *segment, base int64, rolled bool, err error) {
	sg = s.activeSegment()
	if sg != s.wseg {
		s.wseg, s.wend = sg, sg.size
	}
	if s.wend > segHeaderLen && s.wend+int64(n) > s.segBytes {
		// The segment being left must be durable before the next one
		// exists: a crash could otherwise keep the new file's directory
		// entry and a torn tail in the old one, which recovery takes for
		// lost acknowledged data. Rolls are rare; this one gives up the
		// overlap with the fsync in flight.
		s.settle()
		if err := s.failed(); err != nil {
			return nil, 0, false, err
		}
		if err := s.seal(sg, s.wend); err != nil {
			return nil, 0, false, err
		}
		nsg, err := s.createSegment(sg.seq + 1)
		if err != nil {
			return nil, 0, false, err
		}
		s.mu.Lock()
		s.segs = append(s.segs, nsg)
		s.diskBytes += nsg.size
		s.mu.Unlock()
		s.wrote(nsg.size)
		sg, rolled = nsg, true
		s.wseg, s.wend = nsg, nsg.size
		s.prepAsked, s.segWrites = false, 0
	}
	base = s.wend
	saltFrames(bufs, sg.salt)
	if err := s.ringWrite(sg, bufs, n, base); err != nil {
		return nil, 0, false, fmt.Errorf("walstore: writing %s at %d: %w", sg.path, base, err)
	}
	s.wend += int64(n)
	s.segWrites++
	s.wrote(int64(n))
	s.askForSpare()
	return sg, base, rolled, nil
}

func (s *Store) wrote(n int64) {
	s.bytesWritten.Add(uint64(n))
	if s.met != nil {
		s.met.bytesWritten.Add(float64(n))
	}
}

// fail makes the store refuse all further writes (fail-stop) and fails
// everything queued. After a failed write or fsync the kernel may have
// dropped dirty pages, so no later fsync could prove earlier data durable.
func (s *Store) fail(err error) {
	s.logger.Error("walstore: write failed; refusing further writes until reopened", "dir", s.dir, "error", err)
	s.qmu.Lock()
	if s.failErr == nil {
		s.failErr = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	s.qmu.Unlock()
}

func (s *Store) failed() error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.failErr
}

// apply publishes one synced request at position off of segment sg.
// Called with mu held.
func (s *Store) apply(r *request, sg *segment, off int64) {
	g := r.g
	switch r.kind {
	case kindEntry:
		if len(g.locs) == 0 {
			g.first = r.lo
		}
		p := 0
		for _, n := range r.lens {
			g.locs = append(g.locs, loc{seg: sg.seq, off: uint32(off) + uint32(p), n: n})
			s.addLive(sg, int64(n))
			p += int(n)
		}
		g.tail = nil
		// A record this small is always whole at the end of buf; it is
		// kept unsalted.
		if last := int(r.lens[len(r.lens)-1]); last <= tailCacheMax {
			g.tail = slices.Clone(r.buf[len(r.buf)-last:])
			saltFrames([][]byte{g.tail}, sg.salt)
		}
	case kindDelete:
		s.deleteRange(g, r.lo, r.hi)
	case kindStable:
		at := loc{seg: sg.seq, off: uint32(off), n: uint32(len(r.buf))}
		val := slices.Clone(r.val)
		if val == nil {
			val = []byte{}
		}
		if i := stableAt(g, r.key); i >= 0 {
			s.unlive(g.stable[i].at)
			g.stable[i].val, g.stable[i].at = val, at
		} else {
			g.stable = append(g.stable, stableKV{key: r.key, val: val, at: at})
		}
		s.addLive(sg, int64(at.n))
	case kindDrop:
		for _, l := range g.locs {
			s.unlive(l)
		}
		for _, kv := range g.stable {
			s.unlive(kv.at)
		}
		g.first, g.locs, g.stable, g.tail = 0, nil, nil, nil
	}
}

// tailCacheMax is the largest last entry record kept in memory: the
// no-op and configuration entries of an idle group, not produced data.
const tailCacheMax = 256

// deleteRange removes lo..hi from g's published log; validate has
// already refused ranges inside it. Called with mu held.
func (s *Store) deleteRange(g *group, lo, hi uint64) {
	last := g.last()
	if len(g.locs) == 0 || hi < g.first || lo > last {
		return
	}
	lo, hi = max(lo, g.first), min(hi, last)
	for _, l := range g.locs[lo-g.first : hi-g.first+1] {
		s.unlive(l)
	}
	if hi == last {
		g.tail = nil
	}
	switch {
	case lo == g.first && hi == last:
		g.first, g.locs = 0, nil
	case lo == g.first:
		kept := g.locs[hi-g.first+1:]
		if len(kept) < int(hi-lo+1) {
			// Most of the array is now dead: copy so it can be freed.
			kept = slices.Clone(kept)
		}
		g.first, g.locs = hi+1, kept
	default:
		g.locs = g.locs[:lo-g.first]
	}
}

func (s *Store) addLive(sg *segment, n int64) {
	sg.live += n
	s.liveBytes += n
}

func (s *Store) unlive(l loc) {
	if sg := s.segmentAt(l.seg); sg != nil {
		sg.live -= int64(l.n)
	}
	s.liveBytes -= int64(l.n)
}
