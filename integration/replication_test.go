package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition replication: every partition is a Raft group over its
// replicas, the group leader is the Kafka partition leader, acks=-1 and
// acks=1 produces answer once the batch is committed on a majority, and
// every replica applies the committed batches to its own log, so replica
// logs are byte-identical. These tests kill (SIGKILL), pause (SIGSTOP) and
// wipe replicas and check that nothing acknowledged is lost or duplicated,
// on every replica's disk, and that consumer group offsets survive the loss
// of the coordinator.

// verifyReplicatedTopic is the common end of the produce tests, after the
// producer flushed: consume every partition from its current leader and
// check it against what was acknowledged; wait until every replica's log
// holds as much as the others; stop the brokers; compare the segment files
// byte for byte across replicas and check the records decoded from them.
func verifyReplicatedTopic(t *testing.T, bs []*Broker, topic string, id [16]byte, partitions int32, p *seqProducer) {
	t.Helper()
	consumed := consumeAll(t, bs, topic, partitions, 60*time.Second)
	var total seqStats
	for part := range partitions {
		st := checkSeqLog(t, "consumed from the leader", part, consumed[part], p.acked[part])
		total.acked += st.acked
		total.found += st.found
		total.lost += st.lost
		total.duplicated += st.duplicated
	}
	t.Logf("all partitions, consumed: acknowledged %d, found %d, lost %d, duplicated %d", total.acked, total.found, total.lost, total.duplicated)

	waitLogsConverge(t, bs, topic, id, partitions, 1, convergeTimeout)
	stopAll(t, bs)
	compareReplicaSegments(t, bs, topic, id, partitions)
	for part := range partitions {
		// The segments are compared byte for byte above; decode every
		// replica's anyway so a difference is described in records too.
		for _, b := range bs {
			s, err := readSegments(partitionDirOf(b, topic, id, part))
			if err != nil {
				t.Fatalf("node %d: %v", b.NodeID, err)
			}
			what := fmt.Sprintf("on node %d's disk", b.NodeID)
			recs := decodeSegments(t, what, s)
			checkSeqLog(t, what, part, recs, p.acked[part])
			if err := sameRecords(consumed[part], recs); err != nil {
				t.Errorf("partition %d: consumed records and node %d's log differ: %v", part, b.NodeID, err)
			}
		}
	}
}

// TestReplicationDurabilityUnderLeaderKills: an idempotent producer
// (acks=-1) writes sequence-numbered records to an RF 3 topic while the
// leader of a partition is killed (SIGKILL) five times, each time started
// again and back in the cluster before the next kill. Every acknowledged
// record is then present exactly once, in order: as consumed from the
// current leaders and in every replica's segment files, which are
// byte-identical across the three brokers.
func TestReplicationDurabilityUnderLeaderKills(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	const (
		topic      = "repl-kills"
		partitions = 2
		kills      = 5
	)
	createReplicatedTopic(t, bs[0], topic, partitions, 3, map[string]string{"segment.bytes": "65536"})
	waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)
	id := topicIDOf(t, bs[0], topic)

	// Batches stay below segment.bytes (a larger one is refused with
	// RECORD_LIST_TOO_LARGE, as Kafka does), whatever piles up in a
	// failover.
	p := newSeqProducer(t, bs, topic, partitions, kgo.ProducerBatchMaxBytes(32<<10))
	p.run(5, 5*time.Millisecond, 200_000)
	p.waitAcked(t, 500, 30*time.Second, "first records acknowledged")

	start := time.Now()
	for k := 1; k <= kills; k++ {
		part := int32(k % partitions)
		before := waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)
		victimID := before[part].Leader
		victim := brokerByID(t, bs, victimID)
		survivors := without(bs, victimID)
		acked := p.ackedCount()
		t.Logf("kill %d: SIGKILL node %d, leader of %s/%d (%v); %d acknowledged so far", k, victimID, topic, part, before[part], acked)
		victim.Kill(t)
		killed := time.Now()

		after := waitReplicatedLeaders(t, survivors, survivors, topic, partitions, 3, leaderTimeout, func(m map[int32]replPartition) error {
			if m[part].Leader == victimID {
				return fmt.Errorf("partition %d still led by the killed node %d", part, victimID)
			}
			if m[part].Epoch <= before[part].Epoch {
				return fmt.Errorf("partition %d: leader %d epoch %d, want an epoch above %d", part, m[part].Leader, m[part].Epoch, before[part].Epoch)
			}
			return nil
		})
		t.Logf("kill %d: new leader of %s/%d named by the survivors after %v: %v", k, topic, part, time.Since(killed).Round(10*time.Millisecond), after[part])
		p.waitAckedIn(t, part, p.ackedIn(part)+200, 30*time.Second, fmt.Sprintf("kill %d: produce to %s/%d continuing through the new leader", k, topic, part))

		victim.Start(t)
		waitClusterView(t, bs, rejoinTimeout)
		t.Logf("kill %d: node %d back in the cluster %v after the kill", k, victimID, time.Since(killed).Round(10*time.Millisecond))
	}
	p.waitAcked(t, p.ackedCount()+200, 30*time.Second, "produce after the last restart")
	if err := p.stopAndFlush(90 * time.Second); err != nil {
		t.Fatalf("flushing the producer: %v (%s)", err, p.summary())
	}
	t.Logf("%d kills in %v; %s", kills, time.Since(start).Round(10*time.Millisecond), p.summary())
	verifyReplicatedTopic(t, bs, topic, id, partitions, p)
}

