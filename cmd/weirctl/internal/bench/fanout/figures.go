package fanout

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
)

// bytesPerGiB is the unit of CPU seconds per delivered GiB.
const bytesPerGiB = 1 << 30

// Latency kinds: what a run's P50 and P99 measure.
const (
	latencyEndToEnd         = "end_to_end"
	latencyTimeToLastRecord = "time_to_last_record"
)

// fanoutSummary is what bench fanout prints; field names are a contract
// for scripts reading --format json.
type fanoutSummary struct {
	Mode       string      `json:"mode"`
	Topic      string      `json:"topic"`
	Partition  int32       `json:"partition"`
	Consumers  int         `json:"consumers"`
	Records    int64       `json:"records"`
	RecordSize int         `json:"record_size"`
	Rate       int         `json:"rate,omitempty"`
	Fetch      fanoutFetch `json:"fetch"`
	// Latency says what the runs' p50_ms and p99_ms measure.
	Latency    string            `json:"latency"`
	BrokerNote string            `json:"broker_figures_unavailable,omitempty"`
	Runs       []fanoutRun       `json:"runs"`
	Comparison *fanoutComparison `json:"comparison,omitempty"`
}

// fanoutRun is one measured run. Only complete, verified runs are
// reported; a failed run fails the command instead.
type fanoutRun struct {
	Coalescing       string  `json:"coalescing"`
	Run              int     `json:"run"`
	DeliveredRecords int64   `json:"delivered_records"`
	DeliveredBytes   int64   `json:"delivered_bytes"`
	Seconds          float64 `json:"seconds"`
	MBPerSec         float64 `json:"mb_per_sec"`
	P50Ms            float64 `json:"p50_ms"`
	P99Ms            float64 `json:"p99_ms"`
	// FirstDeliveryP99Ms and BehindFirstP99Ms split the end-to-end
	// latency (tail mode): the p99 over records of the first consumer's
	// latency for each, which only the producer and the broker's write
	// path set, and the p99 over deliveries of how far each came after
	// its record's first delivery, which is the fan-out's own share.
	FirstDeliveryP99Ms *float64 `json:"first_delivery_p99_ms,omitempty"`
	BehindFirstP99Ms   *float64 `json:"behind_first_p99_ms,omitempty"`
	// Verified: every consumer got every record once, in order, and
	// every consumer's deliveries hash to the same Checksum.
	Verified bool `json:"verified"`
	// Checksum is the CRC-64 of what each consumer received (offset,
	// key and value of every record, in order), the same for all.
	Checksum    string         `json:"checksum"`
	Broker      *brokerFigures `json:"broker"`
	BrokerNotes []string       `json:"broker_notes,omitempty"`
}

// brokerFigures are the brokers' counters over a run's consume phase,
// summed over the brokers read both before and after it. Per-unit
// figures are null when their divisor is zero.
type brokerFigures struct {
	Brokers            int      `json:"brokers"`
	CPUSeconds         float64  `json:"cpu_seconds"`
	CPUSecondsPerGiB   *float64 `json:"cpu_seconds_per_gib"`
	AllocBytes         uint64   `json:"alloc_bytes"`
	FetchRequests      uint64   `json:"fetch_requests"`
	AllocBytesPerFetch *float64 `json:"alloc_bytes_per_fetch"`
	// AllocBytesPerDeliveredByte and LogReadBytesPerDeliveredByte divide
	// by the bytes every consumer together received.
	AllocBytesPerDeliveredByte   *float64               `json:"alloc_bytes_per_delivered_byte"`
	LogReadBytes                 uint64                 `json:"log_read_bytes"`
	LogReadBytesPerDeliveredByte *float64               `json:"log_read_bytes_per_delivered_byte"`
	TopicBytesOut                uint64                 `json:"topic_bytes_out"`
	Coalescer                    *admin.CoalescerCounts `json:"coalescer"`
}

// fanoutComparison divides coalescing-on figures by coalescing-off ones
// (medians over runs when there are several); null when undefined.
type fanoutComparison struct {
	MBPerSec                     *float64 `json:"mb_per_sec"`
	CPUSecondsPerGiB             *float64 `json:"cpu_seconds_per_gib"`
	AllocBytesPerFetch           *float64 `json:"alloc_bytes_per_fetch"`
	AllocBytesPerDeliveredByte   *float64 `json:"alloc_bytes_per_delivered_byte"`
	LogReadBytesPerDeliveredByte *float64 `json:"log_read_bytes_per_delivered_byte"`
	P99Ms                        *float64 `json:"p99_ms"`
	FirstDeliveryP99Ms           *float64 `json:"first_delivery_p99_ms,omitempty"`
	BehindFirstP99Ms             *float64 `json:"behind_first_p99_ms,omitempty"`
}

