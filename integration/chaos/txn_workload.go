package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnWorkload is the transactional clients of a run: a feeder writing
// uniquely identified records to an input topic (an idempotent producer,
// not transactional), workers each a kgo GroupTransactSession that
// consume the input read_committed, write one output record per input
// record and commit their group offsets in the same transaction (every
// AbortEvery-th transaction they abort instead), a read_committed
// consumer of the output, a prober of the output's read_committed
// fetches, and an abandoner that now and then begins a transaction of a
// new transactional id, writes to the output and leaves it open for the
// coordinator's timeout to abort.
type TxnWorkload struct {
	Input, Output         string
	Partitions            int32 // of each of Input and Output
	Group                 string
	TransactionalIDs      []string // one per worker
	TxnTimeout            time.Duration
	AbortEvery            int
	FeedPace              time.Duration
	MaxRecordsPerTxn      int
	MaxWorkerIncarnations int
	// AbandonEvery is the abandoner's pace (0: none); the ids are
	// "<AbandonPrefix>-<n>", the timeout AbandonTimeout.
	AbandonEvery   time.Duration
	AbandonPrefix  string
	AbandonTimeout time.Duration
}

// endTxnTimeout bounds one End of a transaction: its flush, offset
// commit and EndTxn, retried by the client through a coordinator's
// failover.
const endTxnTimeout = 45 * time.Second

// txnRunning is a started transactional workload.
type txnRunning struct {
	feedStop, workStop context.CancelFunc
	feedDone, workDone sync.WaitGroup
	clients            []*kgo.Client
}

// StopFeeder ends the input and the abandoner and waits (bounded) for
// their last records.
func (r *txnRunning) StopFeeder() { r.feedStop(); r.feedDone.Wait() }

// StopWorkers ends the workers (each finishing its current transaction),
// the output consumer and the prober.
func (r *txnRunning) StopWorkers() { r.workStop(); r.workDone.Wait() }

// Close stops everything and closes the clients.
func (r *txnRunning) Close() {
	r.StopFeeder()
	r.StopWorkers()
	for _, cl := range r.clients {
		cl.Close()
	}
}

