package txn

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/log"
)

// memStore keeps records in memory, per partition, in append order.
type memStore struct {
	mu    sync.Mutex
	parts [][]log.KeyValue
}

func newMemStore(n int) *memStore { return &memStore{parts: make([][]log.KeyValue, n)} }

func (s *memStore) Partitions() int32 { return int32(len(s.parts)) }

func (s *memStore) Append(p int32, recs []log.KeyValue) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := int64(len(s.parts[p]))
	s.parts[p] = append(s.parts[p], recs...)
	return off, nil
}

func (s *memStore) Replay(p int32, fn func(group.StoredRecord)) error {
	s.mu.Lock()
	recs := append([]log.KeyValue(nil), s.parts[p]...)
	s.mu.Unlock()
	for i, r := range recs {
		fn(group.StoredRecord{Key: r.Key, Value: r.Value, Offset: int64(i), ProducerID: -1})
	}
	return nil
}

// markerLog records the markers written; while failing is set it refuses
// them.
type markerLog struct {
	mu      sync.Mutex
	markers []Marker
	failing atomic.Bool
}

func (m *markerLog) WriteMarkers(_ context.Context, mk Marker) error {
	if m.failing.Load() {
		return errors.New("partition leader unreachable")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.markers = append(m.markers, mk)
	return nil
}

func (m *markerLog) all() []Marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Marker(nil), m.markers...)
}

type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

type harness struct {
	t       *testing.T
	store   *memStore
	markers *markerLog
	clk     *clock
	nextPID atomic.Int64
	c       *Coordinator
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, store: newMemStore(4), markers: &markerLog{}, clk: &clock{}}
	h.clk.ms.Store(1_700_000_000_000)
	h.nextPID.Store(1000)
	h.c = h.coordinator()
	return h
}

// coordinator makes a coordinator on the harness's store with every
// partition loaded at epoch 1, as a new leader would.
func (h *harness) coordinator() *Coordinator {
	c := New(Options{
		Store: h.store, Markers: h.markers,
		NewProducerID:   func(context.Context) (int64, error) { return h.nextPID.Add(1), nil },
		GroupPartitions: func() int32 { return 50 },
		Settings:        func() Settings { return Settings{MaxTimeout: 15 * time.Minute, IDExpiration: 7 * 24 * time.Hour} },
		Now:             h.clk.now,
	})
	for p := range h.store.Partitions() {
		if err := c.LoadPartition(p, 1); err != nil {
			h.t.Fatal(err)
		}
	}
	h.t.Cleanup(c.Close)
	return c
}

func (h *harness) init(id string) ProducerID {
	h.t.Helper()
	r := h.c.InitProducerID(context.Background(), id, 60_000, -1, -1, 5)
	if r.Code != 0 {
		h.t.Fatalf("InitProducerId %s: %s", id, kerr.ErrorForCode(r.Code))
	}
	return r
}