func (f *fanoutBench) newSummary() *fanoutSummary {
	o := f.o
	s := &fanoutSummary{
		Mode: o.mode, Topic: f.topic, Partition: fanoutPartition, Consumers: o.consumers,
		Records: o.records, RecordSize: o.recordSize, Fetch: o.fetch,
		Latency: latencyTimeToLastRecord, BrokerNote: f.brokerNote, Runs: []fanoutRun{},
	}
	if o.mode == fanoutTail {
		s.Records, s.Rate, s.Latency = o.tailRecords(), o.rate, latencyEndToEnd
	}
	return s
}

// newRun computes a run's figures from its consumers and the scrapes
// around its consume phase.
func (f *fanoutBench) newRun(label string, n int, consumers []*fanoutConsumer, started time.Time, elapsed time.Duration, before, after []admin.BrokerScrape) *fanoutRun {
	r := &fanoutRun{Coalescing: label, Run: n, Seconds: elapsed.Seconds(), Verified: true}
	var lat []time.Duration
	for i, c := range consumers {
		sum := fmt.Sprintf("%016x", c.track.crc)
		if i == 0 {
			r.Checksum = sum
		} else if sum != r.Checksum {
			r.Verified = false
			r.BrokerNotes = append(r.BrokerNotes, fmt.Sprintf("consumer %d received different bytes (checksum %s, consumer 0 %s)", c.id, sum, r.Checksum))
		}
		r.DeliveredRecords += c.track.received
		r.DeliveredBytes += c.track.bytes
		if f.o.mode == fanoutTail {
			lat = append(lat, c.track.latencies...)
		} else {
			// Preload has no send times; how long each consumer took
			// to drain the backlog is what fan-out changes.
			lat = append(lat, c.track.lastAt.Sub(started))
		}
	}
	if r.Seconds > 0 {
		r.MBPerSec = float64(r.DeliveredBytes) / harness.BytesPerMB / r.Seconds
	}
	p := harness.ComputePercentiles(lat)
	r.P50Ms, r.P99Ms = harness.Milliseconds(p.P50), harness.Milliseconds(p.P99)
	if f.o.mode == fanoutTail {
		r.FirstDeliveryP99Ms, r.BehindFirstP99Ms = deliverySpread(consumers)
	}
	if f.brokers != nil {
		var notes []string
		r.Broker, notes = computeBrokerFigures(before, after, f.topic, r.DeliveredBytes)
		r.BrokerNotes = append(append(r.BrokerNotes, notes...), brokerFigureWarnings(label, r.Broker)...)
	}
	return r
}

// deliverySpread computes FirstDeliveryP99Ms and BehindFirstP99Ms over
// the records every consumer received (each consumer's latencies are in
// offset order from the same first offset); nil without any.
func deliverySpread(consumers []*fanoutConsumer) (firstP99, behindP99 *float64) {
	n := -1
	for _, c := range consumers {
		if n < 0 || len(c.track.latencies) < n {
			n = len(c.track.latencies)
		}
	}
	if n <= 0 {
		return nil, nil
	}
	first := slices.Clone(consumers[0].track.latencies[:n])
	for _, c := range consumers[1:] {
		for i, l := range c.track.latencies[:n] {
			first[i] = min(first[i], l)
		}
	}
	behind := make([]time.Duration, 0, n*len(consumers))
	for _, c := range consumers {
		for i, l := range c.track.latencies[:n] {
			behind = append(behind, l-first[i])
		}
	}
	f := harness.Milliseconds(harness.ComputePercentiles(first).P99)
	b := harness.Milliseconds(harness.ComputePercentiles(behind).P99)
	return &f, &b
}

// brokerCounters are the counters bench fanout reads from one broker.
type brokerCounters struct {
	cpuSeconds    float64
	allocBytes    float64
	fetchRequests float64
	topicBytesOut float64
	logReadBytes  float64
	coalescer     *admin.CoalescerCounts
}

// readBrokerCounters needs the process and Go collectors; the Fetch and
// topic series only appear once used, so absent means zero.
func readBrokerCounters(m admin.MetricFamilies, topic string) (brokerCounters, error) {
	var c brokerCounters
	var ok bool
	if c.cpuSeconds, ok = m.Sum(admin.MetricCPUSeconds, nil); !ok {
		return c, fmt.Errorf("exports no %s", admin.MetricCPUSeconds)
	}
	if c.allocBytes, ok = m.Sum(admin.MetricAllocBytes, nil); !ok {
		return c, fmt.Errorf("exports no %s", admin.MetricAllocBytes)
	}
	c.fetchRequests, _ = m.Sum(admin.MetricKafkaRequests, map[string]string{"api": admin.FetchAPILabel})
	c.topicBytesOut, _ = m.Sum(admin.MetricTopicBytesOut, map[string]string{"topic": topic})
	c.logReadBytes, _ = m.Sum(admin.MetricLogReadBytes, nil)
	if co, err := m.CoalescerTotal(); err == nil {
		c.coalescer = &co
	}
	return c, nil
}

