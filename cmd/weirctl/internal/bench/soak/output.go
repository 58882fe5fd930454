package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// soakErrorCounts are the errors of each kind, with the latest of each.
type soakErrorCounts struct {
	Produce    int64    `json:"produce"`
	Consume    int64    `json:"consume"`
	Connection int64    `json:"connection"`
	Latest     []string `json:"latest,omitempty"`
}

func (e soakErrorCounts) total() int64 { return e.Produce + e.Consume + e.Connection }

// soakSummary is what bench soak prints; field names are a contract for
// scripts reading --format json.
type soakSummary struct {
	Brokers         int      `json:"brokers"`
	DurationSeconds float64  `json:"duration_seconds"`
	WarmupSeconds   float64  `json:"warmup_seconds"`
	SampleSeconds   float64  `json:"sample_seconds"`
	Topics          []string `json:"topics"`
	Partitions      int      `json:"partitions"`

	Connections         int     `json:"connections"`
	ChurnPerSec         float64 `json:"churn_per_sec"`
	ConnectionsOpened   int64   `json:"connections_opened"`
	ConnectionsChurned  int64   `json:"connections_churned"`
	ConnectionsMoved    int64   `json:"connections_moved"`
	ConnectionRequests  int64   `json:"connection_requests"`
	ConnectionFetchWait float64 `json:"connection_fetch_wait_seconds"`

	Rate              int `json:"rate"`
	RecordSize        int `json:"record_size"`
	Producers         int `json:"producers"`
	Groups            int `json:"groups"`
	ConsumersPerGroup int `json:"consumers_per_group"`

	// After warm-up: acknowledged and first-delivered records per second
	// (delivered over all groups) and produce-to-consume latency.
	ProducedPerSec  float64  `json:"produced_per_sec"`
	DeliveredPerSec float64  `json:"delivered_per_sec"`
	P50Ms           *float64 `json:"p50_ms"`
	P99Ms           *float64 `json:"p99_ms"`
	MaxMs           *float64 `json:"max_ms"`

	soakCheck
	// CaughtUp: every group had every acknowledged record within --drain
	// of producing's end, DrainSeconds later.
	CaughtUp     bool    `json:"caught_up"`
	DrainSeconds float64 `json:"drain_seconds"`

	// RestBefore and RestAfter are the brokers with none of the soak's
	// load connected: once the topics had leaders, and once every
	// client had left (null when the soak was interrupted).
	RestBefore soakRest  `json:"at_rest_before"`
	RestAfter  *soakRest `json:"at_rest_after"`
	// LeftBehind lists what the brokers kept after every client left
	// beyond the tolerated floor.
	LeftBehind []string `json:"left_behind,omitempty"`

	Errors        soakErrorCounts `json:"errors"`
	FailedScrapes int             `json:"failed_scrapes"`
	Samples       []soakSample    `json:"samples"`
	Growth        []growthCheck   `json:"growth"`
	// Tolerance is --tolerance as a fraction.
	Tolerance float64  `json:"tolerance"`
	Verdict   string   `json:"verdict"`
	Stopped   string   `json:"stopped"`
	Failures  []string `json:"failures,omitempty"`
}

// summarize gathers the run's figures, verification and verdict.
func (b *soakBench) summarize(s *soakSampler, t *soakTraffic, cs *soakConnStats, parts []*soakPartition, ran, drained time.Duration, caughtUp bool) *soakSummary {
	o := b.o
	warmup := o.warmup.of(o.duration)
	sum := &soakSummary{
		Brokers: len(b.brokers), DurationSeconds: ran.Seconds(), WarmupSeconds: warmup.Seconds(), SampleSeconds: o.sample.Seconds(),
		Topics: o.topicNames(), Partitions: len(parts),
		Connections: o.connections, ChurnPerSec: o.churn, ConnectionsOpened: cs.opened.Load(), ConnectionsChurned: cs.churned.Load(),
		ConnectionsMoved: cs.moved.Load(), ConnectionRequests: cs.requests.Load(), ConnectionFetchWait: o.connWait.Seconds(),
		Rate: o.rate, RecordSize: o.recordSize, Producers: o.producers, Groups: o.groups, ConsumersPerGroup: o.consumers,
		P50Ms: s.overall.quantileMs(0.50), P99Ms: s.overall.quantileMs(0.99), MaxMs: s.overall.quantileMs(1),
		soakCheck: t.verify(), CaughtUp: caughtUp, DrainSeconds: drained.Seconds(),
		FailedScrapes: s.failedScrapes, Samples: s.samples, Tolerance: o.tolerance / 100,
	}
	if s.secondsAfterWarmup > 0 {
		sum.ProducedPerSec = float64(s.ackedAfterWarmup) / s.secondsAfterWarmup
		sum.DeliveredPerSec = float64(s.deliveredAfterWarmup) / s.secondsAfterWarmup
	}
	sum.Errors = soakErrorCounts{Produce: t.produceErrs.n.Load(), Consume: t.consumeErrs.n.Load(), Connection: t.connErrs.n.Load()}
	for _, e := range []*soakErrors{&t.produceErrs, &t.consumeErrs, &t.connErrs} {
		if l := e.latest(); l != "" {
			sum.Errors.Latest = append(sum.Errors.Latest, l)
		}
	}
	if sum.Samples == nil {
		sum.Samples = []soakSample{}
	}
	assignPhases(sum.Samples, warmup)
	sum.Growth = growthChecks(sum.Samples, sum.Tolerance)
	sum.Verdict = soakVerdict(sum.Growth)
	if s.procErr != nil {
		sum.Failures = append(sum.Failures, "reading --pid's memory: "+s.procErr.Error())
	}
	return sum
}

