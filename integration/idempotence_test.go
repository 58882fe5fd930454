package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func initProducerID(t testing.TB, rc *rawConn, vers map[int16][2]int16) (int64, int16) {
	t.Helper()
	r, ok := vers[22]
	if !ok {
		t.Fatalf("broker does not advertise InitProducerId (22)")
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = min(r[1], 4)
	req.TransactionalID = nil
	req.TransactionTimeoutMillis = 60000
	req.ProducerID = -1
	req.ProducerEpoch = -1
	resp := rc.Do(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId v%d: error %d", req.Version, resp.ErrorCode)
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		t.Fatalf("InitProducerId v%d: producer id %d epoch %d", req.Version, resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func idemRecs(batch, n int) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i] = rec{Key: fmt.Appendf(nil, "b%d", batch), Value: fmt.Appendf(nil, "b%d-r%d", batch, i), TsDelta: int64(i)}
	}
	return out
}

// TestIdempotentProduceRaw drives the idempotent producer protocol by hand.
func TestIdempotentProduceRaw(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	const topic = "idem-raw"
	CreateTopic(t, b, topic, 1, nil)
	rc := dialRaw(t, b.KafkaAddr)
	pv := produceVersion(t, vers)
	pid, epoch := initProducerID(t, rc, vers)
	t.Logf("producer id %d epoch %d, produce v%d", pid, epoch, pv)

	const per = 5
	batches := make([][]byte, 8)
	for i := range batches {
		batches[i] = buildBatch(idemOpts(pid, epoch, int32(i*per)), idemRecs(i, per))
	}
	hwm := func() int64 {
		off, _, ec := listOffsetRaw(t, b, topic, 0, -1, 0)
		if ec != 0 {
			t.Fatalf("ListOffsets latest: error %d", ec)
		}
		return off
	}
	send := func(_ string, i int) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return produceRaw(t, rc, pv, -1, topic, 0, batches[i])
	}

	r := send("first", 0)
	if r.ErrorCode != 0 {
		t.Fatalf("first idempotent batch (seq 0): error %d", r.ErrorCode)
	}
	base := r.BaseOffset
	if base != 0 {
		t.Errorf("first batch base offset %d, want 0", base)
	}

	r = send("retry", 0)
	if r.ErrorCode != 0 || r.BaseOffset != base {
		t.Errorf("identical retry of seq 0: error %d base offset %d; want error 0 and the original base offset %d", r.ErrorCode, r.BaseOffset, base)
	}
	if h := hwm(); h != per {
		t.Fatalf("after a batch and its retry the HWM is %d, want %d (retry was appended again)", h, per)
	}

	// Batches 1..5 fill the 5-batch window.
	for i := 1; i <= 5; i++ {
		r = send("next", i)
		if r.ErrorCode != 0 || r.BaseOffset != base+int64(i*per) {
			t.Fatalf("batch %d (seq %d): error %d base offset %d, want 0 and %d", i, i*per, r.ErrorCode, r.BaseOffset, base+int64(i*per))
		}
	}
	// Retries within the window get their original offsets.
	for _, i := range []int{1, 3, 5} {
		r = send("retry", i)
		if r.ErrorCode != 0 || r.BaseOffset != base+int64(i*per) {
			t.Errorf("retry of batch %d (seq %d, inside the 5-batch window): error %d base offset %d; want 0 and %d", i, i*per, r.ErrorCode, r.BaseOffset, base+int64(i*per))
		}
	}
	if h := hwm(); h != 6*per {
		t.Fatalf("HWM %d after 6 batches and retries, want %d", h, 6*per)
	}
	// Batch 0 has left the window: whatever the broker answers, it must
	// not append it again.
	r = send("stale retry", 0)
	if r.ErrorCode == 0 && r.BaseOffset != base {
		t.Errorf("retry of batch 0 (outside the window): accepted at base offset %d, want an error (%d or %d) or the original offset %d",
			r.BaseOffset, errOutOfOrderSequence, errDuplicateSequence, base)
	}
	if h := hwm(); h != 6*per {
		t.Fatalf("HWM %d after a stale retry, want %d (stale batch appended)", h, 6*per)
	}

	// A sequence gap: batch 7 (seq 35) while seq 30 is expected.
	r = send("gap", 7)
	if r.ErrorCode != errOutOfOrderSequence {
		t.Errorf("batch with sequence 35 when 30 is expected: error %d (base offset %d), want %d (OUT_OF_ORDER_SEQUENCE_NUMBER)", r.ErrorCode, r.BaseOffset, errOutOfOrderSequence)
	}
	if h := hwm(); h != 6*per {
		t.Fatalf("HWM %d after a rejected out-of-order batch, want %d", h, 6*per)
	}
	// The expected sequence still works, then the formerly gapped one.
	for _, i := range []int{6, 7} {
		r = send("resume", i)
		if r.ErrorCode != 0 || r.BaseOffset != base+int64(i*per) {
			t.Fatalf("batch %d (seq %d) after the gap: error %d base offset %d, want 0 and %d", i, i*per, r.ErrorCode, r.BaseOffset, base+int64(i*per))
		}
	}

	// The log holds each batch exactly once, in order.
	const total = 8 * per
	got := consumeN(t, b, total, 30*time.Second, []string{topic})
	for i, rec := range got {
		want := fmt.Sprintf("b%d-r%d", i/per, i%per)
		if rec.Offset != int64(i) || string(rec.Value) != want {
			t.Errorf("record %d: offset %d value %q, want offset %d value %q", i, rec.Offset, rec.Value, i, want)
		}
		if rec.ProducerID != pid || rec.ProducerEpoch != epoch {
			t.Errorf("record %d: producer id %d epoch %d, want %d/%d", i, rec.ProducerID, rec.ProducerEpoch, pid, epoch)
		}
	}

	// A second InitProducerId hands out another producer identity.
	pid2, epoch2 := initProducerID(t, rc, vers)
	if pid2 == pid && epoch2 == epoch {
		t.Errorf("second InitProducerId returned the same producer id %d epoch %d", pid2, epoch2)
	}
	// A new producer starts at sequence 0 independently.
	r = produceRaw(t, rc, pv, -1, topic, 0, buildBatch(idemOpts(pid2, epoch2, 0), idemRecs(99, 1)))
	if r.ErrorCode != 0 || r.BaseOffset != total {
		t.Errorf("new producer seq 0: error %d base offset %d, want 0 and %d", r.ErrorCode, r.BaseOffset, total)
	}
	// A producer the partition has no state for may start at any sequence
	// (Kafka accepts it, so producer state can expire); some brokers reject
	// it as out of order. Either way, from then on sequences are enforced.
	pid3, epoch3 := initProducerID(t, rc, vers)
	r = produceRaw(t, rc, pv, -1, topic, 0, buildBatch(idemOpts(pid3, epoch3, 7), idemRecs(100, 1)))
	switch r.ErrorCode {
	case 0:
		if r2 := produceRaw(t, rc, pv, -1, topic, 0, buildBatch(idemOpts(pid3, epoch3, 8), idemRecs(101, 1))); r2.ErrorCode != 0 || r2.BaseOffset != r.BaseOffset+1 {
			t.Errorf("producer that started at sequence 7, next sequence 8: error %d offset %d, want 0 and %d", r2.ErrorCode, r2.BaseOffset, r.BaseOffset+1)
		}
		if r3 := produceRaw(t, rc, pv, -1, topic, 0, buildBatch(idemOpts(pid3, epoch3, 20), idemRecs(102, 1))); r3.ErrorCode != errOutOfOrderSequence {
			t.Errorf("producer at sequence 8 sending sequence 20: error %d, want %d", r3.ErrorCode, errOutOfOrderSequence)
		}
	case errOutOfOrderSequence, errUnknownProducerID:
	default:
		t.Errorf("new producer's first batch with sequence 7: error %d, want 0, %d or %d", r.ErrorCode, errOutOfOrderSequence, errUnknownProducerID)
	}
}

