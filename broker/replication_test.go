package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
	"github.com/weir-broker/weir/raft"
)

func TestLeaderTrackingISR(t *testing.T) {
	start := time.Unix(1000, 0)
	lag := 10 * time.Second
	var lt leaderTracking
	lt.reset(start)
	replicas := []int32{1, 2, 3}
	if got := lt.isr(1, replicas, start.Add(time.Second), lag); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("new leader's ISR %v, want every replica until lag passes", got)
	}
	// 2 keeps up; 3 never reports.
	lt.record(2, 100, 100, start.Add(2*time.Second))
	if got := lt.isr(1, replicas, start.Add(11*time.Second), lag); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("ISR %v after 11s, want [1 2]", got)
	}
	// 2 falls behind the leader's moving end but reaches, each time, the
	// end the leader had at its previous report: still in sync.
	now := start.Add(2 * time.Second)
	for i := int64(1); i <= 20; i++ {
		now = now.Add(time.Second)
		lt.record(2, 100+10*(i-1), 100+10*i, now)
	}
	if got := lt.isr(1, replicas, now, lag); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("ISR %v with a follower one report behind, want [1 2]", got)
	}
	// 2 stops progressing: it leaves once the lag passes.
	stuck := now
	for i := 0; i < 12; i++ {
		now = now.Add(time.Second)
		lt.record(2, 290, 400, now)
	}
	if got := lt.isr(1, replicas, now, lag); fmt.Sprint(got) != "[1]" {
		t.Fatalf("ISR %v %v after the follower stalled, want [1]", got, now.Sub(stuck))
	}
	// It catches up and is back at once.
	lt.record(2, 400, 400, now)
	if got := lt.isr(1, replicas, now, lag); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("ISR %v after catching up, want [1 2]", got)
	}
	if !lt.caughtUp(2, 400) || lt.caughtUp(3, 0) {
		t.Fatal("caughtUp: want 2 caught up and 3 unknown")
	}
}

// A catching-up replica that follows a moving leader one report behind
// keeps up, though it is never level at the instant it reports; one that
// stalls stops keeping up once the window passes.
func TestLeaderTrackingKeepsUp(t *testing.T) {
	start := time.Unix(1000, 0)
	var lt leaderTracking
	lt.reset(start)
	if lt.keepsUp(2, start, promoteWithin) {
		t.Fatal("a replica never heard from keeps up")
	}
	now := start
	for i := int64(1); i <= 5; i++ {
		now = now.Add(time.Second)
		lt.record(2, 100*(i-1), 100*i, now)
	}
	if lt.caughtUp(2, 500) {
		t.Fatal("caughtUp: the replica was never level with the leader")
	}
	if !lt.keepsUp(2, now, promoteWithin) {
		t.Fatal("a replica one report behind the leader does not keep up")
	}
	// It stalls at 400 while the leader goes on.
	for i := 0; i < 4; i++ {
		now = now.Add(time.Second)
		lt.record(2, 400, 600+100*int64(i), now)
	}
	if lt.keepsUp(2, now, promoteWithin) {
		t.Fatal("a stalled replica keeps up")
	}
}

// A replica that leaves the group and joins again starts from no
// progress: its reports as the earlier member (level with the leader)
// do not make it current, so a reassignment back onto a paused broker
// waits for that broker to report.
func TestLeaderTrackingForget(t *testing.T) {
	now := time.Unix(1000, 0)
	var lt leaderTracking
	lt.reset(now)
	lt.record(2, 100, 100, now)
	if !lt.current(2, 100, now) {
		t.Fatal("a replica level with the leader is not current")
	}
	lt.forget(2)
	if lt.current(2, 100, now) || lt.caughtUp(2, 100) {
		t.Fatal("a forgotten replica is still current")
	}
	if got := lt.isr(1, []int32{1, 2}, now.Add(time.Hour), time.Minute); len(got) != 1 {
		t.Fatalf("isr after forget: %v", got)
	}
}