// addRest compares the brokers at rest after the soak with before it: a
// connection's goroutines that outlive it stay after every client left,
// where the noise of the running load cannot hide them.
func (s *soakSummary) addRest(before soakRest, after *soakRest) {
	s.RestBefore, s.RestAfter = before, after
	if after == nil {
		return
	}
	if n := after.Goroutines - before.Goroutines; float64(n) > growthFloor(seriesGoroutines) {
		s.LeftBehind = append(s.LeftBehind, fmt.Sprintf("%d goroutines", n))
	}
	if n := after.Connections - before.Connections; n > 0 {
		s.LeftBehind = append(s.LeftBehind, fmt.Sprintf("%d connections", n))
	}
	if len(s.LeftBehind) == 0 {
		return
	}
	left := "left behind: " + strings.Join(s.LeftBehind, ", ")
	if s.Verdict == verdictNoGrowth {
		s.Verdict = left
	} else {
		s.Verdict += "; " + left
	}
}

// failure says why the soak failed, or nil: it fails on growth or a
// verdict it could not reach, on any delivery problem, and on any error.
func (s *soakSummary) failure(parent context.Context) error {
	var reasons []string
	if parent.Err() != nil {
		reasons = append(reasons, "interrupted")
	}
	if s.Verdict != verdictNoGrowth {
		reasons = append(reasons, s.Verdict)
	}
	if !s.Verified {
		reasons = append(reasons, fmt.Sprintf("delivery not verified (%d acknowledged records missing, %d offsets skipped, %d repeated or reordered)", s.Missing, s.Skipped, s.Backwards))
	}
	if !s.CaughtUp && s.Missing == 0 && parent.Err() == nil {
		reasons = append(reasons, "the consumers did not catch up within --drain")
	}
	if n := s.Errors.total(); n > 0 {
		reasons = append(reasons, fmt.Sprintf("%d errors (%d produce, %d consume, %d connection)", n, s.Errors.Produce, s.Errors.Consume, s.Errors.Connection))
	}
	if len(s.Failures) > 0 {
		reasons = append(reasons, s.Failures...)
	}
	if len(reasons) == 0 {
		return nil
	}
	return errors.New("soak failed: " + strings.Join(reasons, "; "))
}

func (s *soakSummary) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, s)
	}
	for i, t := range []*cli.Table{s.samplesTable(), s.runTable(), s.growthTable()} {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := t.Write(w); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if _, err := fmt.Fprintf(w, "VERDICT  %s\n", s.Verdict); err != nil {
		return err
	}
	return s.writeNotes(w)
}

// samplesTable is the run over time, one row per sample.
func (s *soakSummary) samplesTable() *cli.Table {
	t := cli.NewTable("SECONDS", "PHASE", "PRODUCED/S", "DELIVERED/S", "P50 MS", "P99 MS", "CONNECTIONS", "GOROUTINES", "RSS", "HEAP IN USE", "LIVE HEAP", "ERRORS")
	for _, sm := range s.Samples {
		t.Row(fmt.Sprintf("%.0f", sm.Seconds), sm.Phase, fmt.Sprintf("%.0f", sm.ProducedPerSec), fmt.Sprintf("%.0f", sm.DeliveredPerSec),
			harness.FloatCell(sm.P50Ms, 1), harness.FloatCell(sm.P99Ms, 1), countPtrCell(sm.Connections), countPtrCell(sm.Goroutines),
			harness.MiBCell(sm.RSSBytes), harness.MiBCell(sm.HeapInUseBytes), harness.MiBCell(sm.HeapLiveBytes), strconv.FormatInt(sm.Errors, 10))
	}
	return t
}

