package kafka

// The fuzz targets' checks must fail on the faults they are there to
// find: these tests plant each fault in a handler and expect the check
// to report it.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

func TestFuzzDecodeChecksCatchFaults(t *testing.T) {
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.SetVersion(12)
	body := metadata.AppendTo(nil)
	stuck := make(chan struct{})
	defer close(stuck)
	fs := startFuzzServer(t, false)
	if got := checkFailures(t, func(tb testing.TB) { fs.checkDecode(tb, 3, 12, body) }); got != "" {
		t.Fatalf("check of a correct handler failed: %s", got)
	}
	fs.budget, fs.hangLimit = 50*time.Millisecond, 200*time.Millisecond
	for _, tc := range []struct {
		name    string
		handler func(c *clientConn, req kmsg.Request) (kmsg.Response, error)
		want    string
	}{
		{"panic", func(*clientConn, kmsg.Request) (kmsg.Response, error) { panic("planted") }, "planted"},
		{"no response", func(*clientConn, kmsg.Request) (kmsg.Response, error) { return nil, nil }, "no response"},
		{"response at another version", func(_ *clientConn, req kmsg.Request) (kmsg.Response, error) {
			resp := req.ResponseKind()
			resp.SetVersion(0)
			return resp, nil
		}, "v12: response"},
		{"response of another API", func(*clientConn, kmsg.Request) (kmsg.Response, error) {
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.SupportedMechanisms = []string{"PLAIN"}
			return resp, nil
		}, "v12: response"},
		{"deaf to its connection closing", func(*clientConn, kmsg.Request) (kmsg.Response, error) {
			<-stuck
			return nil, errConnClosing
		}, "still handled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A server of its own: the stuck handler still reads the
			// table when the next case would change it.
			fs := fs.withOwnServer(t)
			fs.s.apis[3].handle = tc.handler
			got := checkFailures(t, func(tb testing.TB) { fs.checkDecode(tb, 3, 12, body) })
			if !strings.Contains(got, tc.want) {
				t.Fatalf("check reported %q, want it to mention %q", got, tc.want)
			}
		})
	}
}

func TestFuzzFrameChecksCatchFaults(t *testing.T) {
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.SetVersion(12)
	input := encodeRequest(metadata, 5)
	fs := startFuzzServer(t, true)
	got := checkFailures(t, func(tb testing.TB) {
		// Generous, so that only a server that never answers is busy.
		fs.budget = time.Minute
		if busy := fs.checkFrames(tb, pipelinedSeed()); busy {
			tb.Fatal("pipelined requests not all answered")
		}
		fs.budget = fuzzInputBudget
		fs.checkFrames(tb, input)
		fs.checkHealthy(tb)
	})
	if got != "" {
		t.Fatalf("check of a correct server failed: %s", got)
	}
	for _, tc := range []struct {
		name    string
		handler func(c *clientConn, req kmsg.Request) (kmsg.Response, error)
		want    string
	}{
		{"panic", func(*clientConn, kmsg.Request) (kmsg.Response, error) { panic("planted") }, "planted"},
		// The next answer, ApiVersions', comes in its place.
		{"no response", func(*clientConn, kmsg.Request) (kmsg.Response, error) { return nil, nil }, "correlation ID -24301, want 5"},
		{"response at another version", func(_ *clientConn, req kmsg.Request) (kmsg.Response, error) {
			resp := req.ResponseKind()
			resp.SetVersion(0)
			return resp, nil
		}, "v12: response"},
		{"error instead of a response", func(*clientConn, kmsg.Request) (kmsg.Response, error) {
			return nil, errConnClosing
		}, "closed after 0 responses, want 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs.replaceHandler(t, 3, tc.handler)
			got := checkFailures(t, func(tb testing.TB) { fs.checkFrames(tb, input) })
			if !strings.Contains(got, tc.want) {
				t.Fatalf("check reported %q, want it to mention %q", got, tc.want)
			}
		})
	}
}

