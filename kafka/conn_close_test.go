package kafka

import (
	"testing"
	"time"

	"github.com/weir-broker/weir/broker"
)

// TestClosedConnectionEndsItsLongPoll: a client that closes its
// connection while a fetch waits for data (max_wait_ms ten minutes) gets
// its connection and handler released at once, not when the wait ends:
// otherwise closed clients would hold sockets and goroutines for as long
// as they asked to wait.
func TestClosedConnectionEndsItsLongPoll(t *testing.T) {
	s, b, addr := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "quiet", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	const clients = 8
	for range clients {
		c := dial(t, addr)
		req := fetchRequest(12, "quiet", tp.ID(), 0, 1<<20)
		req.MinBytes, req.MaxWaitMillis = 1, int32((10 * time.Minute).Milliseconds())
		c.send(req)
		// The request is read and waiting before the client leaves.
		waitFor(t, 5*time.Second, "the fetch to be waiting", func() bool { return s.openConns() > 0 })
		c.nc.Close()
	}
	waitFor(t, 10*time.Second, "closed clients' connections released", func() bool { return s.openConns() == 0 })
}

// openConns counts the connections the server still holds.
func (s *Server) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
