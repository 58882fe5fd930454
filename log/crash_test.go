package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

const crashDir = "/crash/partition"

// crashScenario is an operation run at every possible crash point.
type crashScenario struct {
	// build creates the log the operation runs on. It must be
	// deterministic: every run makes the same FS calls.
	build func(t *testing.T, m *memFS) *Log
	op    func(l *Log) error
	// ok reports whether a log state is allowed after a crash during op;
	// done is set when op returned nil, and then only the new state is.
	ok func(st logState, done bool) bool
}

// runCrashPoints runs the scenario once to count op's FS calls n, then for
// every k in [0, n] runs it again with call k failing: either every call
// from k on (a crash; the disk is then imaged as a reboot might find it,
// in several ways) or only call k (a transient error; the log is closed
// and reopened). Each resulting disk must open to an allowed state, must
// accept an append and reopen to the same state.
func runCrashPoints(t *testing.T, sc crashScenario) {
	t.Helper()
	m := newMemFS()
	l := sc.build(t, m)
	before := m.stepCount()
	if err := sc.op(l); err != nil {
		t.Fatalf("op without faults: %v", err)
	}
	n := m.stepCount() - before
	if st := stateOf(t, l); !sc.ok(st, true) {
		t.Fatalf("state after op without faults %v not allowed", st)
	}
	l.Close()

	for k := 0; k <= n; k++ {
		for _, crash := range []bool{true, false} {
			m := newMemFS()
			l := sc.build(t, m)
			m.failFrom(m.stepCount()+k, crash)
			err := sc.op(l)
			done := err == nil
			// Whatever the failure, the live log shows the old or the
			// new state, and only the new one after success.
			if st := stateOf(t, l); !sc.ok(st, done) {
				t.Fatalf("fail at call %d/%d (crash %v, op err %v): live state %v not allowed", k, n, crash, err, st)
			}
			l.Close()
			modes := []crashMode{keepSynced, keepAll, keepRandom, keepRandom, keepRandom, keepRandom}
			if !crash {
				// The process survived: what it wrote is on disk, but
				// a power loss may still drop unsynced bytes.
				modes = []crashMode{keepAll, keepSynced}
			}
			for i, mode := range modes {
				rng := rand.New(rand.NewPCG(uint64(k), uint64(i)))
				img := m.image(mode, rng)
				what := fmt.Sprintf("fail at call %d/%d (crash %v, op err %v), image %v #%d", k, n, crash, err, mode, i)
				checkReopen(t, img, sc, done, what)
			}
		}
	}
}

func checkReopen(t *testing.T, img *memFS, sc crashScenario, done bool, what string) {
	t.Helper()
	cfg := truncConfig(img)
	l, err := Open(crashDir, cfg)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	st := stateOf(t, l)
	if !sc.ok(st, done) {
		t.Fatalf("%s: state %v not allowed (files %v)", what, st, img.files(crashDir))
	}
	b := simpleBatch(t, 2, 3000, 20)
	res, err := l.Append(b, AppendOptions{})
	if err != nil || res.BaseOffset != st.end {
		t.Fatalf("%s: append after reopen: %+v %v, want base %d", what, res, err, st.end)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("%s: Close: %v", what, err)
	}
	l, err = Open(crashDir, cfg)
	if err != nil {
		t.Fatalf("%s: second Open: %v", what, err)
	}
	defer l.Close()
	st2 := stateOf(t, l)
	want := logState{start: st.start, end: st.end + 2, raw: append(st.raw, b...)}
	if st.start == st.end {
		want.raw = b
	}
	if !st2.equal(want) {
		t.Fatalf("%s: second Open: %v, want %v", what, st2, want)
	}
}

