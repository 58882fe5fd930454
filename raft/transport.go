package raft

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// The shared Raft transport: one per node, used by every group. Between
// two nodes it keeps, per member address it dials ("addr#identity"), two
// connections: a control lane (heartbeat batches, votes, pre-votes,
// TimeoutNow) and a data lane (AppendEntries with entries or a commit
// index, pipelined or not), so a large append never delays the heartbeats
// that keep leases alive. InstallSnapshot dials a connection of its own
// and closes it afterwards. Each group gets a groupTransport, its
// hraft.Transport view. Frame format: transport_codec.go.
//
//	transport.go            hub, groupTransport (the hraft.Transport), API
//	transport_conn.go       connections: dialing, writer, client and server
//	transport_heartbeat.go  heartbeat batching, both sides
//	transport_pipeline.go   AppendEntriesPipeline
//	transport_stream.go     which followers get a pipeline
//	transport_inbound.go    delivery to a group's Consumer, snapshots in
//	transport_metrics.go    counters, TransportStats, Prometheus
//
// Connections reach the peer's mux with the ordinary stream header naming
// transportStream and the identity from the member address, so the
// accepting mux refuses a replaced broker exactly as it does for a group's
// own stream (and counts it in weir_raft_mux_connections_total).
//
// Calls never hang: each is bounded by TransportOptions.Timeout (or the
// transport's close, or its group's). A failed dial is remembered for a
// short backoff so a thousand groups do not each dial a dead peer, and a
// connection on which a call timed out without anything at all arriving
// is closed, so the next call redials instead of queueing behind a
// half-open socket.
//
// Cost of an idle group: its groupTransport (a few hundred bytes, an
// unbuffered consumer channel) and no goroutine. Goroutines exist per
// connection (a reader and a writer), per group only while it has inbound
// RPCs queued (transport_inbound.go) or a pipeline with answers to hand
// over, and per heartbeat batch being answered on the receiving side (per
// heartbeat only if one group's handler is slow).
//
// What an idle group does cost is its keep-alives: a heartbeat per
// follower every HeartbeatTimeout/10 (batched per peer and tick) and an
// AppendEntries without entries every CommitTimeout, carrying the commit
// index. Those appends and their answers are lazy frames
// (transport_conn.go): they wait up to the group's delay to share a write with
// others on the connection. Nothing on the wire says so: both ends tell
// from the request having no entries.
//
// Lock order: transportHub.mu → peer.mu → clientConn.mu → tconn.wmu;
// transportHub.emu → transportHub.gmu (read); groupTransport.inMu and
// pipeline.mu are leaves. None is held while calling into hashicorp/raft,
// dialing, or blocking on a channel.
const (
	// transportStream is the stream name of the transport's connections.
	// It is the RPC prefix alone: Layer refuses it as a group name (the
	// prefix is reserved for services) and Handle as a service (the name
	// after the prefix is empty), so nothing else can take it.
	transportStream = rpcStreamPrefix

	tpDefaultTimeout = 10 * time.Second
	tpDialTimeout    = 5 * time.Second
	// tpWriteTimeout bounds one write on a connection: a peer that does
	// not read for this long loses the connection.
	tpWriteTimeout = 10 * time.Second
	// tpDefaultDelay is TransportOptions.Delay's default. A group's delay
	// is how long its heartbeat waits for others to the same peer before
	// their batch goes out, and how long its lazy frames may wait for
	// company (at 10 ms, 300 groups per node made heartbeat frames of
	// about 3; a thousand idle partitions cost half the CPU at 250 ms
	// that they did at 25).
	tpDefaultDelay = 25 * time.Millisecond
	// tpDialBackoffMin/Max: after a failed dial, calls to that peer fail
	// at once for this long (doubling per failure up to the max).
	tpDialBackoffMin = 50 * time.Millisecond
	tpDialBackoffMax = time.Second
	// tpIdleConn: a client connection with nothing in flight and no call
	// for this long is closed (the peer left every group).
	tpIdleConn = 2 * time.Minute
	// tpInboundQueue bounds the RPCs queued for one group's Consumer;
	// more are answered with an error.
	tpInboundQueue = 64
	// tpPipelineDepth bounds a pipeline's appends in flight and not yet
	// handed to Raft (hashicorp's NetworkTransport default is 2; more
	// mostly splits batches, see hashicorp/raft#541).
	tpPipelineDepth = 4
	// tpSnapshotScale: InstallSnapshot's timeout is Timeout per this many
	// bytes of snapshot, as NetworkTransport's TimeoutScale.
	tpSnapshotScale = 256 << 10
)