// TestTrimTopics: past the partition limit every topic but the internal
// ones goes.
func TestTrimTopics(t *testing.T) {
	fs := startFuzzServer(t, false)
	fs.maxPartitions = 3
	for _, name := range []string{"a", "b"} {
		if _, err := fs.b.CreateTopic(broker.CreateTopicRequest{Name: name, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
		fs.trimTopics(t)
	}
	var left []string
	for _, topic := range fs.b.Topics() {
		left = append(left, topic.Name())
	}
	if len(left) != 1 || left[0] != broker.GroupTopic {
		t.Fatalf("topics left: %v, want only %s", left, broker.GroupTopic)
	}
}

// TestFramesToSend: what FuzzRequestFrame sends for an input, and the
// answers it then expects.
func TestFramesToSend(t *testing.T) {
	apis := (&Server{}).newAPITable()
	frame := func(key, version int16, corr int32, body []byte) []byte {
		f := requestFrame(key, version, corr, body)
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)
	}
	api := func(version int16) []byte {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(version)
		return req.AppendTo(nil)
	}
	acksZero := kmsg.NewPtrProduceRequest()
	acksZero.SetVersion(9)
	acksZero.Acks = 0
	join := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	sentinel := encodeRequest(kmsg.NewPtrApiVersionsRequest(), sentinelCorrelationID)
	const end = ", key 18 v0 corr -24301" // the sentinel's answer
	for _, tc := range []struct {
		name   string
		input  []byte
		want   string
		closes bool
		sent   int // bytes sent, when it matters
	}{
		{"empty", nil, end[2:], false, len(sentinel)},
		{"one request", frame(18, 3, 1, api(3)), "key 18 v3 corr 1" + end, false, 0},
		{"unsupported ApiVersions answered, then more", join(frame(18, 99, 1, nil), frame(18, 0, 2, api(0))), "key 18 v99 corr 1, key 18 v0 corr 2" + end, false, 0},
		{"unknown key ends the connection", join(frame(18, 0, 1, api(0)), frame(9999, 0, 2, nil), frame(18, 0, 3, api(0))), "key 18 v0 corr 1", true, 0},
		{"unserved version ends it", join(frame(fetchKey, 2, 1, nil), frame(18, 0, 2, api(0))), "", true, 0},
		{"body that does not decode ends it", join(frame(3, 1, 1, []byte{0, 0, 0}), frame(18, 0, 2, api(0))), "", true, 0},
		{"acks=0 produce unanswered", join(frame(produceKey, 9, 1, acksZero.AppendTo(nil)), frame(18, 0, 2, api(0))), "key 18 v0 corr 2" + end, false, 0},
		{"size below a header", join([]byte{0, 0, 0, 7}, frame(18, 0, 2, api(0))), "", true, 0},
		{"size above the maximum", []byte{0, 0x10, 0, 1}, "", true, 4},
		// The correlation ID's last three bytes and the rest are zeros.
		{"last frame cut short", join(frame(18, 0, 1, api(0)), frame(18, 0, 2, api(0))[:9]), "key 18 v0 corr 1, key 18 v0 corr 0" + end, false, 2*len(frame(18, 0, 1, api(0))) + len(sentinel)},
		{"size prefix cut short", join(frame(18, 0, 1, api(0)), []byte{0, 0}), "key 18 v0 corr 1", true, len(frame(18, 0, 1, api(0))) + 4},
	} {
		send, want, closes := framesToSend(apis, tc.input)
		if got := describeReplies(want); got != tc.want || closes != tc.closes {
			t.Errorf("%s: expects %q, closes %v; want %q, %v", tc.name, got, closes, tc.want, tc.closes)
		}
		if tc.sent != 0 && len(send) != tc.sent {
			t.Errorf("%s: sends %d bytes, want %d", tc.name, len(send), tc.sent)
		}
		if !bytes.HasPrefix(send, tc.input) {
			t.Errorf("%s: the input is not sent as it is", tc.name)
		}
	}
}

// withOwnServer returns fs with a server of its own (not listening) on
// the same broker.
func (fs *fuzzServer) withOwnServer(t *testing.T) *fuzzServer {
	s, err := NewServer(fs.b, fs.s.opts)
	if err != nil {
		t.Fatal(err)
	}
	own := *fs
	own.s, own.addr = s, ""
	return &own
}

// replaceHandler swaps the handler of key until the test ends. It holds
// the server's lock, which every new connection takes before its first
// request, so the connections see the handler of the moment.
func (fs *fuzzServer) replaceHandler(t *testing.T, key int16, h func(c *clientConn, req kmsg.Request) (kmsg.Response, error)) {
	fs.s.mu.Lock()
	defer fs.s.mu.Unlock()
	old := fs.s.apis[key].handle
	fs.s.apis[key].handle = h
	t.Cleanup(func() {
		fs.s.mu.Lock()
		defer fs.s.mu.Unlock()
		fs.s.apis[key].handle = old
	})
}

// failureRecorder is a testing.TB whose failures are recorded instead of
// failing the test; Fatal ends the goroutine, as it does in a test.
type failureRecorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *failureRecorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
}

func (r *failureRecorder) Helper()                        {}
func (r *failureRecorder) Error(args ...any)              { r.record(fmt.Sprint(args...)) }
func (r *failureRecorder) Errorf(format string, a ...any) { r.record(fmt.Sprintf(format, a...)) }
func (r *failureRecorder) Fatal(args ...any)              { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *failureRecorder) Fatalf(format string, a ...any) {
	r.record(fmt.Sprintf(format, a...))
	runtime.Goexit()
}
func (r *failureRecorder) FailNow()                      { r.record("FailNow"); runtime.Goexit() }
func (r *failureRecorder) Fail()                         { r.record("Fail") }
func (r *failureRecorder) Skip(args ...any)              { runtime.Goexit() }
func (r *failureRecorder) Skipf(format string, a ...any) { runtime.Goexit() }
func (r *failureRecorder) Logf(string, ...any)           {}
func (r *failureRecorder) Log(...any)                    {}
func (r *failureRecorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

// checkFailures runs check as a fuzz input would run and returns what
// it failed with, "" if nothing.
func checkFailures(t *testing.T, check func(testing.TB)) string {
	t.Helper()
	rec := &failureRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("check did not finish within a minute")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return strings.Join(rec.failures, "\n")
}
