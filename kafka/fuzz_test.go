package kafka

// Fuzzing of the request path: FuzzRequestFrame writes arbitrary bytes to
// a live server's socket, FuzzDecodeRequest hands a request body after a
// valid header to the connection's own decode-and-handle step. Both run
// every input against one broker per fuzz process (setting a broker up
// costs far more than an input), so what an input changes (topics,
// groups, configs) is seen by later inputs, as on a real broker.
// testdata/fuzz holds the seed corpus (fuzz_corpus_test.go) and the
// crashers found so far; docs/reliability.md says how to run them.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log/logtest"
)

const (
	// fuzzInputBudget is how long one input may keep the server busy
	// before its connection is closed under it. Requests that wait
	// (long-poll fetches, joins) legitimately take longer; closing their
	// connection must end them.
	fuzzInputBudget = time.Second
	// fuzzHangLimit is how long a request may run after its connection
	// was closed: past it the handler is stuck.
	fuzzHangLimit = 10 * time.Second
	// fuzzHealthEvery is how many inputs pass between checks that a
	// fresh connection is still served.
	fuzzHealthEvery = 32
	// fuzzMaxRequestBytes is the fuzzed server's max request size.
	fuzzMaxRequestBytes = 1 << 20
	// fuzzMaxResponseBytes bounds a response the client will read: past
	// it the size prefix is garbage.
	fuzzMaxResponseBytes = 128 << 20
	// fuzzCorrelationID is the correlation ID of FuzzDecodeRequest's
	// requests.
	fuzzCorrelationID = 0x0f0f0f0f
	// fuzzMaxNewPartitions bounds the partitions one input may ask to
	// create; inputs asking for more are skipped. A partition costs tens
	// of milliseconds and about 2 MiB of disk (its Raft log), created
	// before CreateTopics answers and whether or not the client is still
	// there: a few inputs asking for thousands would spend the fuzzing
	// time, and the disk, creating them.
	fuzzMaxNewPartitions = 64
	// fuzzMaxPartitions is how many partitions the fuzzed broker may hold
	// before the topics inputs created are deleted, which keeps a long
	// run's disk use bounded.
	fuzzMaxPartitions = 1024
)

// FuzzRequestFrame writes each input to a new connection, completed to
// whole frames and followed by an ApiVersions request whose answer marks
// the end (framesToSend), and reads the answers. The server must answer
// exactly the requests Kafka answers, in order, with responses that decode
// at the request's version, and close the connection after answering what
// came before the first frame Kafka closes for: a size outside [8, max], a
// truncated header, an unknown API key, a version outside the served range
// (except ApiVersions, answered UNSUPPORTED_VERSION), a body that does not
// decode. It must never panic, and once the connection has ended the
// request memory it held is returned. Every fuzzHealthEvery inputs, and
// after any input that kept the server busy past its budget, a fresh
// connection's ApiVersions must still be answered. Inputs asking for
// more than fuzzMaxNewPartitions new partitions are skipped.
func FuzzRequestFrame(f *testing.F) {
	fs := startFuzzServer(f, true)
	for _, seed := range badFrameSeeds() {
		f.Add(seed)
	}
	f.Add(pipelinedSeed())
	inputs := 0
	f.Fuzz(func(t *testing.T, input []byte) {
		if _, want, _ := framesToSend(fs.s.apis, input); newPartitions(want) > fuzzMaxNewPartitions {
			t.Skipf("asks for %d new partitions", newPartitions(want))
		}
		busy := fs.checkFrames(t, input)
		inputs++
		if busy || inputs%fuzzHealthEvery == 0 {
			fs.checkHealthy(t)
		}
		fs.trimTopics(t)
	})
}

