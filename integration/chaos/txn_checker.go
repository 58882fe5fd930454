package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// TxnFinal is what was read once the faults healed, the feeder stopped
// and the workers drained the input.
type TxnFinal struct {
	// Input is the input topic's log (partition -> records).
	Input map[int32][]logRecord
	// Views are the output's read_committed views, node -> partition.
	Views map[int]map[int32]committedView
	// Uncommitted is the output's log read read_uncommitted, aborted
	// records included (partition -> records).
	Uncommitted map[int32][]logRecord
	// OutputBatches is one replica's output log with its markers
	// (partition -> batches; nil: not read): the committed view must be
	// what its markers make of it.
	OutputBatches map[int32][]txnBatch
	// Open are the transactions the coordinators described as not
	// ended, polled after the workers stopped.
	Open []openTxn
	// HealedAt is when the cluster was healthy after the last fault.
	HealedAt time.Time
	// Grace is how long past its timeout (or the heal, if later) a
	// transaction may stay open: the coordinator's check interval and
	// slack.
	Grace time.Duration
}

// TxnReport is the verdict on the transactional workload.
type TxnReport struct {
	InputSent, InputAcked, InputFailed int
	// InputRecords: records in the input's log.
	InputRecords int
	Attempts     int
	Committed    int
	Aborted      int
	Deliberate   int // aborts the workers asked for
	Unknown      int // End failed: the outcome is the cluster's
	// UnknownCommitted: of those, the ones the committed view shows.
	UnknownCommitted int
	Unended          int
	Abandoned        int // left open for the coordinator's timeout to abort
	Restarts         int // worker sessions replaced after a failure
	// OutputCommitted: records in the read_committed view of the output.
	OutputCommitted int
	// OutputUncommitted: records in the output's log, aborted included.
	OutputUncommitted int
	// AbortedInLog: records of known-aborted (or abandoned) attempts in
	// the output's log: proof the aborts wrote data that read_committed must hide.
	AbortedInLog int
	Observed     int // records the read_committed consumer was served
	Probes       int // read_committed fetches checked against the LSO

	// (a) records of aborted transactions, or not in the committed view,
	// served to read_committed.
	AbortedVisible int
	// (b) transactions partly visible, or committed and not visible.
	Partial int
	// (c) input records reflected more than once, or never, or output
	// records naming an input record that is not there.
	Duplicated, Missing, Bogus int
	// Read_committed views that differ between brokers, or from what
	// the markers in the log make of it.
	ViewsDiffer int
	// (d) read_committed fetches that returned data at or past the LSO,
	// or answered an LSO past the high watermark.
	PastLSO int
	// (e) transactions open past their timeout after the heal, and
	// partitions whose LSO stayed below the high watermark.
	StaleOpen int

	Violations []string

	// located: attempt -> where its records are in the output's log;
	// byInput: input record -> the records naming it there.
	located map[string][]string
	byInput map[inputKey][]string
}

// locate finds each attempt's records in the output's batches, with the
// producer, epoch-less, and the marker that ended its transaction there.
func locate(batches map[int32][]txnBatch) (map[string][]string, map[inputKey][]string) {
	out, byInput := map[string][]string{}, map[inputKey][]string{}
	for _, p := range slices.Sorted(maps.Keys(batches)) {
		bs := batches[p]
		for i, b := range bs {
			if b.Control {
				continue
			}
			end := "not transactional"
			if b.Transactional {
				end = "no marker after it"
				for _, m := range bs[i+1:] {
					if m.Control && m.ProducerID == b.ProducerID {
						end = fmt.Sprintf("COMMIT at %d", m.FirstOffset)
						if m.Abort {
							end = fmt.Sprintf("ABORT at %d", m.FirstOffset)
						}
						break
					}
				}
			}
			for _, rec := range b.Records {
				if o, err := parseOutput(rec.Value); err == nil {
					out[o.Attempt] = append(out[o.Attempt], fmt.Sprintf("%d/%d producer %d, %s", p, rec.Offset, b.ProducerID, end))
					k := inputKey{o.InputPart, o.InputOff}
					byInput[k] = append(byInput[k], fmt.Sprintf("%s at %d/%d producer %d, %s", o.Attempt, p, rec.Offset, b.ProducerID, end))
				}
			}
		}
	}
	return out, byInput
}

