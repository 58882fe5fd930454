package group

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// within runs f and fails the test if it does not return in time.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("timed out: %s", what)
	}
}

// gate holds replays of one partition until released.
type gate struct {
	p        int32
	entered  chan struct{}
	released chan struct{}
}

func holdReplays(store *memStore, p int32) *gate {
	g := &gate{p: p, entered: make(chan struct{}, 16), released: make(chan struct{})}
	store.setOnReplay(func(q int32) {
		if q != g.p {
			return
		}
		g.entered <- struct{}{}
		select {
		case <-g.released:
		case <-time.After(10 * time.Second): // never hang the test binary
		}
	})
	return g
}

// awaitWaiter returns once some goroutine waits in awaitLocked for a
// load in progress. It enters awaitLocked holding c.mu and reads the
// partition's generation before releasing it, so from then on an unload
// is ordered after the waiter's call.
func awaitWaiter(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(string(buf[:runtime.Stack(buf, true)]), ").awaitLocked(") {
		if time.Now().After(deadline) {
			t.Fatal("no LoadPartition waits for the load in progress")
		}
		time.Sleep(time.Millisecond)
	}
}

func loadAsync(c *Coordinator, p int32) chan error {
	out := make(chan error, 1)
	go func() { out <- c.LoadPartition(p) }()
	return out
}

func deleteGroup(c *Coordinator, group string) int16 {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{group}
	return c.DeleteGroups(req).Groups[0].ErrorCode
}

// seed commits an offset for each group through a coordinator of its own,
// so another coordinator finds them in the store.
func seed(t *testing.T, store *memStore, offsets map[string]int64) {
	t.Helper()
	c := newTestCoordinator(t, store, testSettings())
	for group, o := range offsets {
		if codes := commit(c, group, "", -1, "t", map[int32]int64{0: o}); codes[0] != 0 {
			t.Fatalf("seeding %s: %v", group, codes)
		}
	}
	c.Close()
}

// TestLoadPartitionServesOnlyItsGroups: a coordinator serves the groups of
// the partitions it loaded; the rest are NOT_COORDINATOR whatever the
// request. Loading a loaded partition again changes nothing.
func TestLoadPartitionServesOnlyItsGroups(t *testing.T) {
	store := newMemStore(4)
	c := newIdleCoordinator(t, store, testSettings(), nil)
	g0, g1 := groupIn(t, c, 0, "zero"), groupIn(t, c, 1, "one")
	seed(t, store, map[string]int64{g0: 5, g1: 6})

	notCoord := kerrCode("NOT_COORDINATOR")
	if code := fetchCode(c, g0); code != notCoord {
		t.Fatalf("fetch before any load: %d", code)
	}
	if code, ids := listGroups(c); code != 0 || len(ids) != 0 {
		t.Fatalf("list groups before any load: %d %v", code, ids)
	}
	if err := c.LoadPartition(0); err != nil {
		t.Fatal(err)
	}
	if !c.Loaded() {
		t.Fatal("not Loaded after the load")
	}
	if got := fetchOffsets(c, g0)["t"]; got[0] != 5 {
		t.Fatalf("offsets of the loaded partition's group: %v", got)
	}

	if code := fetchCode(c, g1); code != notCoord {
		t.Fatalf("fetch of another partition's group: %d", code)
	}
	if codes := commit(c, g1, "", -1, "t", map[int32]int64{0: 1}); codes[0] != notCoord {
		t.Fatalf("commit to another partition's group: %v", codes)
	}
	if r := wait(t, joinAsync(c, joinReq(g1, joinOpts{})), "join"); r.ErrorCode != notCoord {
		t.Fatalf("join of another partition's group: %d", r.ErrorCode)
	}
	if code := heartbeat(c, g1, "m", 1); code != notCoord {
		t.Fatalf("heartbeat of another partition's group: %d", code)
	}
	if d := describe(c, g1); d.ErrorCode != notCoord {
		t.Fatalf("describe of another partition's group: %+v", d)
	}
	if code := deleteGroup(c, g1); code != notCoord {
		t.Fatalf("delete of another partition's group: %d", code)
	}
	if code, ids := listGroups(c); code != 0 || len(ids) != 1 || !ids[g0] {
		t.Fatalf("list groups: %d %v", code, ids)
	}

	before := groupsOf(c, 0)
	if err := c.LoadPartition(0); err != nil {
		t.Fatal(err)
	}
	after := groupsOf(c, 0)
	if len(after) != 1 || after[0] != before[0] || store.replayCount(0) != 2 { // the seeding coordinator replayed once
		t.Fatalf("second load: %d groups (same: %v), %d replays", len(after), len(after) == 1 && after[0] == before[0], store.replayCount(0))
	}

	for _, p := range []int32{-1, 4} {
		if err := c.LoadPartition(p); err == nil {
			t.Fatalf("LoadPartition(%d) succeeded", p)
		}
	}
}

