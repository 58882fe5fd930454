package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConcurrentProducersAndTailingConsumers: several idempotent producers
// write one partition while consumers (read_uncommitted and read_committed)
// tail it. Every consumer sees every record exactly once at contiguous
// offsets, each producer's records in its own order, and never a record
// beyond what was acknowledged-or-in-flight (no garbage, no gaps).
func TestConcurrentProducersAndTailingConsumers(t *testing.T) {
	b := StartBroker(t)
	const (
		topic     = "concurrent"
		producers = 4
		each      = 5000
		total     = producers * each
	)
	CreateTopic(t, b, topic, 1, nil)

	type result struct {
		name string
		recs []*kgo.Record
		err  error
	}
	results := make(chan result, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var consumersWG sync.WaitGroup
	for _, iso := range []struct {
		name string
		opt  kgo.IsolationLevel
	}{{"read_uncommitted", kgo.ReadUncommitted()}, {"read_committed", kgo.ReadCommitted()}} {
		cons := b.Client(t,
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(iso.opt),
			kgo.FetchMaxWait(200*time.Millisecond),
		)
		consumersWG.Add(1)
		go func() {
			defer consumersWG.Done()
			var out []*kgo.Record
			for len(out) < total {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					results <- result{iso.name, out, fmt.Errorf("timed out with %d of %d records", len(out), total)}
					return
				}
				var ferr error
				fs.EachError(func(_ string, _ int32, err error) { ferr = err })
				if ferr != nil {
					results <- result{iso.name, out, ferr}
					return
				}
				out = append(out, fs.Records()...)
			}
			results <- result{iso.name, out, nil}
		}()
	}

	var prodWG sync.WaitGroup
	prodErrs := make([]error, producers)
	for p := range producers {
		cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			var mu sync.Mutex
			for i := range each {
				r := &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "prod%d", p), Value: fmt.Appendf(nil, "prod%d-%06d", p, i)}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						if prodErrs[p] == nil {
							prodErrs[p] = err
						}
						mu.Unlock()
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				mu.Lock()
				if prodErrs[p] == nil {
					prodErrs[p] = err
				}
				mu.Unlock()
			}
		}()
	}
	prodWG.Wait()
	for p, err := range prodErrs {
		if err != nil {
			t.Fatalf("producer %d: %v", p, err)
		}
	}
	consumersWG.Wait()
	close(results)

	for res := range results {
		if res.err != nil {
			t.Errorf("%s consumer: %v", res.name, res.err)
			continue
		}
		if len(res.recs) != total {
			t.Errorf("%s consumer: %d records, want %d", res.name, len(res.recs), total)
			continue
		}
		next := make([]int, producers)
		for i, r := range res.recs {
			if r.Offset != int64(i) {
				t.Fatalf("%s consumer: record %d at offset %d (gap or duplicate)", res.name, i, r.Offset)
			}
			var p, seq int
			if _, err := fmt.Sscanf(string(r.Value), "prod%d-%d", &p, &seq); err != nil || p < 0 || p >= producers {
				t.Fatalf("%s consumer: offset %d: unexpected value %q", res.name, r.Offset, r.Value)
			}
			if seq != next[p] {
				t.Fatalf("%s consumer: offset %d: producer %d sequence %d, want %d", res.name, r.Offset, p, seq, next[p])
			}
			next[p]++
		}
	}
	if hw := endOffsets(t, b.Admin(t), topic); hw[0] != total {
		t.Errorf("HWM %d, want %d", hw[0], total)
	}
}
