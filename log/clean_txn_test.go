package log

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// txnWriter appends to a log as transactional producers, plain
// producers and a coordinator writing markers would; to shadow too, if
// set, which is never cleaned.
type txnWriter struct {
	tb     testing.TB
	l      *Log
	shadow *Log
	clk    *fakeClock
	seqs   map[int64]int32
}

func newTxnWriter(tb testing.TB, l *Log, clk *fakeClock) *txnWriter {
	return &txnWriter{tb: tb, l: l, clk: clk, seqs: map[int64]int32{}}
}

func (w *txnWriter) append(b []byte) int64 {
	if w.shadow != nil {
		mustAppend(w.tb, w.shadow, slices.Clone(b))
	}
	return mustAppend(w.tb, w.l, b).BaseOffset
}

// plain appends recs (key=value pairs, value "-" for a tombstone) as a
// non-idempotent producer; it returns the batch's base offset.
func (w *txnWriter) plain(recs ...string) int64 {
	return w.append(keyedBatch(w.tb, CompressionNone, 0, -1, -1, -1, w.clk.Now().UnixMilli(), kvs(recs)))
}

// txn appends recs as a batch of producer pid's transaction.
func (w *txnWriter) txn(pid int64, codec int8, recs ...string) int64 {
	r := kvs(recs)
	seq := w.seqs[pid]
	w.seqs[pid] += int32(len(r))
	return w.append(keyedBatch(w.tb, codec, attrTransactional, pid, 0, seq, w.clk.Now().UnixMilli(), r))
}

// end appends producer pid's marker.
func (w *txnWriter) end(pid int64, commit bool) int64 {
	return w.append(BuildMarker(w.clk.Now().UnixMilli(), pid, 0, commit, 3))
}

func kvs(recs []string) []kv {
	out := make([]kv, len(recs))
	for i, s := range recs {
		k, v, _ := bytes.Cut([]byte(s), []byte("="))
		out[i].key = k
		if string(v) != "-" {
			out[i].value = v
		}
	}
	return out
}

// logView is what the log holds: every record by offset and every
// marker's offset.
type logView struct {
	recs    map[int64]string // offset -> key=value
	markers []int64
	horizon map[int64]bool // marker offset -> has a delete horizon
}

