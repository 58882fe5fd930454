package raft

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"syscall"
	"time"
)

// The calling side of RPC services: a pool of connections per (peer,
// service), one request in flight per connection.

// rpcState is a mux's RPC side: the caller's connection pool, the metrics
// and the ctx handlers run under. It is created on the first Handle or
// Call (Mux.rpcState); its watch goroutine (counted in Mux.wg) tears it
// down when the mux closes.
//
// Lock order: Mux.rpcMu before Mux.mu (rpc only); rpcState.mu is never
// held with either, nor while closing a connection.
type rpcState struct {
	m       *Mux
	metrics *rpcMetrics
	ctx     context.Context // handlers' base ctx, canceled when the mux closes
	cancel  context.CancelFunc

	mu     sync.Mutex
	idle   map[rpcKey][]*rpcConn // by mu
	conns  map[*rpcConn]bool     // every open outbound connection, by mu
	closed bool                  // by mu
	wg     sync.WaitGroup        // outbound connections' readers
}

type rpcKey struct{ addr, service string }

func (m *Mux) rpc() (*rpcState, error) {
	m.rpcMu.Lock()
	defer m.rpcMu.Unlock()
	if s := m.rpcState; s != nil {
		return s, nil // possibly closing: its methods check
	}
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.wg.Add(1) // for watch; before Close's Wait: Close sets closed under mu first
	}
	m.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	met, err := newRPCMetrics(m.metrics.reg)
	if err != nil {
		m.wg.Done()
		return nil, err
	}
	s := &rpcState{
		m: m, metrics: met,
		idle:  make(map[rpcKey][]*rpcConn),
		conns: make(map[*rpcConn]bool),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	m.rpcState = s
	go s.watch()
	return s, nil
}

// watch waits for the mux to close, then ends handlers' ctx and closes
// every outbound connection (idle or in a call).
func (s *rpcState) watch() {
	defer s.m.wg.Done()
	<-s.m.done
	s.cancel()
	s.mu.Lock()
	s.closed = true
	conns := make([]*rpcConn, 0, len(s.conns))
	for rc := range s.conns {
		conns = append(conns, rc)
	}
	s.mu.Unlock()
	for _, rc := range conns {
		rc.close()
	}
	s.wg.Wait()
	s.metrics.unregister()
}

func (s *rpcState) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *rpcState) call(ctx context.Context, addr, service string, req []byte) ([]byte, string, error) {
	fail := func(outcome string, err error) ([]byte, string, error) {
		return nil, outcome, fmt.Errorf("raft: rpc %s to %s: %w", service, addr, err)
	}
	stream, err := rpcStream(service)
	if err != nil {
		return nil, rpcInvalid, err
	}
	if len(req) > RPCMaxPayload {
		return fail(rpcInvalid, fmt.Errorf("request of %d bytes: %w", len(req), ErrFrameTooLarge))
	}
	timeout, err := rpcTimeout(ctx)
	if err != nil {
		return fail(ctxOutcome(err), err)
	}
	rc, fresh, err := s.get(ctx, rpcKey{addr, service}, stream)
	switch {
	case err == nil:
	case errors.Is(err, net.ErrClosed) && s.isClosed():
		return fail(rpcClosed, net.ErrClosed)
	case ctx.Err() != nil:
		return fail(ctxOutcome(ctx.Err()), fmt.Errorf("dialing: %w (%w)", ctx.Err(), err))
	default:
		return fail(rpcDialError, fmt.Errorf("dialing: %w", err))
	}

	rc.id++
	buf := make([]byte, 0, len(rc.hdr)+rpcFrameHeader+len(req))
	buf = append(buf, rc.hdr...)
	buf = appendFrameHeader(buf, 0, rc.id, timeout, len(req))
	buf = append(buf, req...)
	rc.hdr = nil

	stop := context.AfterFunc(ctx, rc.close)
	f, err := rc.roundTrip(buf)
	fired := !stop()
	if err == nil && (f.id != rc.id || f.flags&rpcFlagResponse == 0) {
		err = fmt.Errorf("%w: response id %d flags %#x to request %d", errBadFrame, f.id, f.flags, rc.id)
	}
	if err != nil {
		rc.close()
		switch {
		case fired:
			return fail(ctxOutcome(ctx.Err()), ctx.Err())
		case s.isClosed():
			return fail(rpcClosed, net.ErrClosed)
		case fresh && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
			return fail(rpcConnError, fmt.Errorf("peer closed the connection without answering "+
				"(service not registered there, or shutting down): %w", err))
		}
		return fail(rpcConnError, err)
	}
	if fired {
		rc.close() // the response won the race with ctx, but the conn is being closed
	} else {
		s.put(rc)
	}
	if f.flags&rpcFlagError != 0 {
		re := &RemoteError{Addr: addr, Service: service, Message: string(f.payload)}
		if err := ctxEnded(ctx); err != nil {
			// Most likely the handler gave up at the deadline it was sent,
			// before this side's timer fired.
			return nil, ctxOutcome(err), fmt.Errorf("%w (%w)", err, re)
		}
		return nil, rpcRemoteError, re
	}
	return f.payload, rpcOK, nil
}

