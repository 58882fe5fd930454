package raft

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Request/response services on the shared listener (Handle, Call): small
// control messages between brokers (hello, join, forward) that are not
// Raft traffic but use the same rpc_addr.
//
// A service is a stream like a group's: the dialer sends the ordinary
// stream header (mux.go) naming rpcStreamPrefix+service, and the mux hands
// the connection to the service. Group names never collide with a service
// silently: both register in the mux's one name table, so whichever comes
// second fails.
//
// After the header, each direction is a sequence of frames, all with this
// header (big-endian):
//
//	 0         1         2                   6                   10                  14
//	+---------+---------+---------+---------+---------+---------+---------+---------+---------
//	| version |  flags  |     request id    |     timeout ms    |   payload length  | payload
//	|   = 1   |         |      uint32       |      uint32       |  uint32, ≤ 16 MiB | …
//	+---------+---------+---------+---------+---------+---------+---------+---------+---------
//
//	flags     bit 0 (0x01) response, bit 1 (0x02) error; other bits must be 0.
//	          A request has flags 0. A response has 0x01, and 0x03 when the
//	          handler failed: its payload is then the error's text (UTF-8).
//	request   chosen by the caller, echoed by the response; one request is
//	id        in flight per connection, so it only catches a stale or
//	          misdirected response.
//	timeout   request only: the caller's remaining ctx time in ms (0: none);
//	ms        the handler's ctx gets that deadline. 0 in responses.
//
// A connection carries one request at a time: the caller writes a request,
// the service runs the handler and writes the response, and the
// connection then goes back to the caller's pool. The payload length is
// checked against RPCMaxPayload before anything is allocated. A frame with
// another version, unknown flags, a length over the limit, a request
// flagged as response (or the reverse) or a wrong request id closes that
// connection only; nothing is answered. A new frame format is a new
// version byte, which an old node closes.
const (
	rpcStreamPrefix = "_rpc."
	rpcFrameVersion = 1
	rpcFrameHeader  = 14

	rpcFlagResponse = 0x01
	rpcFlagError    = 0x02

	// RPCMaxPayload is the largest request or response payload.
	RPCMaxPayload = 16 << 20

	rpcMaxIdle     = 2               // idle connections kept per (addr, service)
	rpcDialTimeout = 5 * time.Second // MuxConfig has no dial timeout; ctx may shorten it
	rpcWriteInline = 64 << 10        // responses up to this size go out in one write
)

// Call outcomes, the values of the calls metric's outcome label.
const (
	rpcOK          = "ok"
	rpcRemoteError = "remote_error" // the handler returned an error
	rpcDialError   = "dial_error"   // no connection: the request was not sent
	rpcConnError   = "conn_error"   // the connection failed or broke the protocol mid-call
	rpcDeadline    = "deadline"     // ctx deadline
	rpcCanceled    = "canceled"     // ctx canceled
	rpcClosed      = "closed"       // this mux is closed
	rpcInvalid     = "invalid"      // bad service name or request too large; nothing sent
)

// Handled outcomes on the serving side.
const (
	rpcHandledOK       = "ok"
	rpcHandledError    = "error"
	rpcHandledBadFrame = "bad_frame"
)

// Handler serves one request of a service. from is the caller's TCP
// address (an ephemeral port: for logs, not identity). ctx ends when the
// mux closes and, if the caller's ctx had a deadline, at that deadline; it
// does not end when the caller gives up otherwise, and Mux.Close waits for
// handlers, so they must return once ctx is done. A returned error reaches
// the caller as a *RemoteError carrying err.Error(); the response is then
// ignored. req is the handler's to keep.
type Handler func(ctx context.Context, from string, req []byte) ([]byte, error)

// RemoteError is a handler's error as the caller gets it: the request
// reached the peer and its handler ran and failed. Only the text crosses
// the wire; Message is err.Error() on the peer, unchanged.
type RemoteError struct {
	Addr    string // the peer called
	Service string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("raft: rpc %s at %s: %s", e.Service, e.Addr, e.Message)
}

// ErrFrameTooLarge: a request or response payload over RPCMaxPayload. A
// request that large is refused by Call before anything is sent; a
// response that large comes back as a *RemoteError saying so.
var ErrFrameTooLarge = errors.New("raft: rpc payload exceeds RPCMaxPayload")

