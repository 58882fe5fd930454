package memory

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
)

// Metric names bench memory reads from a broker's /metrics, with
// admin.MetricResidentMemory. Any of them may be missing (a broker
// predating the fetch memory budget, or one with disable_metrics set); a
// missing series is reported as n/a.
const (
	metricFetchMemoryBudget   = "weir_fetch_memory_budget_bytes"
	metricFetchMemoryInUse    = "weir_fetch_memory_in_use_bytes"
	metricFetchMemoryWaits    = "weir_fetch_memory_waits_total"
	metricFetchMemoryWaitSecs = "weir_fetch_memory_wait_seconds_total"
	metricFetchMemoryTrimmed  = "weir_fetch_memory_trimmed_reads_total"
	metricRequestMemoryInUse  = "weir_request_memory_in_use_bytes"
	metricRequestMemoryWaits  = "weir_request_memory_waits_total"
)

// How a bench memory run ended.
const (
	memoryStoppedCompleted   = "completed"
	memoryStoppedMaxDuration = "max_duration"
	memoryStoppedInterrupted = "interrupted"
	memoryStoppedFailed      = "failed"
)

// optValue is a reading that may be absent.
type optValue struct {
	v  float64
	ok bool
}

func (o optValue) max(n optValue) optValue {
	if n.ok && (!o.ok || n.v > o.v) {
		return n
	}
	return o
}

func (o optValue) bytes() *int64 {
	if !o.ok {
		return nil
	}
	v := int64(math.Round(o.v))
	return &v
}

// memorySample is one broker's readings from one scrape.
type memorySample struct {
	rss, fetchBudget, fetchInUse, requestInUse          optValue
	fetchWaits, fetchWaitSeconds, trimmed, requestWaits optValue
}

func readMemorySample(m admin.MetricFamilies) memorySample {
	get := func(name string) optValue {
		v, ok := m.Sum(name, nil)
		return optValue{v, ok}
	}
	return memorySample{
		rss:              get(admin.MetricResidentMemory),
		fetchBudget:      get(metricFetchMemoryBudget),
		fetchInUse:       get(metricFetchMemoryInUse),
		requestInUse:     get(metricRequestMemoryInUse),
		fetchWaits:       get(metricFetchMemoryWaits),
		fetchWaitSeconds: get(metricFetchMemoryWaitSecs),
		trimmed:          get(metricFetchMemoryTrimmed),
		requestWaits:     get(metricRequestMemoryWaits),
	}
}

// counters lists the sample's counters, for reset detection.
func (s memorySample) counters() []optValue {
	return []optValue{s.fetchWaits, s.fetchWaitSeconds, s.trimmed, s.requestWaits}
}

// brokerMemoryTrack folds one broker's samples: peaks of the gauges, and
// the first and last readings of the counters.
type brokerMemoryTrack struct {
	nodeID  int32
	scrapes int
	failed  int
	lastErr error

	first, last memorySample
	sampled     bool
	reset       bool

	rssBefore                             optValue
	peakRSS, peakFetchInUse, peakReqInUse optValue
}

func (t *brokerMemoryTrack) observe(s memorySample) {
	if !t.sampled {
		t.first, t.rssBefore, t.sampled = s, s.rss, true
	} else {
		prev, now := t.last.counters(), s.counters()
		for i := range prev {
			if prev[i].ok && now[i].ok && now[i].v < prev[i].v {
				t.reset = true
			}
		}
	}
	t.last = s
	t.peakRSS = t.peakRSS.max(s.rss)
	t.peakFetchInUse = t.peakFetchInUse.max(s.fetchInUse)
	t.peakReqInUse = t.peakReqInUse.max(s.requestInUse)
}

// memorySampler keeps every broker's track; the sampling goroutine and
// the progress printer share it.
type memorySampler struct {
	mu     sync.Mutex
	tracks []*brokerMemoryTrack
	byID   map[int32]*brokerMemoryTrack
}

func newMemorySampler(brokers []admin.Broker) *memorySampler {
	s := &memorySampler{byID: map[int32]*brokerMemoryTrack{}}
	for _, b := range brokers {
		t := &brokerMemoryTrack{nodeID: b.NodeID}
		s.tracks = append(s.tracks, t)
		s.byID[b.NodeID] = t
	}
	return s
}

// record folds one round of scrapes in; brokers the cluster reports as
// down are not counted as failed scrapes, since they were not asked.
func (s *memorySampler) record(scrapes []admin.BrokerScrape) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sc := range scrapes {
		t := s.byID[sc.Broker.NodeID]
		if t == nil {
			continue
		}
		t.scrapes++
		if sc.Err != nil {
			t.failed++
			t.lastErr = sc.Err
			continue
		}
		t.observe(readMemorySample(sc.Metrics))
	}
}