// TestLoadInProgress: a loading partition's groups get
// COORDINATOR_LOAD_IN_PROGRESS while the other partitions are served, and
// a second LoadPartition waits for the first rather than replaying again.
func TestLoadInProgress(t *testing.T) {
	store := newMemStore(4)
	c := newIdleCoordinator(t, store, testSettings(), nil)
	g0, g1 := groupIn(t, c, 0, "zero"), groupIn(t, c, 1, "one")
	seed(t, store, map[string]int64{g1: 6})
	replaysBefore := store.replayCount(1)
	if err := c.LoadPartition(0); err != nil {
		t.Fatal(err)
	}

	gate := holdReplays(store, 1)
	first := loadAsync(c, 1)
	wait(t, gate.entered, "the replay of partition 1")
	second := loadAsync(c, 1)

	inProgress := kerrCode("COORDINATOR_LOAD_IN_PROGRESS")
	if code := fetchCode(c, g1); code != inProgress {
		t.Fatalf("fetch during the load: %d", code)
	}
	if codes := commit(c, g1, "", -1, "t", map[int32]int64{0: 1}); codes[0] != inProgress {
		t.Fatalf("commit during the load: %v", codes)
	}
	if r := wait(t, joinAsync(c, joinReq(g1, joinOpts{})), "join"); r.ErrorCode != inProgress {
		t.Fatalf("join during the load: %d", r.ErrorCode)
	}
	if code, _ := listGroups(c); code != inProgress {
		t.Fatalf("list groups during the load: %d", code)
	}
	if c.Loaded() {
		t.Fatal("Loaded during a load")
	}
	// The partition already loaded does not wait for the other.
	if codes := commit(c, g0, "", -1, "t", map[int32]int64{0: 9}); codes[0] != 0 {
		t.Fatalf("commit to the loaded partition during another's load: %v", codes)
	}
	stableMember(t, c, g0)
	awaitWaiter(t)
	select {
	case err := <-second:
		t.Fatalf("second LoadPartition returned before the replay ended: %v", err)
	default:
	}

	close(gate.released)
	if err := wait(t, first, "first load"); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, second, "second load"); err != nil {
		t.Fatal(err)
	}
	if n := store.replayCount(1) - replaysBefore; n != 1 {
		t.Fatalf("partition 1 replayed %d times", n)
	}
	if got := fetchOffsets(c, g1)["t"]; got[0] != 6 {
		t.Fatalf("offsets after the load: %v", got)
	}
	if !c.Loaded() {
		t.Fatal("not Loaded after the load")
	}
}