func (s *soakSummary) runTable() *cli.Table {
	t := cli.NewTable()
	brokers := "1 broker"
	if s.Brokers != 1 {
		brokers = fmt.Sprintf("%d brokers (series summed)", s.Brokers)
	}
	t.Row("RAN", fmt.Sprintf("%.0fs against %s, warm-up %.0fs, a sample every %.0fs", s.DurationSeconds, brokers, s.WarmupSeconds, s.SampleSeconds))
	t.Row("TOPICS", fmt.Sprintf("%d (%s), %d partitions", len(s.Topics), topicSpan(s.Topics), s.Partitions))
	t.Row("CONNECTIONS", fmt.Sprintf("%d held, long-polling %.0fs; %d churned (%g/s), %d opened in all, %d moved to a new leader, %d requests",
		s.Connections, s.ConnectionFetchWait, s.ConnectionsChurned, s.ChurnPerSec, s.ConnectionsOpened, s.ConnectionsMoved, s.ConnectionRequests))
	t.Row("PRODUCERS", fmt.Sprintf("%d at %d records/s of %d bytes, acks=-1: %d acknowledged", s.Producers, s.Rate, s.RecordSize, s.Acknowledged))
	t.Row("CONSUMERS", fmt.Sprintf("%d groups of %d: %d delivered, %d redelivered (rebalances)", s.Groups, s.ConsumersPerGroup, s.Delivered, s.Redelivered))
	t.Row("AFTER WARM-UP", fmt.Sprintf("produced %.0f/s, delivered %.0f/s; latency p50 %s ms, p99 %s ms, max %s ms",
		s.ProducedPerSec, s.DeliveredPerSec, harness.FloatCell(s.P50Ms, 1), harness.FloatCell(s.P99Ms, 1), harness.FloatCell(s.MaxMs, 1)))
	caught := fmt.Sprintf("caught up %.1fs after producing stopped", s.DrainSeconds)
	if !s.CaughtUp {
		caught = fmt.Sprintf("NOT caught up %.1fs after producing stopped", s.DrainSeconds)
	}
	t.Row("VERIFIED", fmt.Sprintf("%s: %d missing, %d skipped, %d repeated or reordered; %s", cli.YesNo(s.Verified), s.Missing, s.Skipped, s.Backwards, caught))
	t.Row("ERRORS", fmt.Sprintf("%d: %d produce, %d consume, %d connection", s.Errors.total(), s.Errors.Produce, s.Errors.Consume, s.Errors.Connection))
	t.Row("AT REST", s.restCell())
	t.Row("STOPPED", s.Stopped)
	return t
}

// restCell compares the brokers at rest before and after the soak.
func (s *soakSummary) restCell() string {
	if s.RestAfter == nil {
		return fmt.Sprintf("%d goroutines and %d connections before the load; not read after it", s.RestBefore.Goroutines, s.RestBefore.Connections)
	}
	return fmt.Sprintf("%d goroutines before the load, %d once every client left (%+d); connections %d and %d",
		s.RestBefore.Goroutines, s.RestAfter.Goroutines, s.RestAfter.Goroutines-s.RestBefore.Goroutines,
		s.RestBefore.Connections, s.RestAfter.Connections)
}

// topicSpan names the first and last topic.
func topicSpan(topics []string) string {
	switch len(topics) {
	case 0:
		return ""
	case 1:
		return topics[0]
	}
	return topics[0] + " .. " + topics[len(topics)-1]
}

// growthTable shows each series' verdict and the figures behind it.
func (s *soakSummary) growthTable() *cli.Table {
	t := cli.NewTable("SERIES", "FIRST THIRD", "LAST THIRD", "CHANGE", "SLOPE/MIN", "VERDICT")
	for _, c := range s.Growth {
		if !c.Judged {
			t.Row(c.Series, harness.NotAvailable, harness.NotAvailable, harness.NotAvailable, harness.NotAvailable, c.describe())
			continue
		}
		t.Row(c.Series, c.amount(c.FirstThird), c.amount(c.LastThird), fmt.Sprintf("%+.1f%%", 100*c.Change),
			signed(c.amount(c.SlopePerMinute)), c.describe())
	}
	return t
}

// signed puts a + before a rendered amount that is not negative.
func signed(s string) string {
	if strings.HasPrefix(s, "-") {
		return s
	}
	return "+" + s
}

// writeNotes lists the tolerance, errors and problems under the tables.
func (s *soakSummary) writeNotes(w io.Writer) error {
	notes := []string{
		fmt.Sprintf("a series grew when its last third's mean exceeds its first third's by more than %.0f%% (or a floor: 16 MiB, 50 goroutines, 20 connections) and its slope is positive", 100*s.Tolerance),
		"live heap is the heap the last garbage collection kept (its next goal / (1 + GOGC/100)); heap in use swings between it and the goal",
	}
	if s.FailedScrapes > 0 {
		notes = append(notes, fmt.Sprintf("%d scrapes failed; their samples have no broker series", s.FailedScrapes))
	}
	if s.Unacknowledged > 0 {
		notes = append(notes, fmt.Sprintf("%d records were delivered whose producer saw an error (written, not acknowledged)", s.Unacknowledged))
	}
	if s.SeqSkips > 0 {
		notes = append(notes, fmt.Sprintf("%d sequence numbers were never written (records their producer gave up on)", s.SeqSkips))
	}
	for _, e := range s.Errors.Latest {
		notes = append(notes, "latest error: "+e)
	}
	for _, p := range s.Problems {
		notes = append(notes, "FAILED: "+p)
	}
	for _, f := range s.Failures {
		notes = append(notes, "FAILED: "+f)
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		if _, err := fmt.Fprintf(w, "NOTE  %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// countPtrCell shows a count, n/a when absent.
func countPtrCell(v *int64) string {
	if v == nil {
		return harness.NotAvailable
	}
	return strconv.FormatInt(*v, 10)
}