// Start runs the workload against c, recording into h, until Stop.
func (w TxnWorkload) Start(c *Cluster, h *TxnHistory, logf func(string, ...any)) (*txnRunning, error) {
	r := &txnRunning{}
	fctx, fcancel := context.WithCancel(context.Background())
	wctx, wcancel := context.WithCancel(context.Background())
	r.feedStop, r.workStop = fcancel, wcancel
	feeder, err := kgo.NewClient(append(c.ClientOpts(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.ProduceRequestTimeout(5*time.Second),
	)...)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.clients = append(r.clients, feeder)
	r.feedDone.Go(func() { w.feed(fctx, feeder, h, logf) })
	if w.AbandonEvery > 0 {
		r.feedDone.Go(func() { w.abandon(fctx, c, h, logf) })
	}
	for i, id := range w.TransactionalIDs {
		r.workDone.Go(func() { w.work(wctx, c, i, id, h, logf) })
	}
	observer, err := kgo.NewClient(append(c.ClientOpts(),
		kgo.ConsumeTopics(w.Output),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.clients = append(r.clients, observer)
	r.workDone.Go(func() { w.observe(wctx, observer, h) })
	r.workDone.Go(func() { w.probeLSO(wctx, c, h) })
	return r, nil
}

// feed writes "in-<seq>" every FeedPace, round robin over the input's
// partitions, at most 100 unacknowledged; after ctx ends it flushes.
func (w TxnWorkload) feed(ctx context.Context, cl *kgo.Client, h *TxnHistory, logf func(string, ...any)) {
	recCtx, recCancel := context.WithCancel(context.Background())
	defer recCancel()
	slots := make(chan struct{}, 100)
	tick := time.NewTicker(w.FeedPace)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			if err := cl.Flush(fctx); err != nil {
				logf("txn feeder: flushing: %v", err)
			}
			cancel()
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		rec := &kgo.Record{Topic: w.Input, Partition: int32(seq) % w.Partitions, Value: fmt.Appendf(nil, "in-%09d", seq)}
		h.inputAttempt()
		cl.Produce(recCtx, rec, func(_ *kgo.Record, err error) {
			<-slots
			h.inputAck(err)
		})
	}
}

// outputValue is the value of the output record for input record in,
// written in transaction attempt with n records: the checker finds the
// attempt (to tell aborted ones and count members) and the input record
// (to count how often each is reflected) in it.
func outputValue(attempt string, n int, in *kgo.Record) string {
	return fmt.Sprintf("%s|%d|%d/%d|%s", attempt, n, in.Partition, in.Offset, in.Value)
}

// outputRecord is a parsed output value.
type outputRecord struct {
	Attempt   string
	N         int
	InputPart int32
	InputOff  int64
	InputVal  string
}

func parseOutput(v string) (outputRecord, error) {
	f := strings.Split(v, "|")
	if len(f) != 4 {
		return outputRecord{}, fmt.Errorf("output value %q: want 4 fields", v)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return outputRecord{}, fmt.Errorf("output value %q: count: %w", v, err)
	}
	ps, offText, ok := strings.Cut(f[2], "/")
	if !ok {
		return outputRecord{}, fmt.Errorf("output value %q: no input partition/offset", v)
	}
	p, err := strconv.ParseInt(ps, 10, 32)
	if err != nil {
		return outputRecord{}, fmt.Errorf("output value %q: input partition: %w", v, err)
	}
	off, err := strconv.ParseInt(offText, 10, 64)
	if err != nil {
		return outputRecord{}, fmt.Errorf("output value %q: input offset: %w", v, err)
	}
	return outputRecord{Attempt: f[0], N: n, InputPart: int32(p), InputOff: off, InputVal: f[3]}, nil
}

// work runs worker i with transactional id id until ctx ends: sessions
// one after another, a new one (fencing the old producer) after a
// session's End failed, at most MaxWorkerIncarnations.
func (w TxnWorkload) work(ctx context.Context, c *Cluster, worker int, id string, h *TxnHistory, logf func(string, ...any)) {
	for inc := 0; inc < w.MaxWorkerIncarnations && ctx.Err() == nil; inc++ {
		if inc > 0 {
			h.restart()
			sleepCtx(ctx, 500*time.Millisecond)
		}
		s, err := kgo.NewGroupTransactSession(append(c.ClientOpts(),
			kgo.TransactionalID(id),
			kgo.TransactionTimeout(w.TxnTimeout),
			kgo.ConsumerGroup(w.Group),
			kgo.ConsumeTopics(w.Input),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.SessionTimeout(10*time.Second),
			kgo.RebalanceTimeout(20*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordDeliveryTimeout(30*time.Second),
			kgo.ProduceRequestTimeout(5*time.Second),
		)...)
		if err != nil {
			logf("txn worker %d: new session: %v", worker, err)
			continue
		}
		err = w.session(ctx, s, worker, inc, h)
		s.Close()
		if err != nil {
			logf("txn worker %d (%s), session %d: %v; starting a new one", worker, id, inc, err)
		}
	}
}

// session runs transactions on s until ctx ends (nil) or one fails.
func (w TxnWorkload) session(ctx context.Context, s *kgo.GroupTransactSession, worker, inc int, h *TxnHistory) error {
	for seq := 0; ctx.Err() == nil; seq++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := s.PollRecords(pctx, w.MaxRecordsPerTxn)
		cancel()
		var in []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { in = append(in, r) })
		if len(in) == 0 {
			seq--
			continue
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		attempt := fmt.Sprintf("w%d.%d-%06d", worker, inc, seq)
		deliberate := w.AbortEvery > 0 && seq%w.AbortEvery == w.AbortEvery-1
		h.begin(attempt, worker, len(in), deliberate)
		// Records are produced with a context of their own: stopping the
		// worker lets the transaction end normally.
		for _, r := range in {
			out := &kgo.Record{
				Topic:     w.Output,
				Partition: int32(r.Offset % int64(w.Partitions)), // spread over the output: a transaction spans partitions
				Key:       []byte(attempt),
				Value:     []byte(outputValue(attempt, len(in), r)),
			}
			s.Produce(context.Background(), out, func(r *kgo.Record, err error) { h.produced(attempt, r, err) })
		}
		ectx, cancel := context.WithTimeout(context.Background(), endTxnTimeout)
		if deliberate {
			// Sent before the abort, so that the aborted records are in
			// the output's log for read_committed to skip: End(TryAbort)
			// would drop records still buffered.
			if err := s.Client().Flush(ectx); err != nil {
				cancel()
				h.end(attempt, TxnUnknown, err)
				return fmt.Errorf("flushing %s before its abort: %w", attempt, err)
			}
		}
		committed, err := s.End(ectx, kgo.TransactionEndTry(!deliberate))
		cancel()
		switch {
		case err != nil:
			h.end(attempt, TxnUnknown, err)
			return fmt.Errorf("end of %s: %w", attempt, err)
		case committed:
			h.end(attempt, TxnCommitted, nil)
		default:
			h.end(attempt, TxnAborted, nil)
		}
	}
	return nil
}

// observe records every output record a read_committed consumer is
// served.
func (w TxnWorkload) observe(ctx context.Context, cl *kgo.Client, h *TxnHistory) {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollRecords(pctx, 1000)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			h.observe(seenRecord{Consumer: -1, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
	}
}

// probeLSO sends read_committed fetches of the output's partitions to
// every running broker in turn (followers serve consumer fetches too),
// each from where the last one to that broker ended, and records what
// they answered: the checker asserts no data at or past the last stable
// offset was returned.
func (w TxnWorkload) probeLSO(ctx context.Context, c *Cluster, h *TxnHistory) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	next := map[[2]int64]int64{} // node, partition -> fetch offset
	var topicID [16]byte
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if topicID == ([16]byte{}) {
			id, err := c.TopicID(ctx, w.Output)
			if err != nil {
				continue
			}
			topicID = id
		}
		nodes := c.answering()
		if len(nodes) == 0 {
			continue
		}
		n := nodes[round%len(nodes)]
		p := int32(round/len(nodes)) % w.Partitions
		key := [2]int64{int64(n.ID), int64(p)}
		at := next[key]
		rp, err := c.fetchCommitted(ctx, n.ID, w.Output, topicID, p, at, 1<<20)
		if err != nil {
			if errors.Is(err, kerr.OffsetOutOfRange) {
				next[key] = 0 // a wiped replica: read it again from its start
			}
			continue
		}
		batches, end, err := decodeTxnBatches(rp.RecordBatches, at)
		if err != nil {
			continue
		}
		last := int64(-1)
		for _, b := range batches {
			if !b.Control && len(b.Records) > 0 {
				last = max(last, b.Records[len(b.Records)-1].Offset)
			}
		}
		h.probe(lsoProbe{Node: n.ID, Partition: p, FetchOffset: at, LastStable: rp.LastStableOffset, HighWatermark: rp.HighWatermark, LastDataOffset: last})
		next[key] = end
	}
}

// abandon begins a transaction of a new transactional id every
// AbandonEvery, writes three records of it to the output and closes the
// client without ending it: the coordinator must abort it when its
// timeout passes (also when the coordinator moved meanwhile), and
// read_committed must never show its records.
func (w TxnWorkload) abandon(ctx context.Context, c *Cluster, h *TxnHistory, logf func(string, ...any)) {
	tick := time.NewTicker(w.AbandonEvery)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		id := fmt.Sprintf("%s-%d", w.AbandonPrefix, k)
		cl, err := kgo.NewClient(append(c.ClientOpts(),
			kgo.TransactionalID(id),
			kgo.TransactionTimeout(w.AbandonTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordDeliveryTimeout(10*time.Second),
		)...)
		if err != nil {
			logf("txn abandoner: %v", err)
			continue
		}
		if err := cl.BeginTransaction(); err != nil {
			logf("txn abandoner: %s: begin: %v", id, err)
			cl.Close()
			continue
		}
		attempt := fmt.Sprintf("x%d", k)
		const n = 3
		h.begin(attempt, -1, n, false)
		h.end(attempt, TxnAbandoned, nil)
		h.abandon(id)
		// Names the first input record: were it visible, it would also
		// count as that record reflected twice.
		in := &kgo.Record{Partition: 0, Offset: 0, Value: []byte(fmt.Sprintf("in-%09d", 0))}
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: w.Output, Partition: int32(k+i) % w.Partitions, Key: []byte(attempt), Value: []byte(outputValue(attempt, n, in))})
		}
		pctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
			logf("txn abandoner: %s: produce: %v", id, err)
		}
		cancel()
		cl.Close()
	}
}