// TestIdempotentProducerKgo: the kgo idempotent producer (several batches
// in flight per partition) writes every record exactly once and in order.
func TestIdempotentProducerKgo(t *testing.T) {
	b := StartBroker(t)
	const (
		topic        = "idem-kgo"
		partitions   = 3
		perPartition = 10000
	)
	CreateTopic(t, b, topic, partitions, nil)
	prod := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(16<<10),
	)
	produceAll(t, prod, seqRecords(topic, partitions, perPartition), 60*time.Second)
	hw := endOffsets(t, b.Admin(t), topic)
	for p := range int32(partitions) {
		if hw[p] != perPartition {
			t.Errorf("partition %d: HWM %d, want %d", p, hw[p], perPartition)
		}
	}
	got := consumeN(t, b, partitions*perPartition, 60*time.Second, []string{topic})
	verifySeq(t, got, partitions, perPartition, true)
	var pid int64 = -1
	for _, r := range got {
		if r.ProducerID < 0 {
			t.Fatalf("record at %d/%d has no producer id", r.Partition, r.Offset)
		}
		if pid == -1 {
			pid = r.ProducerID
		} else if r.ProducerID != pid {
			t.Fatalf("records carry producer ids %d and %d; want one", pid, r.ProducerID)
		}
	}
}

