package raft

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Connections of the shared transport. A tconn is the part both
// directions share: the socket and a writer goroutine that sends whatever
// frames are queued in one writev. A clientConn (dialed, carries
// requests) adds the calls in flight; a serverConn (accepted) reads
// requests and queues responses.
//
// Frames are urgent or lazy. An urgent frame wakes the writer at once. A
// lazy one (an AppendEntries without entries, which only carries the
// commit index, and the answer to one) may wait up to its group's delay
// (TransportOptions.Delay) for company: an idle leader sends each
// follower one every CommitTimeout,
// and a thousand groups' worth of them, and of their answers, then share
// one writev and one wakeup of the reader at the other end instead of
// costing a syscall and two wakeups each. The queue keeps its order and
// an urgent frame takes everything queued before it along, so lazy
// frames never pass, nor hold up, anything.

const (
	laneControl = iota // heartbeat batches, votes, pre-votes, TimeoutNow
	laneData           // AppendEntries with entries or a commit index
	laneCount
)

type tconn struct {
	h       *transportHub
	c       net.Conn
	w       io.Writer // c, or the net.Conn it wraps: see writerOf
	inbound bool

	wmu    sync.Mutex
	wq     net.Buffers // frames waiting for the writer, by wmu
	wn     int         // their bytes, by wmu
	wf     int         // their frame count, by wmu
	urgent bool        // wq holds an urgent frame and wake was sent, by wmu
	lazyAt time.Time   // when lazyT fires for the lazy frames in wq (zero: not armed), by wmu
	lazyT  *time.Timer // flushes lazy frames by the earliest one's deadline
	wake   chan struct{}
	closed chan struct{} // closed by close

	once   sync.Once
	err    error       // why it closed; set before closed is closed
	onDone func(error) // called once by close (client: fail calls)
}

func (h *transportHub) newTconn(c net.Conn, inbound bool) (*tconn, bool) {
	t := &tconn{h: h, c: c, w: writerOf(c), inbound: inbound, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	t.lazyT = time.NewTimer(time.Hour)
	t.lazyT.Stop()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, false
	}
	h.conns[t] = true
	h.wg.Add(2) // reader and writer
	h.mu.Unlock()
	if inbound {
		h.st.inbound.Add(1)
	} else {
		h.st.outbound.Add(1)
	}
	go t.writeLoop()
	return t, true
}

// writerOf is what the writer hands its batches to: the connection under
// c's wrappers when they expose it (the mux's trackedConn does, a test's
// fault-injecting wrapper does not), so that net.Buffers.WriteTo writes a
// batch with one writev instead of one write per buffer.
func writerOf(c net.Conn) io.Writer {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = u.NetConn()
	}
}

// enqueue queues one urgent frame; false if the connection is closed.
func (t *tconn) enqueue(frame net.Buffers, n int) bool { return t.queue(frame, n, 0) }

