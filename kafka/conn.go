package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/broker/memory"
)

// idleTimeout is Kafka's connections.max.idle.ms: a connection that sends
// nothing for this long, or trickles a frame slower than this, is closed
// (up to deadlineSlack later).
const idleTimeout = 10 * time.Minute

// deadlineSlack is how much later than idleTimeout a connection's read or
// write deadline may fall. Moving a deadline updates a runtime timer under
// the poller's lock; renewed only once it is less than idleTimeout ahead,
// a busy connection pays that about once per slack, not once per request.
const deadlineSlack = time.Second

// deadline is one direction's deadline of a connection, kept at least
// idleTimeout ahead of every read or write that renews it first. Each is
// owned by the goroutine that reads (or writes) the connection.
type deadline struct{ at time.Time }

// renew returns the deadline to set, idleTimeout + deadlineSlack after
// now, and true; or false when the one set is at least idleTimeout after
// now already.
func (d *deadline) renew(now time.Time) (time.Time, bool) {
	if d.at.Sub(now) >= idleTimeout {
		return time.Time{}, false
	}
	d.at = now.Add(idleTimeout + deadlineSlack)
	return d.at, true
}

// readBufferBytes is a connection's socket read buffer: room for a few
// small pipelined requests. Bytes in it are read before the request pool
// is asked for them, so the pool may be exceeded by this much per
// connection.
const readBufferBytes = 4 << 10

// minHeaderSize is api key, api version and correlation id.
const minHeaderSize = 8

// clientConn is one client connection: a reader goroutine frames
// requests, the serve goroutine answers them in order.
type clientConn struct {
	s        *Server
	listener *Listener
	// raw is the accepted connection; nc is the one requests are read
	// from and answered on: raw, or TLS over it once startTLS is done.
	raw    net.Conn
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	frames chan queuedFrame // each holds its size in the request pool until handled
	logger *slog.Logger

	closeOnce sync.Once
	clientID  string // of the request being handled
	out       []byte // response buffer, reused between requests
	fetch     fetchScratch
	fetchEnc  fetchEncoder
	fetchReq  *kmsg.FetchRequest
	fetchResp fetchResponse
	sasl      saslConn
	// tlsPrincipal is "User:" and the verified client certificate's
	// subject (RFC 2253, as Kafka prints it), on a TLS listener.
	tlsPrincipal string
	// closeAfterResponse closes the connection once the current
	// response is written (a failed authentication).
	closeAfterResponse bool
	// writeDeadline is the connection's write deadline, renewed before
	// each response (by the goroutine that writes them).
	writeDeadline deadline
	// writing is the pieces of the fetch response being written: a
	// field, so that writev's consumption of them needs no allocation.
	writing net.Buffers
	// tlsWriter gathers a fetch response's pieces on a TLS connection.
	tlsWriter *bufio.Writer
	// pending are the produce requests started and not answered yet,
	// oldest first (pipeline.go).
	pending []pendingResponse
	// quotas are the connection's resolved client quotas and its mute
	// (quota.go); reqQuotas is them for the request being handled, nil
	// while no quota is configured.
	quotas    connQuotas
	reqQuotas *connQuotas
	// fetchWait is how long the last fetch spent in the broker's Fetch
	// (reading and long polling), which request_percentage does not
	// count.
	fetchWait time.Duration
}

// newClientConn is a connection of the listener Options describes.
func newClientConn(s *Server, nc net.Conn) *clientConn {
	return newListenerConn(s, nc, s.optionsListener)
}

func newListenerConn(s *Server, nc net.Conn, l *Listener) *clientConn {
	ctx, cancel := context.WithCancel(context.Background())
	return &clientConn{
		s: s, listener: l, raw: nc, nc: nc, ctx: ctx, cancel: cancel,
		// In flight: the frame being handled, those queued, and the one
		// the reader holds until there is room. Pipelining clients keep
		// several requests in flight, and reading them ahead overlaps
		// socket reads with handling.
		frames: make(chan queuedFrame, s.opts.ConnectionMaxInflightRequests-2),
		logger: s.logger.With("remote", nc.RemoteAddr().String(), "listener", l.Name),
	}
}

// close may run on any goroutine (Server.Close), so it closes raw, which
// never changes; closing it ends TLS too, without a close_notify that
// could wait on a stalled writer.
func (c *clientConn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.raw.Close()
	})
}