// FuzzDecodeRequest builds a frame from an API key, a version and a body,
// with a valid header between them, and hands it to clientConn.handle,
// the step the connection runs for every frame it reads, then lets it
// answer what it queued (a produce request's response). For a key and
// version the server serves, handle must answer with one response that
// decodes at that version and encodes back to the same bytes, or (for a
// body that does not decode) fail with nothing written; no response at
// all only for an acks=0 produce. An unknown key or unsupported version
// fails with nothing written, except ApiVersions above its range, which
// is answered UNSUPPORTED_VERSION in the v0 format. No handler may panic,
// and a handler still running when its budget is spent must end once its
// connection closes. Inputs asking for more than fuzzMaxNewPartitions new
// partitions are skipped.
func FuzzDecodeRequest(f *testing.F) {
	fs := startFuzzServer(f, false)
	f.Add(int16(9999), int16(0), []byte{})
	f.Add(int16(-1), int16(0), []byte{})
	f.Add(int16(apiVersionsKey), int16(127), []byte{})
	f.Add(int16(apiVersionsKey), int16(-1), []byte{})
	f.Add(int16(fetchKey), int16(2), []byte{})
	f.Add(int16(3), int16(12), []byte{0, 0, 0})
	f.Add(int16(produceKey), int16(9), []byte{0xde, 0xad, 0xbe, 0xef})
	f.Add(int16(produceKey), int16(9), produceRequest(9, -1, "fuzz", logtest.Batch{Records: 2}.Encode()).AppendTo(nil))
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		if req := kmsg.RequestForKey(key); req != nil {
			req.SetVersion(version)
			if req.ReadFrom(body) == nil {
				if n := newPartitions([]reply{{req: req}}); n > fuzzMaxNewPartitions {
					t.Skipf("asks for %d new partitions", n)
				}
			}
		}
		fs.checkDecode(t, key, version, body)
		fs.trimTopics(t)
	})
}

// fuzzServer is the broker and Kafka server of one fuzz process.
type fuzzServer struct {
	s      *Server
	b      *broker.Broker
	addr   string // "" when not listening
	panics *panicLog
	// budget, hangLimit and maxPartitions are fuzzInputBudget,
	// fuzzHangLimit and fuzzMaxPartitions; the tests of the checks lower
	// them.
	budget, hangLimit time.Duration
	maxPartitions     int
}

