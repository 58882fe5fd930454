package raft

import (
	"fmt"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Pipelined appends. A pipeline's appends go out on the peer's data
// connection in the order AppendEntries is called (one goroutine,
// pipelineReplicate, calls it), so the follower's group queue gets them
// in that order. Futures reach Consumer() strictly in issue order even if
// answers (or timeouts) complete them otherwise: a completed future waits
// in fifo until those before it are done.
//
// One timer per pipeline bounds its futures: they share the timeout and
// are issued in order, so the oldest pending one expires first; the timer
// is set for it and, when it fires, fails what has expired and is set for
// the next. An idle leader's keep-alive thus costs no timer of its own.
//
// At most tpPipelineDepth futures are in fifo; AppendEntries blocks for a
// slot (bounded by the timeout), which is hashicorp's back-pressure. A
// completed head is handed to Consumer() by whoever completed it, without
// blocking; only if Raft's decoder is behind does a goroutine wait to hand
// it over, and it exits as soon as it has caught up.

type pipeline struct {
	gt      *groupTransport
	p       *peer
	doneCh  chan hraft.AppendFuture
	space   chan struct{} // a token per future in fifo
	closeCh chan struct{}
	once    sync.Once

	mu         sync.Mutex
	fifo       []*pipeFuture // issued, not yet handed to Consumer, by mu
	delivering bool          // a goroutine is handing futures over, by mu
	closed     bool          // by mu
	timer      *time.Timer   // runs expire; made on first use, by mu
	timerOn    bool          // timer is set, by mu
}

func newPipeline(gt *groupTransport, p *peer) *pipeline {
	return &pipeline{
		gt: gt, p: p,
		doneCh:  make(chan hraft.AppendFuture, tpPipelineDepth),
		space:   make(chan struct{}, tpPipelineDepth),
		closeCh: make(chan struct{}),
	}
}

// pipeFuture implements hraft.AppendFuture.
type pipeFuture struct {
	callState
	pl    *pipeline
	start time.Time
	args  *hraft.AppendEntriesRequest
	resp  *hraft.AppendEntriesResponse
	cc    *clientConn
	id    uint32
	due   time.Time // issued + timeout
}

func (f *pipeFuture) Error() error                           { <-f.done; return f.err }
func (f *pipeFuture) Start() time.Time                       { return f.start }
func (f *pipeFuture) Request() *hraft.AppendEntriesRequest   { return f.args }
func (f *pipeFuture) Response() *hraft.AppendEntriesResponse { return f.resp }
func (f *pipeFuture) reqType() byte                          { return tpAppend }

func (f *pipeFuture) complete(kind byte, body []byte, err error) {
	if !f.begin() {
		return
	}
	if err == nil {
		if kind&tpError != 0 {
			err = newRemoteError(string(body))
		} else {
			err = decodeResponse(tpAppend, body, f.resp)
		}
	}
	if err == nil && f.resp.Success {
		ct := &f.pl.gt.commits
		ct.replicated(f.pl.p.key, f.args)
		if len(f.args.Entries) == 0 && !ct.streaming(f.pl.p.key, time.Now()) {
			f.resp.Success = false // ends an idle pipeline: transport_stream.go
		}
	}
	f.finish(err)
}

func (f *pipeFuture) timedOut() {
	if !f.begin() {
		return
	}
	f.cc.forget(f.id, f.start)
	f.pl.gt.hub.countError(tpErrTimeout)
	f.finish(fmt.Errorf("pipelined AppendEntries to %s: %w", f.pl.p.key, errTpTimeout))
}

// finish ends a future its caller (begin) owns.
func (f *pipeFuture) finish(err error) {
	if err != nil {
		f.pl.gt.hub.countCallError(err)
	}
	f.end(err)
	f.pl.advance()
}

// AppendEntries implements hraft.AppendPipeline.
func (pl *pipeline) AppendEntries(args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) (hraft.AppendFuture, error) {
	gt := pl.gt
	start := time.Now()
	select {
	case pl.space <- struct{}{}:
	default:
		t := time.NewTimer(gt.timeout)
		select {
		case pl.space <- struct{}{}:
			t.Stop()
		case <-pl.closeCh:
			t.Stop()
			return nil, hraft.ErrPipelineShutdown
		case <-gt.closed:
			t.Stop()
			return nil, hraft.ErrPipelineShutdown
		case <-t.C:
			return nil, fmt.Errorf("pipelined AppendEntries to %s: %w", pl.p.key, errTpTimeout)
		}
	}
	frame, n, err := encodeAppendReq(gt.name, args).frame()
	if err == nil {
		var cc *clientConn
		if cc, err = pl.p.conn(laneData, start.Add(gt.timeout)); err == nil {
			return pl.issue(cc, args, resp, start, frame, n)
		}
	}
	<-pl.space
	gt.hub.countCallError(err)
	return nil, err
}

func (pl *pipeline) issue(cc *clientConn, args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse,
	start time.Time, frame [][]byte, n int) (hraft.AppendFuture, error) {
	f := &pipeFuture{callState: callState{done: make(chan struct{})}, pl: pl, start: start,
		args: args, resp: resp, cc: cc, id: cc.newID(), due: time.Now().Add(pl.gt.timeout)}
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		<-pl.space
		return nil, hraft.ErrPipelineShutdown
	}
	pl.fifo = append(pl.fifo, f)
	if !pl.timerOn {
		pl.timerOn = true
		if pl.timer == nil {
			pl.timer = time.AfterFunc(pl.gt.timeout, pl.expire)
		} else {
			pl.timer.Reset(pl.gt.timeout)
		}
	}
	pl.mu.Unlock()
	if err := cc.send(f, f.id, frame, n, pl.gt.appendWait(args)); err != nil {
		// Delivered failed, in order, like any other.
		if f.begin() {
			f.finish(err)
		}
		return nil, err
	}
	return f, nil
}

