package soak

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// soakPoll is how often the soak checks whether the consumers caught up
// after producing stopped, and whether new topics have leaders.
const soakPoll = 100 * time.Millisecond

// run checks the brokers can be sampled, prepares the topics, applies
// the load for --duration while sampling, lets the consumers catch up,
// and verifies. The summary is nil when the soak failed before the load.
func (b *soakBench) run(parent context.Context) (*soakSummary, error) {
	o := b.o
	if err := b.findBrokers(parent); err != nil {
		return nil, err
	}
	cl, err := b.g.NewClient(kgo.ClientID(soakClientID))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	parts, targets, err := b.prepareTopics(parent, cl)
	if err != nil {
		return nil, err
	}
	restBefore, err := b.atRest(parent)
	if err != nil {
		return nil, err
	}

	// Fresh groups each run: a group that resumed from the last run's
	// commits would not read this run's records from their base.
	runID := time.Now().Unix()
	groupNames := make([]string, o.groups)
	for i := range groupNames {
		groupNames[i] = fmt.Sprintf("%s-g%d-%d", o.topicPrefix, i, runID)
	}
	traffic := newSoakTraffic(parts, groupNames)

	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	conns := newSoakConns(b, targets, o.connections, &traffic.connErrs)
	opening := time.Now()
	fmt.Fprintf(b.errOut, "opening %d connections to %d partition leaders\n", o.connections, len(targets))
	conns.start(ctx)
	defer conns.close()
	fmt.Fprintf(b.errOut, "%d of %d connections open after %.1fs (%d errors)\n",
		conns.stats.open.Load(), o.connections, time.Since(opening).Seconds(), traffic.connErrs.n.Load())

	consumers, err := b.newConsumers(traffic)
	if err != nil {
		return nil, err
	}
	producers, err := b.newProducers(parts)
	if err != nil {
		for _, c := range consumers {
			c.cl.Close()
		}
		return nil, err
	}
	// The clients are closed before the brokers are read at rest, and
	// on every early return.
	closeClients := sync.OnceFunc(func() {
		for _, c := range consumers {
			c.cl.Close()
		}
		for _, p := range producers {
			p.cl.Close()
		}
	})
	defer closeClients()

	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	var consuming sync.WaitGroup
	for _, c := range consumers {
		consuming.Go(func() { c.consume(consumeCtx, traffic) })
	}

	warmup := o.warmup.of(o.duration)
	fmt.Fprintf(b.errOut, "soak: %s (warm-up %s): %d records/s of %d bytes to %d partitions, %d groups of %d consumers, %d connections churning %g/s\n",
		o.duration, warmup, o.rate, o.recordSize, len(parts), o.groups, o.consumers, o.connections, o.churn)
	started := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, o.duration)
	defer stopLoad()
	var load sync.WaitGroup
	for _, p := range producers {
		load.Go(func() { p.produce(loadCtx, ctx, traffic, o.recordSize) })
	}
	load.Go(func() { conns.churn(loadCtx, o.churn) })

	sampler := newSoakSampler(b, traffic, &conns.stats, started, warmup)
	b.sampleUntil(loadCtx, sampler)
	stopLoad()
	load.Wait()
	ran := time.Since(started)
	flushErr := b.flush(ctx, producers)
	drained, caughtUp := b.drain(ctx, traffic)
	stopConsuming()
	consuming.Wait()
	conns.close()
	closeClients()
	var restAfter *soakRest
	var restErr error
	if ctx.Err() == nil {
		var r soakRest
		if r, restErr = b.backAtRest(ctx, restBefore); restErr == nil {
			restAfter = &r
		}
	}

	sum := b.summarize(sampler, traffic, &conns.stats, parts, ran, drained, caughtUp)
	sum.addRest(restBefore, restAfter)
	if flushErr != nil {
		sum.Failures = append(sum.Failures, flushErr.Error())
	}
	if restErr != nil {
		sum.Failures = append(sum.Failures, restErr.Error())
	}
	sum.Stopped = "duration"
	if parent.Err() != nil {
		sum.Stopped = "interrupted"
	}
	return sum, sum.failure(parent)
}