// latest is the highest current RSS and fetch memory in use over the
// brokers' last samples, for the progress line.
func (s *memorySampler) latest() (rss, fetchInUse optValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tracks {
		if t.sampled {
			rss = rss.max(t.last.rss)
			fetchInUse = fetchInUse.max(t.last.fetchInUse)
		}
	}
	return rss, fetchInUse
}

// memoryBrokerFigures is one broker over the consume phase. Pointers are
// null when the broker does not export the series (or, for counters, was
// not read at both ends, or restarted in between).
type memoryBrokerFigures struct {
	NodeID        int32  `json:"node_id"`
	Scrapes       int    `json:"scrapes"`
	FailedScrapes int    `json:"failed_scrapes"`
	RSSBefore     *int64 `json:"rss_before_bytes"`
	PeakRSS       *int64 `json:"peak_rss_bytes"`
	// FetchBudget is weir_fetch_memory_budget_bytes as last read; 0 (or
	// less) means unbounded.
	FetchBudget    *int64 `json:"fetch_budget_bytes"`
	PeakFetchInUse *int64 `json:"peak_fetch_in_use_bytes"`
	// PeakFetchInUseOfBudget is PeakFetchInUse / FetchBudget; null when
	// the budget is unbounded or either is missing.
	PeakFetchInUseOfBudget *float64 `json:"peak_fetch_in_use_of_budget"`
	FetchWaits             *uint64  `json:"fetch_waits"`
	FetchWaitSeconds       *float64 `json:"fetch_wait_seconds"`
	FetchTrimmedReads      *uint64  `json:"fetch_trimmed_reads"`
	PeakRequestInUse       *int64   `json:"peak_request_in_use_bytes"`
	RequestWaits           *uint64  `json:"request_waits"`
	Notes                  []string `json:"notes,omitempty"`
}

func (s *memorySampler) figures() []memoryBrokerFigures {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]memoryBrokerFigures, 0, len(s.tracks))
	for _, t := range s.tracks {
		out = append(out, t.figures())
	}
	return out
}

func (t *brokerMemoryTrack) figures() memoryBrokerFigures {
	f := memoryBrokerFigures{NodeID: t.nodeID, Scrapes: t.scrapes, FailedScrapes: t.failed}
	if t.failed > 0 {
		f.Notes = append(f.Notes, fmt.Sprintf("%d of %d scrapes failed (last: %v)", t.failed, t.scrapes, t.lastErr))
	}
	if !t.sampled {
		return f
	}
	f.RSSBefore = t.rssBefore.bytes()
	f.PeakRSS = t.peakRSS.bytes()
	f.FetchBudget = t.last.fetchBudget.bytes()
	f.PeakFetchInUse = t.peakFetchInUse.bytes()
	f.PeakRequestInUse = t.peakReqInUse.bytes()
	if t.last.fetchBudget.ok && t.last.fetchBudget.v > 0 && t.peakFetchInUse.ok {
		r := t.peakFetchInUse.v / t.last.fetchBudget.v
		f.PeakFetchInUseOfBudget = &r
	}
	if t.reset {
		f.Notes = append(f.Notes, "counters went backwards: the broker restarted during the run; waits and trimmed reads left out")
		return f
	}
	delta := func(first, last optValue) (float64, bool) {
		if !first.ok || !last.ok {
			return 0, false
		}
		return last.v - first.v, true
	}
	count := func(first, last optValue) *uint64 {
		d, ok := delta(first, last)
		if !ok {
			return nil
		}
		n := harness.RoundCount(d)
		return &n
	}
	f.FetchWaits = count(t.first.fetchWaits, t.last.fetchWaits)
	f.FetchTrimmedReads = count(t.first.trimmed, t.last.trimmed)
	f.RequestWaits = count(t.first.requestWaits, t.last.requestWaits)
	if d, ok := delta(t.first.fetchWaitSeconds, t.last.fetchWaitSeconds); ok {
		f.FetchWaitSeconds = &d
	}
	return f
}

// consumerResult is how one (not stalled) consumer's run went.
type consumerResult struct {
	id        int
	completed bool
	took      time.Duration // from the phase's start to its last record
	records   int64
	bytes     int64
	checksum  uint64
	err       error
}

// consumerChecksum combines a consumer's per-partition checksums, in
// partition order.
func consumerChecksum(parts []*partitionProgress) uint64 {
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b *partitionProgress) int { return cmp.Compare(a.partition, b.partition) })
	var sum uint64
	var b [12]byte
	for _, p := range sorted {
		binary.BigEndian.PutUint32(b[0:], uint32(p.partition))
		binary.BigEndian.PutUint64(b[4:], p.crc)
		sum = crc64.Update(sum, crc64Table, b[:])
	}
	return sum
}

