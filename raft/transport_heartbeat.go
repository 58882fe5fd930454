package raft

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Heartbeat batching. hashicorp/raft sends each follower of each group an
// empty AppendEntries every HeartbeatTimeout/10 from a goroutine per
// follower. Here each such call queues on the target's peer, where a
// timer runs to the earliest deadline of those queued (each may wait its
// group's delay); then (or at tpFlushBatch heartbeats) everything queued
// for that peer goes out as ONE frame on its
// control connection. The receiver hands every entry to its own group and
// answers the whole batch in one frame once each group has answered;
// every caller then returns its own group's answer.
//
// The receiver never answers for a group: a nil error refreshes the
// leader's lease (heartbeat() calls setLastContact), so an answer not
// produced by the follower's Raft would let a deposed leader keep serving
// reads. A group that is not running, or does not answer (hashicorp's
// processHeartbeat returns without answering once Raft is shut down),
// gets an error in its slot; the others are unaffected.

// callState is a call's completion: whoever wins begin (the connection's
// reader or its closer) fills the response and calls end; a caller that
// gives up wins abandon instead, after which nothing touches its
// response.
type callState struct {
	state atomic.Uint32 // 0 pending, 1 completing, 2 abandoned, 3 complete
	done  chan struct{}
	err   error
}

func (s *callState) begin() bool   { return s.state.CompareAndSwap(0, 1) }
func (s *callState) abandon() bool { return s.state.CompareAndSwap(0, 2) }
func (s *callState) end(err error) {
	s.err = err
	close(s.done)
	s.state.Store(3)
}

// hbCall is one group's heartbeat waiting for, or in, a batch. req is a
// copy of the caller's request (hashicorp reuses its own); resp is the
// caller's, written only by whoever wins begin.
type hbCall struct {
	callState
	gt     *groupTransport
	req    hraft.AppendEntriesRequest
	resp   *hraft.AppendEntriesResponse
	notice commitNotice // set when the batch is encoded, if the peer takes notices
}

func (c *hbCall) fail(err error) {
	if c.begin() {
		c.end(err)
	}
}

func (gt *groupTransport) sendHeartbeat(target string, args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) error {
	h := gt.hub
	if err := gt.shutdownErr(); err != nil {
		return err
	}
	p, err := h.peer(target)
	if err != nil {
		return err
	}
	c := &hbCall{callState: callState{done: make(chan struct{})}, gt: gt, req: *args, resp: resp}
	p.queueHeartbeat(c)
	t := getTimer(gt.timeout)
	defer putTimer(t)
	select {
	case <-c.done:
	case <-t.C:
		if c.abandon() {
			h.countError(tpErrTimeout)
			return fmt.Errorf("heartbeat to %s: %w", target, errTpTimeout)
		}
		<-c.done
	case <-gt.closed:
		if c.abandon() {
			return hraft.ErrTransportShutdown
		}
		<-c.done
	case <-h.done:
		if c.abandon() {
			return fmt.Errorf("raft transport: closed")
		}
		<-c.done
	}
	if c.err != nil {
		h.countCallError(c.err)
	}
	return c.err
}

func (p *peer) queueHeartbeat(c *hbCall) {
	p.mu.Lock()
	p.hbQ = append(p.hbQ, c)
	full := len(p.hbQ) >= tpFlushBatch
	if !full {
		p.flushHeartbeatsBy(c.gt.delay)
	}
	p.mu.Unlock()
	if full {
		p.flushHeartbeats()
	}
}

// flushHeartbeatsBy arms the flush to run within d. p.mu is held.
func (p *peer) flushHeartbeatsBy(d time.Duration) {
	at := time.Now().Add(d)
	if !p.hbAt.IsZero() && !at.Before(p.hbAt) {
		return
	}
	p.hbAt = at
	if p.hbT == nil {
		p.hbT = time.AfterFunc(d, p.flushHeartbeats)
	} else {
		p.hbT.Reset(d)
	}
}

// holdHeartbeats puts back heartbeats that could not go out because the
// peer cannot be reached, to go with the lane's next dial; each waits
// there up to its caller's timeout. Failing them at once would make
// hashicorp/raft back the follower's heartbeats off, up to half the
// leader's heartbeat timeout after a dozen quick failures, so that a
// follower back from an outage could hear nothing for that long and
// start an election meanwhile. Held, they go the moment a dial succeeds.
func (p *peer) holdHeartbeats(q []*hbCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hbQ = append(q, p.hbQ...)
	p.flushHeartbeatsBy(max(time.Until(p.lanes[laneControl].retryAt), tpDialBackoffMin))
	p.h.st.hbHeld.Add(uint64(len(q)))
}

func (p *peer) takeHeartbeats() []*hbCall {
	p.mu.Lock()
	q := p.hbQ
	p.hbQ, p.hbAt = nil, time.Time{}
	p.mu.Unlock()
	return q
}

func (p *peer) failHeartbeats(err error) {
	for _, c := range p.takeHeartbeats() {
		c.fail(err)
	}
}

