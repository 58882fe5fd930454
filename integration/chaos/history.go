package chaos

import (
	"sync"
)

// History is what the clients observed during a run: which records the
// cluster acknowledged (and where), which records the consumers were
// served, and which group offsets they committed. Every method is safe
// for concurrent use.
type History struct {
	mu        sync.Mutex
	attempted int
	failed    int
	failures  map[string]int       // error text -> count
	acked     map[string]ackedAt   // record id -> where the ack said it is
	ackedTwo  map[string][]ackedAt // ids acknowledged more than once
	seen      []seenRecord
	commits   []commitRecord
	fetched   map[int32][]int64 // committed offsets read back from the group, in order
}

// ackedAt is where an acknowledgement placed a record.
type ackedAt struct {
	Partition int32
	Offset    int64
}

// seenRecord is one record a group consumer was served.
type seenRecord struct {
	Consumer  int
	Partition int32
	Offset    int64
	Value     string
}

// commitRecord is one offset commit the coordinator accepted, in the order
// the accepts arrived.
type commitRecord struct {
	Consumer  int
	Partition int32
	Offset    int64
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{
		failures: map[string]int{},
		acked:    map[string]ackedAt{},
		ackedTwo: map[string][]ackedAt{},
		fetched:  map[int32][]int64{},
	}
}

func (h *History) attempt() {
	h.mu.Lock()
	h.attempted++
	h.mu.Unlock()
}

func (h *History) ack(id string, at ackedAt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if prev, ok := h.acked[id]; ok {
		h.ackedTwo[id] = append(h.ackedTwo[id], prev, at)
		return
	}
	h.acked[id] = at
}

func (h *History) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed++
	h.failures[err.Error()]++
}

func (h *History) see(r seenRecord) {
	h.mu.Lock()
	h.seen = append(h.seen, r)
	h.mu.Unlock()
}

func (h *History) commit(c commitRecord) {
	h.mu.Lock()
	h.commits = append(h.commits, c)
	h.mu.Unlock()
}

func (h *History) fetchedOffset(p int32, off int64) {
	h.mu.Lock()
	h.fetched[p] = append(h.fetched[p], off)
	h.mu.Unlock()
}

// Acked is the number of acknowledged records so far.
func (h *History) Acked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

// Seen is the number of records consumers were served so far.
func (h *History) Seen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}