func (h *harness) wantState(id string, want kmsg.TransactionState) Transaction {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tx, code := h.c.Describe(id)
		if code == 0 && tx.State == want {
			return tx
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: state %v (code %d), want %v", id, tx.State, code, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if want == nil && got != 0 || want != nil && got != want.Code {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

var (
	tpA = TopicPartition{"a", 0}
	tpB = TopicPartition{"b", 3}
)

func TestInitProducerID(t *testing.T) {
	h := newHarness(t)
	first := h.init("app")
	if first.Epoch != 0 || first.ID <= 0 {
		t.Fatalf("first InitProducerId: %+v", first)
	}
	second := h.init("app")
	if second.ID != first.ID || second.Epoch != 1 {
		t.Fatalf("second InitProducerId: %+v, want id %d epoch 1", second, first.ID)
	}
	if r := h.c.InitProducerID(context.Background(), "", 1000, -1, -1, 5); r.Code != kerr.InvalidRequest.Code {
		t.Fatalf("empty id: %d", r.Code)
	}
	for _, timeout := range []int32{0, -5, 15*60*1000 + 1} {
		if r := h.c.InitProducerID(context.Background(), "app", timeout, -1, -1, 5); r.Code != kerr.InvalidTransactionTimeout.Code {
			t.Fatalf("timeout %d: %d", timeout, r.Code)
		}
	}
	// KIP-360: the current pair bumps; the pair before the last bump is a
	// retry of it; anything else is fenced (INVALID_PRODUCER_EPOCH before v4).
	if r := h.c.InitProducerID(context.Background(), "app", 60_000, second.ID, second.Epoch, 5); r.Code != 0 || r.Epoch != 2 {
		t.Fatalf("recovery with the current epoch: %+v", r)
	}
	if r := h.c.InitProducerID(context.Background(), "app", 60_000, second.ID, second.Epoch, 5); r.Code != 0 || r.Epoch != 2 {
		t.Fatalf("retry of the recovery: %+v", r)
	}
	if r := h.c.InitProducerID(context.Background(), "app", 60_000, second.ID, 0, 5); r.Code != kerr.ProducerFenced.Code {
		t.Fatalf("stale pair: %+v", r)
	}
	if r := h.c.InitProducerID(context.Background(), "app", 60_000, second.ID, 0, 3); r.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale pair, v3: %+v", r)
	}
}

// initWith is InitProducerId from a producer that holds pid and epoch
// (KIP-360), at v5.
func (h *harness) initWith(id string, pid int64, epoch int16) ProducerID {
	return h.c.InitProducerID(context.Background(), id, 60_000, pid, epoch, 5)
}

// TestNewProducerFencesOldPairForGood: an InitProducerId without a pair
// is a new producer of the id; the one it fenced cannot get the new epoch
// by presenting its old pair, as Kafka forgets the previous epoch on such
// a bump.
func TestNewProducerFencesOldPairForGood(t *testing.T) {
	h := newHarness(t)
	old := h.init("app")
	fresh := h.init("app")
	if fresh.ID != old.ID || fresh.Epoch != old.Epoch+1 {
		t.Fatalf("second producer: %+v", fresh)
	}
	if r := h.initWith("app", old.ID, old.Epoch); r.Code != kerr.ProducerFenced.Code {
		t.Fatalf("the fenced producer recovering with its old pair: %+v, want PRODUCER_FENCED", r)
	}
	// The same after an exhausted epoch moved the id to a new producer id.
	e, _, _ := h.c.lock("app", false)
	e.st.producerEpoch = epochExhausted
	e.mu.Unlock()
	rotated := h.init("app")
	if rotated.ID == old.ID || rotated.Epoch != 0 {
		t.Fatalf("rotation: %+v", rotated)
	}
	if r := h.initWith("app", old.ID, epochExhausted); r.Code != kerr.ProducerFenced.Code {
		t.Fatalf("the producer fenced by the rotation: %+v, want PRODUCER_FENCED", r)
	}
}

// TestRecoveryRetryAfterRotation: a producer that bumped an exhausted
// epoch with its own pair and lost the answer gets the new producer id
// when it asks again.
func TestRecoveryRetryAfterRotation(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	e, _, _ := h.c.lock("app", false)
	e.st.producerEpoch = epochExhausted
	e.mu.Unlock()
	first := h.initWith("app", p.ID, epochExhausted)
	if first.Code != 0 || first.ID == p.ID || first.Epoch != 0 {
		t.Fatalf("rotation asked with the exhausted pair: %+v", first)
	}
	if again := h.initWith("app", p.ID, epochExhausted); again != first {
		t.Fatalf("its retry: %+v, want %+v", again, first)
	}
}

// TestFencesForgetThePreviousEpoch: a transaction timeout and a new
// producer's abort of an open transaction fence its producer; a retry of
// the bump that had given it its epoch is no longer honoured.
func TestFencesForgetThePreviousEpoch(t *testing.T) {
	for _, how := range []string{"timeout", "new producer"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			p := h.init("app")
			bumped := h.initWith("app", p.ID, p.Epoch)
			if bumped.Code != 0 || bumped.Epoch != p.Epoch+1 {
				t.Fatalf("recovery: %+v", bumped)
			}
			wantCode(t, "add", h.c.AddPartitions("app", bumped.ID, bumped.Epoch, []TopicPartition{tpA}, 3), nil)
			switch how {
			case "timeout":
				h.clk.ms.Add(60_001)
				h.c.Expire()
			default:
				if r := h.c.InitProducerID(context.Background(), "app", 60_000, -1, -1, 5); r.Code != kerr.ConcurrentTransactions.Code {
					t.Fatalf("init over the open transaction: %+v", r)
				}
			}
			h.wantState("app", kmsg.TransactionStateCompleteAbort)
			for _, held := range []int16{p.Epoch, bumped.Epoch} {
				if r := h.initWith("app", p.ID, held); r.Code != kerr.ProducerFenced.Code {
					t.Fatalf("recovery with epoch %d after the fence: %+v, want PRODUCER_FENCED", held, r)
				}
			}
		})
	}
}