// TestUnloadPartitionStopsItsGroups: unloading stops the partition's group
// loops, answers parked JoinGroup and SyncGroup requests NOT_COORDINATOR
// and leaves the other partitions' groups alone.
func TestUnloadPartitionStopsItsGroups(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	joining, syncing := groupIn(t, c, 0, "join"), groupIn(t, c, 0, "sync")
	other := groupIn(t, c, 1, "other")
	join := parkedJoin(t, c, joining)
	sync := parkedSync(t, c, syncing)
	member := stableMember(t, c, other)
	otherGroup := groupsOf(c, 1)
	stopping := groupsOf(c, 0)
	if len(stopping) != 2 || len(otherGroup) != 1 {
		t.Fatalf("%d groups in partition 0, %d in 1", len(stopping), len(otherGroup))
	}

	within(t, 10*time.Second, "UnloadPartition", func() { c.UnloadPartition(0) })
	notCoord := kerrCode("NOT_COORDINATOR")
	if r := wait(t, join, "parked join"); r.ErrorCode != notCoord {
		t.Fatalf("parked join: %d", r.ErrorCode)
	}
	if r := wait(t, sync, "parked sync"); r.ErrorCode != notCoord {
		t.Fatalf("parked sync: %d", r.ErrorCode)
	}
	for _, g := range stopping {
		select {
		case <-g.stopped:
		default:
			t.Fatalf("group %s still running after UnloadPartition returned", g.id)
		}
	}
	if n := len(groupsOf(c, 0)); n != 0 {
		t.Fatalf("%d groups of the unloaded partition in the table", n)
	}
	for _, id := range []string{joining, syncing} {
		if code := fetchCode(c, id); code != notCoord {
			t.Fatalf("fetch of %s after unload: %d", id, code)
		}
		if r := wait(t, joinAsync(c, joinReq(id, joinOpts{})), "join"); r.ErrorCode != notCoord {
			t.Fatalf("join of %s after unload: %d", id, r.ErrorCode)
		}
		if d := describe(c, id); d.ErrorCode != notCoord {
			t.Fatalf("describe of %s after unload: %+v", id, d)
		}
	}

	if got := groupsOf(c, 1); len(got) != 1 || got[0] != otherGroup[0] {
		t.Fatal("the other partition's group was replaced")
	}
	if code := heartbeat(c, other, member.MemberID, member.Generation); code != 0 {
		t.Fatalf("heartbeat in the other partition: %d", code)
	}
	if code, ids := listGroups(c); code != 0 || len(ids) != 1 || !ids[other] {
		t.Fatalf("list groups after unload: %d %v", code, ids)
	}
	// Unloading again, or a partition never loaded, is harmless.
	c.UnloadPartition(0)
	c.UnloadPartition(3)
}

// TestReloadRestoresState: what was committed before an unload is served
// again after the partition is loaded again, members included.
func TestReloadRestoresState(t *testing.T) {
	c := newTestCoordinator(t, newMemStore(4), testSettings())
	standalone, members := groupIn(t, c, 2, "standalone"), groupIn(t, c, 2, "members")
	if codes := commit(c, standalone, "", -1, "t", map[int32]int64{0: 5, 1: 7}); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("commit: %v", codes)
	}
	m := stableMember(t, c, members)
	if codes := commit(c, members, m.MemberID, m.Generation, "t", map[int32]int64{3: 11}); codes[3] != 0 {
		t.Fatalf("member commit: %v", codes)
	}

	c.UnloadPartition(2)
	if code := fetchCode(c, standalone); code != kerrCode("NOT_COORDINATOR") {
		t.Fatalf("fetch while unloaded: %d", code)
	}
	if err := c.LoadPartition(2); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffsets(c, standalone)["t"]; len(got) != 2 || got[0] != 5 || got[1] != 7 {
		t.Fatalf("standalone offsets after reload: %v", got)
	}
	if got := fetchOffsets(c, members)["t"]; got[3] != 11 {
		t.Fatalf("member offsets after reload: %v", got)
	}
	if d := describe(c, members); d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != m.MemberID {
		t.Fatalf("group after reload: %+v", d)
	}
	if code := heartbeat(c, members, m.MemberID, m.Generation); code != 0 {
		t.Fatalf("restored member's heartbeat: %d", code)
	}
}