func viewLog(t testing.TB, l *Log) logView {
	t.Helper()
	v := logView{recs: map[int64]string{}, horizon: map[int64]bool{}}
	off, end := l.LogStartOffset(), l.EndOffset()
	for off < end {
		b, err := l.Read(off, 1<<20, Obligatory, end)
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, len(b), err)
		}
		for len(b) > 0 {
			h := parseHeader(b)
			if h.IsControl() {
				v.markers = append(v.markers, h.BaseOffset)
				v.horizon[h.BaseOffset] = h.Attributes&attrDeleteHorizon != 0
			} else if err := ForEachRecord(b[:h.Size()], func(r Record) bool {
				val := "-"
				if r.Value != nil {
					val = string(r.Value)
				}
				v.recs[r.Offset] = string(r.Key) + "=" + val
				return true
			}); err != nil {
				t.Fatal(err)
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return v
}

// committedView is what a read_committed reader of the whole log ends
// with, key by key: the latest record of every key outside aborted and
// open transactions. It reads markers as a consumer does, so a marker
// removed while data of its transaction is left shows.
func committedView(t testing.TB, l *Log) map[string]string {
	t.Helper()
	type rec struct {
		off      int64
		key, val string
	}
	view := map[string]rec{}
	apply := func(r rec) {
		if cur, ok := view[r.key]; !ok || r.off > cur.off {
			view[r.key] = r
		}
	}
	pending := map[int64][]rec{}
	off, end := l.LogStartOffset(), l.EndOffset()
	for off < end {
		b, err := l.Read(off, 1<<20, Obligatory, end)
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, len(b), err)
		}
		for len(b) > 0 {
			h := parseHeader(b)
			batch := b[:h.Size()]
			if h.IsControl() {
				commit, ok := MarkerType(batch)
				if !ok {
					t.Fatalf("control batch %d holds no marker", h.BaseOffset)
				}
				if commit {
					for _, r := range pending[h.ProducerID] {
						apply(r)
					}
				}
				delete(pending, h.ProducerID)
			} else if err := ForEachRecord(batch, func(r Record) bool {
				val := "-"
				if r.Value != nil {
					val = string(r.Value)
				}
				x := rec{r.Offset, string(r.Key), val}
				if h.IsTransactional() {
					pending[h.ProducerID] = append(pending[h.ProducerID], x)
				} else {
					apply(x)
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	out := map[string]string{}
	for k, r := range view {
		out[k] = r.val
	}
	return out
}

// TestCleanTxnCommittedAndAborted: interleaved producers' transactions;
// aborted records go at once and never shadow earlier values, committed
// ones deduplicate like any other, and a marker goes only after its
// transaction's data is gone and its delete horizon has passed.
func TestCleanTxnCommittedAndAborted(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(10_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 1))
	defer l.Close()
	w := newTxnWriter(t, l, clk)
	const p1, p2 = 7, 8
	w.plain("k1=v0")
	w.txn(p1, CompressionNone, "k1=a1", "k2=a1") // aborted
	w.txn(p2, CompressionZstd, "k1=c2", "k3=c2") // committed
	abort1 := w.end(p1, false)
	commit2 := w.end(p2, true)
	w.plain("k2=v7")
	w.txn(p1, CompressionNone, "k4=c8")
	w.txn(p2, CompressionLZ4, "k4=x9", "k7=x9") // aborted: k4=c8 must stay
	commit1 := w.end(p1, true)
	abort2 := w.end(p2, false)
	w.txn(p2, CompressionNone, "k5=c12")
	commit2b := w.end(p2, true)
	w.txn(p1, CompressionNone, "k6=c14", "k6=-")
	commit1b := w.end(p1, true)
	w.plain("z=1") // the active segment
	opts := CleanOptions{UpTo: l.EndOffset(), DeleteRetention: time.Second}

	st, err := l.Clean(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.AbortedRecordsRemoved != 4 || st.MarkersRemoved != 0 || len(st.EmptyAbortedTxns) != 0 {
		t.Fatalf("first clean: %+v", st)
	}
	v := viewLog(t, l)
	want := map[int64]string{3: "k1=c2", 4: "k3=c2", 7: "k2=v7", 8: "k4=c8", 13: "k5=c12", 16: "k6=-", 18: "z=1"}
	if !mapsEqual(v.recs, want) {
		t.Fatalf("after the first clean: %v, want %v", v.recs, want)
	}
	allMarkers := []int64{abort1, commit2, commit1, abort2, commit2b, commit1b}
	if !slices.Equal(v.markers, allMarkers) {
		t.Fatalf("markers %v, want %v: each transaction's data was there", v.markers, allMarkers)
	}
	wantView := map[string]string{"k1": "c2", "k2": "v7", "k3": "c2", "k4": "c8", "k5": "c12", "k6": "-", "z": "1"}
	if got := committedView(t, l); !mapsEqual(got, wantView) {
		t.Fatalf("committed view %v, want %v", got, wantView)
	}

	// The next clean finds the aborted transactions empty: their
	// markers get a horizon.
	w.plain("z=2")
	opts.UpTo = l.EndOffset()
	if st, err = l.Clean(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.EmptyAbortedTxns, []int64{abort1, abort2}) || st.MarkersRemoved != 0 {
		t.Fatalf("second clean: %+v", st)
	}
	v = viewLog(t, l)
	if !slices.Equal(v.markers, allMarkers) || !v.horizon[abort1] || !v.horizon[abort2] || v.horizon[commit2] || v.horizon[commit1] {
		t.Fatalf("markers %v horizons %v", v.markers, v.horizon)
	}

	// Before the horizon they stay.
	clk.Advance(500)
	w.plain("z=3")
	opts.UpTo = l.EndOffset()
	if st, err = l.Clean(context.Background(), opts); err != nil || st.MarkersRemoved != 0 {
		t.Fatalf("clean before the horizon: %+v %v", st, err)
	}
	// Past it they go; so does the tombstone k6=-, which got its own
	// horizon in the first clean.
	clk.Advance(1_000)
	w.plain("z=4")
	opts.UpTo = l.EndOffset()
	if st, err = l.Clean(context.Background(), opts); err != nil || st.MarkersRemoved != 2 || st.TombstonesRemoved != 1 {
		t.Fatalf("clean past the horizon: %+v %v", st, err)
	}
	v = viewLog(t, l)
	if want := []int64{commit2, commit1, commit2b, commit1b}; !slices.Equal(v.markers, want) {
		t.Fatalf("markers %v, want %v", v.markers, want)
	}
	wantView = map[string]string{"k1": "c2", "k2": "v7", "k3": "c2", "k4": "c8", "k5": "c12", "z": "4"}
	if got := committedView(t, l); !mapsEqual(got, wantView) {
		t.Fatalf("committed view %v, want %v", got, wantView)
	}

	// A committed record superseded: its marker goes after a horizon
	// too, once nothing of its transaction is left.
	w.plain("k5=v-late")
	w.plain("z=5")
	opts.UpTo = l.EndOffset()
	if _, err = l.Clean(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	// The batch of k5=c12 is p2's last data batch, so it stays, empty,
	// and its marker with it.
	v = viewLog(t, l)
	if !slices.Contains(v.markers, commit2b) {
		t.Fatalf("marker %d of a producer's kept empty batch removed: %v", commit2b, v.markers)
	}
}

func mapsEqual[K comparable](a, b map[K]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCleanTxnOpenBound: an open transaction bounds the clean even when
// UpTo says more: its data is neither removed nor deduplicated against,
// and what follows it stays dirty until its marker.
func TestCleanTxnOpenBound(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(10_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 1))
	defer l.Close()
	w := newTxnWriter(t, l, clk)
	w.plain("k=v0")
	w.plain("j=v1")
	open := w.txn(5, CompressionNone, "k=open")
	w.plain("k=v3", "j=v3")
	w.plain("z=1")
	st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()})
	if err != nil {
		t.Fatal(err)
	}
	if st.CleanedTo > open || l.FirstDirtyOffset() > open {
		t.Fatalf("cleaned to %d past the open transaction at %d", st.CleanedTo, open)
	}
	v := viewLog(t, l)
	want := map[int64]string{0: "k=v0", 1: "j=v1", 2: "k=open", 3: "k=v3", 4: "j=v3", 5: "z=1"}
	if !mapsEqual(v.recs, want) {
		t.Fatalf("with an open transaction: %v, want %v", v.recs, want)
	}
	w.end(5, false)
	w.plain("z=2")
	if _, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset()}); err != nil {
		t.Fatal(err)
	}
	v = viewLog(t, l)
	want = map[int64]string{3: "k=v3", 4: "j=v3", 5: "z=1", 7: "z=2"}
	// The open transaction's batch was producer 5's last data batch:
	// kept with no records.
	if !mapsEqual(v.recs, want) {
		t.Fatalf("after the abort: %v, want %v", v.recs, want)
	}
}

// TestCleanTxnRandom: random interleaved transactions, plain writes,
// codecs and tombstones, cleaned in one pass and in many small ones: the
// read_committed view never changes, no aborted record is left in the
// cleaned part, every marker whose transaction has data left is there,
// and both cleans give the same records.
func TestCleanTxnRandom(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			var results []map[int64]string
			for _, buffer := range []int64{0, offsetMapEntryBytes * 6} {
				rng := rand.New(rand.NewPCG(seed, 11))
				clk := &fakeClock{}
				clk.ms.Store(10_000)
				l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 300))
				w := newTxnWriter(t, l, clk)
				w.shadow = mustOpen(t, t.TempDir(), cleanTestConfig(clk, 300))
				aborted := map[int64]bool{} // offsets of aborted records
				openFirst := map[int64]int64{}
				txnRecs := map[int64][]int64{}
				end := func(pid int64, commit bool) {
					if !commit {
						for _, o := range txnRecs[pid] {
							aborted[o] = true
						}
					}
					w.end(pid, commit)
					delete(openFirst, pid)
					delete(txnRecs, pid)
				}
				for range 400 {
					clk.Advance(1)
					pid := int64(rng.IntN(4))
					if pid == 0 {
						w.plain(randRecs(rng)...)
						continue
					}
					if _, ok := openFirst[pid]; ok && rng.IntN(3) == 0 {
						end(pid, rng.IntN(2) == 0)
						continue
					}
					recs := randRecs(rng)
					base := w.txn(pid, int8(rng.IntN(5)), recs...)
					if _, ok := openFirst[pid]; !ok {
						openFirst[pid] = base
					}
					for i := range recs {
						txnRecs[pid] = append(txnRecs[pid], base+int64(i))
					}
				}
				// check compares the read_committed view with the
				// uncleaned log's and looks for aborted records left.
				check := func(st CleanStats) {
					t.Helper()
					want, got := committedView(t, w.shadow), committedView(t, l)
					for k, v := range want {
						if v == "-" && got[k] == "" {
							continue // a tombstone past its horizon
						}
						if got[k] != v {
							t.Fatalf("key %s: %q after a clean, want %q (%+v)", k, got[k], v, st)
						}
					}
					if len(got) > len(want) {
						t.Fatalf("read_committed view %v, want %v", got, want)
					}
					for off := range viewLog(t, l).recs {
						if off < st.CleanedTo && aborted[off] {
							t.Fatalf("aborted record at %d left below %d", off, st.CleanedTo)
						}
					}
				}
				st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset(), DedupeBufferBytes: buffer, DeleteRetention: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range openFirst {
					if st.CleanedTo > f {
						t.Fatalf("cleaned to %d past an open transaction at %d", st.CleanedTo, f)
					}
				}
				check(st)
				// The open transactions end; another clean later (empty
				// transactions' markers get a horizon) and one past it.
				for pid := range int64(4) {
					if _, ok := openFirst[pid]; ok {
						end(pid, rng.IntN(2) == 0)
					}
				}
				for _, adv := range []int64{10, 2 * 3600_000} {
					clk.Advance(adv)
					for range 6 { // closes the active segment
						w.plain("zz=1")
					}
					st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset(), DedupeBufferBytes: buffer, DeleteRetention: time.Hour})
					if err != nil {
						t.Fatal(err)
					}
					if st.Passes == 0 {
						t.Fatalf("later clean ran no pass: %+v", st)
					}
					check(st)
				}
				w.shadow.Close()
				results = append(results, viewLog(t, l).recs)
				l.Close()
			}
			if !mapsEqual(results[0], results[1]) {
				t.Fatalf("one pass and many passes differ:\n%v\n%v", results[0], results[1])
			}
		})
	}
}