// TestRecoveryAfterIDExpired: a producer whose transactional id expired
// while it was idle recovers with its old pair and gets a new producer id
// at epoch 0, as Kafka answers for an id it has no state for.
func TestRecoveryAfterIDExpired(t *testing.T) {
	h := newHarness(t)
	p := h.init("idle")
	h.clk.ms.Add((7*24*time.Hour + time.Second).Milliseconds())
	h.c.Expire()
	if _, code := h.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("expired id: code %d", code)
	}
	r := h.initWith("idle", p.ID, p.Epoch)
	if r.Code != 0 || r.ID == p.ID || r.Epoch != 0 {
		t.Fatalf("recovery of an expired id: %+v, want a new producer id at epoch 0", r)
	}
	wantCode(t, "add with the new pair", h.c.AddPartitions("idle", r.ID, r.Epoch, []TopicPartition{tpA}, 3), nil)
}

func TestInitHalfPairIsInvalid(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	for _, pair := range [][2]int64{{p.ID, -1}, {-1, int64(p.Epoch)}} {
		if r := h.initWith("app", pair[0], int16(pair[1])); r.Code != kerr.InvalidRequest.Code {
			t.Fatalf("InitProducerId with %v: %+v, want INVALID_REQUEST", pair, r)
		}
	}
}

func TestEpochExhaustedGetsNewProducerID(t *testing.T) {
	h := newHarness(t)
	first := h.init("app")
	e, _, _ := h.c.lock("app", false)
	e.st.producerEpoch = epochExhausted
	e.mu.Unlock()
	next := h.init("app")
	if next.ID == first.ID || next.Epoch != 0 {
		t.Fatalf("after an exhausted epoch: %+v (was id %d)", next, first.ID)
	}
}

func TestCommitWritesMarkersThenCompletes(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	wantCode(t, "add", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpB, tpA}, 3), nil)
	wantCode(t, "add again", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA}, 3), nil)
	wantCode(t, "add offsets", h.c.AddOffsets("app", p.ID, p.Epoch, "grp", 3), nil)
	tx := h.wantState("app", kmsg.TransactionStateOngoing)
	if len(tx.Partitions) != 3 || tx.StartMs < 0 {
		t.Fatalf("ongoing: %+v", tx)
	}
	wantCode(t, "commit", endCode(h.c.EndTxn("app", p.ID, p.Epoch, true, 3)), nil)
	h.wantState("app", kmsg.TransactionStateCompleteCommit)
	ms := h.markers.all()
	if len(ms) != 1 || !ms[0].Commit || ms[0].ProducerID != p.ID || ms[0].ProducerEpoch != p.Epoch || ms[0].CoordinatorEpoch != 1 || len(ms[0].Partitions) != 3 {
		t.Fatalf("markers %+v", ms)
	}
	wantCode(t, "commit retried", endCode(h.c.EndTxn("app", p.ID, p.Epoch, true, 3)), nil)
	wantCode(t, "abort after commit", endCode(h.c.EndTxn("app", p.ID, p.Epoch, false, 3)), kerr.InvalidTxnState)
	// The next transaction starts from the completed one.
	wantCode(t, "add after commit", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA}, 3), nil)
	wantCode(t, "abort", endCode(h.c.EndTxn("app", p.ID, p.Epoch, false, 3)), nil)
	h.wantState("app", kmsg.TransactionStateCompleteAbort)
	if ms := h.markers.all(); len(ms) != 2 || ms[1].Commit || len(ms[1].Partitions) != 1 {
		t.Fatalf("markers %+v", ms)
	}
	wantCode(t, "end with nothing open", endCode(h.c.EndTxn("app", p.ID, p.Epoch, true, 3)), kerr.InvalidTxnState)
	wantCode(t, "unknown producer id", endCode(h.c.EndTxn("app", p.ID+1, p.Epoch, true, 3)), kerr.InvalidProducerIDMapping)
	wantCode(t, "unknown transactional id", endCode(h.c.EndTxn("nobody", p.ID, p.Epoch, true, 3)), kerr.InvalidProducerIDMapping)
}

func TestPreparingIsConcurrent(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	h.markers.failing.Store(true)
	wantCode(t, "add", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA}, 3), nil)
	wantCode(t, "commit", endCode(h.c.EndTxn("app", p.ID, p.Epoch, true, 3)), nil)
	wantCode(t, "commit retried while preparing", endCode(h.c.EndTxn("app", p.ID, p.Epoch, true, 3)), kerr.ConcurrentTransactions)
	wantCode(t, "abort while committing", endCode(h.c.EndTxn("app", p.ID, p.Epoch, false, 3)), kerr.InvalidTxnState)
	wantCode(t, "add while preparing", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpB}, 3), kerr.ConcurrentTransactions)
	if r := h.c.InitProducerID(context.Background(), "app", 60_000, -1, -1, 5); r.Code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init while preparing: %d", r.Code)
	}
	h.markers.failing.Store(false)
	h.wantState("app", kmsg.TransactionStateCompleteCommit)
}

