package kafka

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

// discardConn is a net.Conn whose writes vanish, so a benchmark measures
// request handling and encoding, not the loopback.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error)       { return len(b), nil }
func (discardConn) SetWriteDeadline(time.Time) error  { return nil }
func (discardConn) RemoteAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (discardConn) Close() error                      { return nil }
func (discardConn) SetReadDeadline(t time.Time) error { return nil }
func (discardConn) Read(b []byte) (int, error)        { select {} }
func (discardConn) LocalAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (discardConn) SetDeadline(t time.Time) error     { return nil }

func benchConn(s *Server) *clientConn {
	c := newClientConn(s, discardConn{})
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
			frame := encodeRequest(fetchRequest(v, "bench", tp.ID, 0, 1<<20), 1)[4:]
			c := benchConn(s)
			if err := c.handle(frame); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(c.out)))
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

// BenchmarkProduceRequest: one 16-record batch of 1 KiB values per request.
func BenchmarkProduceRequest(b *testing.B) {
	s, br, _ := startServer(b)
	if _, err := br.CreateTopic(broker.CreateTopicRequest{Name: "bench", Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	batch := logtest.Batch{Records: 16, ValueSize: 1000}.Encode()
	frame := encodeRequest(produceRequest(9, -1, "bench", batch), 1)[4:]
	c := benchConn(s)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The handler stamps offsets into the frame in place, as it does
		// with a request read from a socket; a fresh copy per request
		// keeps each one valid.
		b.StopTimer()
		f := append([]byte(nil), frame...)
		b.StartTimer()
		if err := c.handle(f); err != nil {
			b.Fatal(err)
		}
	}
}