func (c *clientConn) serve() {
	defer c.close()
	if c.listener.TLS != nil {
		if err := c.startTLS(); err != nil {
			// Port scanners, plaintext clients and clients that do not
			// trust the certificate all end here: one line each.
			if c.ctx.Err() == nil {
				c.logger.Info("closing connection: TLS handshake failed", "err", err)
			}
			return
		}
	}
	go c.readLoop()
	// Frames left unhandled when the connection ends give their bytes
	// back too; closing first ends the reader, which closes frames.
	defer func() {
		c.close()
		for rf := range c.frames {
			c.s.pool.Release(int64(rf.size))
			rf.split.release(c.s.records)
		}
		// So do produce requests left unanswered (a failed write).
		for _, pr := range c.pending {
			c.s.pool.Release(pr.charge)
		}
		// A fetch whose response was never written (a handler that
		// failed) gives its bytes back to the fetch budget too.
		for i := range c.fetch.results {
			c.fetch.results[i].Release()
		}
	}()
	for {
		// While produce requests are pending, the oldest is answered as
		// soon as it completes, and the next frames are read meanwhile
		// unless the pipeline is full.
		frames := c.frames
		if c.pipelineFull() {
			frames = nil
		}
		// A connection throttled for its quotas handles no request
		// until its throttle time has passed (KIP-219).
		unmuted, muted := c.muted()
		var closed <-chan struct{}
		if muted {
			frames, closed = nil, c.ctx.Done()
		}
		var oldest <-chan struct{}
		if len(c.pending) > 0 {
			oldest = c.pending[0].done
		}
		var rf queuedFrame
		var ok bool
		select {
		case <-unmuted:
			continue
		case <-closed:
			c.closing(c.answerPending())
			return
		case <-oldest:
			if err := c.answerOldest(); err != nil {
				c.closing(err)
				return
			}
			continue
		case rf, ok = <-frames:
		}
		if !ok {
			// The reader stopped: the requests it read are answered
			// first, as in Kafka.
			c.closing(c.answerPending())
			return
		}
		err := c.handleFrame(rf.b, rf.size, int64(rf.size), rf.split)
		if recyclableFrame(rf.b) {
			c.s.frames.put(rf.b)
		}
		if err != nil {
			c.closing(errors.Join(c.answerPending(), err))
			return
		}
	}
}

// closing logs why the connection closes: protocol violations close it,
// as in Kafka, and the client usually will not say why. A connection
// closed under the handler (shutdown, the client left) needs no word.
func (c *clientConn) closing(err error) {
	if err != nil && c.ctx.Err() == nil {
		c.logger.Info("closing connection", "err", err)
	}
}