// memorySummary is what bench memory prints; field names are a contract
// for scripts reading --format json.
type memorySummary struct {
	Topic      string      `json:"topic"`
	Partitions int         `json:"partitions"`
	Consumers  int         `json:"consumers"`
	Stalled    int         `json:"stalled"`
	Producers  int         `json:"producers"`
	RecordSize int         `json:"record_size"`
	Fetch      memoryFetch `json:"fetch"`
	// BacklogRecords is what each consumer reads, all partitions
	// together; BacklogBytes the record batch bytes that carry them, as
	// received by a consumer that got them all (0 if none did).
	BacklogRecords     int64 `json:"backlog_records"`
	BacklogBytes       int64 `json:"backlog_bytes"`
	ConsumersCompleted int   `json:"consumers_completed"`
	// DeliveredRecords and DeliveredBytes (record batch bytes) are over
	// all consumers, complete or not.
	DeliveredRecords int64   `json:"delivered_records"`
	DeliveredBytes   int64   `json:"delivered_bytes"`
	Seconds          float64 `json:"seconds"`
	MBPerSec         float64 `json:"mb_per_sec"`
	// Consumer completion times, from the start of the consume phase;
	// null when no consumer completed.
	FastestConsumerSeconds *float64 `json:"fastest_consumer_seconds"`
	MedianConsumerSeconds  *float64 `json:"median_consumer_seconds"`
	SlowestConsumerSeconds *float64 `json:"slowest_consumer_seconds"`
	ProducedRecords        int64    `json:"produced_records"`
	ProducedBytes          int64    `json:"produced_bytes"`
	// Verified: every consumer got every backlog offset once, in order,
	// and all agree on the checksum of the batches' headers and CRCs.
	Verified bool   `json:"verified"`
	Checksum string `json:"checksum"`
	// PeakRSS and PeakFetchInUse are the highest of any broker.
	PeakRSS        *int64                `json:"peak_rss_bytes"`
	PeakFetchInUse *int64                `json:"peak_fetch_in_use_bytes"`
	Brokers        []memoryBrokerFigures `json:"brokers"`
	BrokerNote     string                `json:"broker_figures_unavailable,omitempty"`
	Stopped        string                `json:"stopped"`
	Failures       []string              `json:"failures,omitempty"`
}

// addConsumers fills the delivery figures from the consumers' results.
// elapsed is how long the consume phase ran; when every consumer
// completed, the run lasted until the slowest one did.
func (s *memorySummary) addConsumers(results []consumerResult, elapsed time.Duration) {
	var took []time.Duration
	s.Verified = len(results) > 0
	for _, r := range results {
		s.DeliveredRecords += r.records
		s.DeliveredBytes += r.bytes
		if r.err != nil {
			s.Verified = false
			s.Failures = append(s.Failures, r.err.Error())
		}
		if !r.completed {
			s.Verified = false
			continue
		}
		s.ConsumersCompleted++
		took = append(took, r.took)
		sum := fmt.Sprintf("%016x", r.checksum)
		switch {
		case s.Checksum == "":
			s.Checksum, s.BacklogBytes = sum, r.bytes
		case sum != s.Checksum || r.bytes != s.BacklogBytes:
			s.Verified = false
			s.Failures = append(s.Failures, fmt.Sprintf("consumer %d received different batches (checksum %s, %d bytes) than the first to complete (checksum %s, %d bytes)",
				r.id, sum, r.bytes, s.Checksum, s.BacklogBytes))
		}
	}
	slices.Sort(took)
	if n := len(took); n > 0 {
		secs := func(d time.Duration) *float64 { v := d.Seconds(); return &v }
		s.FastestConsumerSeconds, s.SlowestConsumerSeconds = secs(took[0]), secs(took[n-1])
		median := took[n/2]
		if n%2 == 0 {
			median = (took[n/2-1] + took[n/2]) / 2
		}
		s.MedianConsumerSeconds = secs(median)
		if n == len(results) {
			elapsed = took[n-1]
		}
	}
	s.Seconds = elapsed.Seconds()
	if s.Seconds > 0 {
		s.MBPerSec = float64(s.DeliveredBytes) / harness.BytesPerMB / s.Seconds
	}
}

// addBrokers fills the per-broker figures and the highest peaks.
func (s *memorySummary) addBrokers(figs []memoryBrokerFigures) {
	s.Brokers = figs
	var rss, fetch optValue
	for _, f := range figs {
		if f.PeakRSS != nil {
			rss = rss.max(optValue{float64(*f.PeakRSS), true})
		}
		if f.PeakFetchInUse != nil {
			fetch = fetch.max(optValue{float64(*f.PeakFetchInUse), true})
		}
	}
	s.PeakRSS, s.PeakFetchInUse = rss.bytes(), fetch.bytes()
}