// rpcTimeout is ctx's remaining time in whole milliseconds, rounded up
// (0: no deadline).
func rpcTimeout(ctx context.Context) (uint32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return 0, context.DeadlineExceeded
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return uint32(min(ms, math.MaxUint32)), nil
}

// ctxEnded is ctx.Err(), or DeadlineExceeded once the deadline has passed
// even if ctx's timer has not fired yet.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func ctxOutcome(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return rpcDeadline
	}
	return rpcCanceled
}

// get takes an idle connection for key or dials one; fresh reports a new
// connection, whose stream header goes out with its first request.
func (s *rpcState) get(ctx context.Context, key rpcKey, stream string) (rc *rpcConn, fresh bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false, net.ErrClosed
	}
	for idle := s.idle[key]; len(idle) > 0; idle = s.idle[key] {
		c := idle[len(idle)-1]
		s.idle[key] = idle[:len(idle)-1]
		if len(idle) == 1 {
			delete(s.idle, key)
		}
		select {
		case <-c.closing: // died while idle; close is removing it
		default:
			s.mu.Unlock()
			return c, false, nil
		}
	}
	s.mu.Unlock()

	d := net.Dialer{Timeout: rpcDialTimeout}
	c, err := d.DialContext(ctx, "tcp", key.addr)
	if err != nil {
		return nil, false, err
	}
	rc = &rpcConn{
		s: s, key: key, c: c, hdr: encodeHeader(stream, ""),
		resp:    make(chan rpcFrame, 1),
		dead:    make(chan struct{}),
		closing: make(chan struct{}),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return nil, false, net.ErrClosed
	}
	s.conns[rc] = true
	s.wg.Add(1)
	s.mu.Unlock()
	go rc.readLoop()
	return rc, true, nil
}

// put returns rc to the idle pool, or closes it if the pool is full.
func (s *rpcState) put(rc *rpcConn) {
	s.mu.Lock()
	select {
	case <-rc.closing:
		s.mu.Unlock()
		return
	default:
	}
	if !s.closed && len(s.idle[rc.key]) < rpcMaxIdle {
		s.idle[rc.key] = append(s.idle[rc.key], rc)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	rc.close()
}

func (s *rpcState) forget(rc *rpcConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, rc)
	idle := s.idle[rc.key]
	for i, c := range idle {
		if c == rc {
			idle = append(idle[:i], idle[i+1:]...)
			break
		}
	}
	if len(idle) == 0 {
		delete(s.idle, rc.key)
	} else {
		s.idle[rc.key] = idle
	}
}

// idleCount is the number of idle connections pooled for (addr, service).
func (s *rpcState) idleCount(addr, service string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle[rpcKey{addr, service}])
}

// rpcConn is one outbound connection. Its reader goroutine reads
// responses for the whole life of the connection, so a connection the
// peer closes while it sits idle (the peer restarted) is noticed and
// dropped from the pool instead of failing the next call.
type rpcConn struct {
	s   *rpcState
	key rpcKey
	c   net.Conn
	hdr []byte // stream header not sent yet; owner only
	id  uint32 // last request id; owner only

	resp    chan rpcFrame // capacity 1
	dead    chan struct{} // closed when the reader stops; rerr is set before
	rerr    error
	closing chan struct{} // closed by close
	once    sync.Once
}

func (rc *rpcConn) readLoop() {
	defer rc.s.wg.Done()
	defer close(rc.dead)
	br := bufio.NewReader(rc.c)
	for {
		f, err := readFrame(br, RPCMaxPayload)
		if err != nil {
			rc.rerr = err
			rc.close()
			return
		}
		select {
		case rc.resp <- f: // an unexpected one is caught by the next call's id check
		case <-rc.closing:
			rc.rerr = net.ErrClosed
			return
		}
	}
}

// roundTrip writes a request and waits for the response or for the
// connection to fail (which is also how a ctx ends the wait: its AfterFunc
// closes the connection).
func (rc *rpcConn) roundTrip(buf []byte) (rpcFrame, error) {
	if _, err := rc.c.Write(buf); err != nil {
		return rpcFrame{}, err
	}
	select {
	case f := <-rc.resp:
		return f, nil
	case <-rc.dead:
		select { // a response that came just before the peer hung up
		case f := <-rc.resp:
			return f, nil
		default:
		}
		return rpcFrame{}, rc.rerr
	}
}

func (rc *rpcConn) close() {
	rc.once.Do(func() {
		close(rc.closing)
		rc.c.Close()
		rc.s.forget(rc)
	})
}