// TestIdempotentAcrossRestart: a kgo idempotent producer keeps producing
// while the broker is restarted (SIGTERM) or killed (SIGKILL) underneath it.
// kgo retries whatever was in flight with the same sequence numbers; the
// broker, with producer state rebuilt from its log, must neither lose nor
// duplicate anything: every record exactly once, in order.
func TestIdempotentAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"SIGTERM", "SIGKILL"} {
		t.Run(mode, func(t *testing.T) {
			b := StartBroker(t)
			const topic, partitions = "idem-restart", 2
			CreateTopic(t, b, topic, partitions, nil)
			prod := b.Client(t,
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerLinger(time.Millisecond),
				kgo.RecordDeliveryTimeout(60*time.Second),
			)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()

			var (
				mu       sync.Mutex
				firstErr error
				produced int
			)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for chunk := 0; chunk < 2000; chunk++ { // bounded
					select {
					case <-stop:
						return
					default:
					}
					for range 50 {
						for p := range int32(partitions) {
							seq := produced / partitions
							r := &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "p%d", p), Value: fmt.Appendf(nil, "p%d-%08d", p, seq)}
							prod.Produce(ctx, r, func(r *kgo.Record, err error) {
								if err != nil {
									mu.Lock()
									if firstErr == nil {
										firstErr = fmt.Errorf("%s/%d %q: %w", r.Topic, r.Partition, r.Value, err)
									}
									mu.Unlock()
								}
							})
							produced++
						}
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			time.Sleep(400 * time.Millisecond)
			if mode == "SIGTERM" {
				b.Restart(t)
			} else {
				b.Kill(t)
				b.Start(t)
			}
			time.Sleep(400 * time.Millisecond)
			close(stop)
			<-done
			if err := prod.Flush(ctx); err != nil {
				t.Fatalf("flush after %s restart: %v", mode, err)
			}
			mu.Lock()
			err := firstErr
			mu.Unlock()
			if err != nil {
				t.Fatalf("produce across %s restart: %v", mode, err)
			}
			per := produced / partitions
			t.Logf("produced %d records across a %s restart", produced, mode)
			got := consumeN(t, b, produced, 60*time.Second, []string{topic})
			verifySeq(t, got, partitions, per, true)
		})
	}
}