// errCountersReset means a counter went backwards between the scrapes.
var errCountersReset = errors.New("counters went backwards: the broker restarted during the run")

// minus is the change since earlier.
func (c brokerCounters) minus(earlier brokerCounters) (brokerCounters, error) {
	d := brokerCounters{
		cpuSeconds:    c.cpuSeconds - earlier.cpuSeconds,
		allocBytes:    c.allocBytes - earlier.allocBytes,
		fetchRequests: c.fetchRequests - earlier.fetchRequests,
		topicBytesOut: c.topicBytesOut - earlier.topicBytesOut,
		logReadBytes:  c.logReadBytes - earlier.logReadBytes,
	}
	if d.cpuSeconds < 0 || d.allocBytes < 0 || d.fetchRequests < 0 || d.topicBytesOut < 0 || d.logReadBytes < 0 {
		return brokerCounters{}, errCountersReset
	}
	if c.coalescer != nil && earlier.coalescer != nil {
		co, ok := c.coalescer.Minus(*earlier.coalescer)
		if !ok {
			return brokerCounters{}, errCountersReset
		}
		d.coalescer = &co
	}
	return d, nil
}

// computeBrokerFigures sums the per-broker changes between two scrapes.
// A broker missing from either, or whose counters reset, is left out
// and named in the notes; with no broker left, figures are nil.
func computeBrokerFigures(before, after []admin.BrokerScrape, topic string, deliveredBytes int64) (*brokerFigures, []string) {
	var notes []string
	earlier := map[int32]admin.BrokerScrape{}
	for _, s := range before {
		earlier[s.Broker.NodeID] = s
	}
	var total brokerCounters
	counted := 0
	for _, a := range after {
		id := a.Broker.NodeID
		b, ok := earlier[id]
		d, err := brokerChange(b, a, ok, topic)
		if err != nil {
			notes = append(notes, fmt.Sprintf("broker %d left out: %v", id, err))
			continue
		}
		counted++
		total.cpuSeconds += d.cpuSeconds
		total.allocBytes += d.allocBytes
		total.fetchRequests += d.fetchRequests
		total.topicBytesOut += d.topicBytesOut
		total.logReadBytes += d.logReadBytes
		if d.coalescer != nil {
			sum := d.coalescer.Plus(coalescerCountsOrZero(total.coalescer))
			total.coalescer = &sum
		}
	}
	if counted == 0 {
		return nil, append(notes, "broker figures unavailable: no broker was read both before and after the run")
	}
	fig := &brokerFigures{
		Brokers:            counted,
		CPUSeconds:         total.cpuSeconds,
		CPUSecondsPerGiB:   perUnit(total.cpuSeconds, float64(deliveredBytes)/bytesPerGiB),
		AllocBytes:         harness.RoundCount(total.allocBytes),
		FetchRequests:      harness.RoundCount(total.fetchRequests),
		AllocBytesPerFetch: perUnit(total.allocBytes, total.fetchRequests),
		TopicBytesOut:      harness.RoundCount(total.topicBytesOut),
		Coalescer:          total.coalescer,

		AllocBytesPerDeliveredByte:   perUnit(total.allocBytes, float64(deliveredBytes)),
		LogReadBytes:                 harness.RoundCount(total.logReadBytes),
		LogReadBytesPerDeliveredByte: perUnit(total.logReadBytes, float64(deliveredBytes)),
	}
	return fig, notes
}

func brokerChange(before, after admin.BrokerScrape, found bool, topic string) (brokerCounters, error) {
	switch {
	case !found:
		return brokerCounters{}, errors.New("not read before the run")
	case errors.Is(before.Err, admin.ErrBrokerNotAlive):
		return brokerCounters{}, before.Err
	case before.Err != nil:
		return brokerCounters{}, fmt.Errorf("before the run: %w", before.Err)
	case after.Err != nil:
		return brokerCounters{}, fmt.Errorf("after the run: %w", after.Err)
	}
	b, err := readBrokerCounters(before.Metrics, topic)
	if err != nil {
		return brokerCounters{}, err
	}
	a, err := readBrokerCounters(after.Metrics, topic)
	if err != nil {
		return brokerCounters{}, err
	}
	return a.minus(b)
}

func coalescerCountsOrZero(c *admin.CoalescerCounts) admin.CoalescerCounts {
	if c == nil {
		return admin.CoalescerCounts{}
	}
	return *c
}

