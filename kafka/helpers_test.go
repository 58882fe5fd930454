package kafka

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
)

// startServer runs a broker and its Kafka server on a loopback port.
func startServer(t testing.TB) (*Server, *broker.Broker, string) {
	t.Helper()
	dir := t.TempDir()
	node := config.Node{NodeID: 0, DataDir: dir, KafkaAddr: "127.0.0.1:0", AdvertisedKafkaAddr: "127.0.0.1:9092",
		AdminAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", LogLevel: "info", MaxRequestBytes: 1 << 20}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(broker.Options{Node: node, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, addr := serveKafka(t, b, Options{MaxRequestBytes: node.MaxRequestBytes, AdvertisedAddr: node.AdvertisedKafkaAddr, Logger: logger})
	return s, b, addr
}

// serveKafka serves the Kafka protocol for b on a loopback port until the
// test ends.
func serveKafka(t testing.TB, b *broker.Broker, opts Options) (*Server, string) {
	t.Helper()
	s, err := NewServer(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s, ln.Addr().String()
}

// rawConn speaks the framing by hand so tests control every byte.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	corr int32
}

func dial(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// encodeRequest frames req with a v1 or v2 header.
func encodeRequest(req kmsg.Request, corr int32) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	c.writeRaw(encodeRequest(req, c.corr))
	return c.corr
}

func (c *rawConn) writeRaw(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// readFrame returns the correlation id and the rest of a response frame.
func (c *rawConn) readFrame() (int32, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// roundTrip sends req and decodes the matching response.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	corr := c.send(req)
	return c.read(req, corr)
}

func (c *rawConn) read(req kmsg.Request, wantCorr int32) kmsg.Response {
	c.t.Helper()
	corr, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("reading response to %T v%d: %v", req, req.GetVersion(), err)
	}
	if corr != wantCorr {
		c.t.Fatalf("correlation id %d, want %d", corr, wantCorr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding %T v%d: %v", resp, resp.GetVersion(), err)
	}
	return resp
}

// expectClosed asserts the server closed the connection.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	if _, _, err := c.readFrame(); err == nil {
		c.t.Fatal("connection still open, want closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatal("connection neither answered nor closed")
	}
}