// findBrokers lists the brokers and scrapes each once, so that a soak
// that could not judge growth fails before it starts rather than after.
func (b *soakBench) findBrokers(ctx context.Context) error {
	brokers, err := b.admin.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("the soak judges growth from every broker's /metrics, found through the admin API: %w", err)
	}
	if len(brokers) == 0 {
		return fmt.Errorf("the admin API at %s lists no brokers", b.admin.URL())
	}
	if b.o.pid > 0 {
		if len(brokers) != 1 {
			return fmt.Errorf("--pid reads one process's memory and the cluster has %d brokers; leave --pid out to read each broker's %s", len(brokers), admin.MetricResidentMemory)
		}
		if _, err := procRSS(b.o.pid); err != nil {
			return err
		}
	}
	for _, sc := range b.admin.ScrapeBrokers(ctx, brokers) {
		if sc.Err != nil {
			return fmt.Errorf("broker %d: %w", sc.Broker.NodeID, sc.Err)
		}
		r := readSoakBroker(sc.Broker.NodeID, sc.Metrics)
		if r.Goroutines == nil || r.HeapLiveBytes == nil || r.Connections == nil || (r.RSSBytes == nil && b.o.pid == 0) {
			return fmt.Errorf("broker %d does not export all of %s, %s, %s and %s: the soak cannot judge its growth",
				sc.Broker.NodeID, admin.MetricGoroutines, metricNextGC, metricKafkaConnections, admin.MetricResidentMemory)
		}
	}
	b.brokers = brokers
	return nil
}

// prepareTopics creates the topics that are missing, waits until every
// partition has a leader, and reads the end offsets the soak's records
// will start at.
func (b *soakBench) prepareTopics(ctx context.Context, cl *kgo.Client) ([]*soakPartition, []soakTarget, error) {
	names := b.o.topicNames()
	for i, n := range b.o.topicPartitions() {
		if err := harness.EnsureTopic(ctx, b.g, cl, b.errOut, names[i], n, b.o.replicas); err != nil {
			return nil, nil, err
		}
	}
	layouts, err := b.waitForLeaders(ctx, cl, names)
	if err != nil {
		return nil, nil, err
	}
	actx, cancel := context.WithTimeout(ctx, b.g.Timeout)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(actx, names...)
	if err != nil {
		return nil, nil, b.g.DescribeCallErr("listing the end offsets of the soak's topics", err)
	}
	var (
		parts   []*soakPartition
		targets []soakTarget
	)
	for i, name := range names {
		l := layouts[i]
		for _, p := range l.Partitions {
			end, ok := ends.Lookup(name, p)
			switch {
			case !ok:
				return nil, nil, fmt.Errorf("%s/%d: the broker listed no end offset for it", name, p)
			case end.Err != nil:
				return nil, nil, fmt.Errorf("listing the end offset of %s/%d: %s", name, p, cli.StatusCell(end.Err, ""))
			}
			parts = append(parts, &soakPartition{topic: name, partition: p, base: end.Offset})
			leader := l.Leader[p]
			targets = append(targets, soakTarget{topic: name, partition: p, leader: leader, addr: l.Addr[leader]})
		}
	}
	return parts, targets, nil
}

// waitForLeaders reads the topics' layouts, waiting up to --timeout for
// new topics to elect their leaders.
func (b *soakBench) waitForLeaders(ctx context.Context, cl *kgo.Client, names []string) ([]*harness.Layout, error) {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(b.g.Timeout)
	for {
		mctx, cancel := context.WithTimeout(ctx, b.g.Timeout)
		md, err := adm.Metadata(mctx, names...)
		cancel()
		if err != nil {
			return nil, b.g.DescribeCallErr("loading the soak topics' metadata", err)
		}
		layouts := make([]*harness.Layout, len(names))
		var missing error
		for i, name := range names {
			if layouts[i], err = harness.ReadLayout(md, name); err != nil {
				missing = err
				break
			}
		}
		if missing == nil {
			return layouts, nil
		}
		if time.Now().After(deadline) {
			return nil, missing
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(soakPoll):
		}
	}
}