// readAll returns every byte of a partition's log.
func readAll(t *testing.T, p *Partition) []byte {
	t.Helper()
	data, err := p.log.Read(p.LogStartOffset(), 1<<30, log.Obligatory, p.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A restart that finds the log behind its Raft log (the page cache lost
// unsynced appends) truncates to the checkpoint and re-applies the
// entries after it: the same batches at the same offsets with the same
// epochs.
func TestReplicaReplaysRaftLogAfterCheckpoint(t *testing.T) {
	for name, first := range map[string]string{
		"v2": checkpointHeader + "\n0 0\n[]\n",
		// A checkpoint of an earlier release: the producer state is
		// rebuilt from the log.
		"v1": checkpointHeaderV1 + "\n0 0\n",
	} {
		t.Run(name, func(t *testing.T) { replayAfterCheckpoint(t, first) })
	}
}

func replayAfterCheckpoint(t *testing.T, firstCheckpoint string) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp := mustCreate(t, b, "replay", 1, nil)
	pid, epoch, err := b.InitProducerID()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		produceBatch(t, b, "replay", 0, idem(pid, epoch, int32(3*i), 3))
	}
	p := tp.Partition(0)
	want, hwm := readAll(t, p), p.HighWatermark()
	pdir := p.dir
	b.Close()

	// As if only the first checkpoint had been durable.
	if err := os.WriteFile(filepath.Join(pdir, checkpointFile), []byte(firstCheckpoint), 0o644); err != nil {
		t.Fatal(err)
	}
	b = openTestBroker(t, dir)
	p = b.Topic("replay").Partition(0)
	if p.HighWatermark() != hwm {
		t.Fatalf("hwm after replay %d, want %d", p.HighWatermark(), hwm)
	}
	if got := readAll(t, p); !bytes.Equal(got, want) {
		t.Fatalf("replayed log differs: %d bytes, want %d", len(got), len(want))
	}
	// Producer state came back with the log: a retry is recognised.
	if got := produceBatch(t, b, "replay", 0, idem(pid, epoch, 15, 3)); got != 15 {
		t.Fatalf("retry after replay: offset %d, want 15", got)
	}
}

// A broker that crashes before a new partition's log was ever
// checkpointed by a snapshot or a clean stop comes back with the records
// its log held and its whole Raft log to replay: the replay starts from
// the partition's empty beginning, never on top of those records (which
// would append every batch a second time, at offsets no other replica
// has).
func TestCrashBeforeFirstCheckpointReplaysOnce(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp := mustCreate(t, b, "crash", 1, nil)
	for range 3 {
		produceBatch(t, b, "crash", 0, logtest.Batch{Records: 2})
	}
	p := tp.Partition(0)
	want, hwm := readAll(t, p), p.HighWatermark()
	// The files as kill -9 leaves them: page cache included, no clean
	// stop's checkpoint.
	crashed := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	b.Close()

	b = openTestBroker(t, crashed)
	p = b.Topic("crash").Partition(0)
	if p.HighWatermark() != hwm {
		t.Fatalf("high watermark after the crash %d, want %d", p.HighWatermark(), hwm)
	}
	if got := readAll(t, p); !bytes.Equal(got, want) {
		t.Fatalf("log after the crash: %d bytes, want the same %d bytes", len(got), len(want))
	}
	if got := produceBatch(t, b, "crash", 0, logtest.Batch{Records: 1}); got != hwm {
		t.Fatalf("next batch at offset %d, want %d", got, hwm)
	}
}

// Leader epochs are Raft terms, stamped into batches and reported to the
// controller; a restart (new election) raises the epoch.
func TestLeaderEpochIsRaftTerm(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp := mustCreate(t, b, "epochs", 1, nil)
	p := tp.Partition(0)
	first := p.LeaderEpoch()
	if first < 1 {
		t.Fatalf("leader epoch %d, want a Raft term >= 1", first)
	}
	produceBatch(t, b, "epochs", 0, logtest.Batch{Records: 1})
	b.Close()
	b = openTestBroker(t, dir)
	p = b.Topic("epochs").Partition(0)
	if p.LeaderEpoch() <= first {
		t.Fatalf("leader epoch after restart %d, want above %d", p.LeaderEpoch(), first)
	}
	produceBatch(t, b, "epochs", 0, logtest.Batch{Records: 1})
	var epochs []int32
	if err := p.log.Batches(0, func(h log.BatchHeader) bool { epochs = append(epochs, h.PartitionLeaderEpoch); return true }); err != nil {
		t.Fatal(err)
	}
	if len(epochs) != 2 || epochs[0] != first || epochs[1] != p.LeaderEpoch() {
		t.Fatalf("batch epochs %v, want [%d %d]", epochs, first, p.LeaderEpoch())
	}
	if e, end := p.EndOffsetForEpoch(first); e != first || end != 1 {
		t.Fatalf("end of epoch %d: (%d, %d), want (%d, 1)", first, e, end, first)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.PartitionInfos(b.Topic("epochs"))[0].LeaderEpoch != p.LeaderEpoch() {
		if time.Now().After(deadline) {
			t.Fatalf("controller still has epoch %d, want %d", b.PartitionInfos(b.Topic("epochs"))[0].LeaderEpoch, p.LeaderEpoch())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A snapshot fsyncs the log and moves the checkpoint to what it covers.
func TestSnapshotWritesCheckpoint(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "snap", 1, nil)
	for i := 0; i < 4; i++ {
		produceBatch(t, b, "snap", 0, logtest.Batch{Records: 2})
	}
	p := tp.Partition(0)
	if err := p.group.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c, ok, err := readPartitionCheckpoint(p.dir)
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	if c.End != 8 || c.Index == 0 {
		t.Fatalf("checkpoint %+v, want end 8 at a non-zero index", c)
	}
}

// A checkpoint cut short is refused, not read as a smaller End: applying
// the entries after Index on top of a log cut to that End would give
// every later batch other offsets than on the other replicas.
func TestTornCheckpointIsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, data := range []string{
		checkpointHeaderV1 + "\n100 1000\n",
		checkpointHeader + "\n100 1000\n[]\n",
		checkpointHeaderV1 + "\n100 100",
		checkpointHeader + "\n100 1000\n[]",
		checkpointHeader + "\n100 1000\n[{\"id\":7,",
		checkpointHeader + "\n100 ",
	} {
		if err := os.WriteFile(filepath.Join(dir, checkpointFile), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		c, ok, err := readPartitionCheckpoint(dir)
		whole := strings.HasSuffix(data, "\n")
		switch {
		case whole && (err != nil || !ok || c.Index != 100 || c.End != 1000):
			t.Errorf("%q: got %+v %v %v, want {100 1000}", data, c, ok, err)
		case !whole && err == nil:
			t.Errorf("%q: read as %+v, want an error", data, c)
		}
	}
}

// A replica that installs a snapshot takes the leader's producer table
// with it: the batches it copies no longer show a producer whose records
// DeleteRecords removed, yet the leader still answers that producer's
// retry as a duplicate, and so must the new replica, or every later batch
// would land at other offsets on it.
func TestSnapshotInstallKeepsProducerState(t *testing.T) {
	leader := openReplayPartition(t, t.TempDir())
	apply := func(p *Partition, index uint64, data []byte) applyResult {
		t.Helper()
		return p.Apply(raft.Entry{Index: index, Term: 1, Data: data}).(applyResult)
	}
	first, retry := idem(7, 0, 0, 2).Encode(), idem(7, 0, 2, 2).Encode()
	for i, e := range [][]byte{encodeAppend(0, first), encodeAppend(0, retry), encodeAppend(0, logtest.Batch{Records: 3}.Encode()), encodeDeleteRecords(-1)} {
		if r := apply(leader, uint64(i+1), e); r.err != nil {
			t.Fatalf("entry %d: %v", i+1, r.err)
		}
	}
	snap, err := leader.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var meta bytes.Buffer
	if err := snap.Persist(&meta); err != nil {
		t.Fatal(err)
	}

	follower := openReplayPartition(t, t.TempDir())
	follower.pull = func(from, upTo int64) (recordChunk, error) {
		c := recordChunk{LogStart: leader.log.LogStartOffset(), End: leader.log.EndOffset()}
		if from >= c.LogStart {
			recs, err := leader.log.Read(from, 1<<20, log.Strict, upTo)
			if err != nil {
				return recordChunk{}, err
			}
			c.Records = recs
		}
		return c, nil
	}
	if err := follower.Restore(bytes.NewReader(meta.Bytes())); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Partition{leader, follower} {
		r := apply(p, 5, encodeAppend(0, retry))
		if r.err != nil || r.append.BaseOffset != 2 || p.log.EndOffset() != 7 {
			t.Fatalf("the retry: base offset %d, log end %d, err %v; want the original offset 2 and no append (end 7)",
				r.append.BaseOffset, p.log.EndOffset(), r.err)
		}
	}
}
