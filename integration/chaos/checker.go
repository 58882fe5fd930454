package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Report is the checker's verdict on a run.
type Report struct {
	Attempted, Acked, Failed int
	// Lost: acknowledged records missing from a replica's log.
	Lost int
	// Misplaced: acknowledged records found at another offset than the
	// acknowledgement gave.
	Misplaced int
	// Duplicated: record ids at more than one offset (or acknowledged
	// twice).
	Duplicated int
	// Reordered: records of one producer in one partition whose ids do
	// not ascend with their offsets.
	Reordered int
	// Gaps: missing offsets inside a replica's log.
	Gaps int
	// Diverged: partitions whose replicas' logs differ.
	Diverged int
	// SeenLost: records a consumer was served that the log no longer
	// holds at that offset.
	SeenLost int
	// Regressions: committed group offsets that went backwards.
	Regressions int
	// Consumed is how many records the consumers were served.
	Consumed int
	// Commits is how many partition offsets the consumers committed.
	Commits int
	// Violations describe the first problems, with partitions and offsets.
	Violations []string
}

// maxViolations bounds the problems a report describes one by one.
const maxViolations = 40

func (r *Report) violation(format string, args ...any) {
	if len(r.Violations) < maxViolations {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// OK reports whether the run kept every invariant.
func (r *Report) OK() bool {
	return r.Lost+r.Misplaced+r.Duplicated+r.Reordered+r.Gaps+r.Diverged+r.SeenLost+r.Regressions == 0
}

// replicaLogs is, for one partition, each broker's copy of the log.
type replicaLogs map[int][]logRecord

// Check compares the history with the replicas' logs (partition -> node
// id -> records, each read up to the same end) and the group's final
// committed offsets (partition -> offset; missing: none).
func Check(h *History, logs map[int32]replicaLogs, finalCommitted map[int32]int64) *Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &Report{Attempted: h.attempted, Acked: len(h.acked), Failed: h.failed, Consumed: len(h.seen), Commits: len(h.commits)}
	for id, ats := range h.ackedTwo {
		r.Duplicated++
		r.violation("record %s acknowledged more than once: %v", id, ats)
	}

	partitions := slices.Sorted(maps.Keys(logs))
	// where[p][node][value] -> offsets
	where := map[int32]map[int]map[string][]int64{}
	for _, p := range partitions {
		where[p] = checkReplicas(r, p, logs[p])
	}

	ackedIDs := slices.Sorted(maps.Keys(h.acked))
	for _, id := range ackedIDs {
		at := h.acked[id]
		byNode, ok := where[at.Partition]
		if !ok {
			r.Lost++
			r.violation("record %s acknowledged at %d/%d: the partition was not read", id, at.Partition, at.Offset)
			continue
		}
		var missingOn, elsewhereOn []string
		for _, node := range slices.Sorted(maps.Keys(byNode)) {
			offs := byNode[node][id]
			switch {
			case len(offs) == 0:
				missingOn = append(missingOn, strconv.Itoa(node))
			case !slices.Contains(offs, at.Offset):
				elsewhereOn = append(elsewhereOn, fmt.Sprintf("node %d at %v", node, offs))
			}
		}
		if len(missingOn) > 0 {
			r.Lost++
			r.violation("LOST: record %s acknowledged at partition %d offset %d is missing on nodes %s", id, at.Partition, at.Offset, strings.Join(missingOn, ","))
		} else if len(elsewhereOn) > 0 {
			r.Misplaced++
			r.violation("record %s acknowledged at partition %d offset %d is elsewhere: %s", id, at.Partition, at.Offset, strings.Join(elsewhereOn, "; "))
		}
	}

	for _, s := range h.seen {
		byNode, ok := where[s.Partition]
		if !ok {
			continue
		}
		var lostOn []string
		for _, node := range slices.Sorted(maps.Keys(byNode)) {
			if !slices.Contains(byNode[node][s.Value], s.Offset) {
				lostOn = append(lostOn, strconv.Itoa(node))
			}
		}
		if len(lostOn) > 0 {
			r.SeenLost++
			r.violation("SEEN THEN LOST: consumer %d read %s at partition %d offset %d; not there on nodes %s", s.Consumer, s.Value, s.Partition, s.Offset, strings.Join(lostOn, ","))
		}
	}

	checkCommits(r, h, finalCommitted)
	return r
}

// checkReplicas compares the replicas of partition p with each other and
// checks each for gaps, duplicates and order; it returns node -> record
// id -> offsets.
func checkReplicas(r *Report, p int32, byNode replicaLogs) map[int]map[string][]int64 {
	nodes := slices.Sorted(maps.Keys(byNode))
	index := map[int]map[string][]int64{}
	for _, node := range nodes {
		recs := byNode[node]
		idx := map[string][]int64{}
		lastSeq := map[string]int{} // producer -> last sequence
		lastOff := map[string]int64{}
		for i, rec := range recs {
			if i > 0 && rec.Offset != recs[i-1].Offset+1 {
				r.Gaps++
				r.violation("GAP: partition %d on node %d: offset %d follows %d", p, node, rec.Offset, recs[i-1].Offset)
			}
			idx[rec.Value] = append(idx[rec.Value], rec.Offset)
			producer, seq, ok := parseID(rec.Value)
			if !ok {
				continue
			}
			if prev, seen := lastSeq[producer]; seen && seq <= prev && node == nodes[0] {
				r.Reordered++
				r.violation("REORDERED: partition %d on node %d: %s at offset %d after sequence %d at offset %d", p, node, rec.Value, rec.Offset, prev, lastOff[producer])
			}
			lastSeq[producer], lastOff[producer] = seq, rec.Offset
		}
		if len(recs) > 0 && recs[0].Offset != 0 {
			r.Gaps++
			r.violation("GAP: partition %d on node %d starts at offset %d", p, node, recs[0].Offset)
		}
		if node == nodes[0] {
			for _, id := range slices.Sorted(maps.Keys(idx)) {
				if offs := idx[id]; len(offs) > 1 {
					r.Duplicated++
					r.violation("DUPLICATE: partition %d: %s at offsets %v (node %d)", p, id, offs, node)
				}
			}
		}
		index[node] = idx
	}
	ref := nodes[0]
	for _, node := range nodes[1:] {
		if diff := firstDifference(byNode[ref], byNode[node]); diff != "" {
			r.Diverged++
			r.violation("DIVERGED: partition %d: node %d vs node %d: %s", p, ref, node, diff)
		}
	}
	return index
}

func firstDifference(a, b []logRecord) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("record %d: offset %d %q vs offset %d %q", i, a[i].Offset, a[i].Value, b[i].Offset, b[i].Value)
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d records vs %d", len(a), len(b))
	}
	return ""
}