func randRecs(rng *rand.Rand) []string {
	recs := make([]string, 1+rng.IntN(3))
	for i := range recs {
		v := fmt.Sprint(rng.IntN(1000))
		if rng.IntN(10) == 0 {
			v = "-"
		}
		recs[i] = fmt.Sprintf("k%d=%s", rng.IntN(12), v)
	}
	return recs
}

// TestCleanTxnKeepsProducerEpochMarker: a producer's last marker at an
// epoch newer than its last data stays past its horizon (a rebuild of
// producer state from the log learns the epoch from it); once the
// producer writes at that epoch, the marker goes like any other.
func TestCleanTxnKeepsProducerEpochMarker(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(10_000)
	l := mustOpen(t, t.TempDir(), cleanTestConfig(clk, 1))
	defer l.Close()
	w := newTxnWriter(t, l, clk)
	const pid = 4
	w.txn(pid, CompressionNone, "k=a")
	commit := w.end(pid, true)
	w.plain("k=b")
	fence := w.append(BuildMarker(clk.Now().UnixMilli(), pid, 1, false, 3)) // a bumped epoch, no data
	clean := func() CleanStats {
		t.Helper()
		w.plain("z=1")
		st, err := l.Clean(context.Background(), CleanOptions{UpTo: l.EndOffset(), DeleteRetention: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	clean()
	clk.Advance(2_000)
	clean()
	clk.Advance(2_000)
	clean()
	// The producer's emptied data batch stays (its last data), so does
	// its transaction's marker, and the fencing marker for its epoch.
	if v := viewLog(t, l); !slices.Equal(v.markers, []int64{commit, fence}) || !v.horizon[fence] {
		t.Fatalf("markers %v horizons %v, want %d and %d (with a horizon)", v.markers, v.horizon, commit, fence)
	}
	// Data at the new epoch: the fencing marker is no longer needed.
	w.append(keyedBatch(t, CompressionNone, attrTransactional, pid, 1, 0, clk.Now().UnixMilli(), kvs([]string{"k=c"})))
	w.append(BuildMarker(clk.Now().UnixMilli(), pid, 1, true, 3))
	// The fencing marker's horizon passed long ago: it goes at once.
	// The emptied batch goes too; its transaction's marker gets a
	// horizon at the next clean and goes after it.
	if st := clean(); st.MarkersRemoved != 1 {
		t.Fatalf("fencing marker not removed: %+v", st)
	}
	clean()
	clk.Advance(2_000)
	if st := clean(); st.MarkersRemoved != 1 {
		t.Fatalf("emptied transaction's marker not removed: %+v", st)
	}
	if v := viewLog(t, l); slices.Contains(v.markers, fence) || slices.Contains(v.markers, commit) {
		t.Fatalf("markers %v: the fencing marker %d and the emptied transaction's %d should be gone", v.markers, fence, commit)
	}
}