// TransportOptions configures one group's view of the shared transport.
type TransportOptions struct {
	// Timeout bounds one RPC, from the call to its answer; InstallSnapshot
	// scales it by the snapshot's size (per 256 KiB). Default 10 s.
	Timeout time.Duration
	// Delay is how long the group's heartbeats, its appends that carry
	// only the commit index, and the answers to both may wait to share a
	// frame and a write with other groups' (each way). It must stay far
	// below the group's heartbeat and lease timeouts; Mux.Start derives it
	// from them (Config.transportDelay). Default 25 ms.
	Delay time.Duration
}

// Errors callers see; the text never contains "unexpected command", which
// hashicorp/raft takes as a peer without pre-vote and counts as granted.
var (
	errTpTimeout     = errors.New("raft transport: no answer within the timeout")
	errTpConnClosed  = errors.New("raft transport: connection closed")
	errTpGroupClosed = errors.New("raft transport: group closed")
)

// transportHub is a node's shared transport; Mux.transport makes it on
// first use and it closes when the mux does.
type transportHub struct {
	m    *Mux
	log  *slog.Logger
	met  *transportMetrics
	st   tpCounters
	ln   *layer
	done chan struct{} // closed by close

	// wrap, if set (tests), wraps every connection after its stream header.
	wrap func(net.Conn) net.Conn

	gmu    sync.RWMutex
	groups map[string]*groupTransport // by gmu

	// Requests for groups not started yet (transport_early.go), by emu.
	emu        sync.Mutex
	early      map[string][]earlyRPC
	earlyN     int
	earlyTimer *time.Timer

	mu     sync.Mutex
	peers  map[string]*peer // member address → peer, by mu
	conns  map[*tconn]bool  // every open connection, both directions, by mu
	closed bool             // by mu
	wg     sync.WaitGroup   // accept loop, connection goroutines, reaper
}

