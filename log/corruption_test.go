package log

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corruptionConfig is truncConfig on real files with a denser offset
// index, so that damage to index files often hits entries a read relies on.
func corruptionConfig() Config {
	cfg := truncConfig(noSyncFS{})
	cfg.IndexIntervalBytes = 50
	return cfg
}

// noSyncFS is the OS file system with fsync made a no-op. The corruption
// tests damage files directly and never lose power, so fsync would only
// cost time (the crash-image tests on memFS cover what it must persist).
type noSyncFS struct{ OSFS }

func (noSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ *os.File }

func (noSyncFile) Sync() error { return nil }

// writeDamageBase writes the log every corruption run starts from, on
// real files: a dozen segments of batches of every codec, timestamp type
// and several leader epochs, with Sync calls along the way. It returns the
// files as a crash would leave them (no Close: the last Sync wrote the
// recovery point) and every end offset a Sync made durable, that is every
// value the recovery point ever held.
func writeDamageBase(t *testing.T) (dirFiles, []int64) {
	t.Helper()
	dir := t.TempDir()
	l := mustOpen(t, dir, corruptionConfig())
	var synced []int64
	specs := append(append(append([]batchSpec(nil), multiSpecs...), moreSpecs...), multiSpecs...)
	for i, s := range specs {
		if _, err := l.Append(s.encode(t), AppendOptions{LeaderEpoch: s.epoch, LogAppendTime: s.lat}); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			synced = append(synced, l.EndOffset())
		}
	}
	l.mu.RLock()
	segs := l.segs
	l.mu.RUnlock()
	if len(segs) < 8 {
		t.Fatalf("setup: %d segments, want several", len(segs))
	}
	// A crash: the files are left as they are, unsynced tail included.
	for _, s := range segs {
		s.closeFiles()
	}
	return readDirFiles(t, dir), synced
}

// TestCorruptionRecovery damages the files of a multi-segment log at
// random — segment, offset index and time index files cut short, bits
// flipped, ranges zeroed or overwritten, garbage or a stray batch appended
// — and reopens it. Recovery must keep exactly the batches before the
// first one whose bytes were damaged (see survivors), never serve a
// damaged or partial batch (openRecovered), lose nothing to index damage
// alone, accept appends and reopen to the same state.
//
// Which segments Open validates batch by batch is Kafka's rule: the last
// one and every one that may hold data at or above the recovery point.
// Segments wholly below it were fsynced and are trusted; bytes rewritten
// in place there are outside what Open looks at (see
// TestDamageBelowRecoveryPointIsNotScanned). So half the runs keep a
// recovery point (one the log really wrote, or the end as after Close)
// and rewrite .log bytes only in segments it does not cover; the other
// half have none, as after a crash before the first Sync, and Open
// validates every segment. Cutting files short and appending to them is
// aimed at every segment in both: the checks of trusted segments (their
// indexes, and their batches reaching exactly the next segment) catch it.
func TestCorruptionRecovery(t *testing.T) {
	seed, runs := corruptionRuns(t, 200)
	base, synced := writeDamageBase(t)
	batches := storedBatches(t, base)
	end := parseHeader(batches[len(batches)-1].data).LastOffset() + 1
	points := append(synced, end) // every value recovery-point held, and the end as after Close
	cfg := corruptionConfig()
	dir := t.TempDir()
	truncatedRuns, intactRuns := 0, 0
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		files := base.clone()
		rp := "none"
		if rng.IntN(2) == 0 {
			delete(files, recoveryPointFile)
		} else {
			p := points[rng.IntN(len(points))]
			files[recoveryPointFile] = []byte(fmt.Sprintf("%s\n%d\n", checkpointVersion, p))
			rp = fmt.Sprint(p)
		}
		scanned := files.scannedSegments()
		var done []string
		for range 1 + rng.IntN(3) {
			d := randomDamage(rng, files, func(file string) bool { return scanned[file] })
			d.apply(files)
			done = append(done, d.String())
		}
		keep, raw := survivors(batches, files)
		what := fmt.Sprintf("seed %d run %d (recovery point %s; %s)", seed, run, rp, strings.Join(done, ", "))

		files.writeTo(t, dir)
		l, st := openRecovered(t, dir, cfg, what)
		if want := (logState{end: endOf(batches, keep), raw: raw}); !st.equal(want) {
			l.Close()
			t.Fatalf("%s: recovered %v, want the %d batches before the first damaged one: %v", what, st, keep, want)
		}
		appendAndReopen(t, l, st, dir, cfg, what)
		if keep < len(batches) {
			truncatedRuns++
		} else {
			intactRuns++
		}
	}
	t.Logf("%d runs: %d lost a damaged batch and its successors, %d lost nothing", runs, truncatedRuns, intactRuns)
	if runs >= 50 && (truncatedRuns == 0 || intactRuns == 0) {
		t.Fatalf("damage too one-sided to test both outcomes: %d truncated, %d intact", truncatedRuns, intactRuns)
	}
}

