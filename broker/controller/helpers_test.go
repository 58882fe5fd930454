package controller

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// t0 is the start of every test's time line (Unix ms).
const t0 = int64(1_700_000_000_000)

// testValidateTopicConfig stands in for broker.ValidateTopicConfig.
func testValidateTopicConfig(_ ConfigRules, name, value string) error {
	switch name {
	case "retention.ms", "segment.bytes":
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return fmt.Errorf("%w: %s=%q is not an integer", kerr.InvalidConfig, name, value)
		}
		return nil
	case "cleanup.policy":
		if value != "delete" {
			return errors.New("cleanup.policy must be delete") // not a kerr error: becomes INVALID_CONFIG
		}
		return nil
	}
	return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, name)
}

func testLicenseValidator(blob []byte) error {
	if string(blob[:min(len(blob), 4)]) != "LIC:" {
		return errors.New("license signature does not verify")
	}
	return nil
}

func testOptions() Options {
	return Options{
		BrokerSessionTimeout: 9 * time.Second,
		ValidateTopicConfig:  testValidateTopicConfig,
		ValidateLicense:      testLicenseValidator,
	}
}

// harness applies entries with increasing indexes at a controllable time.
type harness struct {
	t     testing.TB
	s     *State
	index uint64
	now   int64
	log   [][]byte // every encoded entry applied
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, s: New(testOptions()), now: t0}
}

func (h *harness) advance(d time.Duration) { h.now += d.Milliseconds() }

// apply encodes, decodes and applies cmd at the harness time.
func (h *harness) apply(cmd Command) Result {
	h.t.Helper()
	b, err := Encode(Entry{TimeMs: h.now, Cmd: cmd})
	if err != nil {
		h.t.Fatalf("encode %T: %v", cmd, err)
	}
	h.index++
	h.log = append(h.log, b)
	r := h.s.Apply(h.index, b)
	if r.Index != h.index {
		h.t.Fatalf("result index %d, want %d", r.Index, h.index)
	}
	if h.s.View().Index() != h.index {
		h.t.Fatalf("view index %d, want %d", h.s.View().Index(), h.index)
	}
	return r
}

func (h *harness) ok(cmd Command) Result {
	h.t.Helper()
	r := h.apply(cmd)
	if r.Err != nil {
		h.t.Fatalf("%T: %v", cmd, r.Err)
	}
	return r
}

// fails applies cmd, expects code, and checks the state did not change
// apart from index and clock.
func (h *harness) fails(cmd Command, code *kerr.Error) Result {
	h.t.Helper()
	before, err := h.s.SnapshotBytes()
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.apply(cmd)
	if r.Err == nil {
		h.t.Fatalf("%T %+v: accepted, want %s", cmd, cmd, code.Message)
	}
	if !errors.Is(r.Err, code) || r.ErrorCode() != code.Code {
		h.t.Fatalf("%T: error %v (code %d), want %s", cmd, r.Err, r.ErrorCode(), code.Message)
	}
	if r.Changed {
		h.t.Fatalf("%T: refused but Changed", cmd)
	}
	after, _ := h.s.SnapshotBytes()
	if !sameExceptIndex(before, after) {
		h.t.Fatalf("%T: refused command changed the state", cmd)
	}
	return r
}

// sameExceptIndex compares two snapshots ignoring index and clock.
func sameExceptIndex(a, b []byte) bool {
	va, err1 := decodeSnapshot(bytesReader(a), emptyView(0))
	vb, err2 := decodeSnapshot(bytesReader(b), emptyView(0))
	if err1 != nil || err2 != nil {
		return false
	}
	va.index, vb.index, va.clockMs, vb.clockMs = 0, 0, 0, 0
	return string(mustSnap(va)) == string(mustSnap(vb))
}

func incarnation(n byte) IncarnationID { return IncarnationID{0: 0xAB, 15: n} }

func topicID(n byte) TopicID { return TopicID{0: 0x7, 1: n, 15: 0x42} }

// register registers brokers 1..n with racks rack-a, rack-b, ... (racks
// 0: none), returning their epochs.
func (h *harness) register(n int, racks int) map[int32]uint64 {
	h.t.Helper()
	epochs := map[int32]uint64{}
	for i := 1; i <= n; i++ {
		c := RegisterBroker{
			NodeID: int32(i), Incarnation: incarnation(byte(i)),
			KafkaAddr: fmt.Sprintf("10.0.0.%d:9092", i), RPCAddr: fmt.Sprintf("10.0.0.%d:33145", i),
		}
		if racks > 0 {
			c.Rack = fmt.Sprintf("rack-%c", 'a'+(i-1)%racks)
		}
		epochs[int32(i)] = h.ok(c).BrokerEpoch
	}
	return epochs
}

func (h *harness) heartbeatAll(epochs map[int32]uint64) {
	h.t.Helper()
	for id := int32(1); int(id) <= len(epochs); id++ {
		h.ok(Heartbeat{NodeID: id, Epoch: epochs[id]})
	}
}
