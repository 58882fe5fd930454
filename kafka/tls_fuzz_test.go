package kafka

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/config"
)

// tlsFuzzHangLimit is how long a connection may still be served after its
// client's last byte: far more than a failed handshake takes, so that only
// a hang trips it.
const tlsFuzzHangLimit = 10 * time.Second

// clientHello is the first flight of a crypto/tls client: a real
// ClientHello record.
func clientHello(t testing.TB) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		defer client.Close()
		tc := tls.Client(client, &tls.Config{ServerName: "127.0.0.1"})
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		_ = tc.Handshake() // fails once the pipe closes
	}()
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	record := make([]byte, 5)
	if _, err := io.ReadFull(server, record); err != nil {
		t.Fatal(err)
	}
	record = append(record, make([]byte, binary.BigEndian.Uint16(record[3:]))...)
	if _, err := io.ReadFull(server, record[5:]); err != nil {
		t.Fatal(err)
	}
	return record
}

// FuzzTLSListenerHandshake: whatever a client sends to a TLS listener
// before it stops (a ClientHello cut or corrupted anywhere, a plaintext
// Kafka request, an HTTP request, noise), the server neither crashes nor
// hangs: the connection's goroutine ends and the connection is closed.
// (A client that stops without closing is TestTLSListenerClosesWhatIsNotTLS's
// handshake deadline.)
//
// An input that reaches the server's flight costs a signature and a key
// exchange, so minimising a new ClientHello-sized input takes the fuzzer's
// whole default minute; bound it to keep fuzzing:
//
//	go test -run '^$' -fuzz FuzzTLSListenerHandshake -fuzztime 30s -fuzzminimizetime 5s ./kafka/
func FuzzTLSListenerHandshake(f *testing.F) {
	hello := clientHello(f)
	f.Add(hello)
	f.Add(hello[:len(hello)/2])
	f.Add(append(append([]byte(nil), hello...), hello...))
	f.Add(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
	f.Add([]byte("GET /v1/status/ready HTTP/1.1\r\nHost: weir\r\n\r\n"))
	f.Add([]byte{0x16, 0x03, 0x01, 0xff, 0xff}) // a handshake record that never comes
	f.Add([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28})
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x02\x03\xfe\xff garbage \x80\x80\x80"))

	ca := newTestCA(f)
	dir := f.TempDir()
	tlsCfg := ca.listenerTLS(f, dir, config.ClientAuthRequested)
	reloader, err := config.NewTLSReloader(tlsCfg, nil)
	if err != nil {
		f.Fatal(err)
	}
	// No broker: no input gets past the handshake to a request, and a
	// broker's background goroutines (Raft, heartbeats) would make the
	// coverage of every input differ, sending the fuzzer into endless
	// minimisation of inputs that only looked new.
	s, err := NewServer(nil, Options{Logger: slog.New(slog.DiscardHandler), TLSHandshakeTimeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	l := &Listener{Name: "SSL", SecurityProtocol: config.ProtocolSSL, AdvertisedAddr: "127.0.0.1:9093", TLS: reloader}

	f.Fuzz(func(t *testing.T, input []byte) {
		conn := &scriptedConn{in: bytes.NewReader(input)}
		c := newListenerConn(s, conn, l)
		served := make(chan struct{})
		go func() {
			defer close(served)
			c.serve()
		}()
		select {
		case <-served:
		case <-time.After(tlsFuzzHangLimit):
			c.close()
			t.Fatalf("input %q: still served %v after the client's last byte", input, tlsFuzzHangLimit)
		}
		if !conn.closed.Load() {
			t.Fatalf("input %q: the server returned without closing the connection", input)
		}
	})
}

// scriptedConn is a client that sends its input, then end of file, and
// swallows whatever the server writes. Unlike a pipe or a socket it
// involves no other goroutine, so an input covers the same code each time
// it runs and the fuzzer's coverage guidance is not misled by scheduling.
type scriptedConn struct {
	in     *bytes.Reader
	closed atomic.Bool
}

func (sc *scriptedConn) Read(p []byte) (int, error) {
	if sc.closed.Load() {
		return 0, net.ErrClosed
	}
	return sc.in.Read(p)
}

func (sc *scriptedConn) Write(p []byte) (int, error) {
	if sc.closed.Load() {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (sc *scriptedConn) Close() error {
	sc.closed.Store(true)
	return nil
}

func (sc *scriptedConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9093}
}
func (sc *scriptedConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}

func (sc *scriptedConn) SetDeadline(time.Time) error      { return nil }
func (sc *scriptedConn) SetReadDeadline(time.Time) error  { return nil }
func (sc *scriptedConn) SetWriteDeadline(time.Time) error { return nil }