// endOf is the offset after the first n batches.
func endOf(batches []storedBatch, n int) int64 {
	if n == 0 {
		return 0
	}
	return parseHeader(batches[n-1].data).LastOffset() + 1
}

// TestDamageBelowRecoveryPointIsNotScanned pins down the limit of what Open
// checks. A segment wholly below the recovery point was fsynced when it was
// sealed; Open trusts it, as Kafka trusts segments below its recovery point
// (and skips recovery altogether after a clean shutdown), and reads only
// its index files and the few batches after the last offset index entry.
// Bytes rewritten in place earlier in such a segment — a failing disk, not
// a crash — are served as stored; a consumer's CRC check rejects the batch.
// Without a recovery point Open validates every segment and truncates the
// log just before the damaged batch.
func TestDamageBelowRecoveryPointIsNotScanned(t *testing.T) {
	dir := t.TempDir()
	cfg := corruptionConfig()
	l := mustOpen(t, dir, cfg)
	appendSpecs(t, l, multiSpecs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := readDirFiles(t, dir)
	batches := storedBatches(t, files)
	end := endOf(batches, len(batches))
	// The second batch of the first segment: below the recovery point,
	// and before the segment's last offset index entry.
	victim := batches[1]
	if victim.file != batches[0].file || victim.file == batches[len(batches)-1].file {
		t.Fatalf("setup: batch 1 in %s", victim.file)
	}
	damage{kind: flipBits, file: victim.file, pos: victim.pos + batchHeaderLen + 5, n: 1, fill: 1}.apply(files)
	files.writeTo(t, dir)
	stored := files[victim.file][victim.pos : victim.pos+len(victim.data)]
	base := parseHeader(victim.data).BaseOffset

	l = mustOpen(t, dir, cfg)
	if got := l.EndOffset(); got != end {
		t.Fatalf("end offset %d after damage below the recovery point, want %d (segment not scanned)", got, end)
	}
	got, err := l.Read(base, 1, Obligatory, end)
	if err != nil || !bytes.Equal(got, stored) {
		t.Fatalf("Read(%d) = %d bytes, %v; want the damaged batch as stored", base, len(got), err)
	}
	if _, err := ValidateBatches(got); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("a consumer's CRC check of the damaged batch: %v, want ErrCorruptBatch", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filepath.Join(dir, recoveryPointFile)); err != nil {
		t.Fatal(err)
	}
	l, st := openRecovered(t, dir, cfg, "without a recovery point")
	defer l.Close()
	keep, raw := survivors(batches, files)
	if want := (logState{end: base, raw: raw}); keep != 1 || !st.equal(want) {
		t.Fatalf("without a recovery point: %v, want the %d batch(es) before the damaged one: %v", st, keep, want)
	}
}
