package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log/logtest"
)

func idem(pid int64, epoch int16, seq int32, records int) logtest.Batch {
	return logtest.Batch{Records: records, Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
}

func TestIdempotentRetryGetsOriginalOffsets(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	mustCreate(t, b, "idem", 1, nil)
	pid, epoch, err := b.InitProducerID()
	if err != nil {
		t.Fatal(err)
	}
	// Five batches in flight, then every one of them retried: each
	// retry answers its original offset and writes nothing.
	var offsets []int64
	for i := 0; i < producerWindow; i++ {
		offsets = append(offsets, produceBatch(t, b, "idem", 0, idem(pid, epoch, int32(i*2), 2)))
	}
	for i := 0; i < producerWindow; i++ {
		if got := produceBatch(t, b, "idem", 0, idem(pid, epoch, int32(i*2), 2)); got != offsets[i] {
			t.Errorf("retry of batch %d: offset %d, want %d", i, got, offsets[i])
		}
	}
	p := b.Topic("idem").Partition(0)
	if hwm := p.HighWatermark(); hwm != 2*producerWindow {
		t.Fatalf("retries were written: hwm %d, want %d", hwm, 2*producerWindow)
	}

	// The state survives a restart: it is rebuilt from the log.
	b.Close()
	b = openTestBroker(t, dir)
	if got := produceBatch(t, b, "idem", 0, idem(pid, epoch, 8, 2)); got != offsets[4] {
		t.Errorf("retry after restart: offset %d, want %d", got, offsets[4])
	}
	if got := produceBatch(t, b, "idem", 0, idem(pid, epoch, 10, 1)); got != 10 {
		t.Errorf("next batch after restart: offset %d, want 10", got)
	}
}

func TestIdempotentSequenceChecks(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "seq", 1, nil)
	pid, _, _ := b.InitProducerID()
	produceBatch(t, b, "seq", 0, idem(pid, 1, 0, 3))

	_, err := b.Produce(context.Background(), "seq", 0, idem(pid, 1, 5, 1).Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.OutOfOrderSequenceNumber)

	_, err = b.Produce(context.Background(), "seq", 0, idem(pid, 0, 3, 1).Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.InvalidProducerEpoch)

	_, err = b.Produce(context.Background(), "seq", 0, idem(pid, 2, 7, 1).Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.OutOfOrderSequenceNumber)

	if got := produceBatch(t, b, "seq", 0, idem(pid, 2, 0, 1)); got != 3 {
		t.Errorf("new epoch from sequence 0: offset %d, want 3", got)
	}
	// A batch older than the window is neither a known retry nor next.
	for i := int32(1); i <= producerWindow; i++ {
		produceBatch(t, b, "seq", 0, idem(pid, 2, i, 1))
	}
	_, err = b.Produce(context.Background(), "seq", 0, idem(pid, 2, 0, 1).Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.OutOfOrderSequenceNumber)
	if hwm := b.Topic("seq").Partition(0).HighWatermark(); hwm != 9 {
		t.Fatalf("hwm %d, want 9: refused batches must not be written", hwm)
	}
}

func TestSequenceWraps(t *testing.T) {
	if nextSeq(1<<31-1) != 0 {
		t.Fatal("sequence after MaxInt32 must be 0")
	}
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "wrap", 1, nil)
	produceBatch(t, b, "wrap", 0, idem(9, 0, 1<<31-2, 2))
	if got := produceBatch(t, b, "wrap", 0, idem(9, 0, 0, 1)); got != 2 {
		t.Fatalf("wrapped sequence: offset %d", got)
	}
}

func TestProducerIDsNeverRepeatAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		id, _, err := b.InitProducerID()
		if err != nil || seen[id] {
			t.Fatalf("id %d err %v", id, err)
		}
		seen[id] = true
	}
	b.Close()
	b = openTestBroker(t, dir)
	id, _, _ := b.InitProducerID()
	if seen[id] {
		t.Fatalf("producer id %d reused after restart", id)
	}
}