// startFuzzServer opens a broker with its Kafka server, listening on a
// loopback port if listen is set.
func startFuzzServer(tb testing.TB, listen bool) *fuzzServer {
	tb.Helper()
	panics := &panicLog{}
	logger := slog.New(panics)
	node := config.Node{NodeID: 0, DataDir: tb.TempDir(), KafkaAddr: "127.0.0.1:0", AdvertisedKafkaAddr: "127.0.0.1:9092",
		AdminAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", LogLevel: "info", MaxRequestBytes: fuzzMaxRequestBytes}
	b, err := broker.Open(broker.Options{Node: node, Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	fs := &fuzzServer{b: b, panics: panics, budget: fuzzInputBudget, hangLimit: fuzzHangLimit, maxPartitions: fuzzMaxPartitions}
	opts := Options{MaxRequestBytes: node.MaxRequestBytes, AdvertisedAddr: node.AdvertisedKafkaAddr, Logger: logger}
	if listen {
		fs.s, fs.addr = serveKafka(tb, b, opts)
		return fs
	}
	if fs.s, err = NewServer(b, opts); err != nil {
		tb.Fatal(err)
	}
	return fs
}

// checkFrames runs one FuzzRequestFrame input and reports whether it kept
// the server busy past its budget.
func (fs *fuzzServer) checkFrames(t testing.TB, input []byte) (busy bool) {
	t.Helper()
	send, want, closes := framesToSend(fs.s.apis, input)
	nc, err := net.DialTimeout("tcp", fs.addr, fs.hangLimit)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(fs.budget))
	// Written while the responses are read: an input of many requests
	// could otherwise fill both directions' socket buffers. The server
	// may close before it has read everything: that is one of the
	// outcomes checked below, not a failure here.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		nc.Write(send)
	}()
	stopAfter := len(want)
	if closes {
		stopAfter = -1 // read until the server closes
	}
	got, readErr := readResponses(nc, stopAfter)
	if readErr == nil {
		// Every answer is in: end with half a request, so that the server
		// also sees a client leaving in the middle of a frame.
		nc.Write([]byte{0, 0, 0, 100, 0, 18, 0})
	}
	nc.Close()
	<-wrote
	busy = isTimeout(readErr)
	fs.waitConnsEnded(t)
	fs.panics.check(t)
	if errors.Is(readErr, errMalformedResponse) {
		t.Fatal(readErr)
	}
	if len(got) > len(want) {
		t.Fatalf("%d responses, want at most %d (%s)", len(got), len(want), describeReplies(want))
	}
	for i, resp := range got {
		if err := want[i].check(resp); err != nil {
			t.Fatalf("response %d of %d: %v", i+1, len(want), err)
		}
	}
	// The server closes cleanly only once it has answered everything it
	// read; a reset may discard answers the client had not read yet.
	if errors.Is(readErr, io.EOF) && len(got) != len(want) {
		t.Fatalf("connection closed after %d responses, want %d (%s)", len(got), len(want), describeReplies(want))
	}
	return busy
}

// sentinelCorrelationID is the correlation ID of the ApiVersions request
// that follows an input: its answer is the last one owed.
const sentinelCorrelationID = -0x5eed

// framesToSend is what FuzzRequestFrame writes for input, the responses
// owed for it, and whether the server must close the connection by itself.
// A last frame cut short is completed with zero bytes (its size prefix
// too), so that the server never waits for the rest of a frame; unless a
// frame makes the server close, an ApiVersions request follows, whose
// answer tells the client that every answer is in.
func framesToSend(apis apiTable, input []byte) (send []byte, want []reply, closes bool) {
	send = bytes.Clone(input)
	for off := 0; off < len(send); {
		if short := off + 4 - len(send); short > 0 {
			send = append(send, make([]byte, short)...)
		}
		n := int32(binary.BigEndian.Uint32(send[off:]))
		if n < minHeaderSize || n > fuzzMaxRequestBytes {
			break
		}
		if short := off + 4 + int(n) - len(send); short > 0 {
			send = append(send, make([]byte, short)...)
		}
		off += 4 + int(n)
	}
	want, closes = expectedReplies(apis, send)
	if !closes {
		sentinel := kmsg.NewPtrApiVersionsRequest()
		send = append(send, encodeRequest(sentinel, sentinelCorrelationID)...)
		want = append(want, reply{correlationID: sentinelCorrelationID, key: apiVersionsKey, req: sentinel})
	}
	return send, want, closes
}

// errMalformedResponse is a response the client cannot frame: the server
// wrote something other than size-prefixed responses.
var errMalformedResponse = errors.New("malformed response")

// readResponses reads response frames until stopAfter of them have come
// (never, if negative), the connection ends or its deadline passes; the
// error says which.
func readResponses(nc net.Conn, stopAfter int) ([][]byte, error) {
	var got [][]byte
	for len(got) != stopAfter {
		var size [4]byte
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return got, fmt.Errorf("%w: closed within a size prefix", errMalformedResponse)
			}
			return got, err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < 4 || n > fuzzMaxResponseBytes {
			return got, fmt.Errorf("%w: size %d", errMalformedResponse, n)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(nc, frame); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return got, fmt.Errorf("%w: closed within a response of %d bytes", errMalformedResponse, n)
			}
			return got, err
		}
		got = append(got, frame)
	}
	return got, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// waitConnsEnded closes whatever connections the server still has (a
// request still waiting keeps its connection open after the client left)
// and waits for their handlers to end; then all the request memory they
// reserved must be back.
func (fs *fuzzServer) waitConnsEnded(t testing.TB) {
	t.Helper()
	fs.s.mu.Lock()
	for c := range fs.s.conns {
		c.close()
	}
	fs.s.mu.Unlock()
	limit := time.Now().Add(fs.hangLimit)
	for {
		fs.s.mu.Lock()
		n := len(fs.s.conns)
		fs.s.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("%d connections still handled %v after they were closed", n, fs.hangLimit)
		}
		time.Sleep(time.Millisecond)
	}
	if used := fs.s.pool.Stats().Used; used != 0 {
		t.Fatalf("%d bytes of queued_max_request_bytes still reserved with no connection open", used)
	}
}

