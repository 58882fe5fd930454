package raft

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"
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