// buildMulti appends multiSpecs on m and, with sync set, makes everything
// durable so that "old state" is exact.
func buildMulti(sync bool, deleteBefore int) func(t *testing.T, m *memFS) *Log {
	return func(t *testing.T, m *memFS) *Log {
		l, err := Open(crashDir, truncConfig(m))
		if err != nil {
			t.Fatal(err)
		}
		appendSpecs(t, l, multiSpecs)
		if deleteBefore > 0 {
			l.mu.RLock()
			start := l.segs[deleteBefore].base
			l.mu.RUnlock()
			if err := l.DeleteRecordsBefore(start); err != nil {
				t.Fatal(err)
			}
		}
		if sync {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
}

func TestTruncateToCrashPoints(t *testing.T) {
	bases := specBases(multiSpecs)
	m := newMemFS()
	ref := buildMulti(true, 0)(t, m)
	old := stateOf(t, ref)
	ref.Close()
	for _, off := range bases {
		// The state of a log built directly up to off.
		want := old
		want.end = off
		want.raw = nil
		for _, h := range splitBatches(t, old.raw) {
			if parseHeader(h).BaseOffset < off {
				want.raw = append(want.raw, h...)
			}
		}
		t.Run(fmt.Sprintf("synced/offset=%d", off), func(t *testing.T) {
			t.Parallel()
			runCrashPoints(t, crashScenario{
				build: buildMulti(true, 0),
				op:    func(l *Log) error { return l.TruncateTo(off) },
				ok: func(st logState, done bool) bool {
					return st.equal(want) || (!done && st.equal(old))
				},
			})
		})
		t.Run(fmt.Sprintf("unsynced/offset=%d", off), func(t *testing.T) {
			t.Parallel()
			// Nothing was fsynced, so a crash may lose any tail of the
			// old log; but never keep batches past off once TruncateTo
			// returned, never show a batch that is not the old one.
			runCrashPoints(t, crashScenario{
				build: buildMulti(false, 0),
				op:    func(l *Log) error { return l.TruncateTo(off) },
				ok: func(st logState, done bool) bool {
					if done && off < old.end {
						return st.equal(want)
					}
					// TruncateTo(EndOffset) is a no-op and syncs nothing.
					return st.start == old.start && bytes.HasPrefix(old.raw, st.raw)
				},
			})
		})
	}
}

func TestResetCrashPoints(t *testing.T) {
	m := newMemFS()
	ref := buildMulti(true, 1)(t, m)
	old := stateOf(t, ref)
	ref.mu.RLock()
	segBases := []int64{ref.segs[0].base, ref.segs[1].base}
	ref.mu.RUnlock()
	ref.Close()
	if old.start == 0 || old.start != segBases[0] {
		t.Fatalf("setup: start %d, segments from %d", old.start, segBases[0])
	}
	for _, tc := range []struct {
		name  string
		start int64
	}{
		{"zero", 0},
		{"below-start", old.start - 1},
		{"first-segment-base", segBases[0]},
		{"second-segment-base", segBases[1]},
		{"inside", segBases[1] + 1},
		{"end", old.end},
		{"above-end", old.end + 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := logState{start: tc.start, end: tc.start}
			runCrashPoints(t, crashScenario{
				build: buildMulti(true, 1),
				op:    func(l *Log) error { return l.Reset(tc.start) },
				ok: func(st logState, done bool) bool {
					return st.equal(want) || (!done && st.equal(old))
				},
			})
		})
	}
}

// AppendReplicated shares Append's write path; a crash during it keeps a
// batch-aligned prefix and never a torn batch.
func TestAppendReplicatedCrashPoints(t *testing.T) {
	m := newMemFS()
	src := buildMulti(true, 0)(t, m)
	full := stateOf(t, src)
	src.Close()
	chunks := splitBatches(t, full.raw)
	records := bytes.Join(chunks[5:9], nil)
	build := func(t *testing.T, m *memFS) *Log {
		l, err := Open(crashDir, truncConfig(m))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunks[:5] {
			if _, err := l.AppendReplicated(c); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	old := logState{end: parseHeader(chunks[5]).BaseOffset, raw: bytes.Join(chunks[:5], nil)}
	want := logState{end: parseHeader(chunks[9]).BaseOffset, raw: bytes.Join(chunks[:9], nil)}
	runCrashPoints(t, crashScenario{
		build: build,
		op: func(l *Log) error {
			_, err := l.AppendReplicated(records)
			if err == nil {
				err = l.Sync()
			}
			return err
		},
		ok: func(st logState, done bool) bool {
			if done {
				return st.equal(want)
			}
			return st.start == 0 && bytes.HasPrefix(want.raw, st.raw) && len(st.raw) >= len(old.raw)
		},
	})
}