// flushHeartbeats sends everything queued for p as one frame.
func (p *peer) flushHeartbeats() {
	q := p.takeHeartbeats()
	live := q[:0]
	for _, c := range q {
		if c.state.Load() == 0 { // not given up on
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	fail := func(err error) {
		for _, c := range live {
			c.fail(err)
		}
	}
	cc, err := p.conn(laneControl, time.Now().Add(tpDialTimeout))
	if err != nil {
		if errors.Is(err, net.ErrClosed) {
			fail(err)
		} else {
			p.holdHeartbeats(live)
		}
		return
	}
	notices := 0
	if cc.notices.Load() {
		for _, c := range live {
			if c.notice = c.gt.commits.notice(p.key, c.req.Term); c.notice.commit > 0 {
				notices++
			}
		}
	}
	f := &hbFlight{cc: cc, calls: live, kind: tpHeartbeats}
	if notices > 0 {
		f.kind = tpHeartbeatsCommit
	}
	frame, n, err := encodeHeartbeats(live, notices > 0).frame()
	if err != nil {
		fail(err)
		return
	}
	if err := cc.send(f, cc.newID(), frame, n, 0); err != nil {
		fail(err)
		return
	}
	st := &p.h.st
	st.hbFramesSent.Add(1)
	st.hbSent.Add(uint64(len(live)))
	st.noticesSent.Add(uint64(notices))
	p.h.met.batchGroups.Observe(float64(len(live)))
}

// hbFlight is a batch on the wire.
type hbFlight struct {
	cc    *clientConn
	calls []*hbCall
	kind  byte // tpHeartbeats, or tpHeartbeatsCommit when some carry a notice
}

func (f *hbFlight) reqType() byte { return f.kind }

func (f *hbFlight) complete(kind byte, body []byte, err error) {
	if err == nil && kind&tpError != 0 {
		err = newRemoteError(string(body))
	}
	var d tpDec
	if err == nil {
		d.b = body
		if n := d.count(tpMaxBatch, 1); d.err == nil && n != len(f.calls) {
			d.fail(fmt.Sprintf("%d answers to %d heartbeats", n, len(f.calls)))
		}
		err = d.err
	}
	if err != nil {
		for _, c := range f.calls {
			c.fail(err)
		}
		return
	}
	var scratch hraft.AppendEntriesResponse
	now := time.Now()
	for _, c := range f.calls {
		switch d.byte1() {
		case 0:
			if c.begin() {
				decodeAppendResp(&d, c.resp)
				if d.err == nil && c.notice.commit > 0 {
					c.gt.commits.told(f.cc.p.key, c.req.Term, c.notice)
				}
				if d.err == nil && c.resp.Success && c.resp.Term == c.req.Term {
					c.gt.commits.heard(f.cc.p.key, c.req.Term, now)
				}
				c.end(d.err)
			} else {
				decodeAppendResp(&d, &scratch)
			}
		case 1:
			msg := d.bytes()
			if d.err == nil {
				c.fail(newRemoteError(string(msg)))
			}
		default:
			d.fail("bad heartbeat status")
		}
		if d.err != nil {
			c.fail(d.err)
		}
	}
	if d.err == nil && len(d.b) > 0 && d.byte1()&tpFeatureCommitNotices != 0 {
		f.cc.notices.Store(true)
	}
}

// hbBatchIn collects a received batch's answers; the last group to
// answer sends them all.
type hbBatchIn struct {
	sc     *serverConn
	id     uint32
	kind   byte // of the request
	res    []hbResult
	left   atomic.Int32
	single bool // one unbatched AppendEntries heartbeat
}

func newHeartbeatBatch(sc *serverConn, id uint32, kind byte, n int) *hbBatchIn {
	b := &hbBatchIn{sc: sc, id: id, kind: kind, res: make([]hbResult, n)}
	b.left.Store(int32(n))
	return b
}

func (b *hbBatchIn) set(i int, r hraft.RPCResponse) {
	switch resp, ok := r.Response.(*hraft.AppendEntriesResponse); {
	case r.Error != nil:
		b.res[i] = hbResult{err: r.Error.Error()}
	case ok && resp != nil:
		b.res[i] = hbResult{resp: resp}
	default:
		b.res[i] = hbResult{err: "raft transport: no AppendEntries response from the group"}
	}
	if b.left.Add(-1) != 0 {
		return
	}
	if b.single {
		(&inbound{sc: b.sc, id: b.id, typ: tpAppend}).reply(r)
		return
	}
	b.sc.enqueue(encodeHeartbeatResults(b.kind, b.id, b.res))
}

// serveHeartbeats hands each heartbeat of a batch to its group.
//
// The handlers (hashicorp's processHeartbeat) run one after another on a
// single goroutine per batch: each only checks the term and notes the
// leader, and a goroutine apiece cost more in scheduling and stacks than
// the handlers themselves. But a term change writes to the stable store,
// and one group's disk must not keep the other groups' Raft from hearing
// from their leader, nor stack its delay onto another slow group's: if
// the goroutine is still busy after tpHeartbeatBudget, what it has not
// started yet is spilled onto a goroutine per heartbeat. (The batch's
// answer waits for every group, as it always has.)
func (h *transportHub) serveHeartbeats(sc *serverConn, id uint32, kind byte, entries []hbEntry) {
	h.st.hbFramesRecv.Add(1)
	h.st.hbRecv.Add(uint64(len(entries)))
	if len(entries) == 0 {
		sc.enqueue(encodeHeartbeatResults(kind, id, nil))
		return
	}
	b := newHeartbeatBatch(sc, id, kind, len(entries))
	var run []hbJob
	for i, e := range entries {
		gt := h.lookup(e.group)
		switch {
		case gt == nil:
			b.set(i, hraft.RPCResponse{Error: fmt.Errorf("%s", sc.notRunning(e.group))})
		case !isHeartbeat(e.req):
			b.set(i, hraft.RPCResponse{Error: fmt.Errorf("raft transport: batched request for %s is not a heartbeat", e.group)})
		default:
			if e.notice.commit > 0 {
				gt.deliverNotice(e.req, e.notice)
			}
			fn := gt.heartbeatHandler()
			if fn == nil {
				gt.enqueue(inbound{cmd: e.req, batch: b, idx: i})
				continue
			}
			if run == nil {
				run = make([]hbJob, 0, len(entries)-i)
			}
			run = append(run, hbJob{gt: gt, fn: fn, req: e.req, idx: i})
		}
	}
	switch len(run) {
	case 0:
	case 1:
		j := run[0]
		h.wg.Add(1)
		go j.gt.runHeartbeat(j.fn, j.req, b, j.idx)
	default:
		r := &hbRun{h: h, b: b, jobs: run}
		h.wg.Add(1)
		go r.run()
	}
}

// tpHeartbeatBudget is how long a batch's goroutine may be busy before
// the heartbeats it has not started get goroutines of their own.
const tpHeartbeatBudget = 5 * time.Millisecond

// hbJob is one heartbeat of a batch for a group with a handler.
type hbJob struct {
	gt  *groupTransport
	fn  func(hraft.RPC)
	req *hraft.AppendEntriesRequest
	idx int // slot in the batch
}

// hbRun runs a batch's jobs in order; next is the first not yet claimed,
// by the runner (one at a time) or by spill (all that are left).
type hbRun struct {
	h    *transportHub
	b    *hbBatchIn
	jobs []hbJob
	next atomic.Int32
}

func (r *hbRun) run() {
	h := r.h
	defer h.wg.Done()
	// The spill's count, taken while this goroutine's own is held, so it
	// cannot race the hub's Wait; whoever ends up owning it releases it.
	h.wg.Add(1)
	t := time.AfterFunc(tpHeartbeatBudget, func() {
		defer h.wg.Done()
		r.spill()
	})
	respCh := make(chan hraft.RPCResponse, 1)
	for n := int32(len(r.jobs)); ; {
		i := r.next.Load()
		if i >= n {
			break
		}
		if !r.next.CompareAndSwap(i, i+1) {
			continue
		}
		j := &r.jobs[i]
		if !j.gt.heartbeatOn(j.fn, j.req, r.b, j.idx, respCh) {
			respCh = make(chan hraft.RPCResponse, 1)
		}
	}
	if t.Stop() {
		h.wg.Done()
	}
}

// spill gives every job not yet started a goroutine of its own.
func (r *hbRun) spill() {
	for _, j := range r.jobs[min(int(r.next.Swap(int32(len(r.jobs)))), len(r.jobs)):] {
		r.h.wg.Add(1)
		go j.gt.runHeartbeat(j.fn, j.req, r.b, j.idx)
	}
}

func (gt *groupTransport) runHeartbeat(fn func(hraft.RPC), req *hraft.AppendEntriesRequest, b *hbBatchIn, i int) {
	defer gt.hub.wg.Done()
	gt.heartbeatOn(fn, req, b, i, make(chan hraft.RPCResponse, 1))
}

// heartbeatOn runs one heartbeat's handler and fills its slot. respCh
// must be empty; false if the handler did not answer, in which case
// respCh must not be used again (a late answer could land in it).
func (gt *groupTransport) heartbeatOn(fn func(hraft.RPC), req *hraft.AppendEntriesRequest, b *hbBatchIn, i int,
	respCh chan hraft.RPCResponse) bool {
	fn(hraft.RPC{Command: req, RespChan: respCh})
	select {
	case r := <-respCh:
		b.set(i, r)
		return true
	default:
		// processHeartbeat returns without answering once Raft is shut
		// down; an answer here would be a lie.
		b.set(i, hraft.RPCResponse{Error: fmt.Errorf("raft transport: group %s did not answer the heartbeat (shut down)", gt.name)})
		return false
	}
}