// transport returns the mux's shared transport, making it on first use.
func (m *Mux) transport() (*transportHub, error) {
	m.rpcMu.Lock()
	defer m.rpcMu.Unlock()
	if h := m.hub; h != nil {
		return h, nil
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
	ln, err := m.newLayer(transportStream)
	if err != nil {
		m.wg.Done()
		return nil, fmt.Errorf("raft transport: %w", err)
	}
	h := &transportHub{
		m: m, log: m.log, ln: ln,
		done:   make(chan struct{}),
		groups: make(map[string]*groupTransport),
		peers:  make(map[string]*peer),
		conns:  make(map[*tconn]bool),
	}
	if h.met, err = newTransportMetrics(m.metrics.reg, h); err != nil {
		ln.Close()
		m.wg.Done()
		return nil, err
	}
	m.hub = h
	h.wg.Add(2)
	go h.acceptLoop()
	go h.reaper()
	go h.watch()
	return h, nil
}

// groupTransport registers group on the node's shared transport and
// returns its hraft.Transport. It fails if the group is already
// registered or the mux is closed.
func (m *Mux) groupTransport(group string, opts TransportOptions) (*groupTransport, error) {
	if err := validGroupName(group); err != nil {
		return nil, err
	}
	if err := notRPCStream(group); err != nil {
		return nil, err
	}
	h, err := m.transport()
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = tpDefaultTimeout
	}
	if opts.Delay <= 0 {
		opts.Delay = tpDefaultDelay
	}
	gt := &groupTransport{
		hub: h, name: group, timeout: opts.Timeout, delay: opts.Delay,
		consumeCh: make(chan hraft.RPC),
		closed:    make(chan struct{}),
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	h.gmu.Lock()
	if _, ok := h.groups[group]; ok {
		h.gmu.Unlock()
		return nil, fmt.Errorf("raft: group %q already has a transport on this mux", group)
	}
	h.groups[group] = gt
	h.gmu.Unlock()
	// After the group is visible: see holdEarly.
	h.releaseEarly(gt)
	return gt, nil
}

// transportStats reads the shared transport's counters (zero if it was
// never used).
func (m *Mux) transportStats() TransportStats {
	m.rpcMu.Lock()
	h := m.hub
	m.rpcMu.Unlock()
	if h == nil {
		return TransportStats{}
	}
	return h.stats()
}

func (h *transportHub) lookup(group []byte) *groupTransport {
	h.gmu.RLock()
	gt := h.groups[string(group)]
	h.gmu.RUnlock()
	return gt
}

func (h *transportHub) isClosed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// watch closes the transport when the mux closes.
func (h *transportHub) watch() {
	defer h.m.wg.Done()
	<-h.m.done
	h.close()
}

func (h *transportHub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	conns := make([]*tconn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	peers := make([]*peer, 0, len(h.peers))
	for _, p := range h.peers {
		peers = append(peers, p)
	}
	h.mu.Unlock()
	h.ln.Close()
	for _, c := range conns {
		c.close(net.ErrClosed)
	}
	for _, p := range peers {
		p.failHeartbeats(fmt.Errorf("raft transport: %w", net.ErrClosed))
	}
	h.expireEarly() // closed: answers every request still held
	h.wg.Wait()
	h.met.unregister()
}

// acceptLoop takes the connections the mux routed to transportStream.
func (h *transportHub) acceptLoop() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		if h.wrap != nil {
			c = h.wrap(c)
		}
		sc := newServerConn(h, c)
		if sc == nil {
			c.Close()
		}
	}
}

// groupTransport is one group's hraft.Transport on the shared transport.
type groupTransport struct {
	hub       *transportHub
	name      string
	timeout   time.Duration
	delay     time.Duration // TransportOptions.Delay
	consumeCh chan hraft.RPC
	hbFn      sync.Mutex // guards heartbeat
	heartbeat func(hraft.RPC)
	closed    chan struct{} // closed by Close
	closeOnce sync.Once

	inMu     sync.Mutex
	inQ      []inbound          // waiting for Consumer, by inMu; nil when empty
	draining bool               // a drain goroutine runs, by inMu
	isClosed bool               // by inMu
	pipes    map[*pipeline]bool // open pipelines, by inMu

	commits commitTracker // transport_commit.go
}

var (
	_ hraft.Transport   = (*groupTransport)(nil)
	_ hraft.WithPreVote = (*groupTransport)(nil)
	_ hraft.WithClose   = (*groupTransport)(nil)
)

// Consumer implements hraft.Transport.
func (gt *groupTransport) Consumer() <-chan hraft.RPC { return gt.consumeCh }

// LocalAddr is the mux's advertised address, shared by every group.
func (gt *groupTransport) LocalAddr() hraft.ServerAddress {
	return hraft.ServerAddress(gt.hub.m.Addr())
}

// EncodePeer implements hraft.Transport.
func (gt *groupTransport) EncodePeer(_ hraft.ServerID, addr hraft.ServerAddress) []byte {
	return []byte(addr)
}

// DecodePeer implements hraft.Transport.
func (gt *groupTransport) DecodePeer(b []byte) hraft.ServerAddress { return hraft.ServerAddress(b) }

// SetHeartbeatHandler implements hraft.Transport: heartbeats go to cb
// (hashicorp's processHeartbeat) instead of the Consumer.
func (gt *groupTransport) SetHeartbeatHandler(cb func(hraft.RPC)) {
	gt.hbFn.Lock()
	gt.heartbeat = cb
	gt.hbFn.Unlock()
}

func (gt *groupTransport) heartbeatHandler() func(hraft.RPC) {
	gt.hbFn.Lock()
	defer gt.hbFn.Unlock()
	return gt.heartbeat
}

