package fanout

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func (s *fanoutSummary) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, s)
	}
	if err := s.writeHeader(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := s.runsTable().Write(w); err != nil {
		return err
	}
	return s.writeNotes(w)
}

func (s *fanoutSummary) writeHeader(w io.Writer) error {
	t := cli.NewTable()
	if s.Latency == latencyEndToEnd {
		t.Row("MODE", s.Mode+" (P50/P99: end-to-end latency of every delivery, send to receive)")
		t.Row("RECORDS", fmt.Sprintf("%d per consumer per run (%d/s), %d bytes each", s.Records, s.Rate, s.avgRecordBytes()))
	} else {
		t.Row("MODE", s.Mode+" (P50/P99: each consumer's time from the start to its last record)")
		t.Row("RECORDS", fmt.Sprintf("%d per consumer per run, %d bytes each", s.Records, s.avgRecordBytes()))
	}
	t.Row("TOPIC", fmt.Sprintf("%s, partition %d", s.Topic, s.Partition))
	t.Row("CONSUMERS", s.Consumers)
	t.Row("FETCH", fmt.Sprintf("max-bytes %d, max-partition-bytes %d, max-wait %s, min-bytes %d",
		s.Fetch.MaxBytes, s.Fetch.MaxPartitionBytes, time.Duration(s.Fetch.MaxWaitMs)*time.Millisecond, s.Fetch.MinBytes))
	return t.Write(w)
}

// runsTable puts figures in rows and runs in columns, so that off and
// on sit side by side, followed by their ratio.
func (s *fanoutSummary) runsTable() *cli.Table {
	runsPerSetting := s.runsPerSetting()
	headers := []string{"COALESCING"}
	for _, r := range s.Runs {
		headers = append(headers, s.runName(r))
	}
	ratioHeader := "ON/OFF"
	if runsPerSetting[coalescingOn] > 1 || runsPerSetting[coalescingOff] > 1 {
		ratioHeader = "ON/OFF (MEDIANS)"
	}
	if s.Comparison != nil {
		headers = append(headers, ratioHeader)
	}
	t := cli.NewTable(headers...)
	// ratioRow ends with the on/off ratio of its figure; row leaves that
	// column empty.
	ratioRow := func(name string, cell func(fanoutRun) string, cmp *float64) {
		cells := []any{name}
		for _, r := range s.Runs {
			cells = append(cells, cell(r))
		}
		if s.Comparison != nil {
			cells = append(cells, ratioCell(cmp))
		}
		t.Row(cells...)
	}
	row := func(name string, cell func(fanoutRun) string) {
		cells := []any{name}
		for _, r := range s.Runs {
			cells = append(cells, cell(r))
		}
		// An empty ratio cell keeps the last run's column aligned:
		// tabwriter sizes only cells that a tab ends.
		if s.Comparison != nil {
			cells = append(cells, "")
		}
		t.Row(cells...)
	}
	broker := func(f func(*brokerFigures) string) func(fanoutRun) string {
		return func(r fanoutRun) string {
			if r.Broker == nil {
				return harness.NotAvailable
			}
			return f(r.Broker)
		}
	}
	coalescer := func(f func(*admin.CoalescerCounts) string) func(fanoutRun) string {
		return broker(func(b *brokerFigures) string {
			if b.Coalescer == nil {
				return harness.NotAvailable
			}
			return f(b.Coalescer)
		})
	}
	var cmp fanoutComparison
	if s.Comparison != nil {
		cmp = *s.Comparison
	}
	latency := "TIME-TO-LAST-RECORD"
	if s.Latency == latencyEndToEnd {
		latency = "E2E LATENCY"
	}

	row("DELIVERED RECORDS", func(r fanoutRun) string { return strconv.FormatInt(r.DeliveredRecords, 10) })
	row("DELIVERED BYTES", func(r fanoutRun) string { return strconv.FormatInt(r.DeliveredBytes, 10) })
	row("SECONDS", func(r fanoutRun) string { return fmt.Sprintf("%.3f", r.Seconds) })
	ratioRow("DELIVERED MB/SEC", func(r fanoutRun) string { return fmt.Sprintf("%.2f", r.MBPerSec) }, cmp.MBPerSec)
	row(latency+" P50 MS", func(r fanoutRun) string { return fmt.Sprintf("%.3f", r.P50Ms) })
	ratioRow(latency+" P99 MS", func(r fanoutRun) string { return fmt.Sprintf("%.3f", r.P99Ms) }, cmp.P99Ms)
	if s.Latency == latencyEndToEnd {
		ratioRow("  P99 OF FIRST DELIVERIES MS", func(r fanoutRun) string { return harness.FloatCell(r.FirstDeliveryP99Ms, 3) }, cmp.FirstDeliveryP99Ms)
		ratioRow("  P99 BEHIND FIRST DELIVERY MS", func(r fanoutRun) string { return harness.FloatCell(r.BehindFirstP99Ms, 3) }, cmp.BehindFirstP99Ms)
	}
	row("VERIFIED", func(r fanoutRun) string { return cli.YesNo(r.Verified) })
	row("DELIVERED CHECKSUM", func(r fanoutRun) string { return r.Checksum })
	row("BROKERS MEASURED", broker(func(b *brokerFigures) string { return strconv.Itoa(b.Brokers) }))
	row("BROKER CPU SECONDS", broker(func(b *brokerFigures) string { return fmt.Sprintf("%.3f", b.CPUSeconds) }))
	ratioRow("BROKER CPU SEC/GIB", broker(func(b *brokerFigures) string { return harness.FloatCell(b.CPUSecondsPerGiB, 3) }), cmp.CPUSecondsPerGiB)
	row("BROKER FETCH REQUESTS", broker(func(b *brokerFigures) string { return strconv.FormatUint(b.FetchRequests, 10) }))
	ratioRow("BROKER ALLOC BYTES/FETCH", broker(func(b *brokerFigures) string { return harness.FloatCell(b.AllocBytesPerFetch, 0) }), cmp.AllocBytesPerFetch)
	ratioRow("BROKER ALLOC BYTES/DELIVERED BYTE", broker(func(b *brokerFigures) string { return harness.FloatCell(b.AllocBytesPerDeliveredByte, 4) }), cmp.AllocBytesPerDeliveredByte)
	row("BROKER LOG READ BYTES", broker(func(b *brokerFigures) string { return strconv.FormatUint(b.LogReadBytes, 10) }))
	ratioRow("BROKER LOG READ BYTES/DELIVERED BYTE", broker(func(b *brokerFigures) string { return harness.FloatCell(b.LogReadBytesPerDeliveredByte, 4) }), cmp.LogReadBytesPerDeliveredByte)
	row("BROKER TOPIC BYTES OUT", broker(func(b *brokerFigures) string { return strconv.FormatUint(b.TopicBytesOut, 10) }))
	row("COALESCER INSERTIONS", coalescer(func(c *admin.CoalescerCounts) string { return strconv.FormatUint(c.Insertions, 10) }))
	row("COALESCER REINSERTIONS", coalescer(func(c *admin.CoalescerCounts) string { return strconv.FormatUint(c.Reinsertions, 10) }))
	row("COALESCER READY HITS", coalescer(func(c *admin.CoalescerCounts) string { return strconv.FormatUint(c.ReadyHits, 10) }))
	row("COALESCER INFLIGHT HITS", coalescer(func(c *admin.CoalescerCounts) string { return strconv.FormatUint(c.InflightHits, 10) }))
	row("COALESCER HIT RATIO", coalescer(func(c *admin.CoalescerCounts) string { return fmt.Sprintf("%.3f", c.HitRatio) }))
	return t
}