// perUnit is value/units, or nil when there are no units.
func perUnit(value, units float64) *float64 {
	if units <= 0 {
		return nil
	}
	v := value / units
	return &v
}

// minComparableCPUSeconds is the least broker CPU time worth comparing:
// process_cpu_seconds_total counts in 10 ms ticks, so a shorter phase
// gives a CPU per GiB that is mostly rounding.
const minComparableCPUSeconds = 1.0

// brokerFigureWarnings flags figures that should not be quoted: a run
// whose coalescer activity contradicts its setting (the switch did not
// take effect, so on and off would compare the wrong things), or one too
// short for the CPU figure to mean anything.
func brokerFigureWarnings(label string, fig *brokerFigures) []string {
	if fig == nil {
		return nil
	}
	var notes []string
	if fig.CPUSeconds < minComparableCPUSeconds {
		notes = append(notes, fmt.Sprintf("the brokers used %.2f CPU seconds, too few to compare (counted in 10 ms ticks): use more --records or --duration", fig.CPUSeconds))
	}
	if fig.Coalescer == nil {
		if label == coalescingOn {
			notes = append(notes, "no broker exports coalescer metrics, so whether reads were coalesced is unknown")
		}
		return notes
	}
	c := fig.Coalescer
	reads := c.Insertions + c.Reinsertions + c.ReadyHits + c.InflightHits
	switch {
	case label == coalescingOn && reads == 0:
		notes = append(notes, "coalescing was on but the coalescer counted no reads: did the setting take effect?")
	case label == coalescingOff && reads > 0:
		notes = append(notes, fmt.Sprintf("coalescing was off but the coalescer counted %d reads", reads))
	}
	return notes
}

// compareRuns divides the median on figures by the median off ones.
func compareRuns(runs []fanoutRun) *fanoutComparison {
	var on, off []fanoutRun
	for _, r := range runs {
		switch r.Coalescing {
		case coalescingOn:
			on = append(on, r)
		case coalescingOff:
			off = append(off, r)
		}
	}
	if len(on) == 0 || len(off) == 0 {
		return nil
	}
	mbps := func(r fanoutRun) *float64 { return &r.MBPerSec }
	cpu := func(r fanoutRun) *float64 {
		if r.Broker == nil {
			return nil
		}
		return r.Broker.CPUSecondsPerGiB
	}
	alloc := func(r fanoutRun) *float64 {
		if r.Broker == nil {
			return nil
		}
		return r.Broker.AllocBytesPerFetch
	}
	brokerFigure := func(get func(*brokerFigures) *float64) func(fanoutRun) *float64 {
		return func(r fanoutRun) *float64 {
			if r.Broker == nil {
				return nil
			}
			return get(r.Broker)
		}
	}
	allocPerByte := brokerFigure(func(b *brokerFigures) *float64 { return b.AllocBytesPerDeliveredByte })
	logPerByte := brokerFigure(func(b *brokerFigures) *float64 { return b.LogReadBytesPerDeliveredByte })
	p99 := func(r fanoutRun) *float64 { return &r.P99Ms }
	firstP99 := func(r fanoutRun) *float64 { return r.FirstDeliveryP99Ms }
	behindP99 := func(r fanoutRun) *float64 { return r.BehindFirstP99Ms }
	return &fanoutComparison{
		MBPerSec:                     ratio(medianOf(on, mbps), medianOf(off, mbps)),
		CPUSecondsPerGiB:             ratio(medianOf(on, cpu), medianOf(off, cpu)),
		AllocBytesPerFetch:           ratio(medianOf(on, alloc), medianOf(off, alloc)),
		AllocBytesPerDeliveredByte:   ratio(medianOf(on, allocPerByte), medianOf(off, allocPerByte)),
		LogReadBytesPerDeliveredByte: ratio(medianOf(on, logPerByte), medianOf(off, logPerByte)),
		P99Ms:                        ratio(medianOf(on, p99), medianOf(off, p99)),
		FirstDeliveryP99Ms:           ratio(medianOf(on, firstP99), medianOf(off, firstP99)),
		BehindFirstP99Ms:             ratio(medianOf(on, behindP99), medianOf(off, behindP99)),
	}
}

// medianOf is the median of a figure over runs, skipping runs without
// it; nil when none has it.
func medianOf(runs []fanoutRun, figure func(fanoutRun) *float64) *float64 {
	var vals []float64
	for _, r := range runs {
		if v := figure(r); v != nil {
			vals = append(vals, *v)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	slices.Sort(vals)
	m := vals[len(vals)/2]
	if len(vals)%2 == 0 {
		m = (vals[len(vals)/2-1] + m) / 2
	}
	return &m
}

// ratio is a/b, nil when either is missing or b is zero.
func ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	r := *a / *b
	return &r
}
