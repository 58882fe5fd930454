package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	// memoryBacklogBuffer and memoryProducerBuffer bound what the
	// backlog producer and each run producer buffer, so that producing
	// large records does not make the bench itself large.
	memoryBacklogBuffer  = 64 << 20
	memoryProducerBuffer = 16 << 20

	// memoryLeaderPoll is how often the bench asks for the topic's
	// leaders while a new topic elects them.
	memoryLeaderPoll = 100 * time.Millisecond
)

// errMemoryMaxDuration ends a consume phase that outlived --max-duration.
var errMemoryMaxDuration = errors.New("the consume phase lasted longer than --max-duration")

// topicLayout reads the topic's leaders, waiting up to --timeout for a
// new topic to elect them.
func (b *memoryBench) topicLayout(ctx context.Context, cl *kgo.Client) (*harness.Layout, error) {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(b.g.Timeout)
	for {
		mctx, cancel := context.WithTimeout(ctx, b.g.Timeout)
		md, err := adm.Metadata(mctx, b.topic)
		cancel()
		if err != nil {
			return nil, b.g.DescribeCallErr("loading metadata for "+b.topic, err)
		}
		l, err := harness.ReadLayout(md, b.topic)
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(memoryLeaderPoll):
		}
	}
}

// topicOffsets returns every partition's log start and end offsets.
func (b *memoryBench) topicOffsets(ctx context.Context, cl *kgo.Client, parts []int32) (map[int32]harness.OffsetRange, error) {
	ctx, cancel := context.WithTimeout(ctx, b.g.Timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, b.topic)
	if err != nil {
		return nil, b.g.DescribeCallErr("listing the start offsets of "+b.topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, b.topic)
	if err != nil {
		return nil, b.g.DescribeCallErr("listing the end offsets of "+b.topic, err)
	}
	out := make(map[int32]harness.OffsetRange, len(parts))
	for _, p := range parts {
		s, sok := starts.Lookup(b.topic, p)
		e, eok := ends.Lookup(b.topic, p)
		switch {
		case !sok || !eok:
			return nil, fmt.Errorf("%s/%d: the broker listed no offsets for it", b.topic, p)
		case s.Err != nil:
			return nil, fmt.Errorf("listing the start offset of %s/%d: %s", b.topic, p, cli.StatusCell(s.Err, ""))
		case e.Err != nil:
			return nil, fmt.Errorf("listing the end offset of %s/%d: %s", b.topic, p, cli.StatusCell(e.Err, ""))
		}
		out[p] = harness.OffsetRange{Start: s.Offset, End: e.Offset}
	}
	return out, nil
}

// backlogShortfall is how many records each partition lacks for a
// backlog of want records; nil when none lacks any.
func backlogShortfall(have map[int32]harness.OffsetRange, want int64) map[int32]int64 {
	var short map[int32]int64
	for p, r := range have {
		if n := want - r.Records(); n > 0 {
			if short == nil {
				short = map[int32]int64{}
			}
			short[p] = n
		}
	}
	return short
}

// backlogRanges are the first want records of each partition.
func backlogRanges(have map[int32]harness.OffsetRange, want int64) map[int32]harness.OffsetRange {
	out := make(map[int32]harness.OffsetRange, len(have))
	for p, r := range have {
		out[p] = harness.OffsetRange{Start: r.Start, End: r.Start + want}
	}
	return out
}

// prepareBacklog makes every partition hold at least the backlog's share
// and returns the first share of each, which every consumer reads. It
// produces only what is missing, so a repeated run reuses the backlog.
func (b *memoryBench) prepareBacklog(ctx context.Context, cl *kgo.Client, l *harness.Layout) (map[int32]harness.OffsetRange, error) {
	want := b.o.backlogRecords(len(l.Partitions))
	have, err := b.topicOffsets(ctx, cl, l.Partitions)
	if err != nil {
		return nil, err
	}
	short := backlogShortfall(have, want)
	if short == nil {
		fmt.Fprintf(b.errOut, "reusing the first %d records of each of the %d partitions of %s as the backlog (their sizes are as written, whatever --record-size says)\n",
			want, len(l.Partitions), b.topic)
		return backlogRanges(have, want), nil
	}
	var total int64
	for _, n := range short {
		total += n
	}
	fmt.Fprintf(b.errOut, "producing %d records of %d bytes to %s for a backlog of %d per partition\n", total, b.o.recordSize, b.topic, want)
	var acked atomic.Int64
	pctx, stopProgress := context.WithCancel(ctx)
	var progress sync.WaitGroup
	progress.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
				n := acked.Load()
				fmt.Fprintf(b.errOut, "bench memory backlog: %d/%d records (%.1f%%)\n", n, total, 100*float64(n)/float64(total))
			}
		}
	})
	err = b.produceSpread(ctx, cl, l.Partitions, short, &acked, nil)
	stopProgress()
	progress.Wait()
	if err != nil {
		return nil, fmt.Errorf("producing the backlog: %w", err)
	}
	if have, err = b.topicOffsets(ctx, cl, l.Partitions); err != nil {
		return nil, err
	}
	if short := backlogShortfall(have, want); short != nil {
		return nil, fmt.Errorf("%s lacks backlog records after producing them (%v missing by partition): did retention delete some?", b.topic, short)
	}
	return backlogRanges(have, want), nil
}

