package integration

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchMemoryBudget: clients that ask for everything and stop reading
// cannot push the broker past its fetch memory budget (beyond the one
// batch each obligatory read may take regardless), a consumer beside them
// still gets every record, and when their connections die mid-response
// every byte of the budget (and of the request pool) comes back.
func TestFetchMemoryBudget(t *testing.T) {
	const (
		budget     = 4 << 20
		connCap    = 1 << 20
		stalled    = 12
		pipelined  = 16 // requests each stalled client sends
		recordSize = 16 << 10
		records    = 160 // 2.5 MiB
		batchMax   = 64 << 10
	)
	b := StartBroker(t, WithSet("fetch_memory_budget_bytes", fmt.Sprint(budget)),
		WithSet("connection_max_unwritten_bytes", fmt.Sprint(connCap)))
	const topic = "budget"
	createTopicVia(t, b, topic, 1)
	recs := make([]*kgo.Record, records)
	for i := range recs {
		v := make([]byte, recordSize)
		rand.Read(v) // incompressible: the log holds what the budget is about
		recs[i] = &kgo.Record{Topic: topic, Value: v}
	}
	produceAll(t, b.Client(t, kgo.ProducerBatchMaxBytes(batchMax), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression())), recs, 60*time.Second)

	// Each stalled client has a small receive window, pipelines fetches
	// for everything from offset 0, and never reads: once the kernel's
	// buffers are full the broker holds its next response.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.ReplicaID = -1
	fetch.MaxWaitMillis = 500
	fetch.MinBytes = 1
	fetch.MaxBytes = 50 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 0, 50<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	conns := make([]*rawConn, stalled)
	for i := range conns {
		conns[i] = dialSmallWindow(t, b.KafkaAddr)
		for range pipelined {
			conns[i].Send(fetch)
		}
	}
	// The stalled clients do hold the budget: it is spent.
	pollUntil(t, 30*time.Second, "stalled clients holding the fetch budget", func() error {
		if v, _ := scrapeMetrics(t, b).value("weir_fetch_memory_in_use_bytes"); v < budget/2 {
			peak, _ := scrapeMetrics(t, b).value("weir_fetch_memory_peak_bytes")
			return fmt.Errorf("weir_fetch_memory_in_use_bytes %v (peak %v)", v, peak)
		}
		return nil
	})

	// A consumer beside them still progresses to the end.
	got := consumeN(t, b, records, 60*time.Second, []string{topic}, kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(50<<20))
	for i, r := range got {
		if r.Offset != int64(i) || !bytes.Equal(r.Value, recs[i].Value) {
			t.Fatalf("record %d: offset %d, %d bytes, not the record produced", i, r.Offset, len(r.Value))
		}
	}

	s := scrapeMetrics(t, b)
	peak, _ := s.value("weir_fetch_memory_peak_bytes")
	size, _ := s.value("weir_fetch_memory_budget_bytes")
	if size != budget {
		t.Fatalf("weir_fetch_memory_budget_bytes %v, want %d", size, budget)
	}
	// Past the budget only by one batch per obligatory read in flight:
	// the stalled clients' and the consumer's.
	if limit := float64(budget + (stalled+1)*batchMax); peak > limit {
		t.Fatalf("fetch memory peaked at %v bytes, past the budget %d plus a batch per reader (%v)", peak, budget, limit)
	}
	waits, _ := s.value("weir_fetch_memory_waits_total")
	trimmed, _ := s.value("weir_fetch_memory_trimmed_reads_total")
	if waits+trimmed == 0 {
		t.Fatal("the budget never ran short: the test did not exercise it")
	}
	t.Logf("peak %v of %d, waits %v, trimmed %v", peak, budget, waits, trimmed)

	// Connections dying mid-response give everything back: the request
	// pool to zero, the fetch budget to what it holds for reuse (read
	// buffers kept, at most a quarter of it, and reads the coalescer
	// retains, none with coalescing off).
	for _, c := range conns {
		c.Close()
	}
	pollUntil(t, 30*time.Second, "fetch budget and request pool released", func() error {
		s := scrapeMetrics(t, b)
		if v, ok := s.value("weir_request_memory_in_use_bytes"); !ok || v != 0 {
			return fmt.Errorf("weir_request_memory_in_use_bytes %v (present %v)", v, ok)
		}
		inUse, ok := s.value("weir_fetch_memory_in_use_bytes")
		held, _ := s.value("weir_fetch_read_buffers_held_bytes")
		retained, _ := s.value("weir_fetch_read_coalescer_retained_bytes")
		if !ok || inUse != held+retained || held > budget/4 {
			return fmt.Errorf("weir_fetch_memory_in_use_bytes %v (present %v), buffers held for reuse %v (at most %d), reads retained %v",
				inUse, ok, held, budget/4, retained)
		}
		return nil
	})
}

// dialSmallWindow connects with a receive buffer fixed small before the
// handshake (no autotuning), so that a client that stops reading soon
// stops the broker's writes instead of the kernel buffering megabytes.
func dialSmallWindow(t testing.TB, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("weir-integration"))}
}