// newConsumers creates --consumers members of each group, reading every
// soak topic from the start (records before a partition's base are
// counted and skipped).
func (b *soakBench) newConsumers(t *soakTraffic) ([]*soakConsumer, error) {
	var out []*soakConsumer
	for _, g := range t.groups {
		for range b.o.consumers {
			cl, err := b.g.NewClient(
				kgo.ClientID(soakClientID),
				kgo.ConsumerGroup(g.name),
				kgo.ConsumeTopics(b.o.topicNames()...),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			)
			if err != nil {
				for _, c := range out {
					c.cl.Close()
				}
				return nil, err
			}
			out = append(out, &soakConsumer{group: g, cl: cl})
		}
	}
	return out, nil
}

// newProducers creates the producers, each its own client writing its
// partitions with acks=all (idempotent).
func (b *soakBench) newProducers(parts []*soakPartition) ([]*soakProducer, error) {
	var out []*soakProducer
	for i, share := range dealPartitions(parts, b.o.producers) {
		opts := append(b.g.ProducerOpts(kgo.NoCompression(), kgo.AllISRAcks()),
			kgo.ClientID(soakClientID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		cl, err := b.g.NewClient(opts...)
		if err != nil {
			for _, p := range out {
				p.cl.Close()
			}
			return nil, err
		}
		out = append(out, &soakProducer{id: i, cl: cl, parts: share, rate: float64(b.o.rate) / float64(b.o.producers)})
	}
	return out, nil
}

// sampleUntil samples every --sample until ctx ends, then once more if
// the last sample is more than half an interval old, so that the end of
// the run is not left out.
func (b *soakBench) sampleUntil(ctx context.Context, s *soakSampler) {
	tick := time.NewTicker(b.o.sample)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if time.Since(s.lastAt) > b.o.sample/2 && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				b.progress(s.take(context.WithoutCancel(ctx)))
			}
			return
		case <-tick.C:
			// Ending the load must not cut a scrape short; the admin
			// client's timeout bounds it.
			b.progress(s.take(context.WithoutCancel(ctx)))
		}
	}
}

// progress prints a sample to stderr as it is taken.
func (b *soakBench) progress(s soakSample) {
	fmt.Fprintf(b.errOut, "soak %4.0fs/%s: produced %.0f/s, delivered %.0f/s, p50 %s ms, p99 %s ms; brokers: %s connections, %s goroutines, RSS %s, heap in use %s, live %s; %d raw connections up, %d errors\n",
		s.Seconds, b.o.duration, s.ProducedPerSec, s.DeliveredPerSec, harness.FloatCell(s.P50Ms, 1), harness.FloatCell(s.P99Ms, 1),
		countPtrCell(s.Connections), countPtrCell(s.Goroutines), harness.MiBCell(s.RSSBytes), harness.MiBCell(s.HeapInUseBytes), harness.MiBCell(s.HeapLiveBytes),
		s.RawConnectionsOpen, s.Errors)
}

// flush waits for every buffered record's acknowledgement.
func (b *soakBench) flush(ctx context.Context, producers []*soakProducer) error {
	fctx, cancel := context.WithTimeout(ctx, b.g.Timeout+time.Second)
	defer cancel()
	errs := make([]error, len(producers))
	var wg sync.WaitGroup
	for i, p := range producers {
		wg.Go(func() {
			if err := p.cl.Flush(fctx); err != nil && ctx.Err() == nil {
				errs[i] = b.g.DescribeCallErr(fmt.Sprintf("producer %d: waiting for acknowledgements", p.id), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// drain waits, at most --drain, until every group has every
// acknowledged record.
func (b *soakBench) drain(ctx context.Context, t *soakTraffic) (took time.Duration, caughtUp bool) {
	start := time.Now()
	deadline := time.NewTimer(b.o.drain)
	defer deadline.Stop()
	poll := time.NewTicker(soakPoll)
	defer poll.Stop()
	for t.behind() > 0 {
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-deadline.C:
			return time.Since(start), t.behind() == 0
		case <-poll.C:
		}
	}
	return time.Since(start), true
}
