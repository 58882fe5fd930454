package log

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// crashRecord is what a writer knows when it dies: every batch an Append
// returned for (as stored, and where) and how many of them the last Sync
// that returned covered.
type crashRecord struct {
	batches []storedBatch
	synced  int
}

// runCrashWorkload appends random batches to a log on m, with a Sync after
// about one in four, until ops appends are done or m fails (a crash at
// the armed step: every later call fails, so the writer stops). The
// choices come from seed alone, so two runs make the same calls up to the
// crash.
func runCrashWorkload(t *testing.T, m *memFS, seed uint64, ops int) crashRecord {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	specs := append(slices.Clone(multiSpecs), moreSpecs...)
	var rec crashRecord
	cfg := corruptionConfig()
	cfg.FS = m
	l, err := Open(crashDir, cfg)
	if err != nil {
		return rec
	}
	for range ops {
		s := specs[rng.IntN(len(specs))]
		sync := rng.IntN(4) == 0
		b := s.encode(t)
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: s.epoch, LogAppendTime: s.lat}); err != nil {
			break
		}
		l.mu.RLock()
		seg := l.active()
		rec.batches = append(rec.batches, storedBatch{file: segmentFileName(seg.base, extLog), pos: int(seg.size) - len(b), data: b})
		l.mu.RUnlock()
		if sync {
			if err := l.Sync(); err != nil {
				break
			}
			rec.synced = len(rec.batches)
		}
	}
	// No Close: the process is gone.
	return rec
}

// memDirFiles copies the files of crashDir out of m.
func memDirFiles(m *memFS) dirFiles {
	m.mu.Lock()
	defer m.mu.Unlock()
	files := dirFiles{}
	for name, ino := range m.names {
		if filepath.Dir(name) == crashDir {
			files[filepath.Base(name)] = slices.Clone(ino.data)
		}
	}
	return files
}

// setMemDirFiles replaces the content of m's files in crashDir with files,
// as durable content.
func setMemDirFiles(m *memFS, files dirFiles) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, data := range files {
		ino := m.names[filepath.Join(crashDir, name)]
		ino.data, ino.synced = slices.Clone(data), slices.Clone(data)
	}
}

// TestCrashImageRecovery crashes a log at a random FS call of a random
// append-and-sync workload on memFS, images the disk as a reboot may find
// it (only fsynced data, everything, or each file torn somewhere in its
// unsynced tail, with a random prefix of the directory changes), damages
// the image in half the runs as TestCorruptionRecovery does, and reopens:
// no batch covered by a Sync that returned may be lost to the crash, and
// recovery must keep exactly the whole, undamaged prefix of what was
// written (see survivors), then accept appends and reopen to the same
// state. runCrashPoints covers every crash point of single operations;
// this covers long mixed histories.
func TestCrashImageRecovery(t *testing.T) {
	seed, runs := corruptionRuns(t, 200)
	cfg := corruptionConfig()
	modes := []crashMode{keepSynced, keepAll, keepRandom, keepRandom}
	lostToDamage := 0
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		workSeed, ops := rng.Uint64(), 5+rng.IntN(30)
		probe := newMemFS()
		runCrashWorkload(t, probe, workSeed, ops)
		crashAt := rng.IntN(probe.stepCount() + 1)

		m := newMemFS()
		m.failFrom(crashAt, true)
		rec := runCrashWorkload(t, m, workSeed, ops)
		mode := modes[rng.IntN(len(modes))]
		img := m.image(mode, rng)
		what := fmt.Sprintf("seed %d run %d (crash at call %d of %d after %d appends, %d synced; image %v",
			seed, run, crashAt, probe.stepCount(), len(rec.batches), rec.synced, mode)

		files := memDirFiles(img)
		if kept, _ := survivors(rec.batches, files); kept < rec.synced {
			t.Fatalf("%s): the image holds %d whole batches; %d were synced", what, kept, rec.synced)
		}
		if rng.IntN(2) == 0 && len(files.segmentBases()) > 0 {
			scanned := files.scannedSegments()
			var done []string
			for range 1 + rng.IntN(2) {
				d := randomDamage(rng, files, func(file string) bool { return scanned[file] })
				d.apply(files)
				done = append(done, d.String())
			}
			setMemDirFiles(img, files)
			what += "; " + strings.Join(done, ", ")
		}
		what += ")"
		keep, raw := survivors(rec.batches, files)
		if keep < rec.synced {
			lostToDamage++
		}

		cfg.FS = img
		l, st := openRecovered(t, crashDir, cfg, what)
		if want := (logState{end: endOf(rec.batches, keep), raw: raw}); !st.equal(want) {
			l.Close()
			t.Fatalf("%s: recovered %v, want the %d whole, undamaged batches written first: %v", what, st, keep, want)
		}
		appendAndReopen(t, l, st, crashDir, cfg, what)
	}
	t.Logf("%d runs; in %d damage hit a synced batch", runs, lostToDamage)
}