// readLoop reads size-prefixed frames. A size outside [8, max] closes the
// connection before anything is allocated for it: that is how a TLS hello
// or an HTTP request sent to the Kafka port ends.
func (c *clientConn) readLoop() {
	defer close(c.frames)
	// Buffered, so that a small request (a fetch, a heartbeat) and its
	// size prefix cost one read from the socket, not two; large frames
	// are read straight into their own buffer.
	r := bufio.NewReaderSize(c.nc, readBufferBytes)
	var size [4]byte
	var readDeadline deadline
	for {
		if t, ok := readDeadline.renew(time.Now()); ok {
			c.nc.SetReadDeadline(t)
		}
		if _, err := io.ReadFull(r, size[:]); err != nil {
			// The client closed (or went idle): end what its requests
			// still wait on — a fetch long poll would otherwise hold the
			// socket and its goroutines for the client's max_wait_ms —
			// as Kafka closes a channel at end of stream.
			c.close()
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < minHeaderSize || n > c.s.opts.MaxRequestBytes {
			// Returning, not closing: the requests read before this
			// one are answered first, as in Kafka, then serve closes.
			c.logger.Warn("closing connection: request size out of bounds", "size", n, "max", c.s.opts.MaxRequestBytes)
			return
		}
		// Reserve the request's bytes before allocating them; while the
		// pool is spent this connection is not read, and TCP holds the
		// client back.
		if err := c.s.pool.Acquire(c.ctx, int64(n)); err != nil {
			if errors.Is(err, memory.ErrLargerThanPool) {
				c.logger.Warn("closing connection: request larger than queued_max_request_bytes", "size", n, "err", err)
			}
			return
		}
		rf, err := c.readFrame(r, int(n))
		if err != nil {
			c.s.pool.Release(int64(n))
			if errors.Is(err, errMalformedProduce) {
				// Like any malformed request: the ones read before it
				// are answered first, then serve closes.
				c.logger.Info("closing connection", "err", err)
				return
			}
			c.close()
			return
		}
		c.s.metrics.bytesIn.Add(float64(4 + n))
		select {
		case c.frames <- rf:
		case <-c.ctx.Done():
			c.s.pool.Release(int64(n))
			rf.split.release(c.s.records)
			return
		}
	}
}

// readFrame reads a request frame of n bytes, its size prefix read: a
// large produce request as it is parsed, its large record sets into
// buffers of their own (produce_frame.go), any other whole.
func (c *clientConn) readFrame(r *bufio.Reader, n int) (queuedFrame, error) {
	rf := queuedFrame{size: n}
	if splitProduceFrame(r, n) {
		// What stays in the frame is mostly small: it grows past this
		// only for many small record sets.
		var err error
		rf.b, rf.split, err = readProduceFrame(r, n, c.s.frames.get(min(n, splitFrameStart)), broker.EntryHeadroom, c.s.records.ProduceBuffer, c.s.records.ReleaseProduceBuffer)
		return rf, err
	}
	rf.b = c.s.frames.get(n)
	_, err := io.ReadFull(r, rf.b)
	return rf, err
}

// requestHeader is the part of a request before its body (the client ID
// goes to clientConn.clientID).
type requestHeader struct {
	key, version  int16
	correlationID int32
}

// readClientID reads the header's nullable client ID as a view into the
// frame: a connection sends the same one every time, so it is turned into
// a string only when it changes.
func (c *clientConn) readClientID(r *kbin.Reader) (id []byte, ok bool) {
	n := r.Int16()
	if n < 0 {
		return nil, r.Ok()
	}
	id = r.Span(int(n))
	return id, r.Ok()
}

// request returns an empty request for key. A connection's Fetch
// requests reuse one struct (one fetch runs per connection at a time and
// nothing keeps it past its response); other APIs get a new one.
func (c *clientConn) request(key int16) kmsg.Request {
	if key == fetchKey {
		if c.fetchReq == nil {
			c.fetchReq = new(kmsg.FetchRequest)
		}
		// Every field reset; the topics' capacity kept, which kmsg's
		// decoding reuses.
		*c.fetchReq = kmsg.FetchRequest{Topics: c.fetchReq.Topics[:0]}
		c.fetchReq.Default()
		return c.fetchReq
	}
	return kmsg.RequestForKey(key)
}

// queuedFrame is a request as the reader hands it over: its frame, the
// bytes it holds in the request pool, and for a produce request read as
// it was parsed, its record sets read outside the frame
// (produce_frame.go).
type queuedFrame struct {
	b     []byte
	size  int
	split *splitProduce
}

// splitProduceFrame reports whether the frame of n bytes r is about to
// give is a produce request worth reading as it is parsed.
func splitProduceFrame(r *bufio.Reader, n int) bool {
	if n < splitFrameMin {
		return false
	}
	h, err := r.Peek(4)
	if err != nil {
		return false
	}
	key, version := int16(binary.BigEndian.Uint16(h)), int16(binary.BigEndian.Uint16(h[2:]))
	return key == produceKey && version >= 3 && version <= 13
}

// handle answers one frame; an error closes the connection.
func (c *clientConn) handle(frame []byte) error {
	return c.handleFrame(frame, len(frame), 0, nil)
}

// handleFrame is handle for a frame of size bytes that holds charge bytes
// of the request pool, given back once it is handled or, for a produce
// request, once it is answered; its record sets may lie outside the frame
// (split).
func (c *clientConn) handleFrame(frame []byte, size int, charge int64, split *splitProduce) (err error) {
	defer func() { c.s.pool.Release(charge) }()
	if split != nil {
		// Handed to the produce path once the request is decoded;
		// released here if it never gets there.
		defer func() { split.release(c.s.records) }()
	}
	start := time.Now()
	r := kbin.Reader{Src: frame}
	h := requestHeader{key: r.Int16(), version: r.Int16(), correlationID: r.Int32()}
	clientID, hasClientID := c.readClientID(&r)
	if !r.Ok() {
		return errors.New("truncated request header")
	}
	api, known := c.s.apis.lookup(h.key)
	if !known {
		return fmt.Errorf("unsupported api key %d", h.key)
	}
	if h.key != produceKey {
		// Handled once the produce requests before it are answered, and
		// once the throttle they earned has passed.
		if err := c.answerPending(); err != nil {
			return err
		}
		if err := c.waitUnmuted(); err != nil {
			return err
		}
	}
	if h.key == apiVersionsKey && h.version > api.max {
		return c.write(h, unsupportedAPIVersions(c.s.apis), start, api)
	}
	if h.version < api.min || h.version > api.max {
		return fmt.Errorf("%s v%d is outside the supported range v%d-v%d", api.name, h.version, api.min, api.max)
	}
	if c.saslRequired() && !c.sasl.authenticated && !allowedBeforeAuth(h.key) {
		return fmt.Errorf("unexpected %s request before SASL authentication", api.name)
	}
	req := c.request(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return errors.New("truncated request header tags")
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return fmt.Errorf("%s v%d: malformed request: %w", api.name, h.version, err)
	}
	if !hasClientID {
		c.clientID = ""
	} else if string(clientID) != c.clientID { // no allocation when equal
		c.clientID = string(clientID)
	}
	c.reqQuotas = c.s.quota.quotasFor(c)
	if h.key == produceKey {
		preq := req.(*kmsg.ProduceRequest)
		entries, err := split.restore(preq)
		if err != nil {
			return err
		}
		if err := c.pipelineProduce(h, api, preq, entries, start, size, charge); err != nil {
			return err
		}
		charge = 0 // the pending response holds it until it is answered
		return nil
	}
	var handlerStart time.Time
	if c.reqQuotas != nil {
		handlerStart = time.Now()
	}
	c.fetchWait = 0
	resp, err := c.call(api, req)
	if err != nil {
		return err
	}
	var throttle time.Duration
	if c.reqQuotas != nil && resp != nil {
		throttle = c.requestQuota(h.key, resp, time.Since(handlerStart)-c.fetchWait)
	}
	if resp == nil { // acks=0 produce: no response, by design
		api.requests.Inc()
		return nil
	}
	if err := c.write(h, resp, start, api); err != nil {
		return err
	}
	c.muteFor(throttle)
	if c.closeAfterResponse {
		return errors.New("SASL authentication failed")
	}
	return nil
}

// call runs a handler; a panic in it is a bug, logged with its stack,
// and costs the connection rather than the process.
func (c *clientConn) call(api api, req kmsg.Request) (resp kmsg.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.logger.Error("handler panicked", "api", api.name, "version", req.GetVersion(), "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%s handler failed", api.name)
		}
	}()
	return api.handle(c, req)
}

