package kafka

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

// discardConn is a net.Conn whose writes vanish, so a benchmark measures
// request handling and encoding, not the loopback. It counts what was
// written when written is set.
type discardConn struct {
	net.Conn
	written *atomic.Int64
}

func (d discardConn) Write(b []byte) (int, error) {
	if d.written != nil {
		d.written.Add(int64(len(b)))
	}
	return len(b), nil
}
func (discardConn) SetWriteDeadline(time.Time) error  { return nil }
func (discardConn) RemoteAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (discardConn) Close() error                      { return nil }
func (discardConn) SetReadDeadline(t time.Time) error { return nil }
func (discardConn) Read(b []byte) (int, error)        { select {} }
func (discardConn) LocalAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (discardConn) SetDeadline(t time.Time) error     { return nil }

func benchConn(s *Server) *clientConn {
	return benchConnCounting(s, nil)
}

func benchConnCounting(s *Server, written *atomic.Int64) *clientConn {
	c := newClientConn(s, discardConn{written: written})
	c.ctx = context.Background()
	return c
}

// BenchmarkFetchRequest is one consumer's fetch from decode to encoded
// response: 1 MiB of 1 KiB records from one partition, v12 (names) and
// v13 (topic IDs).
func BenchmarkFetchRequest(b *testing.B) {
	s, br, _ := startServer(b)
	tp, err := br.CreateTopic(broker.CreateTopicRequest{Name: "bench", Partitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 128; i++ {
		if _, err := br.Produce(context.Background(), "bench", 0, logtest.Batch{Records: 16, ValueSize: 1000}.Encode(), broker.ProduceOptions{AllowZstd: true}); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []int16{12, 13} {
		b.Run(map[int16]string{12: "v12", 13: "v13"}[v], func(b *testing.B) {
			frame := encodeRequest(fetchRequest(v, "bench", tp.ID(), 0, 1<<20), 1)[4:]
			var written atomic.Int64
			c := benchConnCounting(s, &written)
			if err := c.handle(frame); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(written.Load())
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.handle(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProduceRequest: one 16-record batch of 1 KiB values per
// request on one connection, each answered before the next is read
// (serial) or with up to 5 in flight as the Java producer sends them
// (pipelined, pipeline.go): the log's writes and fsyncs then cover several.
// Each request is read as the connection reads it (readFrame, from a
// buffered reader over its bytes): a large one as it is parsed, its
// records into their Raft entry's buffer (produce_frame.go).
// alloc-B/batch-B is what the broker allocates per byte of the batch
// (docs/replication.md lists the copies on the write path).
func BenchmarkProduceRequest(b *testing.B) {
	s, br, _ := startServer(b)
	if _, err := br.CreateTopic(broker.CreateTopicRequest{Name: "bench", Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	for _, run := range []struct {
		name     string
		records  int
		inFlight int
	}{
		{"serial", 16, 1},
		{"pipelined", 16, 5},
		// franz-go's batches: up to 1 MB.
		{"pipelined-1MB", 1000, 5},
	} {
		batch := logtest.Batch{Records: run.records, ValueSize: 1000}.Encode()
		request := encodeRequest(produceRequest(9, -1, "bench", batch), 1)
		inFlight := run.inFlight
		b.Run(run.name, func(b *testing.B) {
			c := benchConn(s)
			src := bytes.NewReader(request)
			r := bufio.NewReaderSize(src, readBufferBytes)
			var size [4]byte
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				src.Reset(request)
				r.Reset(src)
				if _, err := io.ReadFull(r, size[:]); err != nil {
					b.Fatal(err)
				}
				rf, err := c.readFrame(r, len(request)-4)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.handleFrame(rf.b, rf.size, 0, rf.split); err != nil {
					b.Fatal(err)
				}
				c.s.frames.put(rf.b)
				if len(c.pending) >= inFlight {
					<-c.pending[0].done
					if err := c.answerOldest(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := c.answerPending(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(batch)), "alloc-B/batch-B")
		})
	}
}

// BenchmarkFetchFanout: 64 consumers (connections) fetch the same 64 KiB
// of one partition at the same offset with the same settings, all at
// once, per round; coalescing off vs on. ns/op and B/op are per round;
// log-reads/round and log-B/round say how often the log was read.
func BenchmarkFetchFanout(b *testing.B) {
	const consumers = 64
	s, br, _ := startServer(b)
	tp, err := br.CreateTopic(broker.CreateTopicRequest{Name: "fanout", Partitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if _, err := br.Produce(context.Background(), "fanout", 0, logtest.Batch{Records: 8, ValueSize: 1000}.Encode(), broker.ProduceOptions{AllowZstd: true}); err != nil {
			b.Fatal(err)
		}
	}
	frame := encodeRequest(fetchRequest(12, "fanout", tp.ID(), 0, 64<<10), 1)[4:]
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "coalescing=off", true: "coalescing=on"}[on]
		b.Run(name, func(b *testing.B) {
			if err := br.AlterClusterProperties([]broker.PropertyChange{{Name: "kafka_fetch_read_coalescing_enabled", Value: map[bool]string{false: "false", true: "true"}[on]}}, false); err != nil {
				b.Fatal(err)
			}
			var written atomic.Int64
			conns := make([]*clientConn, consumers)
			for i := range conns {
				conns[i] = benchConnCounting(s, &written)
			}
			reads0, bytes0 := br.LogReadStats()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for _, c := range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := c.handle(frame); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			reads, bytes := br.LogReadStats()
			b.SetBytes(written.Load() / int64(b.N))
			b.ReportMetric(float64(reads-reads0)/float64(b.N), "log-reads/round")
			b.ReportMetric(float64(bytes-bytes0)/float64(b.N), "log-B/round")
		})
	}
}