// TestReplicationPausedLeader: the leader of a partition is paused
// (SIGSTOP). The other brokers' Metadata names another leader within a
// bounded time and produce continues through it. Resumed (SIGCONT), the
// old leader follows: after more produce, every acknowledged record is
// present once, in order, and the segment files are identical on all
// three replicas.
func TestReplicationPausedLeader(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	const (
		topic      = "repl-paused"
		partitions = 1
	)
	createReplicatedTopic(t, bs[0], topic, partitions, 3, nil)
	before := waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)
	id := topicIDOf(t, bs[0], topic)

	p := newSeqProducer(t, bs, topic, partitions)
	p.run(5, 5*time.Millisecond, 200_000)
	p.waitAcked(t, 500, 30*time.Second, "first records acknowledged")

	victimID := before[0].Leader
	victim := brokerByID(t, bs, victimID)
	others := without(bs, victimID)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			victim.signal(syscall.SIGCONT)
		}
	})
	acked := p.ackedCount()
	t.Logf("SIGSTOP node %d, leader of %s/0 (%v); %d acknowledged so far", victimID, topic, before[0], acked)
	victim.signal(syscall.SIGSTOP)
	paused := time.Now()

	after := waitReplicatedLeaders(t, others, others, topic, partitions, 3, leaderTimeout, func(m map[int32]replPartition) error {
		if m[0].Leader == victimID {
			return fmt.Errorf("still led by the paused node %d (%v)", victimID, m[0])
		}
		return nil
	})
	t.Logf("new leader named by nodes %v after %v: %v", nodeIDs(others), time.Since(paused).Round(10*time.Millisecond), after[0])
	if after[0].Epoch <= before[0].Epoch {
		t.Errorf("new leader %d has epoch %d, want an epoch above the paused leader's %d", after[0].Leader, after[0].Epoch, before[0].Epoch)
	}
	named := p.ackedCount()
	// The producer first gives up on requests in flight to the paused
	// node (kgo: request timeout plus overhead) and finds the new leader;
	// how long that takes is the client's, so the window is generous.
	p.waitAcked(t, named+500, 90*time.Second, "produce continuing through the new leader while the old one is paused")
	t.Logf("%d records acknowledged while node %d was paused (%d after the new leader was named)", p.ackedCount()-acked, victimID, p.ackedCount()-named)
	if !victim.Running() {
		t.Fatalf("paused node %d exited", victimID)
	}

	victim.signal(syscall.SIGCONT)
	resumed = true
	t.Logf("SIGCONT node %d after %v paused", victimID, time.Since(paused).Round(10*time.Millisecond))
	waitClusterView(t, bs, rejoinTimeout)
	final := waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)
	t.Logf("after the resume all three agree: %v", final[0])
	p.waitAcked(t, p.ackedCount()+500, 30*time.Second, "produce after the old leader resumed")
	if err := p.stopAndFlush(90 * time.Second); err != nil {
		t.Fatalf("flushing the producer: %v (%s)", err, p.summary())
	}
	t.Logf("%s", p.summary())
	verifyReplicatedTopic(t, bs, topic, id, partitions, p)
}