// errBadFrame marks protocol violations (as opposed to I/O errors).
var errBadFrame = errors.New("raft: malformed rpc frame")

// Handle registers service on this mux: connections whose header names it
// are served by h, one request at a time per connection. Service names
// follow the group name rules ([A-Za-z0-9._-]) and may be registered once
// per mux; they live until the mux closes.
func (m *Mux) Handle(service string, h Handler) error {
	if h == nil {
		return errors.New("raft: rpc Handle with a nil handler")
	}
	stream, err := rpcStream(service)
	if err != nil {
		return err
	}
	s, err := m.rpc()
	if err != nil {
		return err
	}
	l, err := m.newLayer(stream)
	if err != nil {
		return fmt.Errorf("raft: rpc service %q: %w", service, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		l.Close()
		return net.ErrClosed
	}
	m.wg.Add(1) // before Close's Wait: Close sets closed under mu first
	m.mu.Unlock()
	svc := &rpcService{s: s, name: service, h: h}
	go svc.serve(l)
	return nil
}

// Call sends req to service on the mux at addr and returns the handler's
// response. It reuses an idle connection to (addr, service) or dials one
// (bounded by ctx and a 5 s dial timeout) and never retries. The error is
//
//   - a *RemoteError: the handler ran and returned an error;
//   - one wrapping ctx.Err(): ctx ended first (the connection is closed;
//     the handler may still run to completion on the peer). If the
//     handler's error arrived after ctx ended (it gave up at the same
//     deadline), the error wraps that *RemoteError as well;
//   - one wrapping net.ErrClosed: this mux is closed;
//   - one wrapping ErrFrameTooLarge: req is over RPCMaxPayload, not sent;
//   - otherwise a transport failure wrapping the underlying error
//     (*net.OpError, io.EOF, …): the peer is unreachable, closed the
//     connection (it is shutting down, or does not handle service), or
//     broke the protocol. If the connection broke after the request was
//     written the handler may have run: commands sent this way must be
//     safe to repeat if the caller retries.
//
// Without a ctx deadline a call to a peer that stops answering waits until
// the peer's connection drops; pass one.
func (m *Mux) Call(ctx context.Context, addr, service string, req []byte) ([]byte, error) {
	s, err := m.rpc()
	if err != nil {
		return nil, fmt.Errorf("raft: rpc %s to %s: %w", service, addr, err)
	}
	start := time.Now()
	resp, outcome, err := s.call(ctx, addr, service, req)
	s.metrics.calls.WithLabelValues(service, outcome).Inc()
	if outcome == rpcOK || outcome == rpcRemoteError {
		s.metrics.latency.WithLabelValues(service).Observe(time.Since(start).Seconds())
	}
	return resp, err
}

func rpcStream(service string) (string, error) {
	if service == "" {
		return "", errors.New("raft: empty rpc service name")
	}
	stream := rpcStreamPrefix + service
	if err := validGroupName(stream); err != nil {
		return "", fmt.Errorf("raft: invalid rpc service name %q", service)
	}
	return stream, nil
}

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
		s: s, key: key, c: c, hdr: encodeHeader(stream),
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

// rpcService serves one registered service.
type rpcService struct {
	s    *rpcState
	name string
	h    Handler
	wg   sync.WaitGroup // connection goroutines
}

// serve accepts the service's connections until the mux closes its layer
// (which also closes every connection it handed over).
func (svc *rpcService) serve(l *layer) {
	defer svc.s.m.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		svc.wg.Add(1)
		go svc.serveConn(c)
	}
	svc.wg.Wait()
}

func (svc *rpcService) serveConn(c net.Conn) {
	defer svc.wg.Done()
	defer c.Close()
	from := c.RemoteAddr().String()
	br := bufio.NewReader(c)
	var out []byte
	for {
		f, err := readFrame(br, RPCMaxPayload)
		if err == nil && f.flags != 0 {
			err = fmt.Errorf("%w: request with flags %#x", errBadFrame, f.flags)
		}
		if err != nil {
			if errors.Is(err, errBadFrame) {
				svc.s.metrics.handled.WithLabelValues(svc.name, rpcHandledBadFrame).Inc()
				svc.s.m.log.Debug("raft rpc closing connection", "service", svc.name, "remote", from, "err", err)
			}
			return
		}
		resp, herr := svc.run(f, from)
		if herr == nil && len(resp) > RPCMaxPayload {
			herr = fmt.Errorf("response of %d bytes: %w", len(resp), ErrFrameTooLarge)
		}
		flags := byte(rpcFlagResponse)
		outcome := rpcHandledOK
		if herr != nil {
			flags |= rpcFlagError
			outcome = rpcHandledError
			resp = []byte(herr.Error())
			if len(resp) > RPCMaxPayload {
				resp = resp[:RPCMaxPayload]
			}
		}
		svc.s.metrics.handled.WithLabelValues(svc.name, outcome).Inc()
		out = appendFrameHeader(out[:0], flags, f.id, 0, len(resp))
		if len(resp) <= rpcWriteInline {
			out = append(out, resp...)
			_, err = c.Write(out)
		} else if _, err = c.Write(out); err == nil {
			_, err = c.Write(resp)
		}
		if err != nil {
			return
		}
	}
}

