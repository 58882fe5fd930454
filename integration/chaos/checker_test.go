package chaos

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// logOf builds a replica log of the given ids at offsets 0, 1, ...
func logOf(ids ...string) []logRecord {
	out := make([]logRecord, len(ids))
	for i, id := range ids {
		out[i] = logRecord{Offset: int64(i), Value: id}
	}
	return out
}

func cleanHistory() *History {
	h := NewHistory()
	for i, id := range []string{"p0-000000000", "p1-000000000", "p0-000000001"} {
		h.attempt()
		h.ack(id, ackedAt{Partition: 0, Offset: int64(i)})
	}
	h.see(seenRecord{Consumer: 0, Partition: 0, Offset: 1, Value: "p1-000000000"})
	h.commit(commitRecord{Consumer: 0, Partition: 0, Offset: 2})
	h.fetchedOffset(0, 2)
	return h
}

func sameLogs(recs []logRecord) map[int32]replicaLogs {
	return map[int32]replicaLogs{0: {0: recs, 1: recs, 2: recs}}
}

func TestCheckAcceptsACleanRun(t *testing.T) {
	h := cleanHistory()
	h.attempt()
	h.fail(errors.New("timed out")) // failed records may or may not be in the log
	logs := sameLogs(logOf("p0-000000000", "p1-000000000", "p0-000000001", "p1-000000001"))
	r := Check(h, logs, map[int32]int64{0: 2})
	if !r.OK() || len(r.Violations) != 0 {
		t.Fatalf("clean run reported violations: %+v", r)
	}
	if r.Acked != 3 || r.Attempted != 4 || r.Failed != 1 || r.Consumed != 1 || r.Commits != 1 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestCheckFindsEachViolation(t *testing.T) {
	base := logOf("p0-000000000", "p1-000000000", "p0-000000001")
	for _, tc := range []struct {
		name   string
		logs   map[int32]replicaLogs
		final  map[int32]int64
		mutate func(h *History)
		count  func(r *Report) int
		want   string
	}{
		{
			name:  "acknowledged record missing on one replica",
			logs:  map[int32]replicaLogs{0: {0: base, 1: base, 2: base[:2]}},
			final: map[int32]int64{0: 2},
			count: func(r *Report) int { return r.Lost },
			want:  "LOST: record p0-000000001 acknowledged at partition 0 offset 2 is missing on nodes 2",
		},
		{
			name:  "acknowledged record at another offset",
			logs:  sameLogs(logOf("p1-000000000", "p0-000000000", "p0-000000001")),
			final: map[int32]int64{0: 2},
			count: func(r *Report) int { return r.Misplaced },
			want:  "record p0-000000000 acknowledged at partition 0 offset 0 is elsewhere",
		},
		{
			name:  "duplicate",
			logs:  sameLogs(logOf("p0-000000000", "p1-000000000", "p0-000000001", "p0-000000001")),
			final: map[int32]int64{0: 2},
			count: func(r *Report) int { return r.Duplicated },
			want:  "DUPLICATE: partition 0: p0-000000001 at offsets [2 3]",
		},
		{
			name:  "reordered",
			logs:  sameLogs(logOf("p0-000000000", "p1-000000000", "p0-000000001", "p0-000000000")),
			final: map[int32]int64{0: 2},
			count: func(r *Report) int { return r.Reordered },
			want:  "REORDERED: partition 0 on node 0: p0-000000000 at offset 3 after sequence 1 at offset 2",
		},
		{
			name: "gap",
			logs: sameLogs([]logRecord{
				{Offset: 0, Value: "p0-000000000"}, {Offset: 1, Value: "p1-000000000"}, {Offset: 2, Value: "p0-000000001"}, {Offset: 4, Value: "p1-000000001"},
			}),
			final: map[int32]int64{0: 2},
			count: func(r *Report) int { return r.Gaps },
			want:  "GAP: partition 0 on node 0: offset 4 follows 2",
		},
		{
			name:  "replicas diverge after the acknowledged records",
			logs:  map[int32]replicaLogs{0: {0: append(slices.Clone(base), logRecord{Offset: 3, Value: "p1-000000001"}), 1: base, 2: base}},
			final: map[int32]int64{0: 2},
			count: func(r *Report) int { return r.Diverged },
			want:  "DIVERGED: partition 0: node 0 vs node 1: 4 records vs 3",
		},
		{
			name:   "a consumer saw a record that is gone",
			logs:   sameLogs(base),
			final:  map[int32]int64{0: 2},
			mutate: func(h *History) { h.see(seenRecord{Consumer: 1, Partition: 0, Offset: 3, Value: "p1-000000001"}) },
			count:  func(r *Report) int { return r.SeenLost },
			want:   "SEEN THEN LOST: consumer 1 read p1-000000001 at partition 0 offset 3",
		},
		{
			name:   "an accepted commit lower than an earlier one",
			logs:   sameLogs(base),
			final:  map[int32]int64{0: 2},
			mutate: func(h *History) { h.commit(commitRecord{Consumer: 1, Partition: 0, Offset: 1}) },
			count:  func(r *Report) int { return r.Regressions },
			want:   "COMMIT REGRESSION: partition 0: consumer 1 committed 1",
		},
		{
			name:   "committed offset read back lower",
			logs:   sameLogs(base),
			final:  map[int32]int64{0: 2},
			mutate: func(h *History) { h.fetchedOffset(0, 1) },
			count:  func(r *Report) int { return r.Regressions },
			want:   "COMMITTED OFFSET WENT BACK: partition 0 read back as 1 after 2",
		},
		{
			name:  "final committed offset below the last accepted",
			logs:  sameLogs(base),
			final: map[int32]int64{0: 1},
			count: func(r *Report) int { return r.Regressions },
			want:  "COMMIT LOST: partition 0: final committed offset 1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanHistory()
			if tc.mutate != nil {
				tc.mutate(h)
			}
			r := Check(h, tc.logs, tc.final)
			if r.OK() || tc.count(r) == 0 {
				t.Fatalf("not detected: %+v", r)
			}
			if !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
				t.Fatalf("violations %q do not mention %q", r.Violations, tc.want)
			}
		})
	}
}

func TestDecodeBatchesRejectsACorruptBatch(t *testing.T) {
	// 12-byte header claiming a 10-byte batch: shorter than any real one.
	data := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10}
	if _, _, err := decodeBatches(data, 0); err == nil {
		t.Fatal("a batch claiming 22 bytes was accepted")
	}
	recs, next, err := decodeBatches(data[:8], 5)
	if err != nil || len(recs) != 0 || next != 5 {
		t.Fatalf("a partial header: %v, %d records, next %d; want it left for the next fetch", err, len(recs), next)
	}
}