// TestInitFencesOngoing: a new producer of the id aborts the old one's
// open transaction with a bumped epoch, and the old producer is fenced.
func TestInitFencesOngoing(t *testing.T) {
	h := newHarness(t)
	old := h.init("app")
	wantCode(t, "add", h.c.AddPartitions("app", old.ID, old.Epoch, []TopicPartition{tpA}, 3), nil)
	if r := h.c.InitProducerID(context.Background(), "app", 60_000, -1, -1, 5); r.Code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init over an open transaction: %d", r.Code)
	}
	h.wantState("app", kmsg.TransactionStateCompleteAbort)
	ms := h.markers.all()
	if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != old.Epoch+1 {
		t.Fatalf("abort markers %+v, want one abort at epoch %d", ms, old.Epoch+1)
	}
	fresh := h.init("app")
	if fresh.ID != old.ID || fresh.Epoch != old.Epoch+2 {
		t.Fatalf("retried init: %+v", fresh)
	}
	wantCode(t, "old producer, v3", h.c.AddPartitions("app", old.ID, old.Epoch, []TopicPartition{tpA}, 3), kerr.ProducerFenced)
	wantCode(t, "old producer, v1", h.c.AddPartitions("app", old.ID, old.Epoch, []TopicPartition{tpA}, 1), kerr.InvalidProducerEpoch)
	wantCode(t, "old producer ends", endCode(h.c.EndTxn("app", old.ID, old.Epoch, true, 3)), kerr.ProducerFenced)
}

// TestFailoverCompletesPrepared: a coordinator that loads a partition
// holding a transaction in PrepareCommit writes its markers and
// completes it; the old coordinator, unloaded, writes nothing more.
func TestFailoverCompletesPrepared(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	wantCode(t, "add", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA, tpB}, 3), nil)
	h.markers.failing.Store(true)
	wantCode(t, "commit", endCode(h.c.EndTxn("app", p.ID, p.Epoch, true, 3)), nil)
	h.c.UnloadPartition(h.c.Partition("app"))
	if _, code := h.c.Describe("app"); code != kerr.NotCoordinator.Code {
		t.Fatalf("describe on the unloaded coordinator: %d", code)
	}
	h.c.Close() // its marker writing has stopped
	h.markers.failing.Store(false)
	h.c = h.coordinator()
	h.wantState("app", kmsg.TransactionStateCompleteCommit)
	ms := h.markers.all()
	if len(ms) != 1 || !ms[0].Commit || len(ms[0].Partitions) != 2 {
		t.Fatalf("markers after failover %+v", ms)
	}
	// The id's state survives: the producer goes on with its epoch.
	wantCode(t, "add after failover", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA}, 3), nil)
}

func TestTimeoutAbortsAndFences(t *testing.T) {
	h := newHarness(t)
	r := h.c.InitProducerID(context.Background(), "slow", 1_000, -1, -1, 5)
	wantCode(t, "add", h.c.AddPartitions("slow", r.ID, r.Epoch, []TopicPartition{tpA}, 3), nil)
	h.c.Expire()
	h.wantState("slow", kmsg.TransactionStateOngoing)
	h.clk.ms.Add(1_001)
	h.c.Expire()
	h.wantState("slow", kmsg.TransactionStateCompleteAbort)
	if ms := h.markers.all(); len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != r.Epoch+1 {
		t.Fatalf("markers %+v", ms)
	}
	wantCode(t, "the timed-out producer commits", endCode(h.c.EndTxn("slow", r.ID, r.Epoch, true, 3)), kerr.ProducerFenced)
}

func TestIDExpiration(t *testing.T) {
	h := newHarness(t)
	h.init("idle")
	h.clk.ms.Add((7*24*time.Hour + time.Second).Milliseconds())
	h.c.Expire()
	if _, code := h.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("expired id: code %d", code)
	}
	h.c = h.coordinator()
	if _, code := h.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("expired id after a reload: code %d", code)
	}
}

func TestVerifyPartitions(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	wantCode(t, "add", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA}, 3), nil)
	got, code := h.c.VerifyPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA, tpB})
	if code != 0 || got[tpA] != 0 || got[tpB] != kerr.TransactionAbortable.Code {
		t.Fatalf("verify: %v %d", got, code)
	}
	if _, code := h.c.VerifyPartitions("app", p.ID, p.Epoch-1, []TopicPartition{tpA}); code != kerr.ProducerFenced.Code {
		t.Fatalf("verify with an old epoch: %d", code)
	}
}