// TestUnloadDuringLoadWins: an unload while the partition replays leaves
// it unloaded; the load and anyone waiting for it get ErrLoadCanceled.
func TestUnloadDuringLoadWins(t *testing.T) {
	store := newMemStore(4)
	c := newIdleCoordinator(t, store, testSettings(), nil)
	g0 := groupIn(t, c, 0, "zero")
	seed(t, store, map[string]int64{g0: 3})

	gate := holdReplays(store, 0)
	load := loadAsync(c, 0)
	wait(t, gate.entered, "the replay")
	waiter := loadAsync(c, 0)
	awaitWaiter(t)
	within(t, 5*time.Second, "UnloadPartition during a load", func() { c.UnloadPartition(0) })
	close(gate.released)
	if err := wait(t, load, "load"); !errors.Is(err, ErrLoadCanceled) {
		t.Fatalf("load: %v", err)
	}
	if err := wait(t, waiter, "waiting load"); !errors.Is(err, ErrLoadCanceled) {
		t.Fatalf("waiting load: %v", err)
	}
	if code := fetchCode(c, g0); code != kerrCode("NOT_COORDINATOR") {
		t.Fatalf("fetch after the canceled load: %d", code)
	}
	if n := len(groupsOf(c, 0)); n != 0 {
		t.Fatalf("%d groups of the canceled load in the table", n)
	}
	if !c.Loaded() {
		t.Fatal("still loading after the canceled load")
	}

	store.setOnReplay(nil)
	if err := c.LoadPartition(0); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffsets(c, g0)["t"]; got[0] != 3 {
		t.Fatalf("offsets after loading again: %v", got)
	}
}

// TestCloseDuringLoad: a load that ends after Close serves nothing.
func TestCloseDuringLoad(t *testing.T) {
	store := newMemStore(2)
	c := newIdleCoordinator(t, store, testSettings(), nil)
	seed(t, store, map[string]int64{groupIn(t, c, 0, "zero"): 1})
	gate := holdReplays(store, 0)
	load := loadAsync(c, 0)
	wait(t, gate.entered, "the replay")
	c.Close()
	close(gate.released)
	if err := wait(t, load, "load"); !errors.Is(err, ErrClosed) {
		t.Fatalf("load: %v", err)
	}
	if n := len(groupsOf(c, 0)); n != 0 {
		t.Fatalf("%d groups after Close", n)
	}
	if err := c.LoadPartition(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("load after Close: %v", err)
	}
}

// TestConcurrentLoadUnload races loads and unloads of one partition with
// requests, deletions, expiry and compaction. Whatever the interleaving,
// an unloaded partition has no groups in the table, a served group's
// committed offset is never missing, and the other partition's member
// keeps its session.
func TestConcurrentLoadUnload(t *testing.T) {
	store := newMemStore(2)
	c := newTestCoordinator(t, store, testSettings())
	keep, scratch := groupIn(t, c, 0, "keep"), groupIn(t, c, 0, "scratch")
	other := groupIn(t, c, 1, "other")
	if codes := commit(c, keep, "", -1, "t", map[int32]int64{0: 42}); codes[0] != 0 {
		t.Fatalf("commit: %v", codes)
	}
	member := stableMember(t, c, other)

	notCoord, inProgress := kerrCode("NOT_COORDINATOR"), kerrCode("COORDINATOR_LOAD_IN_PROGRESS")
	retriable := func(code int16) bool { return code == notCoord || code == inProgress }
	stop := make(chan struct{})
	failures := make(chan string, 100)
	fail := func(format string, args ...any) {
		select {
		case failures <- fmt.Sprintf(format, args...):
		default:
		}
	}
	traffic := func(f func()) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				f()
			}
		}()
		return done
	}
	workers := []chan struct{}{
		traffic(func() {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version = 9
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: keep, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
			g := c.OffsetFetch(req).Groups[0]
			switch {
			case retriable(g.ErrorCode):
			case g.ErrorCode != 0:
				fail("fetch: %d", g.ErrorCode)
			case g.Topics[0].Partitions[0].Offset != 42:
				fail("fetch served offset %d, want 42", g.Topics[0].Partitions[0].Offset)
			}
		}),
		traffic(func() {
			if codes := commit(c, scratch, "", -1, "t", map[int32]int64{0: 1}); !retriable(codes[0]) && codes[0] != 0 && codes[0] != kerrCode("COORDINATOR_NOT_AVAILABLE") {
				fail("scratch commit: %d", codes[0])
			}
			if code := deleteGroup(c, scratch); !retriable(code) && code != 0 && code != kerrCode("GROUP_ID_NOT_FOUND") {
				fail("scratch delete: %d", code)
			}
			if r := c.JoinGroup(t.Context(), joinReq(keep, joinOpts{}), Client{ID: "race"}); !retriable(r.ErrorCode) && r.ErrorCode != kerrCode("MEMBER_ID_REQUIRED") {
				fail("join: %d", r.ErrorCode)
			}
		}),
		traffic(func() {
			if code := heartbeat(c, other, member.MemberID, member.Generation); code != 0 {
				fail("heartbeat in the other partition: %d", code)
			}
			if code, _ := listGroups(c); code != 0 && code != inProgress {
				fail("list groups: %d", code)
			}
			c.ExpireOffsets()
			time.Sleep(time.Millisecond)
		}),
	}

	for i := 0; i < 200; i++ {
		load := loadAsync(c, 0)
		unloadDone := make(chan struct{})
		go func() { c.UnloadPartition(0); close(unloadDone) }()
		if err := wait(t, load, "load"); err != nil && !errors.Is(err, ErrLoadCanceled) {
			t.Fatalf("round %d: load: %v", i, err)
		}
		wait(t, unloadDone, "unload")
		c.mu.Lock()
		state := c.parts[0].state
		c.mu.Unlock()
		groups := groupsOf(c, 0)
		switch state {
		case loaded:
			if len(groups) == 0 {
				t.Fatalf("round %d: partition loaded without its groups", i)
			}
		case unloaded:
			if len(groups) != 0 {
				t.Fatalf("round %d: %d groups of an unloaded partition in the table", i, len(groups))
			}
		default:
			t.Fatalf("round %d: partition still loading", i)
		}
	}
	close(stop)
	for _, w := range workers {
		wait(t, w, "traffic to stop")
	}
	close(failures)
	for f := range failures {
		t.Error(f)
	}

	if err := c.LoadPartition(0); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffsets(c, keep)["t"]; got[0] != 42 {
		t.Fatalf("offsets after the race: %v", got)
	}
}

