package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func echoHandler(_ context.Context, _ string, req []byte) ([]byte, error) {
	return append([]byte("echo:"), req...), nil
}

func rpcStateOf(t testing.TB, m *Mux) *rpcState {
	t.Helper()
	m.rpcMu.Lock()
	defer m.rpcMu.Unlock()
	s := m.rpcState
	if s == nil {
		t.Fatal("mux has no rpc state")
	}
	return s
}

func accepted(m *Mux) float64 {
	return counterValue(m.metrics.conns.WithLabelValues("accepted", ""))
}

// waitAccepted waits for m to have counted n accepted connections (the
// mux counts after handing the connection over, so the count can trail
// the first answer) and checks it stays there.
func waitAccepted(t *testing.T, m *Mux, n float64) {
	t.Helper()
	waitFor(t, 2*time.Second, fmt.Sprintf("%v accepted connections", n), func() bool { return accepted(m) >= n })
	time.Sleep(20 * time.Millisecond)
	if got := accepted(m); got != n {
		t.Errorf("server accepted %v connections, want %v", got, n)
	}
}

// newMuxes is newNodes without a group directory and with the default
// header timeout: the 300 ms of newNodes is tight for a test that moves
// 16 MiB frames under -race on a small machine.
func newMuxes(t *testing.T, n int) []*Mux {
	t.Helper()
	ms := make([]*Mux, n)
	for i := range ms {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMux(ln, MuxConfig{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := m.Close(); err != nil {
				t.Errorf("closing mux: %v", err)
			}
		})
		ms[i] = m
	}
	return ms
}

// openServed is how many inbound connections the service's layer holds.
func openServed(m *Mux, service string) int {
	m.mu.Lock()
	l := m.layers[rpcStreamPrefix+service]
	m.mu.Unlock()
	if l == nil {
		return -1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

func histogramCount(o prometheus.Observer) uint64 {
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// within fails the test unless f returns within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s took longer than %v", what, d)
	}
}

func TestRPCFrameCodec(t *testing.T) {
	b := appendFrameHeader(nil, rpcFlagResponse|rpcFlagError, 7, 1500, 3)
	b = append(b, "abc"...)
	f, err := readFrame(bytes.NewReader(b), RPCMaxPayload)
	if err != nil || f.flags != rpcFlagResponse|rpcFlagError || f.id != 7 || f.timeout != 1500 || string(f.payload) != "abc" {
		t.Fatalf("readFrame = %+v, %v", f, err)
	}
	if _, err := readFrame(bytes.NewReader(nil), 10); err != io.EOF {
		t.Errorf("empty input: %v, want io.EOF", err)
	}
	if _, err := readFrame(bytes.NewReader(b[:len(b)-1]), 10); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated payload: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := readFrame(bytes.NewReader(b[:5]), 10); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated header: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := readFrame(bytes.NewReader(b), 2); !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, errBadFrame) {
		t.Errorf("over the limit: %v", err)
	}
	bad := func(mutate func([]byte)) []byte {
		c := bytes.Clone(b)
		mutate(c)
		return c
	}
	for name, in := range map[string][]byte{
		"version":      bad(func(c []byte) { c[0] = 2 }),
		"unknown flag": bad(func(c []byte) { c[1] = 0x05 }),
		"error only":   bad(func(c []byte) { c[1] = rpcFlagError }),
	} {
		if _, err := readFrame(bytes.NewReader(in), 10); !errors.Is(err, errBadFrame) {
			t.Errorf("%s: %v, want errBadFrame", name, err)
		}
	}
}

