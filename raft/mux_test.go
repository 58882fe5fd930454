package raft

import (
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestHeaderRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go a.Write(encodeHeader("controller", ""))
	got, _, err := readHeader(b, time.Second)
	if err != nil || got != "controller" {
		t.Fatalf("readHeader = %q, %v", got, err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "p 1", string(make([]byte, 256))} {
		if validGroupName(bad) == nil {
			t.Errorf("validGroupName(%q) accepted", bad)
		}
	}
}

// TestMuxRejects sends a bad magic, a bad version, an unknown group and a
// header that never completes; each is closed and counted, and the group
// running on the same listener keeps working.
func TestMuxRejects(t *testing.T) {
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "alive", fastConfig)
	sum := applyN(t, ms, 3)

	addr := nodes[0].mux.Addr()
	cases := []struct {
		name string
		send []byte
	}{
		{"bad magic", []byte("HTTP/1.1 GET /\r\n")},
		{"bad version", append([]byte("WRFT\x09\x05"), "alive"...)},
		{"unknown group", encodeHeader("nosuchgroup", "")},
		{"silent", []byte("WRF")}, // incomplete: the header deadline closes it
	}
	for _, c := range cases {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(c.send); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := conn.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
			t.Errorf("%s: read %d, %v; want the mux to close the connection", c.name, n, err)
		}
		conn.Close()
	}

	conns := nodes[0].mux.metrics.conns
	waitFor(t, 2*time.Second, "rejections counted", func() bool {
		return counterValue(conns.WithLabelValues("rejected", rejectBadHeader)) == 3 &&
			counterValue(conns.WithLabelValues("rejected", rejectUnknownGroup)) == 1
	})
	// Followers of a node that won the first election may never have
	// dialled it, so count acceptances over the whole cluster.
	accepted := 0.0
	for _, n := range nodes {
		accepted += counterValue(n.mux.metrics.conns.WithLabelValues("accepted", ""))
	}
	if accepted == 0 {
		t.Error("no accepted connections counted on any node")
	}

	sum += applyN(t, ms, 3)
	converge(t, ms, fsmState{sum, 6}, 10*time.Second)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// TestLayerLifecycle: a name can be registered once; after the layer
// closes the name is free again and Accept reports closed.
func TestLayerLifecycle(t *testing.T) {
	nodes := newNodes(t, 1)
	m := nodes[0].mux
	l, err := m.Layer("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Layer("x"); err == nil {
		t.Fatal("second Layer for the same group succeeded")
	}
	if _, err := m.Layer("bad/name"); err == nil {
		t.Fatal("Layer accepted an invalid name")
	}
	l.Close()
	if _, err := l.Accept(); err == nil {
		t.Fatal("Accept on a closed layer succeeded")
	}
	l2, err := m.Layer("x")
	if err != nil {
		t.Fatalf("re-registering after close: %v", err)
	}
	l2.Close()

	// Starting a group twice on one mux fails instead of blocking on the
	// first one's store.
	fsm := &countFSM{}
	g, err := m.Start(fastConfig("dup", nodes[0], fsm))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(fastConfig("dup", nodes[0], fsm)); err == nil {
		t.Fatal("second Start of a running group succeeded")
	}
	g.Shutdown()
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestShutdownLeavesNoGoroutines: removing a group (Shutdown) and closing
// the muxes stops every goroutine they started, including hashicorp/raft's
// per-connection handlers, which the layer closes on removal.
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	nodes := newNodes(t, 3)
	ms := startGroup(t, nodes, "a", fastConfig)
	ms2 := startGroup(t, nodes, "b", fastConfig)
	applyN(t, ms, 2)
	applyN(t, ms2, 2)
	for _, m := range ms {
		if err := m.g.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	// Group "b" still works with "a" removed everywhere.
	applyN(t, ms2, 2)
	for _, n := range nodes {
		if err := n.mux.Close(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "goroutines back to the baseline", func() bool {
		return runtime.NumGoroutine() <= base
	})
}

func TestHCLogFormatArgs(t *testing.T) {
	in := []any{"servers", hclog.Fmt("%+v", []int{1, 2}), "n", 3}
	out := formatArgs(in)
	if out[1] != "[1 2]" || out[3] != 3 {
		t.Fatalf("formatted %v", out)
	}
	if _, ok := in[1].(hclog.Format); !ok {
		t.Fatal("the caller's slice was changed")
	}
}

// TestMuxMemberIdentity: a stream dialed to a member address reaches the
// node only when the node has that identity; plain addresses reach anyone.
func TestMuxMemberIdentity(t *testing.T) {
	a, b := net.Pipe()
	go a.Write(encodeHeader("g", "inc-1"))
	group, id, err := readHeader(b, time.Second)
	a.Close()
	b.Close()
	if err != nil || group != "g" || id != "inc-1" {
		t.Fatalf("readHeader = %q %q %v", group, id, err)
	}
	if addr, id := SplitMemberAddr(MemberAddr("127.0.0.1:1", "x")); addr != "127.0.0.1:1" || id != "x" {
		t.Fatalf("SplitMemberAddr = %q %q", addr, id)
	}
	if MemberAddr("h:1", "") != "h:1" {
		t.Fatal("MemberAddr without identity changed the address")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMux(ln, MuxConfig{Identity: "inc-2"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Layer("g")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dialer := &layer{group: "g", hdr: encodeHeader("g", "")}
	for _, tc := range []struct {
		identity string
		want     bool
	}{{"inc-1", false}, {"inc-2", true}, {"", true}} {
		c, err := dialer.Dial(hraft.ServerAddress(MemberAddr(m.Addr(), tc.identity)), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-accepted:
			got.Close()
			if !tc.want {
				t.Errorf("stream for %q reached a node with identity inc-2", tc.identity)
			}
		case <-time.After(time.Second):
			if tc.want {
				t.Errorf("stream for %q was not delivered", tc.identity)
			}
		}
		c.Close()
	}
}