// firstFew is the first entries of a long list, for a violation.
func firstFew(l []string) []string {
	if len(l) > 6 {
		return append(slices.Clone(l[:6]), fmt.Sprintf("... %d more", len(l)-6))
	}
	return l
}

// batchAt describes the batch at offset in batches and the marker that
// ends its transaction, for a violation.
func batchAt(batches []txnBatch, offset int64) string {
	for i, b := range batches {
		if offset < b.FirstOffset || offset > b.LastOffset {
			continue
		}
		desc := fmt.Sprintf("batch %d-%d producer %d transactional %v control %v", b.FirstOffset, b.LastOffset, b.ProducerID, b.Transactional, b.Control)
		if len(b.Records) > 0 {
			desc += fmt.Sprintf(" first record %q", b.Records[0].Value)
		}
		for _, m := range batches[i+1:] {
			if m.Control && m.ProducerID == b.ProducerID {
				return desc + fmt.Sprintf(", next marker of the producer at %d (abort %v)", m.FirstOffset, m.Abort)
			}
		}
		return desc + ", no marker of the producer after it"
	}
	return "no batch read there"
}

// describe is what is known of attempt id, for a violation.
func (r *TxnReport) describe(h *TxnHistory, id string) string {
	a, ok := h.attempts[id]
	if !ok {
		return "not in the history"
	}
	s := fmt.Sprintf("outcome %s", a.Outcome)
	if a.Err != "" {
		s += " (" + a.Err + ")"
	}
	return fmt.Sprintf("%s; produced %v; in the log: %v", s, firstFew(a.Produced), firstFew(r.located[id]))
}