// expire fails the futures whose timeout has passed and sets the timer
// for the oldest one left pending.
func (pl *pipeline) expire() {
	now := time.Now()
	var late []*pipeFuture
	next := time.Duration(-1)
	pl.mu.Lock()
	pl.timerOn = false
	if !pl.closed {
		for _, f := range pl.fifo {
			if f.state.Load() != 0 {
				continue
			}
			if left := f.due.Sub(now); left > 0 {
				next = left
				break
			}
			late = append(late, f)
		}
		if next >= 0 {
			pl.timerOn = true
			pl.timer.Reset(next)
		}
	}
	pl.mu.Unlock()
	for _, f := range late {
		f.timedOut()
	}
}

// advance hands completed futures at the head to Consumer().
func (pl *pipeline) advance() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.delivering || pl.closed {
		return
	}
	for len(pl.fifo) > 0 && pl.fifo[0].state.Load() == 3 {
		select {
		case pl.doneCh <- pl.fifo[0]:
			pl.pop()
		default:
			pl.delivering = true
			go pl.deliver()
			return
		}
	}
}

// pop drops the head; pl.mu held.
func (pl *pipeline) pop() {
	pl.fifo[0] = nil
	pl.fifo = pl.fifo[1:]
	if len(pl.fifo) == 0 {
		pl.fifo = nil
	}
	<-pl.space
}

// deliver waits for Raft's decoder to take completed futures, in order.
func (pl *pipeline) deliver() {
	for {
		pl.mu.Lock()
		if pl.closed || len(pl.fifo) == 0 || pl.fifo[0].state.Load() != 3 {
			pl.delivering = false
			pl.mu.Unlock()
			return
		}
		f := pl.fifo[0]
		pl.mu.Unlock()
		select {
		case pl.doneCh <- f:
		case <-pl.closeCh:
			pl.mu.Lock()
			pl.delivering = false
			pl.mu.Unlock()
			return
		}
		pl.mu.Lock()
		pl.pop()
		pl.mu.Unlock()
	}
}

// Consumer implements hraft.AppendPipeline.
func (pl *pipeline) Consumer() <-chan hraft.AppendFuture { return pl.doneCh }

// Close implements hraft.AppendPipeline: futures in flight fail with
// ErrPipelineShutdown and are not handed over.
func (pl *pipeline) Close() error {
	pl.once.Do(func() {
		pl.mu.Lock()
		pl.closed = true
		fifo := pl.fifo
		pl.fifo = nil
		pl.mu.Unlock()
		close(pl.closeCh)
		for _, f := range fifo {
			if f.begin() {
				f.cc.forget(f.id, time.Time{})
				f.end(hraft.ErrPipelineShutdown)
			}
		}
		pl.mu.Lock()
		if pl.timer != nil {
			pl.timer.Stop()
		}
		pl.mu.Unlock()
		pl.gt.forgetPipeline(pl)
	})
	return nil
}