// run calls the handler under the mux's ctx and the caller's deadline; a
// panic becomes the caller's error rather than the broker's crash.
func (svc *rpcService) run(f rpcFrame, from string) (resp []byte, err error) {
	ctx := svc.s.ctx
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(f.timeout)*time.Millisecond)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			svc.s.m.log.Error("raft rpc handler panicked", "service", svc.name, "remote", from,
				"panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("rpc handler panicked: %v", r)
		}
	}()
	return svc.h(ctx, from, f.payload)
}

type rpcFrame struct {
	flags   byte
	id      uint32
	timeout uint32 // ms
	payload []byte
}

func appendFrameHeader(dst []byte, flags byte, id, timeout uint32, n int) []byte {
	dst = append(dst, rpcFrameVersion, flags)
	dst = binary.BigEndian.AppendUint32(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, timeout)
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// readFrame reads one frame, checking its header before allocating the
// payload. io.EOF means the peer closed between frames; errBadFrame
// wraps protocol violations.
func readFrame(r io.Reader, limit int) (rpcFrame, error) {
	var h [rpcFrameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return rpcFrame{}, err
	}
	if h[0] != rpcFrameVersion {
		return rpcFrame{}, fmt.Errorf("%w: version %d", errBadFrame, h[0])
	}
	f := rpcFrame{
		flags:   h[1],
		id:      binary.BigEndian.Uint32(h[2:]),
		timeout: binary.BigEndian.Uint32(h[6:]),
	}
	if f.flags&^(rpcFlagResponse|rpcFlagError) != 0 || f.flags == rpcFlagError {
		return rpcFrame{}, fmt.Errorf("%w: flags %#x", errBadFrame, f.flags)
	}
	n := binary.BigEndian.Uint32(h[10:])
	if uint64(n) > uint64(limit) {
		return rpcFrame{}, fmt.Errorf("%w: payload of %d bytes: %w", errBadFrame, n, ErrFrameTooLarge)
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return rpcFrame{}, err
	}
	return f, nil
}

// rpcMetrics are the RPC collectors, registered on the mux's registerer
// on first use. Services are a fixed set in code, so the service label is
// bounded.
type rpcMetrics struct {
	reg     prometheus.Registerer
	calls   *prometheus.CounterVec   // service, outcome
	latency *prometheus.HistogramVec // service
	handled *prometheus.CounterVec   // service, outcome
}

func newRPCMetrics(reg prometheus.Registerer) (*rpcMetrics, error) {
	met := &rpcMetrics{
		reg: reg,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_raft_rpc_calls_total",
			Help: "RPCs this node made, by service and outcome (ok, remote_error, dial_error, conn_error, deadline, canceled, closed, invalid).",
		}, []string{"service", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_raft_rpc_call_duration_seconds",
			Help:    "Duration of this node's RPCs that got an answer (ok or remote_error), by service, dial included.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 15), // 0.25 ms … 4 s
		}, []string{"service"}),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_raft_rpc_handled_total",
			Help: "RPC requests this node served, by service and outcome (ok, error, bad_frame).",
		}, []string{"service", "outcome"}),
	}
	if reg == nil {
		return met, nil
	}
	cs := []prometheus.Collector{met.calls, met.latency, met.handled}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, errors.Join(errors.New("raft: registering rpc metrics"), err)
		}
	}
	return met, nil
}

func (met *rpcMetrics) unregister() {
	if met.reg == nil {
		return
	}
	met.reg.Unregister(met.calls)
	met.reg.Unregister(met.latency)
	met.reg.Unregister(met.handled)
}