// writeNotes explains missing or doubtful broker figures under the table.
func (s *fanoutSummary) writeNotes(w io.Writer) error {
	var notes []string
	if s.BrokerNote != "" {
		notes = append(notes, "broker figures unavailable: "+s.BrokerNote)
	}
	for _, r := range s.Runs {
		for _, n := range r.BrokerNotes {
			notes = append(notes, fmt.Sprintf("%s: %s", s.runName(r), n))
		}
	}
	if len(notes) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		if _, err := fmt.Fprintf(w, "NOTE  %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

func (s *fanoutSummary) runsPerSetting() map[string]int {
	n := map[string]int{}
	for _, r := range s.Runs {
		n[r.Coalescing]++
	}
	return n
}

// runName names a run's column and notes: its setting, numbered when
// the setting ran more than once.
func (s *fanoutSummary) runName(r fanoutRun) string {
	if s.runsPerSetting()[r.Coalescing] > 1 {
		return fmt.Sprintf("%s #%d", r.Coalescing, r.Run)
	}
	return r.Coalescing
}

// avgRecordBytes is the measured size of a delivered record (key and
// value), which differs from --record-size when preload reuses records
// already in the partition; 0 before any run.
func (s *fanoutSummary) avgRecordBytes() int64 {
	for _, r := range s.Runs {
		if r.DeliveredRecords > 0 {
			return (r.DeliveredBytes + r.DeliveredRecords/2) / r.DeliveredRecords
		}
	}
	return 0
}

func ratioCell(v *float64) string {
	if v == nil {
		return harness.NotAvailable
	}
	return fmt.Sprintf("%.2fx", *v)
}