// TestReplicationWipedReplicaCatchesUp: with the partition groups' Raft
// logs trimmed early (snapshot after 64 entries, 16 kept behind it), a
// follower is stopped, its data directory removed, more is produced (one
// batch per record, several hundred batches), and once the leader has
// snapshotted and trimmed its Raft log the follower is started again with
// the same node id. The leader must catch it up with a snapshot plus a copy
// of the records, until its segment files equal the leader's byte for
// byte; it then follows live replication, and every acknowledged record is
// on every replica once, in order.
//
// The records carry a 20 KiB header so that the leader's Raft log (raft-wal,
// 8 MiB segments) rotates past its first segment: raft-wal drops trimmed
// entries only with whole sealed segments and still serves trimmed entries
// of its open segment, from which the leader would replicate instead of
// sending a snapshot.
func TestReplicationWipedReplicaCatchesUp(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3, WithSet("raft_snapshot_entries", "64"), WithSet("raft_trailing_entries", "16"))
	const (
		topic      = "repl-wiped"
		partitions = 1
		perPhase   = 300 // one batch each
		pad        = 20 << 10
	)
	createReplicatedTopic(t, bs[0], topic, partitions, 3, map[string]string{"segment.bytes": "1048576"})
	created := time.Now()
	before := waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)
	id := topicIDOf(t, bs[0], topic)
	p := newSeqProducer(t, bs, topic, partitions)
	p.padRecords(pad)

	start := time.Now()
	p.produceSync(perPhase)
	t.Logf("%d batches acknowledged in %v", perPhase, time.Since(start).Round(10*time.Millisecond))

	// A follower; if possible not the controller, so that only the
	// partition's replication is exercised, not a controller failover.
	leaderID := before[0].Leader
	leader := brokerByID(t, bs, leaderID)
	controller, err := clusterView(t, bs)
	if err != nil {
		t.Fatal(err)
	}
	candidates := without(bs, leaderID)
	victim := candidates[0]
	if int32(victim.NodeID) == controller && len(candidates) > 1 {
		victim = candidates[1]
	}
	t.Logf("leader node %d, controller node %d; stopping follower node %d and removing %s", leaderID, controller, victim.NodeID, victim.DataDir)
	victim.Stop(t)
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatalf("removing node %d's data directory: %v", victim.NodeID, err)
	}

	start = time.Now()
	p.produceSync(perPhase)
	t.Logf("%d more batches acknowledged with node %d down in %v", perPhase, victim.NodeID, time.Since(start).Round(10*time.Millisecond))

	// The returning replica must need a snapshot: wait until every live
	// replica has one past everything produced so far, so that (16
	// entries kept behind it) its Raft log no longer starts at the
	// beginning — whichever of them leads when the wiped replica returns
	// (leadership may move meanwhile) cannot replay the log from the
	// start. Replicas compare their logs with raft_snapshot_entries only
	// at hashicorp/raft's SnapshotInterval ticks (30 s, randomised to
	// 30-60 s from the group's start), hence the long bound.
	snaps := map[int][]uint64{}
	for _, b := range without(bs, int32(victim.NodeID)) {
		dir := partitionGroupDir(b, id, 0)
		pollUntil(t, 75*time.Second, fmt.Sprintf("node %d snapshotting %s/0 (%s)", b.NodeID, topic, dir), func() error {
			got, err := raftSnapshots(dir)
			if err != nil {
				return err
			}
			if len(got) == 0 || got[len(got)-1] < 2*perPhase {
				return fmt.Errorf("snapshots at Raft indexes %v; want one at index %d or later", got, 2*perPhase)
			}
			snaps[b.NodeID] = got
			return nil
		})
	}
	t.Logf("live replicas' snapshots at Raft indexes %v, %v after the topic was created", snaps, time.Since(created).Round(10*time.Millisecond))

	restarted := time.Now()
	startWiped(t, victim, 40*time.Second)
	waitClusterView(t, bs, rejoinTimeout)
	t.Logf("node %d back in the cluster %v after its start", victim.NodeID, time.Since(restarted).Round(10*time.Millisecond))
	leaderNow := waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)
	leader = brokerByID(t, bs, leaderNow[0].Leader)

	// Caught up: its log files as large as the leader's, and stable.
	waitLogsConverge(t, []*Broker{leader, victim}, topic, id, partitions, 1, convergeTimeout)
	t.Logf("node %d caught up %v after its start", victim.NodeID, time.Since(restarted).Round(10*time.Millisecond))

	// It got there through a snapshot: hashicorp/raft's installation log
	// line for the group, or the snapshot in its store (its own snapshot
	// timer does not fire within 30 s of its start).
	group := filepath.Base(partitionGroupDir(victim, id, 0))
	installed := 0
	for _, line := range strings.Split(victim.Log(), "\n") {
		if strings.Contains(line, "Installed remote snapshot") && strings.Contains(line, group) {
			installed++
		}
	}
	vsnaps, err := raftSnapshots(partitionGroupDir(victim, id, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d: %d \"Installed remote snapshot\" log line(s) for %s, snapshots at Raft indexes %v", victim.NodeID, installed, group, vsnaps)
	if installed == 0 && len(vsnaps) == 0 {
		t.Errorf("node %d caught up without installing a snapshot of %s, although the leader's Raft log was trimmed (snapshots %v)", victim.NodeID, group, snaps)
	}

	// The leader took it back as a non-voter first (its former
	// incarnation's vote must not count) and promoted it once caught up.
	// Leadership may have moved meanwhile, so every broker's log counts.
	pollUntil(t, 30*time.Second, "the wiped replica's demotion and promotion in the leaders' logs", func() error {
		var logs strings.Builder
		for _, b := range bs {
			logs.WriteString(b.Log())
		}
		for _, want := range []string{"demoted a replica with new data to catch up", "promoted a caught-up replica to voter"} {
			if !strings.Contains(logs.String(), want) {
				return fmt.Errorf("no broker has logged %q", want)
			}
		}
		return nil
	})

	// It follows live replication too.
	p.produceSync(50)
	t.Logf("%s", p.summary())
	verifyReplicatedTopic(t, bs, topic, id, partitions, p)
}

