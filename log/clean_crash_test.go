package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// buildKeyed appends a deterministic keyed workload to a log on m (with
// truncConfig's small segments), optionally cleans it and appends more,
// and makes everything durable.
func buildKeyed(cleanFirst bool) func(t *testing.T, m *memFS) *Log {
	return func(t *testing.T, m *memFS) *Log {
		cfg := truncConfig(m)
		l, err := Open(crashDir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(9, 9))
		clk := &fakeClock{}
		clk.ms.Store(1_000_000)
		w := &cleanWorkload{batches: map[int64]BatchHeader{}, pidLast: map[int64]int64{}}
		runKeyedWorkload(t, l, clk, rng, 30, 8, w)
		if cleanFirst {
			if _, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset(), DeleteRetention: time.Hour, Now: clk.Now}); err != nil {
				t.Fatal(err)
			}
			runKeyedWorkload(t, l, clk, rng, 15, 8, w)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// fromTemplate builds the log once, on a template memFS, and returns a
// build that copies its durable files into a fresh memFS and opens them:
// the same log and the same FS calls every time, at a fraction of the
// cost of appending the workload again for every crash point.
func fromTemplate(t *testing.T, build func(t *testing.T, m *memFS) *Log) func(t *testing.T, m *memFS) *Log {
	tmpl := newMemFS()
	if err := build(t, tmpl).Close(); err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T, m *memFS) *Log {
		tmpl.mu.Lock()
		for d := range tmpl.dirs {
			m.dirs[d] = true
		}
		for name, ino := range tmpl.durable {
			c := &memInode{data: slices.Clone(ino.synced), synced: slices.Clone(ino.synced)}
			m.names[name], m.durable[name] = c, c
		}
		tmpl.mu.Unlock()
		l, err := Open(crashDir, truncConfig(m))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// TestCleanSwapCrashPoints crashes (or fails one call) at every FS call of
// a Clean and reopens: the log is the old one or the cleaned one, never a
// mix, and only the cleaned one once Clean returned.
func TestCleanSwapCrashPoints(t *testing.T) {
	for _, cleanFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("cleaned-before=%v", cleanFirst), func(t *testing.T) {
			t.Parallel()
			build := fromTemplate(t, buildKeyed(cleanFirst))
			clean := func(l *Log) error {
				_, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()})
				return err
			}
			m := newMemFS()
			ref := build(t, m)
			old := stateOf(t, ref)
			if err := clean(ref); err != nil {
				t.Fatal(err)
			}
			cleaned := stateOf(t, ref)
			ref.Close()
			if cleaned.equal(old) || len(cleaned.raw) >= len(old.raw) {
				t.Fatalf("clean changed nothing: %v -> %v", old, cleaned)
			}
			runCrashPoints(t, crashScenario{
				build: build,
				op:    clean,
				ok: func(st logState, done bool) bool {
					return st.equal(cleaned) || (!done && st.equal(old))
				},
			})
		})
	}
}

// TestCleanSwapMarkerFinished: Open finding a clean-swap record with the
// .cleaned files still in place installs them; without the record it
// removes them.
func TestCleanSwapMarkerFinished(t *testing.T) {
	build := fromTemplate(t, buildKeyed(false))
	for _, committed := range []bool{false, true} {
		m := newMemFS()
		l := build(t, m)
		old := stateOf(t, l)
		// Stop the clean just before the swap, keeping its .cleaned
		// files, by failing the marker write after they are durable.
		n := m.stepCount()
		if err := func() error { _, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); return err }(); err != nil {
			t.Fatal(err)
		}
		cleaned := stateOf(t, l)
		steps := m.stepCount() - n
		l.Close()

		m = newMemFS()
		l = build(t, m)
		// Find the call that creates clean-swap.tmp: crash right after
		// the marker's rename (committed) or right before it.
		var at int
		for k := range steps {
			probe := newMemFS()
			pl := build(t, probe)
			probe.failFrom(probe.stepCount()+k, true)
			pl.Clean(context.Background(), CleanOptions{UpTo: pl.EndOffset()})
			img := probe.image(keepAll, rand.New(rand.NewPCG(1, 1)))
			has := false
			for _, f := range img.files(crashDir) {
				if f == cleanSwapFile {
					has = true
				}
			}
			if has {
				at = k
				break
			}
		}
		if at == 0 {
			t.Fatal("no clean-swap file seen")
		}
		k := at
		if !committed {
			k = at - 1
		}
		m.failFrom(m.stepCount()+k, true)
		l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()})
		img := m.image(keepAll, rand.New(rand.NewPCG(1, 1)))
		hasCleaned := false
		for _, f := range img.files(crashDir) {
			if len(f) > len(cleanedSuffix) && f[len(f)-len(cleanedSuffix):] == cleanedSuffix {
				hasCleaned = true
			}
		}
		if !hasCleaned {
			t.Fatalf("committed=%v: no .cleaned files at the crash", committed)
		}
		r, err := Open(crashDir, truncConfig(img))
		if err != nil {
			t.Fatal(err)
		}
		st := stateOf(t, r)
		want := old
		if committed {
			want = cleaned
		}
		if !st.equal(want) {
			t.Fatalf("committed=%v: reopened %v, want %v", committed, st, want)
		}
		for _, f := range img.files(crashDir) {
			if f == cleanSwapFile || (len(f) > len(cleanedSuffix) && f[len(f)-len(cleanedSuffix):] == cleanedSuffix) {
				t.Fatalf("committed=%v: %s left after Open", committed, f)
			}
		}
		r.Close()
	}
}

// TestCleanCheckpointGuardsHoles: holes are accepted only below the
// cleaner checkpoint. Without it a scan cuts the cleaned log at its
// first hole, which is why an unreadable checkpoint fails Open instead.
func TestCleanCheckpointGuardsHoles(t *testing.T) {
	m := newMemFS()
	l := buildKeyed(false)(t, m)
	if _, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); err != nil {
		t.Fatal(err)
	}
	cleaned := stateOf(t, l)
	l.Close()
	img := m.image(keepSynced, nil)
	img.Remove(crashDir + "/" + recoveryPointFile)
	r, err := Open(crashDir, truncConfig(img))
	if err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, r); !st.equal(cleaned) {
		t.Fatalf("full scan of the cleaned log: %v, want %v", st, cleaned)
	}
	r.Close()

	bad := img.image(keepSynced, nil)
	f, _ := bad.OpenFile(crashDir+"/"+cleanerCheckpointFile, 0, 0)
	f.Truncate(1)
	if _, err := Open(crashDir, truncConfig(bad)); err == nil {
		t.Fatal("Open accepted an unreadable cleaner checkpoint")
	}

	gone := img.image(keepSynced, nil)
	gone.Remove(crashDir + "/" + cleanerCheckpointFile)
	gone.Remove(crashDir + "/" + recoveryPointFile)
	r, err = Open(crashDir, truncConfig(gone))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st := stateOf(t, r); st.end >= cleaned.end {
		t.Fatalf("holes accepted without a cleaner checkpoint: %v", st)
	}
}