// Close detaches this group only: it leaves inbound routing, its queued
// inbound RPCs are answered with an error, and its pending calls and
// pipelines fail. Connections and other groups are unaffected.
func (gt *groupTransport) Close() error {
	gt.closeOnce.Do(func() {
		h := gt.hub
		h.gmu.Lock()
		if h.groups[gt.name] == gt {
			delete(h.groups, gt.name)
		}
		h.gmu.Unlock()
		gt.inMu.Lock()
		gt.isClosed = true
		pipes := gt.pipes
		gt.pipes = nil
		gt.inMu.Unlock()
		close(gt.closed)
		for p := range pipes {
			p.Close()
		}
	})
	return nil
}

func (gt *groupTransport) shutdownErr() error {
	select {
	case <-gt.closed:
		return hraft.ErrTransportShutdown
	case <-gt.hub.done:
		return fmt.Errorf("raft transport: %w", net.ErrClosed)
	default:
		return nil
	}
}

// AppendEntries implements hraft.Transport. Heartbeats are batched with
// every other group's to the same peer; other appends go on the data lane.
func (gt *groupTransport) AppendEntries(_ hraft.ServerID, target hraft.ServerAddress,
	args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) error {
	if isHeartbeat(args) {
		return gt.sendHeartbeat(string(target), args, resp)
	}
	err := gt.call(string(target), laneData, encodeAppendReq(gt.name, args), resp, gt.appendWait(args))
	if err == nil && resp.Success {
		gt.commits.replicated(string(target), args)
	}
	return err
}

// RequestVote implements hraft.Transport.
func (gt *groupTransport) RequestVote(_ hraft.ServerID, target hraft.ServerAddress,
	args *hraft.RequestVoteRequest, resp *hraft.RequestVoteResponse) error {
	return gt.call(string(target), laneControl, encodeVoteReq(gt.name, args), resp, 0)
}

// RequestPreVote implements hraft.WithPreVote.
func (gt *groupTransport) RequestPreVote(_ hraft.ServerID, target hraft.ServerAddress,
	args *hraft.RequestPreVoteRequest, resp *hraft.RequestPreVoteResponse) error {
	return gt.call(string(target), laneControl, encodePreVoteReq(gt.name, args), resp, 0)
}

// TimeoutNow implements hraft.Transport.
func (gt *groupTransport) TimeoutNow(_ hraft.ServerID, target hraft.ServerAddress,
	args *hraft.TimeoutNowRequest, resp *hraft.TimeoutNowResponse) error {
	return gt.call(string(target), laneControl, encodeTimeoutNowReq(gt.name, args), resp, 0)
}

// AppendEntriesPipeline implements hraft.Transport.
func (gt *groupTransport) AppendEntriesPipeline(_ hraft.ServerID, target hraft.ServerAddress) (hraft.AppendPipeline, error) {
	if err := gt.shutdownErr(); err != nil {
		return nil, err
	}
	if !gt.commits.streaming(string(target), time.Now()) {
		return nil, hraft.ErrPipelineReplicationNotSupported // transport_stream.go
	}
	p, err := gt.hub.peer(string(target))
	if err != nil {
		return nil, err
	}
	// Dial now: replication falls back to plain AppendEntries if the
	// follower is unreachable, rather than finding out per append.
	if _, err := p.conn(laneData, time.Now().Add(gt.timeout)); err != nil {
		return nil, err
	}
	pl := newPipeline(gt, p)
	gt.inMu.Lock()
	if gt.isClosed {
		gt.inMu.Unlock()
		return nil, hraft.ErrTransportShutdown
	}
	if gt.pipes == nil {
		gt.pipes = make(map[*pipeline]bool)
	}
	gt.pipes[pl] = true
	gt.inMu.Unlock()
	return pl, nil
}

func (gt *groupTransport) forgetPipeline(pl *pipeline) {
	gt.inMu.Lock()
	delete(gt.pipes, pl)
	gt.inMu.Unlock()
}

