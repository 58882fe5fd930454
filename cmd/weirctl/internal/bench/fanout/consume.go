package fanout

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// fanoutConsumer is one consumer: its own client, hence its own
// connections, as separate applications reading one partition would have.
type fanoutConsumer struct {
	id        int
	cl        *kgo.Client
	fetched   *firstFetchHook
	closeOnce sync.Once
	track     fanoutTracker
	// err is what stopped this consumer, if it failed.
	err error
}

func (c *fanoutConsumer) close() { c.closeOnce.Do(c.cl.Close) }

func closeConsumers(cs []*fanoutConsumer) {
	for _, c := range cs {
		c.close()
	}
}

// newConsumers creates the consumers and connects each to the cluster
// (a Metadata round trip), so that dialing is not part of the measured
// phase. They consume nothing until given the partition.
func (f *fanoutBench) newConsumers(ctx context.Context) ([]*fanoutConsumer, error) {
	fetch := f.o.fetch
	cs := make([]*fanoutConsumer, 0, f.o.consumers)
	for i := range f.o.consumers {
		hook := &firstFetchHook{sent: make(chan struct{})}
		cl, err := f.g.NewClient(
			kgo.FetchMaxBytes(fetch.MaxBytes),
			kgo.FetchMaxPartitionBytes(fetch.MaxPartitionBytes),
			kgo.FetchMaxWait(f.o.maxWait),
			kgo.FetchMinBytes(fetch.MinBytes),
			// A broker answer may exceed FetchMaxBytes by a batch;
			// franz-go's default read limit is 100 MiB.
			kgo.BrokerMaxReadBytes(max(100<<20, fetch.MaxBytes+(16<<20))),
			kgo.WithHooks(hook),
		)
		if err != nil {
			closeConsumers(cs)
			return nil, err
		}
		cs = append(cs, &fanoutConsumer{id: i, cl: cl, fetched: hook})
	}
	pctx, cancel := context.WithTimeout(ctx, f.g.Timeout)
	defer cancel()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = c.cl.Ping(pctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeConsumers(cs)
			return nil, f.g.DescribeCallErr(fmt.Sprintf("connecting consumer %d", i), err)
		}
	}
	return cs, nil
}

// firstFetchHook tells when a client has sent its first Fetch request.
type firstFetchHook struct {
	once sync.Once
	sent chan struct{}
}

func (h *firstFetchHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		h.once.Do(func() { close(h.sent) })
	}
}

// waitFirstFetches waits, at most timeout, until every consumer is
// fetching.
func waitFirstFetches(ctx context.Context, cs []*fanoutConsumer, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for _, c := range cs {
		select {
		case <-c.fetched.sent:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C:
			return fmt.Errorf("consumer %d sent no Fetch request within %s", c.id, timeout)
		}
	}
	return nil
}

// consume polls until the consumer has every record of rng, fails, or
// ctx ends; it then closes the client, so a consumer that is done stops
// fetching and adds nothing to the brokers' figures.
func (c *fanoutConsumer) consume(ctx context.Context, rng harness.OffsetRange, tail bool, run *harness.Run) {
	defer c.close()
	if c.track.done(rng) {
		return
	}
	for ctx.Err() == nil {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		if err := cli.FirstFetchError(fetches); err != nil {
			c.fail(run, err)
			return
		}
		now := time.Now()
		records, bytes := c.track.received, c.track.bytes
		var err error
		for it := fetches.RecordIter(); !it.Done() && err == nil && !c.track.done(rng); {
			err = c.track.add(it.Next(), now, tail)
		}
		run.Done.Add(c.track.received - records)
		run.Bytes.Add(c.track.bytes - bytes)
		if err != nil {
			c.fail(run, err)
			return
		}
		if c.track.done(rng) {
			run.Completed(c.track.lastAt)
			return
		}
	}
}

func (c *fanoutConsumer) fail(run *harness.Run, err error) {
	c.err = fmt.Errorf("consumer %d: %w", c.id, err)
	run.Cancel(c.err)
}

// fanoutTracker checks one consumer's deliveries: every offset of the
// range exactly once and in order. The producers write contiguous offsets
// (idempotent, not transactional, so no control records), so accepting
// only the offset due next and counting is proof enough.
type fanoutTracker struct {
	crc      uint64 // CRC-64 (ECMA) of offset, key and value of each record
	next     int64
	received int64
	bytes    int64
	lastAt   time.Time
	// latencies are end to end, tail mode only.
	latencies []time.Duration
}

// newFanoutTracker expects rng.start first: the consumer starts exactly
// there.
func newFanoutTracker(rng harness.OffsetRange) fanoutTracker {
	return fanoutTracker{next: rng.Start}
}

func (t *fanoutTracker) done(rng harness.OffsetRange) bool {
	return t.next == rng.End && t.received == rng.Records()
}

// add accepts r if it is the record due next.
func (t *fanoutTracker) add(r *kgo.Record, now time.Time, tail bool) error {
	switch {
	case r.Offset < t.next:
		return fmt.Errorf("offset %d delivered again or out of order (offset %d was due)", r.Offset, t.next)
	case r.Offset > t.next:
		return fmt.Errorf("offset %d delivered where %d was due: %d records missing (or TOPIC holds transaction markers)", r.Offset, t.next, r.Offset-t.next)
	}
	if tail {
		if len(r.Value) < sendTimestampBytes {
			return fmt.Errorf("offset %d has a %d-byte value without a send time: is something else writing to the topic?", r.Offset, len(r.Value))
		}
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
		t.latencies = append(t.latencies, now.Sub(sent))
	}
	var off [8]byte
	binary.BigEndian.PutUint64(off[:], uint64(r.Offset))
	table := crc64.MakeTable(crc64.ECMA) // cached by the package
	t.crc = crc64.Update(t.crc, table, off[:])
	t.crc = crc64.Update(t.crc, table, r.Key)
	t.crc = crc64.Update(t.crc, table, r.Value)
	t.next++
	t.received++
	t.bytes += int64(len(r.Key) + len(r.Value))
	t.lastAt = now
	return nil
}
