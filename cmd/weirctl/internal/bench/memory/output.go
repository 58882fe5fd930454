package memory

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// memoryFailuresShown is how many failures the table lists; JSON and
// YAML have them all.
const memoryFailuresShown = 5

func (s *memorySummary) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, s)
	}
	if err := s.runTable().Write(w); err != nil {
		return err
	}
	if len(s.Brokers) > 0 {
		fmt.Fprintln(w)
		if err := s.brokersTable().Write(w); err != nil {
			return err
		}
	}
	return s.writeNotes(w)
}

func (s *memorySummary) runTable() *cli.Table {
	t := cli.NewTable()
	t.Row("TOPIC", fmt.Sprintf("%s, %d partitions", s.Topic, s.Partitions))
	t.Row("CONSUMERS", fmt.Sprintf("%d, plus %d stalled", s.Consumers, s.Stalled))
	backlogBytes := harness.MiBCell(&s.BacklogBytes)
	if s.ConsumersCompleted == 0 {
		backlogBytes = harness.NotAvailable // only a consumer that got it all knows
	}
	t.Row("BACKLOG", fmt.Sprintf("%d records per consumer, %s of record batches", s.BacklogRecords, backlogBytes))
	t.Row("FETCH", fmt.Sprintf("max-bytes %d, max-partition-bytes %d, max-wait %s, min-bytes %d",
		s.Fetch.MaxBytes, s.Fetch.MaxPartitionBytes, time.Duration(s.Fetch.MaxWaitMs)*time.Millisecond, s.Fetch.MinBytes))
	t.Row("PRODUCERS", fmt.Sprintf("%d, added %d records (%s of values)", s.Producers, s.ProducedRecords, harness.MiBCell(&s.ProducedBytes)))
	t.Row("CONSUMERS COMPLETED", fmt.Sprintf("%d/%d", s.ConsumersCompleted, s.Consumers))
	t.Row("DELIVERED RECORDS", s.DeliveredRecords)
	t.Row("DELIVERED BYTES", fmt.Sprintf("%d (%s)", s.DeliveredBytes, harness.MiBCell(&s.DeliveredBytes)))
	t.Row("SECONDS", fmt.Sprintf("%.3f", s.Seconds))
	t.Row("DELIVERED MB/SEC", fmt.Sprintf("%.2f", s.MBPerSec))
	t.Row("FASTEST CONSUMER SECONDS", harness.FloatCell(s.FastestConsumerSeconds, 3))
	t.Row("MEDIAN CONSUMER SECONDS", harness.FloatCell(s.MedianConsumerSeconds, 3))
	t.Row("SLOWEST CONSUMER SECONDS", harness.FloatCell(s.SlowestConsumerSeconds, 3))
	t.Row("VERIFIED", cli.YesNo(s.Verified))
	t.Row("CHECKSUM", s.Checksum)
	t.Row("PEAK BROKER RSS", harness.MiBCell(s.PeakRSS))
	t.Row("PEAK FETCH MEMORY IN USE", harness.MiBCell(s.PeakFetchInUse))
	t.Row("STOPPED", s.Stopped)
	return t
}

// brokersTable puts figures in rows and brokers in columns.
func (s *memorySummary) brokersTable() *cli.Table {
	headers := []string{"BROKER"}
	for _, b := range s.Brokers {
		headers = append(headers, strconv.Itoa(int(b.NodeID)))
	}
	t := cli.NewTable(headers...)
	row := func(name string, cell func(memoryBrokerFigures) string) {
		cells := []any{name}
		for _, b := range s.Brokers {
			cells = append(cells, cell(b))
		}
		t.Row(cells...)
	}
	row("SCRAPES", func(b memoryBrokerFigures) string {
		if b.FailedScrapes > 0 {
			return fmt.Sprintf("%d (%d failed)", b.Scrapes, b.FailedScrapes)
		}
		return strconv.Itoa(b.Scrapes)
	})
	row("RSS BEFORE", func(b memoryBrokerFigures) string { return harness.MiBCell(b.RSSBefore) })
	row("PEAK RSS", func(b memoryBrokerFigures) string { return harness.MiBCell(b.PeakRSS) })
	row("FETCH BUDGET", func(b memoryBrokerFigures) string { return budgetCell(b.FetchBudget) })
	row("PEAK FETCH IN USE", func(b memoryBrokerFigures) string {
		if b.PeakFetchInUseOfBudget != nil {
			return fmt.Sprintf("%s (%.0f%% of budget)", harness.MiBCell(b.PeakFetchInUse), 100**b.PeakFetchInUseOfBudget)
		}
		return harness.MiBCell(b.PeakFetchInUse)
	})
	row("FETCH WAITS", func(b memoryBrokerFigures) string { return countCell(b.FetchWaits) })
	row("FETCH WAIT SECONDS", func(b memoryBrokerFigures) string { return harness.FloatCell(b.FetchWaitSeconds, 3) })
	row("FETCH TRIMMED READS", func(b memoryBrokerFigures) string { return countCell(b.FetchTrimmedReads) })
	row("PEAK REQUEST MEMORY IN USE", func(b memoryBrokerFigures) string { return harness.MiBCell(b.PeakRequestInUse) })
	row("REQUEST WAITS", func(b memoryBrokerFigures) string { return countCell(b.RequestWaits) })
	return t
}

// writeNotes lists failures and missing or doubtful broker figures
// under the tables.
func (s *memorySummary) writeNotes(w io.Writer) error {
	var notes []string
	if s.BrokerNote != "" {
		notes = append(notes, "broker figures unavailable: "+s.BrokerNote)
	}
	for _, b := range s.Brokers {
		for _, n := range b.Notes {
			notes = append(notes, fmt.Sprintf("broker %d: %s", b.NodeID, n))
		}
	}
	for i, f := range s.Failures {
		if i == memoryFailuresShown {
			notes = append(notes, fmt.Sprintf("FAILED: and %d more", len(s.Failures)-i))
			break
		}
		notes = append(notes, "FAILED: "+f)
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

// budgetCell shows weir_fetch_memory_budget_bytes, whose 0 means
// unbounded.
func budgetCell(v *int64) string {
	if v != nil && *v <= 0 {
		return "unbounded"
	}
	return harness.MiBCell(v)
}

func countCell(v *uint64) string {
	if v == nil {
		return harness.NotAvailable
	}
	return strconv.FormatUint(*v, 10)
}