func (r *TxnReport) violation(format string, args ...any) {
	if len(r.Violations) < maxViolations {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// OK reports whether the transactional workload kept every invariant.
func (r *TxnReport) OK() bool {
	return r.AbortedVisible+r.Partial+r.Duplicated+r.Missing+r.Bogus+r.ViewsDiffer+r.PastLSO+r.StaleOpen == 0
}

// inputKey names an input record by where it is.
type inputKey struct {
	Partition int32
	Offset    int64
}

// CheckTxn checks the transactional workload's history against what was
// read at the end.
func CheckTxn(h *TxnHistory, f TxnFinal) *TxnReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &TxnReport{
		InputSent: h.inputSent, InputAcked: h.inputAcked, InputFailed: h.inputFailed,
		Attempts: len(h.attempts), Restarts: h.restarts, Observed: len(h.observed),
	}
	for _, a := range h.attempts {
		switch a.Outcome {
		case TxnCommitted:
			r.Committed++
		case TxnAborted:
			r.Aborted++
			if a.Deliberate {
				r.Deliberate++
			}
		case TxnUnknown:
			r.Unknown++
		case TxnAbandoned:
			r.Abandoned++
		default:
			r.Unended++
		}
	}
	input := map[inputKey]string{}
	for p, recs := range f.Input {
		for _, rec := range recs {
			input[inputKey{p, rec.Offset}] = rec.Value
		}
	}
	r.InputRecords = len(input)

	for _, p := range slices.Sorted(maps.Keys(f.Uncommitted)) {
		for _, rec := range f.Uncommitted[p] {
			r.OutputUncommitted++
			if out, err := parseOutput(rec.Value); err == nil {
				if a, ok := h.attempts[out.Attempt]; ok && hidden(a.Outcome) {
					r.AbortedInLog++
				}
			}
		}
	}

	r.located, r.byInput = locate(f.OutputBatches)
	nodes := slices.Sorted(maps.Keys(f.Views))
	for _, o := range f.Open {
		due := o.Start.Add(o.Timeout)
		if f.HealedAt.After(due) {
			due = f.HealedAt
		}
		due = due.Add(f.Grace)
		if o.SeenAt.After(due) {
			r.StaleOpen++
			r.violation("STALE TRANSACTION: %s in state %s at %s, started %s with timeout %v; the faults healed at %s", o.ID, o.State, o.SeenAt.Format(time.TimeOnly), o.Start.Format(time.TimeOnly), o.Timeout, f.HealedAt.Format(time.TimeOnly))
		}
	}
	for _, node := range nodes {
		for _, p := range slices.Sorted(maps.Keys(f.Views[node])) {
			if v := f.Views[node][p]; v.LastStable != v.HighWatermark {
				r.StaleOpen++
				r.violation("LSO STUCK: node %d, output %d: last stable offset %d below the high watermark %d after every transaction should have ended; in the log there: %s", node, p, v.LastStable, v.HighWatermark, batchAt(f.OutputBatches[p], v.LastStable))
			}
		}
	}
	if len(nodes) > 0 && f.OutputBatches != nil {
		ref := f.Views[nodes[0]]
		for _, p := range slices.Sorted(maps.Keys(f.OutputBatches)) {
			if diff := firstDifference(markerView(f.OutputBatches[p]), ref[p].Records); diff != "" {
				r.ViewsDiffer++
				r.violation("READ_COMMITTED VIEW NOT WHAT THE MARKERS SAY: output partition %d: the log's markers vs node %d's view: %s", p, nodes[0], diff)
			}
		}
		inView := map[string]bool{}
		for _, v := range ref {
			for _, rec := range v.Records {
				if out, err := parseOutput(rec.Value); err == nil {
					inView[out.Attempt] = true
				}
			}
		}
		for id, a := range h.attempts {
			if a.Outcome == TxnUnknown && inView[id] {
				r.UnknownCommitted++
			}
		}
	}
	for i, node := range nodes {
		checkView(r, h, node, f.Views[node], input, i == 0)
		if i > 0 {
			ref := f.Views[nodes[0]]
			for _, p := range slices.Sorted(maps.Keys(ref)) {
				if diff := firstDifference(ref[p].Records, f.Views[node][p].Records); diff != "" {
					r.ViewsDiffer++
					r.violation("READ_COMMITTED VIEWS DIFFER: output partition %d: node %d vs node %d: %s", p, nodes[0], node, diff)
				}
			}
		}
	}

	// The consumer's records during the run: never of an aborted
	// attempt, and each still in the committed view where it was served.
	if len(nodes) > 0 {
		where := map[int32]map[int64]string{}
		for p, v := range f.Views[nodes[0]] {
			where[p] = map[int64]string{}
			for _, rec := range v.Records {
				where[p][rec.Offset] = rec.Value
			}
		}
		for _, s := range h.observed {
			if out, err := parseOutput(s.Value); err == nil {
				if a, ok := h.attempts[out.Attempt]; ok && hidden(a.Outcome) {
					r.AbortedVisible++
					r.violation("ABORTED VISIBLE: the read_committed consumer was served %q at output %d/%d, of aborted transaction %s", s.Value, s.Partition, s.Offset, out.Attempt)
					continue
				}
			}
			if v, ok := where[s.Partition][s.Offset]; !ok || v != s.Value {
				r.AbortedVisible++
				r.violation("UNCOMMITTED SERVED: the read_committed consumer was served %q at output %d/%d; the committed view has %q there", s.Value, s.Partition, s.Offset, v)
			}
		}
	}

	probes := slices.Clone(h.probes)
	for _, node := range nodes {
		for _, p := range slices.Sorted(maps.Keys(f.Views[node])) {
			probes = append(probes, f.Views[node][p].Probes...)
		}
	}
	r.Probes = len(probes)
	for _, pr := range probes {
		switch {
		case pr.LastDataOffset >= 0 && pr.LastDataOffset >= pr.LastStable:
			r.PastLSO++
			r.violation("PAST LSO: node %d, read_committed fetch of output %d at %d returned data up to offset %d; last stable offset %d (high watermark %d)", pr.Node, pr.Partition, pr.FetchOffset, pr.LastDataOffset, pr.LastStable, pr.HighWatermark)
		case pr.LastStable > pr.HighWatermark:
			r.PastLSO++
			r.violation("LSO PAST HIGH WATERMARK: node %d, output %d: last stable offset %d, high watermark %d", pr.Node, pr.Partition, pr.LastStable, pr.HighWatermark)
		}
	}

	return r
}

// checkView checks one broker's read_committed view of the output:
// (a) no record of an aborted attempt, (b) every attempt in it whole and
// every committed attempt in it, (c) every input record reflected
// exactly once. Counts come from the first (reference) view.
func checkView(r *TxnReport, h *TxnHistory, node int, view map[int32]committedView, input map[inputKey]string, ref bool) {
	members := map[string]int{} // attempt -> records seen
	declared := map[string]int{}
	reflected := map[inputKey][]string{} // input -> output positions
	for _, p := range slices.Sorted(maps.Keys(view)) {
		for _, rec := range view[p].Records {
			if ref {
				r.OutputCommitted++
			}
			at := fmt.Sprintf("%d/%d", p, rec.Offset)
			out, err := parseOutput(rec.Value)
			if err != nil {
				r.Bogus++
				r.violation("BOGUS OUTPUT: node %d, output %s: %v", node, at, err)
				continue
			}
			if a, ok := h.attempts[out.Attempt]; ok && hidden(a.Outcome) {
				r.AbortedVisible++
				r.violation("ABORTED VISIBLE: node %d, output %s: %q of %s transaction %s (deliberate %v)", node, at, rec.Value, a.Outcome, out.Attempt, a.Deliberate)
			}
			members[out.Attempt]++
			declared[out.Attempt] = out.N
			k := inputKey{out.InputPart, out.InputOff}
			reflected[k] = append(reflected[k], at+" ("+out.Attempt+")")
			if v, ok := input[k]; !ok || v != out.InputVal {
				r.Bogus++
				r.violation("BOGUS OUTPUT: node %d, output %s names input %d/%d %q; the input has %q there", node, at, k.Partition, k.Offset, out.InputVal, v)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(members)) {
		want := declared[id]
		if a, ok := h.attempts[id]; ok {
			want = a.Records
		}
		if members[id] != want {
			r.Partial++
			r.violation("PARTIAL TRANSACTION: node %d: %d of the %d records of %s are visible; %s", node, members[id], want, id, r.describe(h, id))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(h.attempts)) {
		if a := h.attempts[id]; a.Outcome == TxnCommitted && members[id] == 0 {
			r.Partial++
			r.violation("COMMITTED TRANSACTION MISSING: node %d: none of the %d records of %s, reported committed, are visible; %s", node, a.Records, id, r.describe(h, id))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(input), compareInputKeys) {
		switch outs := reflected[k]; {
		case len(outs) == 0:
			r.Missing++
			r.violation("INPUT NOT REFLECTED: node %d: input %d/%d %q has no committed output; in the log: %v", node, k.Partition, k.Offset, input[k], r.byInput[k])
		case len(outs) > 1:
			r.Duplicated++
			r.violation("INPUT REFLECTED TWICE: node %d: input %d/%d %q at output %s", node, k.Partition, k.Offset, input[k], strings.Join(outs, ", "))
		}
	}
}

func compareInputKeys(a, b inputKey) int {
	if a.Partition != b.Partition {
		return int(a.Partition - b.Partition)
	}
	switch {
	case a.Offset < b.Offset:
		return -1
	case a.Offset > b.Offset:
		return 1
	}
	return 0
}

// Table renders the transactional workload's summary, in the format of
// Report.Table.
func (r *TxnReport) Table(faults map[string]int) string {
	var b strings.Builder
	row := func(name string, v any) { fmt.Fprintf(&b, "| %-44s | %10v |\n", name, v) }
	fmt.Fprintf(&b, "| %-44s | %10s |\n|%s|%s|\n", "transactional workload", "count", strings.Repeat("-", 46), strings.Repeat("-", 12))
	for _, k := range TxnFaultKinds() {
		row("fault: "+k, faults[k])
	}
	row("input records sent", r.InputSent)
	row("input records acknowledged", r.InputAcked)
	row("input records in the log", r.InputRecords)
	row("transactions begun", r.Attempts)
	row("transactions committed", r.Committed)
	row("transactions aborted", r.Aborted)
	row("  of them asked for by the worker", r.Deliberate)
	row("transactions ended with an error", r.Unknown)
	row("  of them committed, as the output shows", r.UnknownCommitted)
	row("transactions never ended", r.Unended)
	row("transactions abandoned for their timeout", r.Abandoned)
	row("worker sessions replaced", r.Restarts)
	row("output records, read_committed", r.OutputCommitted)
	row("output records, read_uncommitted", r.OutputUncommitted)
	row("  of aborted transactions", r.AbortedInLog)
	row("records served to the output consumer", r.Observed)
	row("read_committed fetches checked vs LSO", r.Probes)
	row("ABORTED or uncommitted VISIBLE", r.AbortedVisible)
	row("PARTIAL or lost transactions", r.Partial)
	row("input reflected TWICE", r.Duplicated)
	row("input NOT REFLECTED", r.Missing)
	row("bogus output records", r.Bogus)
	row("read_committed views differing", r.ViewsDiffer)
	row("fetches PAST the LSO", r.PastLSO)
	row("transactions or LSOs STALE after heal", r.StaleOpen)
	return b.String()
}