// TestRPCRoundTrip: answers come back, sequential calls share one pooled
// connection, the caller's deadline reaches the handler, metrics count,
// and an unreachable peer is a plain network error.
func TestRPCRoundTrip(t *testing.T) {
	nodes := newNodes(t, 2)
	srv, cli := nodes[1].mux, nodes[0].mux
	var mu sync.Mutex
	var froms []string
	var deadlines []bool
	err := srv.Handle("echo", func(ctx context.Context, from string, req []byte) ([]byte, error) {
		_, ok := ctx.Deadline()
		mu.Lock()
		froms, deadlines = append(froms, from), append(deadlines, ok)
		mu.Unlock()
		return echoHandler(ctx, from, req)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range [][]byte{[]byte("a"), nil, []byte("hello"), bytes.Repeat([]byte("x"), 100<<10)} {
		ctx := context.Background()
		if i == 2 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
		}
		resp, err := cli.Call(ctx, srv.Addr(), "echo", req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if want := append([]byte("echo:"), req...); !bytes.Equal(resp, want) {
			t.Fatalf("call %d: got %d bytes %.20q, want %.20q", i, len(resp), resp, want)
		}
	}
	mu.Lock()
	if froms[0] == "" || deadlines[0] || !deadlines[2] {
		t.Errorf("handler saw from %q, deadlines %v; want an address and only call 2 with a deadline", froms[0], deadlines)
	}
	mu.Unlock()
	waitAccepted(t, srv, 1) // 4 sequential calls, one connection
	s := rpcStateOf(t, cli)
	if n := s.idleCount(srv.Addr(), "echo"); n != 1 {
		t.Errorf("%d idle connections pooled, want 1", n)
	}
	if c := counterValue(s.metrics.calls.WithLabelValues("echo", rpcOK)); c != 4 {
		t.Errorf("calls{echo,ok} = %v, want 4", c)
	}
	if c := histogramCount(s.metrics.latency.WithLabelValues("echo")); c != 4 {
		t.Errorf("latency samples = %v, want 4", c)
	}
	if c := counterValue(rpcStateOf(t, srv).metrics.handled.WithLabelValues("echo", rpcHandledOK)); c != 4 {
		t.Errorf("handled{echo,ok} = %v, want 4", c)
	}
	mfs, err := nodes[0].reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "weir_raft_rpc_calls_total"
	}
	if !found {
		t.Error("weir_raft_rpc_calls_total not on the mux's registerer")
	}

	// A port nobody listens on: a dial error, not a *RemoteError.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	_, err = cli.Call(context.Background(), dead, "echo", []byte("a"))
	var re *RemoteError
	var op *net.OpError
	if err == nil || errors.As(err, &re) || !errors.As(err, &op) {
		t.Errorf("call to a closed port: %v; want a wrapped *net.OpError", err)
	}
	if c := counterValue(s.metrics.calls.WithLabelValues("echo", rpcDialError)); c != 1 {
		t.Errorf("calls{echo,dial_error} = %v, want 1", c)
	}
}

// TestRPCConcurrent: many callers at once (run with -race); each gets its
// own answer and the pool stays within its bound.
func TestRPCConcurrent(t *testing.T) {
	nodes := newNodes(t, 2)
	srv, cli := nodes[1].mux, nodes[0].mux
	if err := srv.Handle("echo", echoHandler); err != nil {
		t.Fatal(err)
	}
	const callers, calls = 32, 25
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				req := fmt.Appendf(nil, "%d/%d", g, i)
				resp, err := cli.Call(ctx, srv.Addr(), "echo", req)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if string(resp) != "echo:"+string(req) {
					errs <- fmt.Errorf("got %q for %q", resp, req)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := rpcStateOf(t, cli)
	if n := s.idleCount(srv.Addr(), "echo"); n < 1 || n > rpcMaxIdle {
		t.Errorf("%d idle connections pooled, want 1..%d", n, rpcMaxIdle)
	}
	// Connections beyond the pool were closed by the caller, and the
	// server let go of them.
	waitFor(t, 2*time.Second, "server holding only the pooled connections", func() bool {
		return openServed(srv, "echo") == s.idleCount(srv.Addr(), "echo")
	})
	if c := counterValue(s.metrics.calls.WithLabelValues("echo", rpcOK)); c != callers*calls {
		t.Errorf("calls{echo,ok} = %v, want %d", c, callers*calls)
	}
}

// TestRPCRemoteError: a handler's error (or panic) comes back as a
// *RemoteError with its text, and the connection serves the next call.
func TestRPCRemoteError(t *testing.T) {
	nodes := newNodes(t, 2)
	srv, cli := nodes[1].mux, nodes[0].mux
	err := srv.Handle("svc", func(ctx context.Context, from string, req []byte) ([]byte, error) {
		switch string(req) {
		case "fail":
			return []byte("ignored"), &NotLeaderError{Group: "controller", LeaderID: "n2", LeaderAddr: "10.0.0.2:9093"}
		case "panic":
			panic("handler bug")
		}
		return echoHandler(ctx, from, req)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := (&NotLeaderError{Group: "controller", LeaderID: "n2", LeaderAddr: "10.0.0.2:9093"}).Error()
	for range 2 {
		resp, err := cli.Call(ctx, srv.Addr(), "svc", []byte("fail"))
		var re *RemoteError
		if !errors.As(err, &re) || re.Message != want || re.Service != "svc" || re.Addr != srv.Addr() || resp != nil {
			t.Fatalf("Call = %q, %v; want *RemoteError with message %q", resp, err, want)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error text %q lost the message", err)
		}
		if resp, err := cli.Call(ctx, srv.Addr(), "svc", []byte("ok")); err != nil || string(resp) != "echo:ok" {
			t.Fatalf("call after a remote error: %q, %v", resp, err)
		}
	}
	_, err = cli.Call(ctx, srv.Addr(), "svc", []byte("panic"))
	var re *RemoteError
	if !errors.As(err, &re) || !strings.Contains(re.Message, "handler bug") {
		t.Fatalf("panicking handler: %v", err)
	}
	if resp, err := cli.Call(ctx, srv.Addr(), "svc", []byte("ok")); err != nil || string(resp) != "echo:ok" {
		t.Fatalf("call after a panic: %q, %v", resp, err)
	}
	waitAccepted(t, srv, 1) // errors do not close the connection
	s := rpcStateOf(t, cli)
	if c := counterValue(s.metrics.calls.WithLabelValues("svc", rpcRemoteError)); c != 3 {
		t.Errorf("calls{svc,remote_error} = %v, want 3", c)
	}
	if c := counterValue(rpcStateOf(t, srv).metrics.handled.WithLabelValues("svc", rpcHandledError)); c != 3 {
		t.Errorf("handled{svc,error} = %v, want 3", c)
	}
}

// TestRPCUnknownServiceAndGroups: calling a service the peer does not
// handle fails (the mux closes the connection) while a Raft group on the
// same muxes keeps committing; names are checked on both sides.
func TestRPCUnknownServiceAndGroups(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "alive", fastConfig)
	sum := applyN(t, ms, 3)
	for _, n := range nodes {
		if err := n.mux.Handle("echo", echoHandler); err != nil {
			t.Fatal(err)
		}
	}

	cli, srv := nodes[0].mux, nodes[1].mux
	var err error
	within(t, 3*time.Second, "call to an unknown service", func() {
		_, err = cli.Call(context.Background(), srv.Addr(), "nosuch", []byte("x"))
	})
	var re *RemoteError
	if err == nil || errors.As(err, &re) || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("unknown service: %v; want a connection error saying so", err)
	}
	if c := counterValue(srv.metrics.conns.WithLabelValues("rejected", rejectUnknownGroup)); c != 1 {
		t.Errorf("rejected{unknown_group} = %v, want 1", c)
	}
	if n := rpcStateOf(t, cli).idleCount(srv.Addr(), "nosuch"); n != 0 {
		t.Errorf("%d connections pooled for the unknown service", n)
	}
	if resp, err := cli.Call(context.Background(), srv.Addr(), "echo", []byte("x")); err != nil || string(resp) != "echo:x" {
		t.Fatalf("known service after an unknown one: %q, %v", resp, err)
	}

	// Names: a service and a group can't take the same stream, and the
	// usual name rules hold.
	if err := cli.Handle("echo", echoHandler); err == nil {
		t.Error("second Handle of a service succeeded")
	}
	if err := cli.Handle("bad/name", echoHandler); err == nil {
		t.Error("Handle accepted an invalid name")
	}
	if err := cli.Handle("", echoHandler); err == nil {
		t.Error("Handle accepted an empty name")
	}
	if _, err := cli.Call(context.Background(), srv.Addr(), "bad name", nil); err == nil {
		t.Error("Call accepted an invalid name")
	}
	if _, err := cli.Start(fastConfig(rpcStreamPrefix+"echo", nodes[0], &countFSM{})); err == nil {
		t.Error("a group took a service's stream name")
	}

	sum += applyN(t, ms, 3)
	converge(t, ms, fsmState{sum, 6}, 10*time.Second)
}

// TestRPCFrameLimits: an oversized request is refused before it is sent,
// an oversized response becomes a *RemoteError, and malformed frames
// close only their own connection, before any payload is read.
func TestRPCFrameLimits(t *testing.T) {
	ms := newMuxes(t, 2)
	srv, cli := ms[1], ms[0]
	err := srv.Handle("svc", func(_ context.Context, _ string, req []byte) ([]byte, error) {
		if string(req) == "big" {
			return make([]byte, RPCMaxPayload+1), nil
		}
		return fmt.Appendf(nil, "%d", len(req)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = cli.Call(ctx, srv.Addr(), "svc", make([]byte, RPCMaxPayload+1))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized request: %v, want ErrFrameTooLarge", err)
	}
	if n := accepted(srv); n != 0 {
		t.Fatalf("oversized request reached the server (%v connections)", n)
	}
	if resp, err := cli.Call(ctx, srv.Addr(), "svc", make([]byte, RPCMaxPayload)); err != nil || string(resp) != fmt.Sprint(RPCMaxPayload) {
		t.Fatalf("request at the limit: %q, %v", resp, err)
	}
	_, err = cli.Call(ctx, srv.Addr(), "svc", []byte("big"))
	var re *RemoteError
	if !errors.As(err, &re) || !strings.Contains(re.Message, "exceeds") {
		t.Fatalf("oversized response: %v, want a *RemoteError", err)
	}
	if resp, err := cli.Call(ctx, srv.Addr(), "svc", []byte("abc")); err != nil || string(resp) != "3" {
		t.Fatalf("call after an oversized response: %q, %v", resp, err)
	}

	// Raw connections with bad frames: each is closed without an answer.
	hdr := encodeHeader(rpcStreamPrefix+"svc", "")
	for name, frame := range map[string][]byte{
		"too large":  appendFrameHeader(nil, 0, 1, 0, RPCMaxPayload+1), // no payload follows
		"version":    append([]byte{9}, appendFrameHeader(nil, 0, 1, 0, 0)[1:]...),
		"a response": appendFrameHeader(nil, rpcFlagResponse, 1, 0, 0),
	} {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(append(bytes.Clone(hdr), frame...)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, err := c.Read(make([]byte, 1))
		var ne net.Error
		if (err != io.EOF && !isReset(err)) || (errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("%s: read %d, %v; want the connection closed", name, n, err)
		}
		c.Close()
	}
	if c := counterValue(rpcStateOf(t, srv).metrics.handled.WithLabelValues("svc", rpcHandledBadFrame)); c != 3 {
		t.Errorf("handled{svc,bad_frame} = %v, want 3", c)
	}
	// The pooled connection was not disturbed.
	if resp, err := cli.Call(ctx, srv.Addr(), "svc", []byte("abcd")); err != nil || string(resp) != "4" {
		t.Fatalf("call after bad frames: %q, %v", resp, err)
	}
	waitAccepted(t, srv, 4) // one pooled + three raw
}

// TestRPCCancel: a call whose ctx ends returns promptly, its connection is
// closed instead of pooled, the deadline reached the handler, and the next
// calls work.
func TestRPCCancel(t *testing.T) {
	nodes := newNodes(t, 2)
	srv, cli := nodes[1].mux, nodes[0].mux
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	handlerErr := make(chan error, 4)
	err := srv.Handle("svc", func(ctx context.Context, from string, req []byte) ([]byte, error) {
		if string(req) != "block" {
			return echoHandler(ctx, from, req)
		}
		entered <- struct{}{}
		select {
		case <-release:
			handlerErr <- nil
			return []byte("late"), nil
		case <-ctx.Done():
			handlerErr <- ctx.Err()
			return nil, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	if _, err := cli.Call(context.Background(), srv.Addr(), "svc", []byte("warm")); err != nil {
		t.Fatal(err)
	}
	s := rpcStateOf(t, cli)

	// Cancel mid-call.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	start := time.Now()
	_, err = cli.Call(ctx, srv.Addr(), "svc", []byte("block"))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("canceled call: %v after %v", err, time.Since(start))
	}
	if n := s.idleCount(srv.Addr(), "svc"); n != 0 {
		t.Errorf("%d connections pooled after the cancel, want 0 (the only one was closed)", n)
	}

	// A deadline: the caller gives up and the handler's ctx, which carries
	// the same deadline, ends too.
	ctx, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	start = time.Now()
	_, err = cli.Call(ctx, srv.Addr(), "svc", []byte("block"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("call past its deadline: %v after %v", err, time.Since(start))
	}
	<-entered
	select {
	case herr := <-handlerErr:
		if !errors.Is(herr, context.DeadlineExceeded) {
			t.Errorf("handler ended with %v, want its ctx's deadline", herr)
		}
	case <-time.After(2 * time.Second):
		t.Error("handler's ctx did not end at the caller's deadline")
	}

	// An already-ended ctx sends nothing.
	if _, err := cli.Call(ctx, srv.Addr(), "svc", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call with an expired ctx: %v", err)
	}

	// The pool recovers: new calls dial and pool again.
	for i := range 3 {
		if resp, err := cli.Call(context.Background(), srv.Addr(), "svc", []byte("ok")); err != nil || string(resp) != "echo:ok" {
			t.Fatalf("call %d after cancels: %q, %v", i, resp, err)
		}
	}
	if n := s.idleCount(srv.Addr(), "svc"); n != 1 {
		t.Errorf("%d connections pooled, want 1", n)
	}
	s.mu.Lock()
	open := len(s.conns)
	s.mu.Unlock()
	if open != 1 {
		t.Errorf("%d outbound connections open, want only the pooled one", open)
	}
	if c := counterValue(s.metrics.calls.WithLabelValues("svc", rpcCanceled)); c != 1 {
		t.Errorf("calls{svc,canceled} = %v, want 1", c)
	}
	if c := counterValue(s.metrics.calls.WithLabelValues("svc", rpcDeadline)); c != 2 {
		t.Errorf("calls{svc,deadline} = %v, want 2", c)
	}
}

// TestRPCPeerRestart: a pooled connection the peer closed while idle is
// dropped from the pool, so the first call after the peer comes back on
// the same address succeeds.
func TestRPCPeerRestart(t *testing.T) {
	nodes := newNodes(t, 1)
	cli := nodes[0].mux
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv, err := NewMux(ln, MuxConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Handle("echo", echoHandler); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Call(context.Background(), addr, "echo", []byte("1")); err != nil {
		t.Fatal(err)
	}
	s := rpcStateOf(t, cli)
	if s.idleCount(addr, "echo") != 1 {
		t.Fatal("no pooled connection")
	}
	srv.Close()
	waitFor(t, 2*time.Second, "the dead connection to leave the pool", func() bool {
		return s.idleCount(addr, "echo") == 0
	})

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv, err = NewMux(ln, MuxConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Handle("echo", echoHandler); err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Call(context.Background(), addr, "echo", []byte("2")); err != nil || string(resp) != "echo:2" {
		t.Fatalf("first call after the peer restarted: %q, %v", resp, err)
	}
}

// TestRPCCloseEndsHandlersAndPool: Mux.Close closes pooled connections,
// ends in-flight handlers through their ctx (and so the calls waiting on
// them), refuses later calls, and leaves no goroutine behind.
func TestRPCCloseEndsHandlersAndPool(t *testing.T) {
	base := runtime.NumGoroutine()
	nodes := newNodes(t, 3)
	srv, pooler, caller := nodes[0].mux, nodes[1].mux, nodes[2].mux
	entered := make(chan struct{})
	handlerErr := make(chan error, 1)
	if err := srv.Handle("echo", echoHandler); err != nil {
		t.Fatal(err)
	}
	err := srv.Handle("block", func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		handlerErr <- ctx.Err()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pooler.Call(context.Background(), srv.Addr(), "echo", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := openServed(srv, "echo"); n != 1 {
		t.Fatalf("server holds %d echo connections, want 1", n)
	}

	// Closing the caller's mux closes its pooled connection: the server
	// sees it go.
	within(t, 3*time.Second, "closing the pooling mux", func() {
		if err := pooler.Close(); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, 2*time.Second, "the pooled connection closed", func() bool {
		return openServed(srv, "echo") == 0
	})
	if _, err := pooler.Call(context.Background(), srv.Addr(), "echo", nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Call on a closed mux: %v, want net.ErrClosed", err)
	}
	if err := pooler.Handle("late", echoHandler); err == nil {
		t.Error("Handle on a closed mux succeeded")
	}

	// Closing the serving mux ends the handler in flight; the call
	// waiting on it returns.
	callErr := make(chan error, 1)
	go func() {
		_, err := caller.Call(context.Background(), srv.Addr(), "block", nil)
		callErr <- err
	}()
	select {
	case <-entered:
	case <-time.After(3 * time.Second):
		t.Fatal("handler not called")
	}
	within(t, 3*time.Second, "closing the serving mux", func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := <-handlerErr; !errors.Is(err, context.Canceled) {
		t.Errorf("handler's ctx ended with %v, want context.Canceled", err)
	}
	select {
	case err := <-callErr:
		if err == nil {
			t.Error("call to a closing mux succeeded")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("call still waiting after the serving mux closed")
	}
	if err := caller.Close(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Mux{caller} {
		if s := m.rpcState; s != nil && !s.isClosed() {
			t.Error("rpc state still open after its mux closed")
		}
	}
	waitFor(t, 5*time.Second, "goroutines back to the baseline", func() bool {
		return runtime.NumGoroutine() <= base
	})
}

func TestRPCPrefixReservedForServices(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMux(ln, MuxConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Layer(rpcStreamPrefix + "forward"); err == nil {
		t.Fatal("a group took a name reserved for rpc services")
	}
}
