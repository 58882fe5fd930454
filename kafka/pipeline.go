package kafka

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pipelined produce.
//
// Kafka handles a connection's requests one at a time and answers them in
// the order they came. weir answers in that order too, and handles every
// request after the ones before it were answered, except that a run of
// produce requests is pipelined: each is checked and its batches proposed
// to their partitions' Raft groups as soon as it is read, while the ones
// before it still wait for their commits, so one write and fsync of a
// partition's log covers several of them (up to
// connection_max_inflight_requests per connection). Any other request
// first waits until every produce before it was answered, so it sees
// their effects as in Kafka.
//
// Ordering: a connection's batches for a partition are proposed, and so
// applied, in request order. A request refused when it is read
// (NOT_LEADER_OR_FOLLOWER, a malformed batch) does not hold back the ones
// after it — as in Kafka, where each is handled on its own — and an
// idempotent producer's later batches then fail the sequence check at
// apply (OUT_OF_ORDER_SEQUENCE_NUMBER), as Kafka's would. A batch that
// fails after it was proposed (leadership lost, timeout) takes the later
// ones of the same partition with it: Raft commits a log prefix, so none
// of them can be committed unless it is.

// pendingResponse is a pipelined produce request waiting for its turn to
// be answered.
type pendingResponse struct {
	h     requestHeader
	api   api
	start time.Time
	resp  kmsg.Response // nil for acks=0: nothing is written
	done  <-chan struct{}
	// mute is the throttle the request earned: the connection handles
	// nothing for this long once it is answered (or, for acks=0, would
	// have been).
	mute time.Duration
	// charge is what the request holds of queued_max_request_bytes
	// until it is answered.
	charge int64
}

// pipelineProduce starts a produce request and queues its response; a
// panic while starting it is a bug, logged, and costs the connection.
func (c *clientConn) pipelineProduce(h requestHeader, a api, req *kmsg.ProduceRequest, entries [][]byte, start time.Time, size int, charge int64) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.logger.Error("handler panicked", "api", a.name, "version", req.GetVersion(), "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%s handler failed", a.name)
		}
	}()
	var handlerStart time.Time
	if c.reqQuotas != nil {
		handlerStart = time.Now()
	}
	resp, done := c.s.startProduce(c, req, entries)
	pr := pendingResponse{h: h, api: a, start: start, done: done, charge: charge}
	if c.reqQuotas != nil {
		pr.mute = c.produceQuota(resp, size, time.Since(handlerStart))
	}
	if req.Acks != 0 {
		pr.resp = resp
	}
	c.pending = append(c.pending, pr)
	return nil
}

// pipelineFull says no further produce may start until the oldest one is
// answered.
func (c *clientConn) pipelineFull() bool {
	return len(c.pending) >= c.s.opts.ConnectionMaxInflightRequests
}

// answerOldest writes the oldest pending response, which is complete.
func (c *clientConn) answerOldest() error {
	pr := c.pending[0]
	n := copy(c.pending, c.pending[1:])
	c.pending[n] = pendingResponse{}
	c.pending = c.pending[:n]
	c.s.pool.Release(pr.charge)
	defer c.muteFor(pr.mute)
	if pr.resp == nil {
		pr.api.requests.Inc()
		return nil
	}
	return c.write(pr.h, pr.resp, pr.start, pr.api)
}

// answerPending waits for every pending response and writes them, in
// order.
func (c *clientConn) answerPending() error {
	for len(c.pending) > 0 {
		<-c.pending[0].done
		if err := c.answerOldest(); err != nil {
			return err
		}
	}
	return nil
}