// checkHealthy asks a fresh connection for ApiVersions.
func (fs *fuzzServer) checkHealthy(t testing.TB) {
	t.Helper()
	c := dial(t, fs.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(fs.s.apis.versions()) {
		t.Fatalf("server unhealthy: ApiVersions error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	c.nc.Close()
	fs.waitConnsEnded(t)
}

// reply is a response the server owes: to the request with this
// correlation ID, at its key and version; unsupported is ApiVersions'
// v0 UNSUPPORTED_VERSION answer. req is the request as decoded.
type reply struct {
	correlationID int32
	key, version  int16
	unsupported   bool
	req           kmsg.Request
}

// expectedReplies reads input as the server reads a connection and
// returns the responses Kafka sends for it, up to the frame it closes
// the connection at (closes), or to the end of the input's whole frames.
func expectedReplies(apis apiTable, input []byte) (want []reply, closes bool) {
	for len(input) >= 4 {
		n := int32(binary.BigEndian.Uint32(input))
		if n < minHeaderSize || n > fuzzMaxRequestBytes {
			return want, true
		}
		if int(n) > len(input)-4 {
			return want, false
		}
		frame := input[4 : 4+n]
		input = input[4+n:]
		r := kbin.Reader{Src: frame}
		h := reply{key: r.Int16(), version: r.Int16(), correlationID: r.Int32()}
		if l := r.Int16(); l > 0 {
			r.Span(int(l))
		}
		a, known := apis.lookup(h.key)
		switch {
		case !r.Ok() || !known:
			return want, true
		case h.key == apiVersionsKey && h.version > a.max:
			h.unsupported = true
			want = append(want, h)
			continue
		case h.version < a.min || h.version > a.max:
			return want, true
		}
		req := kmsg.RequestForKey(h.key)
		req.SetVersion(h.version)
		if req.IsFlexible() {
			kmsg.SkipTags(&r)
		}
		if !r.Ok() || req.ReadFrom(r.Src) != nil {
			return want, true
		}
		if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			continue // acks=0: no response, by design
		}
		h.req = req
		want = append(want, h)
	}
	return want, false
}

// newPartitions is how many partitions the requests ask to create, the
// cluster default counted as one.
func newPartitions(want []reply) int64 {
	var n int64
	for _, r := range want {
		switch req := r.req.(type) {
		case *kmsg.CreateTopicsRequest:
			for _, t := range req.Topics {
				n += max(int64(t.NumPartitions), 1)
			}
		case *kmsg.CreatePartitionsRequest:
			for _, t := range req.Topics {
				n += max(int64(t.Count), 0)
			}
		}
	}
	return n
}

// trimTopics deletes the topics inputs created once they hold more than
// maxPartitions partitions.
func (fs *fuzzServer) trimTopics(t testing.TB) {
	t.Helper()
	var created []*broker.Topic
	partitions := 0
	for _, topic := range fs.b.Topics() {
		if !topic.Internal() {
			created = append(created, topic)
			partitions += len(topic.Partitions())
		}
	}
	if partitions <= fs.maxPartitions {
		return
	}
	for _, topic := range created {
		if err := fs.b.DeleteTopic(topic.Name()); err != nil {
			t.Fatalf("deleting topic %q the fuzzing created: %v", topic.Name(), err)
		}
	}
}

func describeReplies(want []reply) string {
	var b strings.Builder
	for i, r := range want {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "key %d v%d corr %d", r.key, r.version, r.correlationID)
	}
	return b.String()
}

// check verifies a response frame (after its size prefix): the
// correlation ID, the header's tags, and a body that decodes at the
// request's version and encodes back to the same bytes.
func (r reply) check(frame []byte) error {
	if len(frame) < 4 {
		return fmt.Errorf("%d-byte response", len(frame))
	}
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != r.correlationID {
		return fmt.Errorf("correlation ID %d, want %d", corr, r.correlationID)
	}
	body := frame[4:]
	req := kmsg.RequestForKey(r.key)
	version := r.version
	if r.unsupported {
		version = 0
	}
	req.SetVersion(version)
	resp := req.ResponseKind()
	// ApiVersions' response header is v0 at every version.
	if resp.IsFlexible() && r.key != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			return fmt.Errorf("key %d v%d: response header tags %x, want none", r.key, version, body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("key %d v%d: response does not decode: %w", r.key, version, err)
	}
	if again := resp.AppendTo(nil); !bytes.Equal(again, body) {
		return fmt.Errorf("key %d v%d: response of %d bytes re-encodes to %d different bytes", r.key, version, len(body), len(again))
	}
	if r.unsupported {
		av := resp.(*kmsg.ApiVersionsResponse)
		if av.ErrorCode != kerr.UnsupportedVersion.Code || !advertises(av, apiVersionsKey) {
			return fmt.Errorf("ApiVersions v%d: error %d with %d keys, want UNSUPPORTED_VERSION and the supported range", r.version, av.ErrorCode, len(av.ApiKeys))
		}
	}
	return nil
}

func advertises(resp *kmsg.ApiVersionsResponse, key int16) bool {
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// panicLog is the fuzzed server's log: it drops everything but what a
// recovered panic logs (an error with a "panic" attribute), which it
// keeps for check. A handler's panic costs only its connection, so
// without this the fuzzer would never see it.
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (p *panicLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelError }

func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	panicked := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "panic" {
			panicked = true
		}
		fmt.Fprintf(&b, "\n%s: %v", a.Key, a.Value)
		return true
	})
	if panicked {
		p.mu.Lock()
		p.panics = append(p.panics, r.Message+b.String())
		p.mu.Unlock()
	}
	return nil
}