// appendWait is how long an AppendEntries may wait for company: its
// group's delay when it has no entries (it only carries the commit
// index), else not at all.
func (gt *groupTransport) appendWait(args *hraft.AppendEntriesRequest) time.Duration {
	if len(args.Entries) == 0 {
		return gt.delay
	}
	return 0
}

// call sends one request on lane and waits for its answer, decoded into
// resp; wait lets the request wait that long for company (tconn.queue).
func (gt *groupTransport) call(target string, lane int, e *tpEnc, resp any, wait time.Duration) error {
	h := gt.hub
	if err := gt.shutdownErr(); err != nil {
		return err
	}
	frame, n, err := e.frame()
	if err != nil {
		h.countError(tpErrTooLarge)
		return err
	}
	start := time.Now()
	deadline := start.Add(gt.timeout)
	p, err := h.peer(target)
	if err != nil {
		return err
	}
	cc, err := p.conn(lane, deadline)
	if err != nil {
		return err
	}
	c := &syncCall{callState: callState{done: make(chan struct{})}, typ: e.buf[1], resp: resp}
	id := cc.newID()
	if err := cc.send(c, id, frame, n, wait); err != nil {
		h.countError(tpErrConn)
		return err
	}
	t := getTimer(time.Until(deadline))
	defer putTimer(t)
	select {
	case <-c.done:
	case <-t.C:
		if c.abandon() {
			cc.forget(id, start)
			h.countError(tpErrTimeout)
			return fmt.Errorf("%s to %s: %w", tpTypeName(c.typ), target, errTpTimeout)
		}
		<-c.done
	case <-gt.closed:
		if c.abandon() {
			cc.forget(id, time.Time{})
			return hraft.ErrTransportShutdown
		}
		<-c.done
	}
	if c.err != nil {
		h.countCallError(c.err)
		return c.err
	}
	return nil
}

// A caller's timeout timer comes from a pool: a stopped timer's channel
// holds nothing stale (Go 1.23 timers; drained anyway under
// asynctimerchan=1), so it can be reset for the next caller.
var tpTimerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

func getTimer(d time.Duration) *time.Timer {
	t := tpTimerPool.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func putTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	tpTimerPool.Put(t)
}

// syncCall is a call whose caller waits for it (everything but
// pipelined appends and heartbeats).
type syncCall struct {
	callState
	typ  byte
	resp any // the caller's response, written only by whoever wins begin
}

func (c *syncCall) reqType() byte { return c.typ }

func (c *syncCall) complete(kind byte, body []byte, err error) {
	if !c.begin() {
		return
	}
	if err == nil {
		if kind&tpError != 0 {
			err = newRemoteError(string(body))
		} else {
			err = decodeResponse(c.typ, body, c.resp)
		}
	}
	c.end(err)
}

// InstallSnapshot implements hraft.Transport: the snapshot streams on a
// connection of its own, closed afterwards, so it never holds up other
// traffic to the peer.
func (gt *groupTransport) InstallSnapshot(_ hraft.ServerID, target hraft.ServerAddress,
	args *hraft.InstallSnapshotRequest, resp *hraft.InstallSnapshotResponse, data io.Reader) error {
	if err := gt.shutdownErr(); err != nil {
		return err
	}
	timeout := gt.timeout
	if scaled := gt.timeout * time.Duration(args.Size/tpSnapshotScale); scaled > timeout {
		timeout = scaled
	}
	err := gt.hub.sendSnapshot(gt, string(target), timeout, args, resp, data)
	if err != nil {
		gt.hub.countCallError(err)
	}
	return err
}

// remoteError is an error the peer answered with (its group's error, or
// the peer transport's: unknown group, queue full).
type remoteError struct{ msg string }

func (e *remoteError) Error() string { return e.msg }

func newRemoteError(msg string) error {
	// A peer never sends this (its groups run the same transport), but
	// if it did, hashicorp would count a failed pre-vote as granted.
	msg = strings.ReplaceAll(msg, "unexpected command", "unsupported command")
	return &remoteError{msg: msg}
}