// producerOpts are bench produce's with acks=all, no compression,
// batches of up to --batch-max-bytes and records sent to the partition
// they name.
func (b *memoryBench) producerOpts(buffer int) []kgo.Opt {
	return append(b.g.ProducerOpts(kgo.NoCompression(), kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(b.o.batchMaxBytes),
		kgo.MaxBufferedBytes(buffer),
	)
}

// produceSpread produces counts[p] records of --record-size to each
// partition p, round-robin, and waits for every acknowledgement. acked
// (and bytes, when not nil) count what was acknowledged.
func (b *memoryBench) produceSpread(parent context.Context, cl *kgo.Client, parts []int32, counts map[int32]int64, acked, bytes *atomic.Int64) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	// One shared value, as bench produce does; franz-go never modifies a
	// record's value.
	payload := make([]byte, b.o.recordSize)
	for i := range payload {
		payload[i] = byte('a' + rand.IntN(26))
	}
	left := maps.Clone(counts)
	for more := true; more && ctx.Err() == nil; {
		more = false
		for _, p := range parts {
			if left[p] == 0 || ctx.Err() != nil {
				continue
			}
			left[p]--
			more = true
			cl.Produce(ctx, &kgo.Record{Topic: b.topic, Partition: p, Value: payload}, func(r *kgo.Record, err error) {
				if err != nil {
					cancel(fmt.Errorf("producing to %s/%d: %s", b.topic, p, cli.StatusCell(err, "")))
					return
				}
				acked.Add(1)
				if bytes != nil {
					bytes.Add(int64(len(r.Value)))
				}
			})
		}
	}
	flushErr := cl.Flush(ctx)
	if cause := context.Cause(ctx); cause != nil {
		if parent.Err() != nil {
			return context.Cause(parent)
		}
		return cause
	}
	if flushErr != nil {
		return b.g.DescribeCallErr("waiting for produce acks", flushErr)
	}
	return nil
}