// parseID splits "p<producer>-<seq>".
func parseID(id string) (string, int, bool) {
	producer, seqText, ok := strings.Cut(id, "-")
	if !ok {
		return "", 0, false
	}
	seq, err := strconv.Atoi(seqText)
	return producer, seq, err == nil
}

// checkCommits: the coordinator's accepted commits of a partition, in the
// order they were accepted, never go backwards (with commits serialised
// against rebalances, a lower one means a member started from an offset
// older than one already committed); the offsets read back from the
// group never go backwards; and the final committed offset is the last
// one accepted.
func checkCommits(r *Report, h *History, finalCommitted map[int32]int64) {
	highest := map[int32]commitRecord{}
	for i, c := range h.commits {
		if prev, ok := highest[c.Partition]; ok && c.Offset < prev.Offset {
			r.Regressions++
			r.violation("COMMIT REGRESSION: partition %d: consumer %d committed %d (commit #%d) after consumer %d had committed %d", c.Partition, c.Consumer, c.Offset, i, prev.Consumer, prev.Offset)
			continue
		}
		highest[c.Partition] = c
	}
	for _, p := range slices.Sorted(maps.Keys(h.fetched)) {
		obs := h.fetched[p]
		for i := 1; i < len(obs); i++ {
			if obs[i] < obs[i-1] {
				r.Regressions++
				r.violation("COMMITTED OFFSET WENT BACK: partition %d read back as %d after %d (read %d of %d)", p, obs[i], obs[i-1], i, len(obs))
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(highest)) {
		want := highest[p].Offset
		if got, ok := finalCommitted[p]; !ok || got < want {
			r.Regressions++
			r.violation("COMMIT LOST: partition %d: final committed offset %d (present %v), but %d was accepted", p, got, ok, want)
		}
	}
}

// Table renders the summary.
func (r *Report) Table(seed uint64, faults map[string]int, kinds []string) string {
	var b strings.Builder
	row := func(name string, v any) { fmt.Fprintf(&b, "| %-44s | %10v |\n", name, v) }
	fmt.Fprintf(&b, "| %-44s | %10s |\n|%s|%s|\n", fmt.Sprintf("chaos run, seed %d", seed), "count", strings.Repeat("-", 46), strings.Repeat("-", 12))
	for _, k := range kinds {
		row("fault: "+k, faults[k])
	}
	row("records sent", r.Attempted)
	row("records acknowledged", r.Acked)
	row("records failed (not acknowledged)", r.Failed)
	row("records consumed", r.Consumed)
	row("offsets committed", r.Commits)
	row("LOST (acknowledged, missing)", r.Lost)
	row("acknowledged at another offset", r.Misplaced)
	row("DUPLICATED", r.Duplicated)
	row("REORDERED", r.Reordered)
	row("offset gaps", r.Gaps)
	row("diverged replicas (partitions)", r.Diverged)
	row("consumer-seen-then-lost", r.SeenLost)
	row("committed offset regressions", r.Regressions)
	return b.String()
}