// TestReplicationGroupOffsetsSurviveCoordinatorLoss: offsets committed by
// a consumer group member survive the loss (SIGKILL) of the group
// coordinator's broker: FetchOffsets through the survivors returns them
// once another replica of the __consumer_offsets partition leads and has
// loaded it, and a new member of the group resumes exactly from them.
func TestReplicationGroupOffsetsSurviveCoordinatorLoss(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	const (
		topic        = "repl-groups"
		group        = "repl-groups-g"
		partitions   = 3
		perPartition = 100
	)
	createReplicatedTopic(t, bs[0], topic, partitions, 3, nil)
	waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, leaderTimeout, nil)
	pcl := newSeqProducer(t, bs, topic, partitions)
	pcl.produceSync(perPartition)

	m := startMember(t, bs[0], "first", group, topic, memberCfg{})
	m.waitRecords(partitions*perPartition, 30*time.Second)
	commits := map[int32]int64{0: 30, 1: 45, 2: 100}
	m.commitExact(topic, commits)
	m.stop()
	want := fmt.Sprint(map[string]map[int32]int64{topic: commits})
	if got := grpOffsets(t, kadmClient(t, bs), group); fmt.Sprint(got) != want {
		t.Fatalf("committed offsets %v, want %v", got, want)
	}

	// The __consumer_offsets partition holding the group is replicated
	// over every broker (RF min(3, live brokers)).
	fc := waitCoordinator(t, bs[1], group)
	coordID := fc.NodeID
	md, err := askMetadata(t, bs[1], "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range md.Topics {
		rfs := map[int]int{}
		for _, mp := range mt.Partitions {
			rfs[len(mp.Replicas)]++
		}
		t.Logf("__consumer_offsets: %d partitions, replica counts %v (count: partitions)", len(mt.Partitions), rfs)
		for _, mp := range mt.Partitions {
			if len(mp.Replicas) != 3 {
				t.Errorf("__consumer_offsets/%d has replicas %v, want 3 (RF min(3, live brokers))", mp.Partition, mp.Replicas)
			}
		}
	}

	victim := brokerByID(t, bs, coordID)
	survivors := without(bs, coordID)
	t.Logf("SIGKILL node %d, coordinator of %s", coordID, group)
	victim.Kill(t)
	killed := time.Now()

	// Another broker becomes the coordinator and answers the committed
	// offsets.
	pollUntil(t, 30*time.Second, "a surviving broker coordinating "+group, func() error {
		for _, b := range survivors {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey = group
			req.CoordinatorKeys = []string{group}
			resp, err := ask(t, b, req)
			if err != nil {
				return err
			}
			fr := resp.(*kmsg.FindCoordinatorResponse)
			if len(fr.Coordinators) == 1 { // v4+
				c := fr.Coordinators[0]
				fr.ErrorCode, fr.NodeID = c.ErrorCode, c.NodeID
			}
			if fr.ErrorCode != 0 {
				return fmt.Errorf("FindCoordinator from node %d: error %d (%s)", b.NodeID, fr.ErrorCode, errName(fr.ErrorCode))
			}
			if fr.NodeID == coordID {
				return fmt.Errorf("FindCoordinator from node %d still names the killed node %d", b.NodeID, coordID)
			}
		}
		return nil
	})
	adm := kadmClient(t, survivors)
	var got map[string]map[int32]int64
	pollUntil(t, 30*time.Second, "committed offsets of "+group+" from the survivors", func() error {
		ctx := ctxTimeout(t, 5*time.Second)
		fo, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		got = map[string]map[int32]int64{}
		var perr error
		fo.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil && perr == nil {
				perr = fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err)
			}
			if got[o.Topic] == nil {
				got[o.Topic] = map[int32]int64{}
			}
			got[o.Topic][o.Partition] = o.At
		})
		if perr != nil {
			return perr
		}
		if fmt.Sprint(got) != want {
			return fmt.Errorf("offsets %v, want %v", got, want)
		}
		return nil
	})
	t.Logf("the survivors answer the committed offsets %v, %v after the kill", got, time.Since(killed).Round(10*time.Millisecond))

	// A new member resumes from them.
	m2 := startMember(t, survivors[0], "second", group, topic, memberCfg{})
	wantN := (perPartition - 30) + (perPartition - 45)
	m2.waitRecords(wantN, 45*time.Second)
	time.Sleep(700 * time.Millisecond) // anything more would be a re-read
	recs := m2.records()
	if len(recs) != wantN {
		t.Errorf("resumed member consumed %d records, want %d", len(recs), wantN)
	}
	firstOff := map[int32]int64{}
	for _, r := range recs {
		if f, ok := firstOff[r.Partition]; !ok || r.Offset < f {
			firstOff[r.Partition] = r.Offset
		}
		if r.Offset < commits[r.Partition] {
			t.Errorf("resumed member read partition %d offset %d, below the committed %d", r.Partition, r.Offset, commits[r.Partition])
			break
		}
	}
	if firstOff[0] != 30 || firstOff[1] != 45 {
		t.Errorf("resumed member started at %v, want partition 0 at 30 and 1 at 45", firstOff)
	}
	if _, ok := firstOff[2]; ok {
		t.Errorf("resumed member read partition 2, whose committed offset is its end")
	}
	m2.stop()
}