// run prepares the topic and its backlog, then measures the consume
// phase. The summary is nil when the bench failed before that phase.
func (b *memoryBench) run(ctx context.Context) (*memorySummary, error) {
	if brokers, err := b.admin.ListBrokers(ctx); err != nil {
		b.brokerNote = err.Error()
		fmt.Fprintf(b.errOut, "note: broker figures unavailable: %v\n", err)
	} else {
		b.brokers = brokers
	}
	cl, err := b.g.NewClient(b.producerOpts(memoryBacklogBuffer)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := harness.EnsureTopic(ctx, b.g, cl, b.errOut, b.topic, b.o.partitions, b.o.replicas); err != nil {
		return nil, err
	}
	layout, err := b.topicLayout(ctx, cl)
	if err != nil {
		return nil, err
	}
	backlog, err := b.prepareBacklog(ctx, cl, layout)
	if err != nil {
		return nil, err
	}
	// Producing may have moved a leader; read them again.
	if layout, err = b.topicLayout(ctx, cl); err != nil {
		return nil, err
	}
	return b.consumePhase(ctx, layout, backlog)
}

// memoryConsumer is one consumer: a connection to each leader of the
// partitions, and its position in every partition.
type memoryConsumer struct {
	id    int
	conns []*memoryConn
	parts []*partitionProgress // in partition order
	took  time.Duration
	err   error
}

func (c *memoryConsumer) close() {
	for _, mc := range c.conns {
		mc.conn.Close()
	}
}

func (c *memoryConsumer) done() bool {
	for _, p := range c.parts {
		if !p.done() {
			return false
		}
	}
	return true
}

func (c *memoryConsumer) result() consumerResult {
	r := consumerResult{id: c.id, completed: c.done() && c.err == nil, took: c.took, checksum: consumerChecksum(c.parts), err: c.err}
	for _, p := range c.parts {
		r.records += p.records
		r.bytes += p.bytes
	}
	return r
}

// newMemoryConsumer connects a consumer to every leader.
func (b *memoryBench) newMemoryConsumer(ctx context.Context, id int, l *harness.Layout, backlog map[int32]harness.OffsetRange) (*memoryConsumer, error) {
	c := &memoryConsumer{id: id}
	byLeader := map[int32][]*partitionProgress{}
	for _, p := range l.Partitions {
		pp := newPartitionProgress(p, backlog[p])
		c.parts = append(c.parts, pp)
		byLeader[l.Leader[p]] = append(byLeader[l.Leader[p]], pp)
	}
	for _, leader := range l.Leaders() {
		mc, err := dialMemoryConn(ctx, b.g.Timeout, leader, l.Addr[leader], byLeader[leader])
		if err != nil {
			c.close()
			return nil, fmt.Errorf("consumer %d: %w", id, err)
		}
		c.conns = append(c.conns, mc)
	}
	return c, nil
}

// memoryRun holds the counters the consumers, producers and the
// progress printer share.
type memoryRun struct {
	started       time.Time
	target        int64 // records, all consumers together
	records       atomic.Int64
	bytes         atomic.Int64
	consumersDone atomic.Int64
	cancel        context.CancelCauseFunc
}

// consume fetches on every connection until the consumer has its whole
// backlog, fails, or ctx ends; a consumer that is done closes its
// connections, so it adds nothing to the brokers' load.
func (c *memoryConsumer) consume(ctx context.Context, b *memoryBench, run *memoryRun) {
	defer c.close()
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	errs := make([]error, len(c.conns))
	var wg sync.WaitGroup
	for i, mc := range c.conns {
		wg.Go(func() { errs[i] = mc.fetchAll(b, run) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		// Errors after the phase ended are those of closed sockets.
		return
	}
	if err := errors.Join(errs...); err != nil {
		c.err = fmt.Errorf("consumer %d: %w", c.id, err)
		fmt.Fprintf(b.errOut, "bench memory: %v\n", c.err)
		run.cancel(c.err)
		return
	}
	c.took = time.Since(run.started)
	run.consumersDone.Add(1)
}

// fetchAll sends one Fetch request at a time, as a consumer does, until
// every partition of the connection has its backlog.
func (c *memoryConn) fetchAll(b *memoryBench, run *memoryRun) error {
	for {
		c.pending = pendingParts(c.parts, int(c.corr), c.pending)
		if len(c.pending) == 0 {
			return nil
		}
		corr, err := c.send(b.topic, b.o.fetch, b.g.Timeout)
		if err != nil {
			return err
		}
		if err := readFetchAnswer(c.r, corr, &c.answer); err != nil {
			return fmt.Errorf("broker %d: %w", c.leader, err)
		}
		if c.answer.ErrorCode != 0 {
			return fmt.Errorf("broker %d: Fetch failed: %s", c.leader, cli.StatusCell(kerr.ErrorForCode(c.answer.ErrorCode), ""))
		}
		seen := make([]bool, len(c.pending))
		for i := range c.answer.Partitions {
			a := &c.answer.Partitions[i]
			k := slices.IndexFunc(c.pending, func(p *partitionProgress) bool { return p.partition == a.Partition })
			switch {
			case a.Topic != b.topic || k < 0:
				return fmt.Errorf("broker %d answered for %s/%d, which was not asked for", c.leader, a.Topic, a.Partition)
			case seen[k]:
				return fmt.Errorf("broker %d answered twice for %s/%d in one response", c.leader, a.Topic, a.Partition)
			}
			seen[k] = true
			records, bytes, err := c.pending[k].take(a)
			run.records.Add(records)
			run.bytes.Add(bytes)
			if err != nil {
				return err
			}
		}
	}
}

// stalledConsumer sends one Fetch request on a connection to each
// leader and never reads the answer: a consumer that stopped reading.
type stalledConsumer struct{ conns []*memoryConn }

func (s *stalledConsumer) close() {
	for _, c := range s.conns {
		c.conn.Close()
	}
}

// startProducers creates the run's producers, each its own client.
func (b *memoryBench) startProducers() ([]*kgo.Client, error) {
	var out []*kgo.Client
	for range b.o.producers {
		opts := append(b.producerOpts(memoryProducerBuffer),
			// A broker busy with the consumers may be slow to
			// acknowledge; the phase's own limit bounds the wait.
			kgo.RecordDeliveryTimeout(b.o.maxDuration))
		cl, err := b.g.NewClient(opts...)
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// consumePhase connects everything, then starts the stalled requests,
// the consumers and the producers together and samples the brokers
// until every consumer is done, fails, or --max-duration passes.
func (b *memoryBench) consumePhase(parent context.Context, l *harness.Layout, backlog map[int32]harness.OffsetRange) (*memorySummary, error) {
	o := b.o
	var perConsumer int64
	for _, r := range backlog {
		perConsumer += r.Records()
	}

	// Connect before the clock starts, so that dialing is not measured.
	consumers := make([]*memoryConsumer, o.consumers)
	stalled := make([]*stalledConsumer, o.stalled)
	defer func() {
		for _, c := range consumers {
			if c != nil {
				c.close()
			}
		}
		for _, s := range stalled {
			if s != nil {
				s.close()
			}
		}
	}()
	dialErrs := make([]error, o.consumers+o.stalled)
	var dial sync.WaitGroup
	for i := range consumers {
		dial.Go(func() { consumers[i], dialErrs[i] = b.newMemoryConsumer(parent, i, l, backlog) })
	}
	for i := range stalled {
		dial.Go(func() {
			c, err := b.newMemoryConsumer(parent, i, l, backlog)
			if err != nil {
				dialErrs[o.consumers+i] = fmt.Errorf("stalled %w", err)
				return
			}
			stalled[i] = &stalledConsumer{conns: c.conns}
		})
	}
	dial.Wait()
	if err := errors.Join(dialErrs...); err != nil {
		return nil, err
	}
	producers, err := b.startProducers()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range producers {
			p.Close()
		}
	}()

	sampler := newMemorySampler(b.brokers)
	scrape := func(ctx context.Context) {
		if b.brokers != nil {
			sampler.record(b.admin.ScrapeBrokers(ctx, b.brokers))
		}
	}
	scrape(parent)

	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	ctx, stopDeadline := context.WithTimeoutCause(ctx, o.maxDuration, errMemoryMaxDuration)
	defer stopDeadline()
	run := &memoryRun{target: int64(o.consumers) * perConsumer, cancel: cancel}

	fmt.Fprintf(b.errOut, "consume phase: %d consumers read %d records each (%d partitions, %d leader(s)), %d stalled, %d producers add %d records\n",
		o.consumers, perConsumer, len(l.Partitions), len(l.Leaders()), o.stalled, o.producers, o.producerRecords()*int64(o.producers))
	for _, s := range stalled {
		for _, c := range s.conns {
			if _, err := c.send(b.topic, o.fetch, b.g.Timeout); err != nil {
				return nil, fmt.Errorf("stalled consumer: %w", err)
			}
		}
	}

	run.started = time.Now()
	var background sync.WaitGroup
	phaseCtx, endPhase := context.WithCancel(ctx)
	background.Go(func() { b.sample(phaseCtx, o.sample, scrape) })
	background.Go(func() { b.progress(phaseCtx, run, sampler) })

	var produced, producedBytes atomic.Int64
	var producing sync.WaitGroup
	produceErrs := make([]error, len(producers))
	for i, p := range producers {
		counts := map[int32]int64{}
		share := o.producerRecords()
		for k, part := range l.Partitions {
			n := share / int64(len(l.Partitions))
			if int64(k) < share%int64(len(l.Partitions)) {
				n++
			}
			counts[part] = n
		}
		producing.Go(func() {
			if err := b.produceSpread(ctx, p, l.Partitions, counts, &produced, &producedBytes); err != nil && ctx.Err() == nil {
				produceErrs[i] = fmt.Errorf("producer %d: %w", i, err)
				cancel(produceErrs[i])
			}
		})
	}

	var consuming sync.WaitGroup
	for _, c := range consumers {
		consuming.Go(func() { c.consume(ctx, b, run) })
	}
	consuming.Wait()
	elapsed := time.Since(run.started)
	// Producers left over after the consumers finish are still part of
	// the load the phase applies; the deadline bounds them.
	producing.Wait()
	endPhase()
	background.Wait()
	scrape(context.WithoutCancel(parent))

	sum := &memorySummary{
		Topic: b.topic, Partitions: len(l.Partitions), Consumers: o.consumers, Stalled: o.stalled,
		Producers: o.producers, RecordSize: o.recordSize, Fetch: o.fetch, BacklogRecords: perConsumer,
		ProducedRecords: produced.Load(), ProducedBytes: producedBytes.Load(), BrokerNote: b.brokerNote,
		Brokers: []memoryBrokerFigures{},
	}
	results := make([]consumerResult, len(consumers))
	for i, c := range consumers {
		results[i] = c.result()
	}
	sum.addConsumers(results, elapsed)
	if b.brokers != nil {
		sum.addBrokers(sampler.figures())
	}
	for _, err := range produceErrs {
		if err != nil {
			sum.Failures = append(sum.Failures, err.Error())
		}
	}
	runErr := memoryRunFailure(parent, ctx, sum)
	switch {
	case runErr == nil:
		sum.Stopped = memoryStoppedCompleted
	case parent.Err() != nil:
		sum.Stopped = memoryStoppedInterrupted
	case errors.Is(context.Cause(ctx), errMemoryMaxDuration):
		sum.Stopped = memoryStoppedMaxDuration
	default:
		sum.Stopped = memoryStoppedFailed
	}
	return sum, runErr
}

// memoryRunFailure says why a run failed, or nil when every consumer got
// every record, verified, and the producers did their part.
func memoryRunFailure(parent, run context.Context, s *memorySummary) error {
	if s.ConsumersCompleted == s.Consumers && s.Verified && len(s.Failures) == 0 {
		return nil
	}
	detail := fmt.Sprintf("%d of %d consumers got every record", s.ConsumersCompleted, s.Consumers)
	cause := context.Cause(run)
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("interrupted: %s", detail)
	case len(s.Failures) > 0:
		more := ""
		if len(s.Failures) > 1 {
			more = fmt.Sprintf(" (and %d more failures)", len(s.Failures)-1)
		}
		return fmt.Errorf("%s; %s%s", detail, s.Failures[0], more)
	case cause != nil:
		return fmt.Errorf("%w: %s", cause, detail)
	}
	return fmt.Errorf("consumers stopped early: %s", detail)
}

// sample scrapes every interval until ctx ends; a scrape slower than
// the interval delays the next rather than piling up.
func (b *memoryBench) sample(ctx context.Context, interval time.Duration, scrape func(context.Context)) {
	if b.brokers == nil {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// The phase's end must not cut a scrape short and count it
			// as failed; the admin client's timeout bounds it.
			scrape(context.WithoutCancel(ctx))
		}
	}
}

// progress prints a line a second to stderr.
func (b *memoryBench) progress(ctx context.Context, run *memoryRun, sampler *memorySampler) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastBytes, lastAt := int64(0), run.started
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			recs, bytes := run.records.Load(), run.bytes.Load()
			line := fmt.Sprintf("bench memory: %d/%d consumers done, %d/%d records (%.1f%%), %.2f MB/s",
				run.consumersDone.Load(), b.o.consumers, recs, run.target, 100*float64(recs)/float64(max(run.target, 1)),
				float64(bytes-lastBytes)/harness.BytesPerMB/now.Sub(lastAt).Seconds())
			if rss, inUse := sampler.latest(); rss.ok || inUse.ok {
				line += fmt.Sprintf("; broker RSS %s, fetch memory in use %s", harness.MiBCell(rss.bytes()), harness.MiBCell(inUse.bytes()))
			}
			fmt.Fprintln(b.errOut, line)
			lastBytes, lastAt = bytes, now
		}
	}
}