// TestPeriodicWorkSkipsUnloadedPartitions: expiry touches loaded
// partitions only; an unloaded partition's records stay as they
// are for whoever loads it next.
func TestPeriodicWorkSkipsUnloadedPartitions(t *testing.T) {
	store := newMemStore(2)
	s := testSettings()
	s.OffsetRetention = 50 * time.Millisecond
	c := newTestCoordinator(t, store, s)
	g0, g1 := groupIn(t, c, 0, "zero"), groupIn(t, c, 1, "one")
	for i := int64(0); i < 20; i++ {
		commit(c, g0, "", -1, "t", map[int32]int64{0: i})
		commit(c, g1, "", -1, "t", map[int32]int64{0: i})
	}
	c.UnloadPartition(0)
	records0 := store.records(0)

	time.Sleep(100 * time.Millisecond)
	c.ExpireOffsets()
	if got := fetchOffsets(c, g1); len(got) != 0 {
		t.Fatalf("loaded partition's offsets not expired: %v", got)
	}
	if n := store.records(0); n != records0 {
		t.Fatalf("unloaded partition written to: %d records, was %d", n, records0)
	}
	if err := c.LoadPartition(0); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffsets(c, g0)["t"]; got[0] != 19 {
		t.Fatalf("offsets of the unloaded partition after reload: %v", got)
	}
}

// TestLoadFollowsOwns: Load loads what Owns selects; LoadPartition loads
// any partition.
func TestLoadFollowsOwns(t *testing.T) {
	store := newMemStore(2)
	c := newIdleCoordinator(t, store, testSettings(), func(p int32) bool { return p == 0 })
	g0, g1 := groupIn(t, c, 0, "zero"), groupIn(t, c, 1, "one")
	seed(t, store, map[string]int64{g0: 1, g1: 2})
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffsets(c, g0)["t"]; got[0] != 1 {
		t.Fatalf("owned partition: %v", got)
	}
	if code := fetchCode(c, g1); code != kerrCode("NOT_COORDINATOR") {
		t.Fatalf("partition not owned: %d", code)
	}
	if err := c.LoadPartition(1); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffsets(c, g1)["t"]; got[0] != 2 {
		t.Fatalf("partition loaded explicitly: %v", got)
	}
}