func TestDescribeAndList(t *testing.T) {
	h := newHarness(t)
	a, b := h.init("alpha"), h.init("beta")
	wantCode(t, "add", h.c.AddPartitions("alpha", a.ID, a.Epoch, []TopicPartition{tpA}, 3), nil)
	h.clk.ms.Add(5_000)
	tx := h.wantState("alpha", kmsg.TransactionStateOngoing)
	if tx.ProducerID != a.ID || tx.TimeoutMs != 60_000 || len(tx.Partitions) != 1 {
		t.Fatalf("describe: %+v", tx)
	}
	if _, code := h.c.Describe("gamma"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("unknown id: %d", code)
	}
	ids := func(f ListFilter) []string {
		var out []string
		for _, t := range h.c.List(f) {
			out = append(out, t.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    ListFilter
		want string
	}{
		{ListFilter{}, "[alpha beta]"},
		{ListFilter{States: []kmsg.TransactionState{kmsg.TransactionStateOngoing}}, "[alpha]"},
		{ListFilter{ProducerIDs: []int64{b.ID}}, "[beta]"},
		{ListFilter{MinDurationMs: 4_000}, "[alpha]"},
		{ListFilter{MinDurationMs: 6_000}, "[]"},
		{ListFilter{IDPattern: regexp.MustCompile("^b")}, "[beta]"},
	} {
		if got := fmt.Sprint(ids(tc.f)); got != tc.want {
			t.Errorf("list %+v: %s, want %s", tc.f, got, tc.want)
		}
	}
}

// endCode is EndTxn's code alone.
func endCode(code int16, _ <-chan struct{}) int16 { return code }

// TestEndTxnDoneAfterMarkers: EndTxn's done channel closes once the
// markers are written and the transaction is complete.
func TestEndTxnDoneAfterMarkers(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	wantCode(t, "add", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA}, 3), nil)
	h.markers.failing.Store(true)
	code, done := h.c.EndTxn("app", p.ID, p.Epoch, true, 3)
	if code != 0 || done == nil {
		t.Fatalf("EndTxn: code %d, done %v", code, done)
	}
	select {
	case <-done:
		t.Fatal("done before any marker was written")
	case <-time.After(100 * time.Millisecond):
	}
	h.markers.failing.Store(false)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("done not closed after the markers")
	}
	if tx, _ := h.c.Describe("app"); tx.State != kmsg.TransactionStateCompleteCommit {
		t.Fatalf("state %v once done", tx.State)
	}
}

// DescribeTransactions shows, as Kafka does, when the last transaction
// began even once it is complete (kafka-transactions describe prints it);
// a new producer (InitProducerId) has none. Listing by duration still
// selects open transactions only.
func TestDescribeStartOfCompletedTransaction(t *testing.T) {
	h := newHarness(t)
	p := h.init("app")
	if tx := h.wantState("app", kmsg.TransactionStateEmpty); tx.StartMs != -1 {
		t.Fatalf("new producer: start %d, want -1", tx.StartMs)
	}
	began := h.clk.now().UnixMilli()
	wantCode(t, "add", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpA}, 3), nil)
	h.clk.ms.Add(5_000)
	wantCode(t, "add more", h.c.AddPartitions("app", p.ID, p.Epoch, []TopicPartition{tpB}, 3), nil)
	if tx := h.wantState("app", kmsg.TransactionStateOngoing); tx.StartMs != began {
		t.Fatalf("ongoing: start %d, want %d", tx.StartMs, began)
	}
	if got := h.c.List(ListFilter{MinDurationMs: 4_000}); len(got) != 1 {
		t.Fatalf("list of transactions open 4 s: %+v", got)
	}
	wantCode(t, "commit", endCode(h.c.EndTxn("app", p.ID, p.Epoch, true, 3)), nil)
	if tx := h.wantState("app", kmsg.TransactionStateCompleteCommit); tx.StartMs != began {
		t.Fatalf("committed: start %d, want %d", tx.StartMs, began)
	}
	if got := h.c.List(ListFilter{MinDurationMs: 4_000}); len(got) != 0 {
		t.Fatalf("list of transactions open 4 s, after the commit: %+v", got)
	}
	h.init("app")
	if tx := h.wantState("app", kmsg.TransactionStateEmpty); tx.StartMs != -1 {
		t.Fatalf("after InitProducerId: start %d, want -1", tx.StartMs)
	}
}
