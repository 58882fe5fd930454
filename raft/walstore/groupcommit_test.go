package walstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// TestGroupCommit runs many groups' appends concurrently on a real disk:
// they must share fsyncs, and every entry must be readable at once and
// after reopening.
func TestGroupCommit(t *testing.T) {
	const groups, calls = 64, 40
	dir := t.TempDir()
	s := openT(t, dir, nil, 256<<10)
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for g := range groups {
		wg.Go(func() {
			gs := s.Group(fmt.Sprintf("p-%d", g))
			for i := uint64(1); i <= calls; i++ {
				if err := gs.StoreLogs([]*hraft.Log{mkLog(gs.name, i, 1)}); err != nil {
					errs <- err
					return
				}
				// Readable as soon as StoreLogs returned.
				if last, _ := gs.LastIndex(); last != i {
					errs <- fmt.Errorf("%s: LastIndex %d right after storing %d", gs.name, last, i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("%d StoreLogs calls: %d fsyncs, %d batches, %d segments", groups*calls, st.Fsyncs, st.Batches, st.Segments)
	if st.Records != groups*calls {
		t.Fatalf("Records = %d, want %d", st.Records, groups*calls)
	}
	if st.Fsyncs*4 > groups*calls {
		t.Fatalf("%d fsyncs for %d calls: not group-committed", st.Fsyncs, groups*calls)
	}
	if st.Groups != groups {
		t.Fatalf("Stats.Groups = %d", st.Groups)
	}
	want := dumpState(t, s)
	for _, g := range want {
		if g.First != 1 || g.Last != calls {
			t.Fatalf("group state %+v", g)
		}
	}
	mustClose(t, s)
	s = openT(t, dir, nil, 256<<10)
	defer mustClose(t, s)
	if err := equalStates(want, dumpState(t, s)); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
}

// TestNotVisibleBeforeFsync holds the writer inside Sync and checks that
// neither the entry nor the stable value can be read until it returns.
func TestNotVisibleBeforeFsync(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	defer mustClose(t, s)
	gs := s.Group("g")
	storeRange(t, gs, 1, 1, 1)

	entered, release := holdFirst(fsys.setSyncHook)
	done := make(chan error, 2)
	go func() { done <- gs.StoreLogs(mkLogs("g", 2, 3, 1)) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("writer never reached Sync")
	}
	// While this Sync is in flight the next batch forms behind it, and
	// is written (not synced) as soon as the writer takes it.
	written := s.bytesWritten.Load()
	go func() { done <- gs.SetUint64([]byte("CurrentTerm"), 4) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.qmu.Lock()
		n := len(s.queue)
		s.qmu.Unlock()
		if n == 1 || s.bytesWritten.Load() > written {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second request never queued")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("a request returned (%v) while the fsync covering it was held", err)
	default:
	}
	if last, _ := gs.LastIndex(); last != 1 {
		t.Fatalf("LastIndex = %d before the fsync returned", last)
	}
	var l hraft.Log
	if err := gs.GetLog(2, &l); !errors.Is(err, hraft.ErrLogNotFound) {
		t.Fatalf("GetLog(2) before fsync: %v", err)
	}
	if _, err := gs.GetUint64([]byte("CurrentTerm")); !isNotFound(err) {
		t.Fatalf("stable value visible before its fsync: %v", err)
	}
	batches := s.Stats().Batches
	close(release)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("writes did not complete")
		}
	}
	if last, _ := gs.LastIndex(); last != 3 {
		t.Fatalf("LastIndex = %d after StoreLogs returned", last)
	}
	if got := s.Stats().Batches - batches; got != 2 {
		t.Fatalf("%d batches for the held and the queued request, want 2", got)
	}
}

// holdSyncs makes the faultFS hold each segment fsync until the test lets
// it go: started receives one value per fsync that began, and each send
// on proceed lets one finish.
func holdSyncs(fsys *faultFS) (started <-chan struct{}, proceed chan<- struct{}) {
	st, pr := make(chan struct{}, 8), make(chan struct{})
	fsys.setSyncHook(func(string) {
		st <- struct{}{}
		<-pr
	})
	return st, pr
}

// holdFirst installs, through set (a faultFS's setWriteHook or
// setSyncHook), a hook that holds the first call until release is closed;
// entered is closed once that call is held. Later calls pass.
func holdFirst(set func(func(string))) (entered <-chan struct{}, release chan<- struct{}) {
	in, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	set(func(string) {
		once.Do(func() {
			close(in)
			<-rel
		})
	})
	return in, rel
}

// waitQueued waits until a request waits for the writer.
func waitQueued(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !s.queued() {
		if time.Now().After(deadline) {
			t.Fatal("the second request was never queued")
		}
		time.Sleep(time.Millisecond)
	}
}

// releaseSyncs stops holding fsyncs and lets go the ones held now.
func releaseSyncs(fsys *faultFS, proceed chan<- struct{}) {
	fsys.setSyncHook(nil)
	for {
		select {
		case proceed <- struct{}{}:
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitWritten(t *testing.T, s *Store, before uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.bytesWritten.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the second batch was never written")
		}
		time.Sleep(time.Millisecond)
	}
}

// writeBehindHeldSync stores a batch of group "a" and holds its fsync,
// then stores one of group "b" and waits until the writer wrote it behind
// the held fsync. The writer overlaps a fsync with the next write only
// when that next request is queued by the time the batch is written, so
// the first batch's write waits until the second request is queued. Each
// send on proceed lets one fsync finish; first and second answer the two
// StoreLogs calls.
func writeBehindHeldSync(t *testing.T, s *Store, fsys *faultFS) (started <-chan struct{}, proceed chan<- struct{}, first, second <-chan error) {
	t.Helper()
	started, proceed = holdSyncs(fsys)
	writing, gate := holdFirst(fsys.setWriteHook)
	f, sec := make(chan error, 1), make(chan error, 1)
	go func() { f <- s.Group("a").StoreLogs(mkLogs("a", 1, 2, 1)) }()
	waitSignal(t, writing, "the first batch's write")
	go func() { sec <- s.Group("b").StoreLogs(mkLogs("b", 1, 2, 1)) }()
	waitQueued(t, s)
	before := s.bytesWritten.Load()
	close(gate)
	waitSignal(t, started, "the first fsync")
	waitWritten(t, s, before)
	fsys.setWriteHook(nil)
	return started, proceed, f, sec
}

// A batch with nothing queued behind it is fsynced by the writer itself,
// and a request that comes in during that fsync is written after it.
func TestLoneBatchIsSyncedByTheWriter(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	defer mustClose(t, s)
	started, proceed := holdSyncs(fsys)
	defer releaseSyncs(fsys, proceed) // before mustClose, should the test fail
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- s.Group("a").StoreLogs(mkLogs("a", 1, 2, 1)) }()
	waitSignal(t, started, "the first fsync")
	before := s.bytesWritten.Load()
	go func() { second <- s.Group("b").StoreLogs(mkLogs("b", 1, 2, 1)) }()
	waitQueued(t, s)
	time.Sleep(20 * time.Millisecond) // room for a write that must not happen
	if got := s.bytesWritten.Load(); got != before {
		t.Fatalf("%d bytes written during the lone batch's fsync, want none: the writer was not the one syncing", got-before)
	}
	proceed <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	waitSignal(t, started, "the second batch's fsync")
	proceed <- struct{}{}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	fsys.setSyncHook(nil)
}

// The writer writes a batch while the one before it is being fsynced, but
// acknowledges it only after an fsync of its own: the first fsync, which
// may have begun before the second batch was written, never counts for
// it.
func TestWriteOverlapsFsyncNeverItsOwn(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	defer mustClose(t, s)
	b := s.Group("b")
	started, proceed, first, second := writeBehindHeldSync(t, s, fsys)

	proceed <- struct{}{} // the first fsync ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	waitSignal(t, started, "the second batch's own fsync")
	select {
	case err := <-second:
		t.Fatalf("the second batch was acknowledged (%v) before its own fsync", err)
	default:
	}
	if last, _ := b.LastIndex(); last != 0 {
		t.Fatalf("the second batch is visible (LastIndex %d) before its fsync", last)
	}
	proceed <- struct{}{}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if last, _ := b.LastIndex(); last != 2 {
		t.Fatalf("LastIndex %d after StoreLogs returned, want 2", last)
	}
	fsys.setSyncHook(nil)
}

// A failed fsync fails the batch written behind it too: the store is
// fail-stop, and that batch's own fsync could no longer prove it durable.
func TestFailedFsyncFailsTheBatchWrittenBehindIt(t *testing.T) {
	fsys := newFaultFS()
	s := openT(t, testDir, fsys, 0)
	defer s.Close()
	b := s.Group("b")
	_, proceed, first, second := writeBehindHeldSync(t, s, fsys)
	fsys.failNextSyncs(1)
	proceed <- struct{}{}
	for name, ch := range map[string]<-chan error{"first": first, "second": second} {
		select {
		case err := <-ch:
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("%s batch: %v, want ErrFailed", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s batch never answered", name)
		}
	}
	if last, _ := b.LastIndex(); last != 0 {
		t.Fatalf("the second batch is visible (LastIndex %d) after a failed fsync", last)
	}
	fsys.setSyncHook(nil)
}