// queue queues a frame that may wait up to wait for company (0: urgent);
// false if the connection is closed.
func (t *tconn) queue(frame net.Buffers, n int, wait time.Duration) bool {
	t.wmu.Lock()
	select {
	case <-t.closed:
		t.wmu.Unlock()
		return false
	default:
	}
	t.wq = append(t.wq, frame...)
	t.wn += n
	t.wf++
	kick := false
	switch {
	case wait <= 0:
		// Once urgent is set the writer has been woken and has yet to
		// take the queue: it takes this frame too.
		kick = !t.urgent
		t.urgent = true
	case !t.urgent:
		// A timer rather than a wakeup: the writer sleeps until the
		// earliest deadline of the lazy frames queued.
		if at := time.Now().Add(wait); t.lazyAt.IsZero() || at.Before(t.lazyAt) {
			t.lazyAt = at
			t.lazyT.Reset(wait)
		}
	}
	t.wmu.Unlock()
	if kick {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	return true
}

func (t *tconn) writeLoop() {
	defer t.h.wg.Done()
	defer t.lazyT.Stop()
	var q net.Buffers
	for {
		fired := false
		select {
		case <-t.wake:
		case <-t.lazyT.C:
			fired = true
		case <-t.closed:
			return
		}
		t.wmu.Lock()
		if !fired && !t.urgent && !t.lazyAt.IsZero() {
			// A wakeup left over from frames already written: the lazy
			// frames since have their timer.
			t.wmu.Unlock()
			continue
		}
		q, t.wq = t.wq, q[:0]
		n, f := t.wn, t.wf
		t.wn, t.wf = 0, 0
		t.urgent = false
		if !t.lazyAt.IsZero() {
			t.lazyAt = time.Time{}
			t.lazyT.Stop()
		}
		t.wmu.Unlock()
		if len(q) == 0 {
			continue
		}
		t.c.SetWriteDeadline(time.Now().Add(tpWriteTimeout))
		w := q // WriteTo consumes its receiver
		if _, err := w.WriteTo(t.w); err != nil {
			t.close(fmt.Errorf("raft transport: writing to %s: %w", t.c.RemoteAddr(), err))
			return
		}
		t.h.st.framesSent.Add(uint64(f))
		t.h.st.bytesSent.Add(uint64(n))
		t.h.st.writes.Add(1)
		clear(q) // drop references to entries' data
		q = q[:0]
	}
}

func (t *tconn) close(err error) {
	t.once.Do(func() {
		t.err = err
		t.wmu.Lock()
		close(t.closed)
		t.wq = nil
		t.wmu.Unlock()
		t.c.Close()
		t.h.mu.Lock()
		delete(t.h.conns, t)
		t.h.mu.Unlock()
		if t.inbound {
			t.h.st.inbound.Add(-1)
		} else {
			t.h.st.outbound.Add(-1)
		}
		if t.onDone != nil {
			t.onDone(err)
		}
	})
}

// pendingCall is a request in flight on a client connection. complete
// runs once, on the connection's reader (body is the response body) or
// when the connection fails (err set); it must not block.
type pendingCall interface {
	reqType() byte
	complete(kind byte, body []byte, err error)
}

// clientConn is a dialed connection carrying this node's requests.
type clientConn struct {
	*tconn
	p        *peer
	lane     int
	lastRecv atomic.Int64 // unix ns of the last frame received
	lastUse  atomic.Int64 // unix ns of the last request sent
	gotFrame atomic.Bool
	notices  atomic.Bool // the peer announced it takes commit notices (transport_commit.go)

	next atomic.Uint32 // last request id

	mu      sync.Mutex
	pending map[uint32]pendingCall // by mu; nil once closed
}

func (cc *clientConn) newID() uint32 { return cc.next.Add(1) }

// send registers c under id (from newID) and queues its frame, urgent or
// allowed to wait (see tconn.queue).
func (cc *clientConn) send(c pendingCall, id uint32, frame net.Buffers, n int, wait time.Duration) error {
	cc.mu.Lock()
	if cc.pending == nil {
		cc.mu.Unlock()
		return fmt.Errorf("%w: %w", errTpConnClosed, cc.err)
	}
	cc.pending[id] = c
	cc.mu.Unlock()
	setTpID(frame, id)
	cc.lastUse.Store(time.Now().UnixNano())
	if !cc.queue(frame, n, wait) {
		cc.mu.Lock()
		delete(cc.pending, id)
		cc.mu.Unlock()
		return fmt.Errorf("%w: %w", errTpConnClosed, cc.err)
	}
	return nil
}

// forget drops a call its caller gave up on. If nothing at all arrived on
// the connection since the call started, the connection is taken for
// dead (a half-open socket, a partition) and closed, so the next call
// redials instead of waiting behind it.
func (cc *clientConn) forget(id uint32, started time.Time) {
	cc.mu.Lock()
	delete(cc.pending, id)
	cc.mu.Unlock()
	if !started.IsZero() && cc.lastRecv.Load() < started.UnixNano() {
		cc.close(fmt.Errorf("nothing received from %s for %v", cc.p.key, time.Since(started).Round(time.Millisecond)))
	}
}

func (cc *clientConn) readLoop() {
	defer cc.h.wg.Done()
	br := bufio.NewReaderSize(cc.c, 32<<10)
	for {
		fh, err := readTpHeader(br, true)
		var body []byte
		if err == nil {
			body, err = readTpBody(br, fh.n)
		}
		if err != nil {
			if errors.Is(err, errBadTpFrame) {
				cc.h.st.badFrames.Add(1)
				cc.h.countError(tpErrBadFrame)
				cc.h.log.Warn("raft transport closing connection", "peer", cc.p.key, "err", err)
			}
			cc.close(err)
			return
		}
		cc.h.st.framesRecv.Add(1)
		cc.h.st.bytesRecv.Add(uint64(tpFrameHeader + fh.n))
		cc.lastRecv.Store(time.Now().UnixNano())
		cc.gotFrame.Store(true)
		cc.mu.Lock()
		c := cc.pending[fh.id]
		delete(cc.pending, fh.id)
		cc.mu.Unlock()
		if c == nil {
			continue // its caller gave up
		}
		if c.reqType() != fh.kind&tpTypeMask {
			err := fmt.Errorf("%w: %s answer to a %s request", errBadTpFrame, tpTypeName(fh.kind&tpTypeMask), tpTypeName(c.reqType()))
			c.complete(0, nil, err)
			cc.h.st.badFrames.Add(1)
			cc.close(err)
			return
		}
		c.complete(fh.kind, body, nil)
	}
}

// failAll fails every call in flight once the connection is closed.
func (cc *clientConn) failAll(err error) {
	cc.mu.Lock()
	pending := cc.pending
	cc.pending = nil
	cc.mu.Unlock()
	if len(pending) > 0 {
		err = fmt.Errorf("%w to %s: %w", errTpConnClosed, cc.p.key, err)
		for _, c := range pending {
			c.complete(0, nil, err)
		}
	}
	cc.p.dropConn(cc)
}

// peer is everything the transport holds for one member address.
type peer struct {
	h        *transportHub
	key      string // member address, "addr#identity"
	addr     string
	identity string

	mu    sync.Mutex
	lanes [laneCount]lane // by mu
	hbQ   []*hbCall       // heartbeats waiting for their batch, by mu
	hbAt  time.Time       // when hbT flushes them (zero: not armed), by mu
	hbT   *time.Timer     // runs flushHeartbeats; made on first use, by mu
}

type lane struct {
	cc      *clientConn
	dialing chan struct{} // closed when the dial in progress ends
	err     error         // last dial's failure, returned until retryAt
	errAt   time.Time     // when err happened
	retryAt time.Time
	backoff time.Duration
}

func (h *transportHub) peer(key string) (*peer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("raft transport: %w", net.ErrClosed)
	}
	if p := h.peers[key]; p != nil {
		return p, nil
	}
	addr, identity := SplitMemberAddr(key)
	if addr == "" {
		return nil, fmt.Errorf("raft transport: empty address in %q", key)
	}
	p := &peer{h: h, key: key, addr: addr, identity: identity}
	h.peers[key] = p
	return p, nil
}

