package chaos

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Outcomes of one transaction attempt as its worker learned it.
const (
	// TxnCommitted: End reported the commit done.
	TxnCommitted = "committed"
	// TxnAborted: End reported no commit and no error: the abort (asked
	// for, or chosen by the session after a rebalance or a failed
	// produce or offset commit) was accepted.
	TxnAborted = "aborted"
	// TxnUnknown: End failed; the transaction may have committed, or
	// been aborted (by the coordinator's timeout or the next producer of
	// the transactional id).
	TxnUnknown = "unknown"
	// TxnUnended: the worker stopped or failed before calling End.
	TxnUnended = "unended"
	// TxnAbandoned: the producer sent the records and closed without
	// ending the transaction; only the coordinator's timeout ends it, and
	// it must abort it.
	TxnAbandoned = "abandoned"
)

// hidden reports whether records of a transaction with this outcome
// must never be visible to read_committed.
func hidden(outcome string) bool { return outcome == TxnAborted || outcome == TxnAbandoned }

// txnAttempt is one transaction a worker began.
type txnAttempt struct {
	ID         string
	Worker     int
	Records    int  // output records produced in it, one per input record
	Deliberate bool // the worker asked for an abort
	Outcome    string
	Err        string
	// Produced are where the records' produce acknowledgements put
	// them, or their errors: what a violation's report shows.
	Produced []string
}

// lsoProbe is one read_committed fetch of an output partition sent to one
// broker: what it answered about the partition and the last offset of
// the data it returned (-1: none).
type lsoProbe struct {
	Node           int
	Partition      int32
	FetchOffset    int64
	LastStable     int64
	HighWatermark  int64
	LastDataOffset int64
}

// openTxn is a transaction a coordinator described as not ended, when it
// was seen.
type openTxn struct {
	ID      string
	State   string
	Start   time.Time
	Timeout time.Duration
	SeenAt  time.Time
}

// TxnHistory is what the transactional workload observed: the input
// records the feeder had acknowledged, every transaction attempt of the
// workers and its outcome, the records a read_committed consumer of the
// output was served, and the read_committed fetches probed. Every method
// is safe for concurrent use.
type TxnHistory struct {
	mu          sync.Mutex
	inputSent   int
	inputAcked  int
	inputFailed int
	attempts    map[string]*txnAttempt
	order       []string // attempt ids in the order they began
	observed    []seenRecord
	probes      []lsoProbe
	restarts    int
	abandoned   []string // transactional ids of abandoned transactions
}

// NewTxnHistory returns an empty history.
func NewTxnHistory() *TxnHistory {
	return &TxnHistory{attempts: map[string]*txnAttempt{}}
}

func (h *TxnHistory) inputAttempt() {
	h.mu.Lock()
	h.inputSent++
	h.mu.Unlock()
}

func (h *TxnHistory) inputAck(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.inputFailed++
		return
	}
	h.inputAcked++
}

// begin records the start of attempt id by worker with n output records.
func (h *TxnHistory) begin(id string, worker, n int, deliberate bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts[id] = &txnAttempt{ID: id, Worker: worker, Records: n, Deliberate: deliberate, Outcome: TxnUnended}
	h.order = append(h.order, id)
}

// end records how attempt id ended.
func (h *TxnHistory) end(id, outcome string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.attempts[id]
	if !ok {
		return
	}
	a.Outcome = outcome
	if err != nil {
		a.Err = err.Error()
	}
}

// produced records the produce result of one of attempt id's records.
func (h *TxnHistory) produced(id string, r *kgo.Record, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.attempts[id]
	if !ok {
		return
	}
	if err != nil {
		a.Produced = append(a.Produced, fmt.Sprintf("%d/-: %v", r.Partition, err))
		return
	}
	a.Produced = append(a.Produced, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
}

func (h *TxnHistory) observe(r seenRecord) {
	h.mu.Lock()
	h.observed = append(h.observed, r)
	h.mu.Unlock()
}

func (h *TxnHistory) probe(p lsoProbe) {
	h.mu.Lock()
	h.probes = append(h.probes, p)
	h.mu.Unlock()
}

func (h *TxnHistory) abandon(txnID string) {
	h.mu.Lock()
	h.abandoned = append(h.abandoned, txnID)
	h.mu.Unlock()
}

// AbandonedIDs are the transactional ids whose transactions were left
// for their timeouts.
func (h *TxnHistory) AbandonedIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.abandoned)
}

func (h *TxnHistory) restart() {
	h.mu.Lock()
	h.restarts++
	h.mu.Unlock()
}

// InputAcked is the number of input records the feeder had acknowledged.
func (h *TxnHistory) InputAcked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inputAcked
}

// Outcomes counts the attempts by outcome.
func (h *TxnHistory) Outcomes() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, a := range h.attempts {
		out[a.Outcome]++
	}
	return out
}
