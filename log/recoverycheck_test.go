package log

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// openRecovered opens a damaged or crashed log and checks what every
// recovery must give, whatever happened to the files: Open succeeds; every
// batch read back is whole, has a valid header and CRC, and continues the
// offsets of the one before it from the log start; every batch is found
// again from its first and last offset through the indexes; header
// iteration, Size and timestamp lookups agree with a log freshly built
// from the same batches (so rebuilt indexes answer as written ones do).
func openRecovered(t *testing.T, dir string, cfg Config, what string) (*Log, logState) {
	t.Helper()
	l, st := openReadable(t, dir, cfg, what)
	checkTimestampsLikeFresh(t, l, st.raw, cfg, what)
	return l, st
}

// openReadable is openRecovered without the timestamp lookups.
func openReadable(t *testing.T, dir string, cfg Config, what string) (*Log, logState) {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	st := readValidState(t, l, what)
	if st.start != 0 {
		t.Fatalf("%s: log start %d, want 0", what, st.start)
	}
	if got := l.Size(); got != int64(len(st.raw)) {
		t.Fatalf("%s: Size %d, but %d bytes of batches are readable", what, got, len(st.raw))
	}
	var want []BatchHeader
	for _, b := range batchesOf(t, st.raw) {
		h := parseHeader(b)
		want = append(want, h)
		for _, off := range []int64{h.BaseOffset, h.LastOffset()} {
			got, err := l.Read(off, 1, Obligatory, st.end)
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("%s: Read(%d) = %d bytes, %v; want the %d-byte batch at %d", what, off, len(got), err, len(b), h.BaseOffset)
			}
		}
	}
	var got []BatchHeader
	if err := l.Batches(st.start, func(h BatchHeader) bool { got = append(got, h); return true }); err != nil {
		t.Fatalf("%s: Batches: %v", what, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: Batches gave %d headers, Read %d batches", what, len(got), len(want))
	}
	return l, st
}

// readValidState is stateOf that also requires every batch to be valid
// and the offsets to run on without gaps or overlaps.
func readValidState(t *testing.T, l *Log, what string) logState {
	t.Helper()
	st := logState{start: l.LogStartOffset(), end: l.EndOffset()}
	next := st.start
	for i := 0; next < st.end; i++ {
		if i > 10000 {
			t.Fatalf("%s: no progress reading the log", what)
		}
		b, err := l.Read(next, 1<<20, Obligatory, st.end)
		if err != nil {
			t.Fatalf("%s: Read(%d): %v", what, next, err)
		}
		hs, err := ValidateBatches(b)
		if err != nil {
			t.Fatalf("%s: Read(%d) served an invalid batch: %v", what, next, err)
		}
		for _, h := range hs {
			if h.BaseOffset != next {
				t.Fatalf("%s: Read served a batch at offset %d, want %d", what, h.BaseOffset, next)
			}
			next = h.LastOffset() + 1
		}
		st.raw = append(st.raw, b...)
	}
	if next != st.end {
		t.Fatalf("%s: batches end at %d, log end is %d", what, next, st.end)
	}
	return st
}

// checkTimestampsLikeFresh compares MaxTimestamp and OffsetForTimestamp,
// which go through the time and offset indexes, with a log built from the
// same batches on an in-memory FS.
func checkTimestampsLikeFresh(t *testing.T, l *Log, raw []byte, cfg Config, what string) {
	t.Helper()
	cfg.FS = newMemFS()
	ref, err := Open(crashDir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	probes := map[int64]bool{-1: true, 0: true}
	for _, b := range batchesOf(t, raw) {
		if _, err := ref.AppendReplicated(b); err != nil {
			t.Fatalf("%s: building the reference log: %v", what, err)
		}
		h := parseHeader(b)
		for _, ts := range []int64{h.FirstTimestamp, h.MaxTimestamp} {
			probes[ts-1], probes[ts], probes[ts+1] = true, true, true
		}
	}
	for ts := range probes {
		o, ts1, ok, err := l.OffsetForTimestamp(ts)
		ro, rts, rok, rerr := ref.OffsetForTimestamp(ts)
		if err != nil || rerr != nil || o != ro || ts1 != rts || ok != rok {
			t.Fatalf("%s: OffsetForTimestamp(%d) = %d,%d,%v,%v; a fresh log says %d,%d,%v,%v", what, ts, o, ts1, ok, err, ro, rts, rok, rerr)
		}
	}
	o, ts, ok, err := l.MaxTimestamp()
	ro, rts, rok, rerr := ref.MaxTimestamp()
	if err != nil || rerr != nil || o != ro || ts != rts || ok != rok {
		t.Fatalf("%s: MaxTimestamp = %d,%d,%v,%v; a fresh log says %d,%d,%v,%v", what, o, ts, ok, err, ro, rts, rok, rerr)
	}
}

// appendAndReopen appends a batch to a recovered log, closes it and checks
// that it reopens, readable as openReadable checks, to the recovered state
// plus that batch.
func appendAndReopen(t *testing.T, l *Log, st logState, dir string, cfg Config, what string) {
	t.Helper()
	b := simpleBatch(t, 2, 3000, 20)
	res, err := l.Append(b, AppendOptions{LeaderEpoch: 9})
	if err != nil || res.BaseOffset != st.end {
		t.Fatalf("%s: append after recovery: %+v, %v; want base %d", what, res, err, st.end)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("%s: Close: %v", what, err)
	}
	what = fmt.Sprintf("%s, reopened after an append", what)
	l2, st2 := openReadable(t, dir, cfg, what)
	defer l2.Close()
	want := logState{start: st.start, end: st.end + 2, raw: append(slices.Clone(st.raw), b...)}
	if !st2.equal(want) {
		t.Fatalf("%s: state %v, want %v", what, st2, want)
	}
}

// batchesOf is splitBatches that accepts an empty log.
func batchesOf(tb testing.TB, raw []byte) [][]byte {
	if len(raw) == 0 {
		return nil
	}
	return splitBatches(tb, raw)
}