// conn returns the lane's connection, dialing it if needed; only one dial
// per lane runs at a time, and a failed one is remembered for a backoff.
func (p *peer) conn(ln int, deadline time.Time) (*clientConn, error) {
	for {
		p.mu.Lock()
		l := &p.lanes[ln]
		if l.cc != nil {
			cc := l.cc
			p.mu.Unlock()
			return cc, nil
		}
		if ch := l.dialing; ch != nil {
			p.mu.Unlock()
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-ch:
				t.Stop()
				continue
			case <-t.C:
				p.h.countError(tpErrTimeout)
				return nil, fmt.Errorf("raft transport: dialing %s: %w", p.key, errTpTimeout)
			case <-p.h.done:
				t.Stop()
				return nil, fmt.Errorf("raft transport: %w", net.ErrClosed)
			}
		}
		if time.Now().Before(l.retryAt) {
			err := l.err
			p.mu.Unlock()
			p.h.countError(tpErrDial)
			return nil, err
		}
		ch := make(chan struct{})
		l.dialing = ch
		p.mu.Unlock()

		cc, err := p.dial(ln, min(tpDialTimeout, time.Until(deadline)))

		p.mu.Lock()
		l.dialing = nil
		if err != nil {
			l.backoff = min(max(2*l.backoff, tpDialBackoffMin), tpDialBackoffMax)
			now := time.Now()
			l.err, l.errAt, l.retryAt = err, now, now.Add(l.backoff)
		} else {
			l.cc, l.err = cc, nil
		}
		p.mu.Unlock()
		close(ch)
		if err != nil {
			p.h.countError(tpErrDial)
			return nil, err
		}
		return cc, nil
	}
}

// dialRaw connects to the peer's mux and sends the stream header.
func (p *peer) dialRaw(timeout time.Duration) (net.Conn, error) {
	h := p.h
	h.st.dials.Add(1)
	if timeout <= 0 {
		timeout = time.Millisecond
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", p.addr)
	if err == nil {
		c.SetWriteDeadline(time.Now().Add(timeout))
		if _, err = c.Write(encodeHeader(transportStream, p.identity)); err != nil {
			c.Close()
		} else {
			c.SetWriteDeadline(time.Time{})
		}
	}
	if err != nil {
		h.st.dialFailures.Add(1)
		return nil, fmt.Errorf("raft transport: dialing %s: %w", p.key, err)
	}
	if h.wrap != nil {
		c = h.wrap(c)
	}
	return c, nil
}

func (p *peer) dial(ln int, timeout time.Duration) (*clientConn, error) {
	c, err := p.dialRaw(timeout)
	if err != nil {
		return nil, err
	}
	t, ok := p.h.newTconn(c, false)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("raft transport: %w", net.ErrClosed)
	}
	cc := &clientConn{tconn: t, p: p, lane: ln, pending: make(map[uint32]pendingCall)}
	now := time.Now().UnixNano()
	cc.lastRecv.Store(now)
	cc.lastUse.Store(now)
	t.onDone = cc.failAll
	go cc.readLoop()
	return cc, nil
}

