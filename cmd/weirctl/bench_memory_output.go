package main

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// memoryFailuresShown is how many failures the table lists; JSON and
// YAML have them all.
const memoryFailuresShown = 5

func (s *memorySummary) write(w io.Writer, format string) error {
	if format != formatTable {
		return writeDocument(w, format, s)
	}
	if err := s.runTable().write(w); err != nil {
		return err
	}
	if len(s.Brokers) > 0 {
		fmt.Fprintln(w)
		if err := s.brokersTable().write(w); err != nil {
			return err
		}
	}
	return s.writeNotes(w)
}

func (s *memorySummary) runTable() *table {
	t := newTable()
	t.row("TOPIC", fmt.Sprintf("%s, %d partitions", s.Topic, s.Partitions))
	t.row("CONSUMERS", fmt.Sprintf("%d, plus %d stalled", s.Consumers, s.Stalled))
	backlogBytes := mibCell(&s.BacklogBytes)
	if s.ConsumersCompleted == 0 {
		backlogBytes = notAvailable // only a consumer that got it all knows
	}
	t.row("BACKLOG", fmt.Sprintf("%d records per consumer, %s of record batches", s.BacklogRecords, backlogBytes))
	t.row("FETCH", fmt.Sprintf("max-bytes %d, max-partition-bytes %d, max-wait %s, min-bytes %d",
		s.Fetch.MaxBytes, s.Fetch.MaxPartitionBytes, time.Duration(s.Fetch.MaxWaitMs)*time.Millisecond, s.Fetch.MinBytes))
	t.row("PRODUCERS", fmt.Sprintf("%d, added %d records (%s of values)", s.Producers, s.ProducedRecords, mibCell(&s.ProducedBytes)))
	t.row("CONSUMERS COMPLETED", fmt.Sprintf("%d/%d", s.ConsumersCompleted, s.Consumers))
	t.row("DELIVERED RECORDS", s.DeliveredRecords)
	t.row("DELIVERED BYTES", fmt.Sprintf("%d (%s)", s.DeliveredBytes, mibCell(&s.DeliveredBytes)))
	t.row("SECONDS", fmt.Sprintf("%.3f", s.Seconds))
	t.row("DELIVERED MB/SEC", fmt.Sprintf("%.2f", s.MBPerSec))
	t.row("FASTEST CONSUMER SECONDS", floatCell(s.FastestConsumerSeconds, 3))
	t.row("MEDIAN CONSUMER SECONDS", floatCell(s.MedianConsumerSeconds, 3))
	t.row("SLOWEST CONSUMER SECONDS", floatCell(s.SlowestConsumerSeconds, 3))
	t.row("VERIFIED", yesNo(s.Verified))
	t.row("CHECKSUM", s.Checksum)
	t.row("PEAK BROKER RSS", mibCell(s.PeakRSS))
	t.row("PEAK FETCH MEMORY IN USE", mibCell(s.PeakFetchInUse))
	t.row("STOPPED", s.Stopped)
	return t
}

// brokersTable puts figures in rows and brokers in columns.
func (s *memorySummary) brokersTable() *table {
	headers := []string{"BROKER"}
	for _, b := range s.Brokers {
		headers = append(headers, strconv.Itoa(int(b.NodeID)))
	}
	t := newTable(headers...)
	row := func(name string, cell func(memoryBrokerFigures) string) {
		cells := []any{name}
		for _, b := range s.Brokers {
			cells = append(cells, cell(b))
		}
		t.row(cells...)
	}
	row("SCRAPES", func(b memoryBrokerFigures) string {
		if b.FailedScrapes > 0 {
			return fmt.Sprintf("%d (%d failed)", b.Scrapes, b.FailedScrapes)
		}
		return strconv.Itoa(b.Scrapes)
	})
	row("RSS BEFORE", func(b memoryBrokerFigures) string { return mibCell(b.RSSBefore) })
	row("PEAK RSS", func(b memoryBrokerFigures) string { return mibCell(b.PeakRSS) })
	row("FETCH BUDGET", func(b memoryBrokerFigures) string { return budgetCell(b.FetchBudget) })
	row("PEAK FETCH IN USE", func(b memoryBrokerFigures) string {
		if b.PeakFetchInUseOfBudget != nil {
			return fmt.Sprintf("%s (%.0f%% of budget)", mibCell(b.PeakFetchInUse), 100**b.PeakFetchInUseOfBudget)
		}
		return mibCell(b.PeakFetchInUse)
	})
	row("FETCH WAITS", func(b memoryBrokerFigures) string { return countCell(b.FetchWaits) })
	row("FETCH WAIT SECONDS", func(b memoryBrokerFigures) string { return floatCell(b.FetchWaitSeconds, 3) })
	row("FETCH TRIMMED READS", func(b memoryBrokerFigures) string { return countCell(b.FetchTrimmedReads) })
	row("PEAK REQUEST MEMORY IN USE", func(b memoryBrokerFigures) string { return mibCell(b.PeakRequestInUse) })
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

// mibCell shows bytes in MiB; n/a when absent.
func mibCell(v *int64) string {
	if v == nil {
		return notAvailable
	}
	return fmt.Sprintf("%.1f MiB", float64(*v)/(1<<20))
}

// budgetCell shows weir_fetch_memory_budget_bytes, whose 0 means
// unbounded.
func budgetCell(v *int64) string {
	if v != nil && *v <= 0 {
		return "unbounded"
	}
	return mibCell(v)
}

func countCell(v *uint64) string {
	if v == nil {
		return notAvailable
	}
	return strconv.FormatUint(*v, 10)
}