func (c *clientConn) write(h requestHeader, resp kmsg.Response, start time.Time, api api) error {
	out := append(c.out[:0], 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(h.correlationID))
	// Response header v1 (flexible) has tagged fields, except for
	// ApiVersions, whose header is always v0 so that a client can read it
	// before it knows which versions the broker speaks.
	if resp.IsFlexible() && h.key != apiVersionsKey {
		out = append(out, 0)
	}
	var n int64
	var err error
	if fr, ok := resp.(*fetchResponse); ok {
		n, err = c.writeFetch(out, fr)
	} else {
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		c.renewWriteDeadline()
		var w int
		w, err = c.nc.Write(out)
		n = int64(w)
	}
	// Keep the buffer for the next response unless it grew huge for one
	// large response.
	if cap(out) <= 1<<20 {
		c.out = out[:0]
	} else {
		c.out = nil
	}
	c.s.metrics.bytesOut.Add(float64(n))
	api.requests.Inc()
	api.latency.Observe(time.Since(start).Seconds())
	return err
}

// renewWriteDeadline keeps the write deadline at least idleTimeout ahead
// of the response about to be written.
func (c *clientConn) renewWriteDeadline() {
	if t, ok := c.writeDeadline.renew(time.Now()); ok {
		c.nc.SetWriteDeadline(t)
	}
}

// writeFetch writes a fetch response after header as one writev, then
// releases its record buffers.
func (c *clientConn) writeFetch(header []byte, fr *fetchResponse) (int64, error) {
	e := &c.fetchEnc
	defer func() {
		e.release()
		fr.release()
	}()
	e.reset(header)
	e.encode(fr.FetchResponse)
	c.writing = e.finish()
	defer func() { c.writing = nil }() // e.release clears the pieces themselves
	size := 0
	for _, p := range c.writing {
		size += len(p)
	}
	binary.BigEndian.PutUint32(c.writing[0], uint32(size-4))
	c.renewWriteDeadline()
	if c.tlsWriter == nil {
		return c.writing.WriteTo(c.nc)
	}
	// TLS has no writev: each piece would be its own record and write,
	// so small pieces are gathered into full records (large record
	// bytes pass straight through the buffer).
	n, err := c.writing.WriteTo(c.tlsWriter)
	if err == nil {
		err = c.tlsWriter.Flush()
	}
	return n, err
}

// errConnClosing ends a handler whose connection went away while it
// waited; there is nobody to answer.
var errConnClosing = errors.New("connection closed while the request waited")

// client identifies the connection for the group coordinator.
func (c *clientConn) client() group.Client {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		host = c.nc.RemoteAddr().String()
	}
	return group.Client{ID: c.clientID, Host: "/" + host}
}