// dropConn forgets a closed connection. One that closed before any frame
// arrived (the peer refused the stream: wrong identity, transport not
// running there) counts as a failed dial, so callers back off instead of
// redialing in a loop.
func (p *peer) dropConn(cc *clientConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := &p.lanes[cc.lane]
	if l.cc != cc {
		return
	}
	l.cc = nil
	if !cc.gotFrame.Load() {
		l.backoff = min(max(2*l.backoff, tpDialBackoffMin), tpDialBackoffMax)
		l.err = fmt.Errorf("raft transport: %s closed the connection without answering "+
			"(wrong member identity, or not running the transport): %w", p.key, cc.err)
		l.retryAt = time.Now().Add(l.backoff)
	} else {
		l.backoff = 0
	}
}

// reaper closes client connections idle for tpIdleConn and forgets peers
// with nothing left, so members that left every group cost nothing.
func (h *transportHub) reaper() {
	defer h.wg.Done()
	t := time.NewTicker(tpIdleConn / 4)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-tpIdleConn).UnixNano()
		h.mu.Lock()
		var idle []*clientConn
		for key, p := range h.peers {
			p.mu.Lock()
			live := len(p.hbQ) > 0
			for i := range p.lanes {
				l := &p.lanes[i]
				if l.dialing != nil {
					live = true
				}
				if cc := l.cc; cc != nil {
					cc.mu.Lock()
					busy := len(cc.pending) > 0
					cc.mu.Unlock()
					if busy || cc.lastUse.Load() > cutoff {
						live = true
					} else {
						idle = append(idle, cc)
					}
				}
			}
			p.mu.Unlock()
			if !live {
				delete(h.peers, key)
			}
		}
		h.mu.Unlock()
		for _, cc := range idle {
			cc.close(errors.New("idle"))
		}
	}
}

// sendSnapshot streams one InstallSnapshot on a connection of its own,
// written and read by this call alone.
func (h *transportHub) sendSnapshot(gt *groupTransport, target string, timeout time.Duration,
	args *hraft.InstallSnapshotRequest, resp *hraft.InstallSnapshotResponse, data io.Reader) error {
	frame, n, err := encodeSnapshotReq(gt.name, args).frame()
	if err != nil {
		return err
	}
	p, err := h.peer(target)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	c, err := p.dialRaw(min(tpDialTimeout, timeout))
	if err != nil {
		h.countError(tpErrDial)
		return err
	}
	h.st.outbound.Add(1)
	defer h.st.outbound.Add(-1)
	// Closing the group or the transport ends the transfer.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-gt.closed:
		case <-h.done:
		case <-stop:
		}
		c.Close()
	}()
	defer wg.Wait()
	defer close(stop)
	c.SetDeadline(deadline)

	fail := func(err error) error {
		if serr := gt.shutdownErr(); serr != nil {
			return serr
		}
		return fmt.Errorf("raft transport: InstallSnapshot to %s: %w", target, err)
	}
	setTpID(frame, 1)
	bw := bufio.NewWriterSize(c, 64<<10)
	if _, err := frame.WriteTo(bw); err != nil {
		return fail(err)
	}
	sent, err := io.Copy(bw, data)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fail(err)
	}
	if sent != args.Size {
		return fmt.Errorf("raft transport: snapshot for %s is %d bytes, not %d", target, sent, args.Size)
	}
	h.st.framesSent.Add(1)
	h.st.bytesSent.Add(uint64(n) + uint64(sent))
	br := bufio.NewReader(c)
	fh, err := readTpHeader(br, true)
	var body []byte
	if err == nil && (fh.kind&tpTypeMask != tpSnapshot || fh.id != 1) {
		err = fmt.Errorf("%w: %s answer %d to InstallSnapshot", errBadTpFrame, tpTypeName(fh.kind&tpTypeMask), fh.id)
	}
	if err == nil {
		body, err = readTpBody(br, fh.n)
	}
	if err != nil {
		return fail(err)
	}
	h.st.framesRecv.Add(1)
	h.st.bytesRecv.Add(uint64(tpFrameHeader + fh.n))
	if fh.kind&tpError != 0 {
		return newRemoteError(string(body))
	}
	return decodeResponse(tpSnapshot, body, resp)
}
