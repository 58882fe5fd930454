package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Workload is the clients of a run: idempotent producers writing records
// with unique ids, a consumer group committing what it processed, and a
// watcher reading the group's committed offsets back.
type Workload struct {
	Topic      string
	Partitions int32
	Group      string
	Producers  int
	Consumers  int
	// Pace is how often each producer sends one record.
	Pace time.Duration
	// MaxInFlight bounds each producer's unacknowledged records.
	MaxInFlight int
}

// flushTimeout bounds waiting for the producers' last records.
const flushTimeout = 45 * time.Second

// running is a started workload; Stop ends it.
type running struct {
	producersStop context.CancelFunc
	consumersStop context.CancelFunc
	producersDone sync.WaitGroup
	consumersDone sync.WaitGroup
	clients       []*kgo.Client
	errs          chan error
}

// Start runs the workload against c, recording into h, until Stop.
func (w Workload) Start(c *Cluster, h *History, logf func(string, ...any)) (*running, error) {
	r := &running{errs: make(chan error, w.Producers+w.Consumers+1)}
	pctx, pcancel := context.WithCancel(context.Background())
	cctx, ccancel := context.WithCancel(context.Background())
	r.producersStop, r.consumersStop = pcancel, ccancel
	for i := range w.Producers {
		cl, err := kgo.NewClient(append(c.ClientOpts(),
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent: kgo's default with acks=all
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordDeliveryTimeout(30*time.Second),
			kgo.ProduceRequestTimeout(5*time.Second),
		)...)
		if err != nil {
			r.stopAll()
			return nil, err
		}
		r.clients = append(r.clients, cl)
		r.producersDone.Go(func() { w.produce(pctx, cl, i, h, logf) })
	}
	for i := range w.Consumers {
		cl, err := kgo.NewClient(append(c.ClientOpts(),
			kgo.ConsumerGroup(w.Group),
			kgo.ConsumeTopics(w.Topic),
			kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.SessionTimeout(10*time.Second),
			kgo.RebalanceTimeout(20*time.Second),
		)...)
		if err != nil {
			r.stopAll()
			return nil, err
		}
		r.clients = append(r.clients, cl)
		r.consumersDone.Go(func() { w.consume(cctx, cl, i, h, logf) })
	}
	watcher, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		r.stopAll()
		return nil, err
	}
	r.clients = append(r.clients, watcher)
	r.consumersDone.Go(func() { w.watchCommitted(cctx, kadm.NewClient(watcher), h) })
	return r, nil
}

// StopProducers ends production and waits (bounded) for every record sent
// to be acknowledged or failed.
func (r *running) StopProducers() { r.producersStop(); r.producersDone.Wait() }

// StopConsumers ends the consumers and the committed-offset watcher.
func (r *running) StopConsumers() { r.consumersStop(); r.consumersDone.Wait() }

func (r *running) stopAll() {
	r.StopProducers()
	r.StopConsumers()
	for _, cl := range r.clients {
		cl.Close()
	}
}

// Close stops everything and closes the clients.
func (r *running) Close() { r.stopAll() }

// produce sends one record every Pace, each with a unique id
// "p<producer>-<seq>", round robin over the partitions, at most
// MaxInFlight unacknowledged. Records are produced with a context of
// their own, so that stopping does not fail records already sent: after
// ctx ends it flushes, within flushTimeout.
func (w Workload) produce(ctx context.Context, cl *kgo.Client, producer int, h *History, logf func(string, ...any)) {
	recCtx, recCancel := context.WithCancel(context.Background())
	defer recCancel()
	slots := make(chan struct{}, w.MaxInFlight)
	tick := time.NewTicker(w.Pace)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			if err := cl.Flush(fctx); err != nil {
				logf("producer %d: flushing: %v (records still unresolved are neither acknowledged nor failed)", producer, err)
			}
			cancel()
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue // the loop's next round flushes and returns
		}
		id := fmt.Sprintf("p%d-%09d", producer, seq)
		rec := &kgo.Record{Topic: w.Topic, Partition: int32(seq) % w.Partitions, Value: []byte(id)}
		h.attempt()
		cl.Produce(recCtx, rec, func(r *kgo.Record, err error) {
			<-slots
			if err != nil {
				h.fail(err)
				return
			}
			h.ack(string(r.Value), ackedAt{Partition: r.Partition, Offset: r.Offset})
		})
	}
}

// consume polls, records every record it was served, commits the offsets
// after them (synchronously, one commit per poll) and only then lets a
// rebalance proceed, so commits of one partition never race between
// members.
func (w Workload) consume(ctx context.Context, cl *kgo.Client, consumer int, h *History, logf func(string, ...any)) {
	defer cl.AllowRebalance()
	fetchErrors := 0
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollRecords(pctx, 500)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			// Faults make fetch errors common; the first few show which.
			if fetchErrors++; fetchErrors <= 10 {
				logf("consumer %d: fetching %s/%d: %v", consumer, topic, p, err)
			}
		})
		next := map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			h.see(seenRecord{Consumer: consumer, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			next[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(next) > 0 {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{w.Topic: next},
				func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
					if err != nil {
						return
					}
					for _, t := range resp.Topics {
						for _, p := range t.Partitions {
							if p.ErrorCode == 0 {
								h.commit(commitRecord{Consumer: consumer, Partition: p.Partition, Offset: next[p.Partition].Offset})
							}
						}
					}
				})
			cancel()
		}
		cl.AllowRebalance()
	}
}

// watchCommitted reads the group's committed offsets back every 500 ms.
func (w Workload) watchCommitted(ctx context.Context, adm *kadm.Client, h *History) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		offs, err := adm.FetchOffsets(rctx, w.Group)
		cancel()
		if err != nil {
			continue
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.Topic == w.Topic && o.At >= 0 {
				h.fetchedOffset(o.Partition, o.At)
			}
		})
	}
}
