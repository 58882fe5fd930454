package kafka

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The connection's side of quota enforcement (quota.go): recording what
// its requests cost, setting throttle_time_ms, and the mute.

// requestQuotaExempt are the APIs request_percentage does not throttle,
// as in Kafka: a client must be able to learn versions and authenticate.
func requestQuotaExempt(key int16) bool {
	return key == apiVersionsKey || key == 17 || key == 36 // SaslHandshake, SaslAuthenticate
}

// requestQuota records a request's handler time against
// request_percentage (as a percentage of one second, Kafka's unit) and
// sets the throttle it earned in resp, keeping a larger one the handler
// set; it returns the time to mute the connection for.
func (c *clientConn) requestQuota(key int16, resp kmsg.Response, elapsed time.Duration) time.Duration {
	q := c.reqQuotas
	tr, ok := resp.(kmsg.SetThrottleResponse)
	if !ok || requestQuotaExempt(key) {
		return c.throttleOf(resp)
	}
	m := c.s.quota
	now := time.Now()
	d := m.record(q, quotaRequest, float64(elapsed)*100/float64(time.Second), now)
	if d > 0 {
		m.throttled(quotaRequest, d)
		if ms := int32(d.Milliseconds()); ms > c.throttleMillis(resp) {
			tr.SetThrottle(ms)
		}
	}
	return max(d, c.throttleOf(resp))
}

// throttleMillis is the throttle_time_ms a response carries.
func (c *clientConn) throttleMillis(resp kmsg.Response) int32 {
	if t, ok := resp.(kmsg.ThrottleResponse); ok {
		ms, _ := t.Throttle()
		return ms
	}
	return 0
}

func (c *clientConn) throttleOf(resp kmsg.Response) time.Duration {
	return time.Duration(c.throttleMillis(resp)) * time.Millisecond
}

// produceQuota records a produce request's size against
// producer_byte_rate and its handler time against request_percentage,
// sets the larger throttle in resp and returns it.
func (c *clientConn) produceQuota(resp *kmsg.ProduceResponse, size int, elapsed time.Duration) time.Duration {
	q, m := c.reqQuotas, c.s.quota
	now := time.Now()
	bytes := m.record(q, quotaProduce, float64(size), now)
	if bytes > 0 {
		m.throttled(quotaProduce, bytes)
	}
	req := m.record(q, quotaRequest, float64(elapsed)*100/float64(time.Second), now)
	if req > 0 {
		m.throttled(quotaRequest, req)
	}
	d := max(bytes, req)
	resp.ThrottleMillis = int32(d.Milliseconds())
	// Muted from now as well as for d after the answer: pipelined
	// requests are read before the ones ahead of them are answered, and
	// Kafka, which reads one request at a time, would not have read them.
	c.muteFor(d)
	return d
}

// fetchQuotaMaxBytes caps a consumer fetch's max_bytes at what its
// consumer_byte_rate allows over a full span, as Kafka does: a larger
// response could never pass the quota, and would be throttled forever.
func (c *clientConn) fetchQuotaMaxBytes(maxBytes int32) int32 {
	q := c.reqQuotas
	if q == nil || q.sensor[quotaFetch] == nil {
		return maxBytes
	}
	allowed := q.limit[quotaFetch] * (quotaSamples - 1) * quotaWindow.Seconds()
	if allowed < float64(maxBytes) {
		return int32(max(allowed, 1))
	}
	return maxBytes
}

// fetchQuota records a consumer fetch's record bytes against
// consumer_byte_rate. Over the quota, Kafka answers with no partitions
// and takes the bytes back: the consumer gets them after its throttle.
// It reports whether the response must be emptied and sets its throttle.
func (c *clientConn) fetchQuota(resp *kmsg.FetchResponse, bytes int) bool {
	q, m := c.reqQuotas, c.s.quota
	if q == nil || q.sensor[quotaFetch] == nil {
		return false
	}
	now := time.Now()
	d := m.record(q, quotaFetch, float64(bytes), now)
	if d <= 0 {
		return false
	}
	m.unrecord(q, quotaFetch, float64(bytes), now)
	m.throttled(quotaFetch, d)
	resp.ThrottleMillis = int32(d.Milliseconds())
	return true
}

// muteFor mutes the connection for d from now: it handles no further
// request until then.
func (c *clientConn) muteFor(d time.Duration) {
	if d <= 0 {
		return
	}
	if until := time.Now().Add(d); until.After(c.quotas.mutedUntil) {
		c.quotas.mutedUntil = until
	}
}

// muted reports whether the connection is muted, and a channel that
// fires when the mute ends.
func (c *clientConn) muted() (<-chan time.Time, bool) {
	if c.quotas.mutedUntil.IsZero() {
		return nil, false
	}
	d := time.Until(c.quotas.mutedUntil)
	if d <= 0 {
		c.quotas.mutedUntil = time.Time{}
		return nil, false
	}
	if c.quotas.mute == nil {
		c.quotas.mute = time.NewTimer(d)
	} else {
		c.quotas.mute.Reset(d)
	}
	return c.quotas.mute.C, true
}

// waitUnmuted waits out the mute, unless the connection closes first.
func (c *clientConn) waitUnmuted() error {
	unmuted, muted := c.muted()
	if !muted {
		return nil
	}
	select {
	case <-unmuted:
		c.quotas.mutedUntil = time.Time{}
		return nil
	case <-c.ctx.Done():
		return errConnClosing
	}
}

// mutationQuota is controller_mutation_rate for one request of
// CreateTopics, CreatePartitions or DeleteTopics: strict (the versions
// that know THROTTLING_QUOTA_EXCEEDED) refuses topics while the quota is
// exceeded, the older versions are only throttled. throttle is the
// largest throttle the request earned.
type mutationQuota struct {
	c        *clientConn
	strict   bool
	throttle time.Duration
}

func (c *clientConn) mutationQuota(strict bool) mutationQuota {
	return mutationQuota{c: c, strict: strict}
}

// check refuses a topic's mutations while a strict quota is exceeded.
func (mq *mutationQuota) check() error {
	q := mq.c.reqQuotas
	if q == nil || q.bucket == nil || !mq.strict {
		return nil
	}
	ok, d := q.bucket.take(0, q.limit[quotaMutation], true, time.Now())
	if ok {
		return nil
	}
	mq.throttle = max(mq.throttle, d)
	return fmt.Errorf("%w: the controller mutation quota is exceeded; retry in %v", kerr.ThrottlingQuotaExceeded, d)
}

// record counts n partition mutations done.
func (mq *mutationQuota) record(n int) {
	q := mq.c.reqQuotas
	if q == nil || q.bucket == nil || n <= 0 {
		return
	}
	_, d := q.bucket.take(float64(n), q.limit[quotaMutation], false, time.Now())
	mq.throttle = max(mq.throttle, d)
}

// throttleMillis is the throttle for the response, counted in the
// metrics.
func (mq *mutationQuota) throttleMillis() int32 {
	if mq.throttle <= 0 {
		return 0
	}
	mq.c.s.quota.throttled(quotaMutation, mq.throttle)
	return int32(mq.throttle.Milliseconds())
}