func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicLog) WithGroup(string) slog.Handler      { return p }

// check fails the test if anything panicked since the last check.
func (p *panicLog) check(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.panics) > 0 {
		msg := strings.Join(p.panics, "\n\n")
		p.panics = nil
		t.Fatal(msg)
	}
}

// badFrameSeeds are inputs Kafka closes the connection for, or answers
// specially.
func badFrameSeeds() [][]byte {
	frame := func(key, version int16, body []byte) []byte {
		f := requestFrame(key, version, 1, body)
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)
	}
	return [][]byte{
		{0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00}, // TLS client hello
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0, 0, 0, 3, 1, 2, 3},
		{0xff, 0xff, 0xff, 0xfe},
		{0, 0x10, 0, 1}, // above max request bytes
		{0, 0, 0, 9, 0, 18},
		frame(9999, 0, nil),
		frame(apiVersionsKey, 127, nil),
		frame(fetchKey, 2, nil),
		frame(3, 1, []byte{0, 0, 0}),
		frame(produceKey, 7, []byte{0xde, 0xad, 0xbe, 0xef, 0x12, 0x34}),
	}
}

// pipelinedSeed is several requests on one connection: a topic created,
// written and read, and an acks=0 produce that is never answered.
func pipelinedSeed() []byte {
	var out []byte
	add := func(req kmsg.Request, corr int32) {
		out = append(out, encodeRequest(req, corr)...)
	}
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	add(api, 1)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fuzz-pipelined", 1, 1
	create.Topics = append(create.Topics, ct)
	add(create, 2)
	add(produceRequest(9, -1, "fuzz-pipelined", logtest.Batch{Records: 3, ValueSize: 16}.Encode()), 3)
	add(fetchRequest(11, "fuzz-pipelined", [16]byte{}, 0, 1<<20), 4)
	add(produceRequest(9, 0, "fuzz-pipelined", logtest.Batch{Records: 1}.Encode()), 5)
	add(api, 6)
	return out
}
