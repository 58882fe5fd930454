package kafka

// FuzzDecodeRequest's machinery: one input through the connection's own
// handle step, on a connection that only captures what is written.

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkDecode runs one FuzzDecodeRequest input.
func (fs *fuzzServer) checkDecode(t testing.TB, key, version int16, body []byte) {
	t.Helper()
	frame := requestFrame(key, version, fuzzCorrelationID, body)
	nc := newCaptureConn()
	c := newClientConn(fs.s, nc)
	done := make(chan error, 1)
	go func() {
		// A produce request's response is queued (pipeline.go); the
		// serve loop writes it once complete.
		err := c.handle(frame)
		if err == nil {
			err = c.answerPending()
		}
		done <- err
	}()
	var err error
	busy := false
	select {
	case err = <-done:
	case <-time.After(fs.budget):
		busy = true
		c.close()
		select {
		case err = <-done:
		case <-time.After(fs.hangLimit):
			t.Fatalf("key %d v%d: still handled %v after its connection closed", key, version, fs.hangLimit)
		}
	}
	c.close()
	// As the connection does when it ends: a fetch whose response was
	// never written gives its bytes back.
	for i := range c.fetch.results {
		c.fetch.results[i].Release()
	}
	fs.panics.check(t)
	if busy {
		return
	}
	if used := fs.b.FetchMemoryStats().Used; used != 0 {
		t.Fatalf("key %d v%d: %d bytes of the fetch memory budget still held after the request", key, version, used)
	}
	written := nc.written()
	a, known := fs.s.apis.lookup(key)
	switch {
	case !known, version < a.min, version > a.max && key != apiVersionsKey:
		if err == nil || len(written) != 0 {
			t.Fatalf("key %d v%d is not served: handle returned %v after writing %d bytes, want an error and nothing written", key, version, err, len(written))
		}
		return
	case err != nil:
		if len(written) != 0 {
			t.Fatalf("%s v%d failed (%v) after writing %d bytes", a.name, version, err, len(written))
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.ReadFrom(body) == nil {
			t.Fatalf("%s v%d: a request that decodes failed: %v", a.name, version, err)
		}
		return
	}
	r := reply{correlationID: fuzzCorrelationID, key: key, version: version, unsupported: version > a.max}
	if len(written) == 0 {
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if p, ok := req.(*kmsg.ProduceRequest); !ok || p.ReadFrom(body) != nil || p.Acks != 0 {
			t.Fatalf("%s v%d: no response", a.name, version)
		}
		return
	}
	if len(written) < 4 || int(binary.BigEndian.Uint32(written)) != len(written)-4 {
		t.Fatalf("%s v%d: %d bytes written, not one size-prefixed response", a.name, version, len(written))
	}
	if err := r.check(written[4:]); err != nil {
		t.Fatal(err)
	}
}

// requestFrame is a request's frame after its size prefix: a v1 or v2
// header (client ID "fuzz"), then body.
func requestFrame(key, version int16, correlationID int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "fuzz"...)
	if req := kmsg.RequestForKey(key); req != nil {
		req.SetVersion(version)
		if req.IsFlexible() {
			b = append(b, 0) // no header tags
		}
	}
	return append(b, body...)
}

// captureConn is the connection handle writes its response to: it keeps
// the bytes, and its reads wait until it is closed.
type captureConn struct {
	mu     sync.Mutex
	out    bytes.Buffer
	closed chan struct{}
	once   sync.Once
}

func newCaptureConn() *captureConn { return &captureConn{closed: make(chan struct{})} }

func (c *captureConn) written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

func (c *captureConn) Read([]byte) (int, error) {
	<-c.closed
	return 0, net.ErrClosed
}

func (c *captureConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *captureConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *captureConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}
}

func (c *captureConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}

func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }
