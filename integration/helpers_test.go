package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceAll produces recs asynchronously, flushes (bounded by timeout) and
// fails the test on the first produce error.
func produceAll(t testing.TB, cl *kgo.Client, recs []*kgo.Record, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		nerr     int
	)
	for _, r := range recs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				nerr++
				if firstErr == nil {
					firstErr = fmt.Errorf("record to %s/%d key %q: %w", r.Topic, r.Partition, r.Key, err)
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flushing %d records: %v", len(recs), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		t.Fatalf("%d of %d records failed to produce; first: %v", nerr, len(recs), firstErr)
	}
}

// consumeN consumes topics from the start with a fresh client until n
// records arrived or timeout, then polls briefly to catch any extra
// (duplicate) record. It fails unless exactly n records arrive. With no
// topics, opts must say what to consume (e.g. kgo.ConsumePartitions).
func consumeN(t testing.TB, b *Broker, n int, timeout time.Duration, topics []string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	all := []kgo.Opt{
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	if len(topics) > 0 {
		all = append(all, kgo.ConsumeTopics(topics...))
	}
	all = append(all, opts...)
	cl := b.Client(t, all...)
	defer cl.Close()
	out := make([]*kgo.Record, 0, n)
	deadline := time.Now().Add(timeout)
	var errs []error
	for len(out) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && len(errs) < 10 {
				errs = append(errs, fmt.Errorf("%s/%d: %w", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	if len(out) < n {
		t.Fatalf("consumed %d of %d records from %v within %v; fetch errors: %v", len(out), n, topics, timeout, errs)
	}
	// Anything more is a duplicate or a stray record.
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	fs := cl.PollFetches(ctx)
	cancel()
	fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	if len(out) != n {
		t.Fatalf("consumed %d records from %v, want exactly %d", len(out), topics, n)
	}
	return out
}

// endOffsets returns partition -> high watermark.
func endOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	if err := lo.Error(); err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	m := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			m[o.Partition] = o.Offset
		}
	})
	return m
}

// startOffsets returns partition -> log start offset.
func startOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	lo, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListStartOffsets %s: %v", topic, err)
	}
	if err := lo.Error(); err != nil {
		t.Fatalf("ListStartOffsets %s: %v", topic, err)
	}
	m := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			m[o.Partition] = o.Offset
		}
	})
	return m
}

// seqRecords builds perPartition records for each of partitions p with key
// "p<P>" and value "p<P>-<seq>" (manual partitioning).
func seqRecords(topic string, partitions int32, perPartition int) []*kgo.Record {
	recs := make([]*kgo.Record, 0, int(partitions)*perPartition)
	for i := range perPartition {
		for p := range partitions {
			recs = append(recs, &kgo.Record{
				Topic:     topic,
				Partition: p,
				Key:       fmt.Appendf(nil, "p%d", p),
				Value:     fmt.Appendf(nil, "p%d-%08d", p, i),
			})
		}
	}
	return recs
}

// verifySeq checks records produced by seqRecords: per partition every
// sequence from 0 to perPartition-1 exactly once; if inOrder, in order and at
// offset base+seq where base is the partition's first offset.
func verifySeq(t testing.TB, recs []*kgo.Record, partitions int32, perPartition int, inOrder bool) {
	t.Helper()
	next := make([]int, partitions)
	seen := make([]map[int]bool, partitions)
	base := make([]int64, partitions)
	for p := range seen {
		seen[p] = map[int]bool{}
		base[p] = -1
	}
	bad := 0
	fail := func(format string, args ...any) {
		bad++
		if bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, r := range recs {
		if r.Partition < 0 || r.Partition >= partitions {
			fail("record from unexpected partition %d", r.Partition)
			continue
		}
		p := r.Partition
		var vp, seq int
		if _, err := fmt.Sscanf(string(r.Value), "p%d-%d", &vp, &seq); err != nil || vp != int(p) {
			fail("partition %d offset %d: unexpected value %q", p, r.Offset, r.Value)
			continue
		}
		if want := fmt.Sprintf("p%d", p); string(r.Key) != want {
			fail("partition %d offset %d: key %q, want %q", p, r.Offset, r.Key, want)
		}
		if seen[p][seq] {
			fail("partition %d: duplicate sequence %d at offset %d", p, seq, r.Offset)
		}
		seen[p][seq] = true
		if inOrder {
			if seq != next[p] {
				fail("partition %d offset %d: sequence %d, want %d (out of order)", p, r.Offset, seq, next[p])
			}
			if base[p] < 0 {
				base[p] = r.Offset
			}
			if want := base[p] + int64(seq); r.Offset != want {
				fail("partition %d: sequence %d at offset %d, want offset %d (offsets not contiguous)", p, seq, r.Offset, want)
			}
			next[p] = seq + 1
		}
	}
	for p := range partitions {
		if len(seen[p]) != perPartition {
			fail("partition %d: %d distinct sequences, want %d", p, len(seen[p]), perPartition)
		}
	}
	if bad > 10 {
		t.Errorf("... %d problems in total", bad)
	}
	if bad > 0 {
		t.FailNow()
	}
}
