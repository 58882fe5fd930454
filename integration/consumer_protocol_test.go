package integration

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// KIP-848 consumer groups (group.protocol=consumer) end to end, with
// Apache Kafka's own verifiable clients from kafka-tools (the jars
// .ci/kafka.sh fetches): org.apache.kafka.tools.VerifiableProducer writes
// increasing integers and prints every acknowledgement as JSON, and
// org.apache.kafka.tools.VerifiableConsumer (the consumer Kafka's own
// system tests drive) consumes with the consumer protocol, commits
// synchronously after every poll and prints, as JSON, each poll's offset
// ranges per partition, each commit and its outcome, and the partitions
// its rebalance listener is given and takes away. The events of every
// run are replayed here partition by partition to prove:
//
//   - every record in the log (and so every acknowledged one) was
//     consumed at least once, and nothing past the log end was;
//   - a partition has one owner at a time: an owner's partitions_revoked
//     comes no later than the next owner's partitions_assigned;
//   - within one ownership a partition is read without a gap or a
//     rewind, and the next owner starts exactly at an offset between the
//     last offset the previous owners committed successfully and the next
//     one they had not read: a record is read twice only if it lies at or
//     past the last committed offset of the owner that read it first
//     (at-least-once), and never below it;
//   - the successful commits of a partition, over all owners in order,
//     strictly increase, and each names an offset its owner had read up
//     to; the group's committed offsets at the end equal the log end
//     offsets.
//
// VerifiableConsumer exits 0 even when its consumer fails (it logs the
// error and prints shutdown_complete): against a broker without
// ConsumerGroupHeartbeat it stops at once with UnsupportedVersionException.
// The tests therefore never trust an exit code alone: a consumer that
// exits before it is stopped fails the test, and so does one whose log has
// the tool's "Error during processing".

const (
	vcToolStartTimeout = 90 * time.Second // JVM start, join, first records
	vcStopGrace        = 30 * time.Second // SIGTERM to exit: close, leave group
	vcWakeupSlack      = 5 * time.Second  // SIGTERM to the consumer's last poll
	vcDrainTimeout     = 120 * time.Second
)

// vcLog4jConfig logs WARN and above to stderr, never stdout: the tools'
// stdout is their JSON event stream.
const vcLog4jConfig = `status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
`

// ---------------------------------------------------------------------------
// Scenarios.

const (
	vcTopic      = "vc848"
	vcGroup      = "vc848-group"
	vcPartitions = 6
	vcRecords    = 100_000
	vcThroughput = 2_500 // records/s, at most: 40 s of production at least
)

// runVerifiableScenario: a VerifiableProducer writes vcRecords records
// while VerifiableConsumers with the consumer protocol join and leave:
// c1 (uniform) starts first and, once it is assigned the partitions, the
// producer; c2 (the broker's default
// assignor) and c3 (uniform) join during production, c2 is stopped with
// SIGTERM mid-way and started again. Once the producer finished and the
// consumers committed the log end, ConsumerGroupDescribe must show the
// three members sharing the partitions the way their own rebalance
// listeners say, then all stop with SIGTERM and the ledger is checked.
func runVerifiableScenario(t *testing.T, addrs []string) {
	java, libs := vcTools(t)
	dir := t.TempDir()
	adm := vcAdmin(t, addrs)
	vcCreateTopic(t, adm, vcTopic, vcPartitions, 3)

	const (
		producer = "org.apache.kafka.tools.VerifiableProducer"
		consumer = "org.apache.kafka.tools.VerifiableConsumer"
	)
	start := time.Now()
	c1 := startVerifiable(t, java, libs, dir, "c1", consumer, vcConsumerArgs(addrs, vcTopic, vcGroup, "uniform")...)
	vcAssigned(t, c1, vcToolStartTimeout)
	t.Logf("c1 assigned %v %v after the start", vcOwned(c1.events(t)), time.Since(start).Round(time.Millisecond))
	prod := startVerifiable(t, java, libs, dir, "producer", producer, vcProducerArgs(addrs, vcTopic, vcRecords, vcThroughput)...)
	vcFirstRecords(t, c1, vcToolStartTimeout)
	t.Logf("c1 consuming %v after the start", time.Since(start).Round(time.Millisecond))

	sleepAlive := func(d time.Duration, ps ...*vcProc) {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			for _, p := range ps {
				p.alive(t)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	progress := func() string {
		if prod.exited() {
			return "the producer has finished"
		}
		return fmt.Sprintf("the producer has %d of %d records acknowledged", lineCount(prod.eventsPath)-1, vcRecords)
	}
	sleepAlive(2*time.Second, c1)
	c2 := startVerifiable(t, java, libs, dir, "c2", consumer, vcConsumerArgs(addrs, vcTopic, vcGroup, "")...)
	sleepAlive(2*time.Second, c1, c2)
	c3 := startVerifiable(t, java, libs, dir, "c3", consumer, vcConsumerArgs(addrs, vcTopic, vcGroup, "uniform")...)
	vcFirstRecords(t, c2, vcToolStartTimeout)
	vcFirstRecords(t, c3, vcToolStartTimeout)
	t.Logf("c2 and c3 consuming %v after the start; %s", time.Since(start).Round(time.Millisecond), progress())
	sleepAlive(3*time.Second, c1, c2, c3)
	t.Logf("stopping c2 with SIGTERM %v after the start; %s", time.Since(start).Round(time.Millisecond), progress())
	c2.stop(t)
	sleepAlive(3*time.Second, c1, c3)
	c2b := startVerifiable(t, java, libs, dir, "c2-again", consumer, vcConsumerArgs(addrs, vcTopic, vcGroup, "")...)
	vcAssigned(t, c2b, vcToolStartTimeout)
	t.Logf("c2-again assigned %v %v after the start; %s", vcOwned(c2b.events(t)), time.Since(start).Round(time.Millisecond), progress())

	if !prod.waitExit(3 * time.Minute) {
		t.Fatalf("the producer did not finish %d records within 3 minutes", vcRecords)
	}
	if code := prod.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the producer exited with %s", prod.cmd.ProcessState)
	}
	t.Logf("producer finished %v after the start", time.Since(start).Round(time.Millisecond))
	acked, nerr := vcProducerResult(t, prod, vcTopic)
	if nerr > 0 {
		t.Errorf("producer: %d send errors on a healthy cluster", nerr)
	}
	nacked := 0
	for _, o := range acked {
		nacked += len(o)
	}
	if nacked != vcRecords {
		t.Errorf("producer: %d records acknowledged, want %d", nacked, vcRecords)
	}
	leo := vcEndOffsets(t, adm, vcTopic)
	vcCheckAcked(t, acked, leo)

	running := []*vcProc{c1, c2b, c3}
	all := []*vcProc{c1, c2, c3, c2b}
	vcWaitDrained(t, vcTopic, leo, running, all, vcDrainTimeout)
	t.Logf("consumers committed the log end %v after the start", time.Since(start).Round(time.Millisecond))

	// The group as the coordinator describes it and as the members' own
	// listeners see it: three members, two partitions each (uniform and
	// range agree on one topic of six partitions), the same split.
	g, byMember := vcDescribe(t, adm, vcGroup, vcTopic, vcPartitions, 3, "uniform", 60*time.Second)
	t.Logf("ConsumerGroupDescribe: state %s, epoch %d, assignor %s, members %v", g.State, g.Epoch, g.AssignorName, byMember)
	var described, listened []string
	for _, ps := range byMember {
		if len(ps) != 2 {
			t.Errorf("a member owns %v, want two partitions (six over three members)", ps)
		}
		described = append(described, fmt.Sprint(ps))
	}
	pollUntil(t, 30*time.Second, "the members' listeners agreeing with ConsumerGroupDescribe", func() error {
		listened = listened[:0]
		for _, r := range running {
			r.alive(t)
			listened = append(listened, fmt.Sprint(vcOwned(r.events(t))))
		}
		slices.Sort(described)
		slices.Sort(listened)
		if !slices.Equal(described, listened) {
			return fmt.Errorf("described %v, the consumers' listeners %v", described, listened)
		}
		return nil
	})

	for _, r := range running {
		r.stop(t)
	}
	committed := vcCommitted(t, adm, vcGroup, vcTopic)
	v := vcReport(t, newLedger(vcTopic), leo, committed, all...)
	if v.owners < vcPartitions+2 {
		t.Errorf("only %d ownerships over %d partitions: the members did not rebalance", v.owners, vcPartitions)
	}
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}

// TestConsumerProtocolVerifiableClients: Kafka's VerifiableProducer and
// three VerifiableConsumers with --group-protocol consumer against a
// three-broker cluster (six partitions, three replicas), consumers joining
// and leaving while 100,000 records are produced (runVerifiableScenario).
func TestConsumerProtocolVerifiableClients(t *testing.T) {
	t.Parallel()
	vcTools(t)
	bs := startReplCluster(t, 3)
	runVerifiableScenario(t, kafkaAddrs(bs))
}

const (
	vkTopic      = "vk848"
	vkGroup      = "vk848-group"
	vkRecords    = 30_000
	vkThroughput = 1_000 // records/s, at most: 30 s of production at least
)

// runCoordinatorKillScenario: one VerifiableConsumer with the consumer
// protocol reads a topic a VerifiableProducer writes to (started once the
// consumer is assigned its partitions, so that production runs for at
// least 30 s from the consumer's first records); once it has
// consumed and committed for a while, the broker coordinating its group
// is killed with SIGKILL (kill is given its node id and returns the
// addresses of the brokers left). Another broker must take the group
// over: FindCoordinator names a live broker, ConsumerGroupDescribe from it
// shows the member owning every partition, the consumer commits again and
// reads everything to the log end, and the ledger holds.
func runCoordinatorKillScenario(t *testing.T, addrs []string, kill func(node int32) []string) {
	java, libs := vcTools(t)
	dir := t.TempDir()
	adm := vcAdmin(t, addrs)
	vcCreateTopic(t, adm, vkTopic, vcPartitions, 3)

	start := time.Now()
	c := startVerifiable(t, java, libs, dir, "consumer", "org.apache.kafka.tools.VerifiableConsumer", vcConsumerArgs(addrs, vkTopic, vkGroup, "")...)
	vcAssigned(t, c, vcToolStartTimeout)
	prod := startVerifiable(t, java, libs, dir, "producer", "org.apache.kafka.tools.VerifiableProducer", vcProducerArgs(addrs, vkTopic, vkRecords, vkThroughput)...)
	vcFirstRecords(t, c, vcToolStartTimeout)
	t.Logf("consumer reading %v after the start", time.Since(start).Round(time.Millisecond))
	coord := vcCoordinator(t, adm, vkGroup)
	_, byMember := vcDescribe(t, adm, vkGroup, vkTopic, vcPartitions, 1, "", 30*time.Second)
	t.Logf("node %d coordinates %s; member and partitions %v", coord, vkGroup, byMember)

	// Let it commit for a few seconds, and make sure the producer is still
	// running: the kill must land mid-way.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.alive(t)
		time.Sleep(200 * time.Millisecond)
	}
	if prod.exited() {
		t.Fatalf("the producer finished before the kill; the kill would not be mid-way")
	}
	if again := vcCoordinator(t, adm, vkGroup); again != coord {
		t.Fatalf("the coordinator moved from node %d to %d before the kill", coord, again)
	}
	var before int
	for _, ev := range c.events(t) {
		if ev.Name == "offsets_committed" && ev.Success {
			before++
		}
	}
	if before == 0 {
		t.Fatalf("no successful commit before the kill")
	}
	killedAt := time.Now()
	t.Logf("SIGKILL node %d (the coordinator) %v after the start, after %d successful commits", coord, killedAt.Sub(start).Round(time.Millisecond), before)
	left := kill(coord)
	adm2 := vcAdmin(t, left)

	var newCoord int32
	pollUntil(t, 60*time.Second, "a surviving broker coordinating "+vkGroup, func() error {
		c.alive(t)
		newCoord = vcCoordinator(t, adm2, vkGroup)
		if newCoord == coord {
			return fmt.Errorf("FindCoordinator still names the killed node %d", coord)
		}
		return nil
	})
	t.Logf("node %d coordinates %s %v after the kill", newCoord, vkGroup, time.Since(killedAt).Round(time.Millisecond))

	if !prod.waitExit(3 * time.Minute) {
		t.Fatalf("the producer did not finish %d records within 3 minutes", vkRecords)
	}
	if code := prod.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the producer exited with %s", prod.cmd.ProcessState)
	}
	acked, _ := vcProducerResult(t, prod, vkTopic)
	leo := vcEndOffsets(t, adm2, vkTopic)
	vcCheckAcked(t, acked, leo)
	vcWaitDrained(t, vkTopic, leo, []*vcProc{c}, []*vcProc{c}, vcDrainTimeout)
	t.Logf("consumer committed the log end %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	g, byMember := vcDescribe(t, adm2, vkGroup, vkTopic, vcPartitions, 1, "", 60*time.Second)
	t.Logf("ConsumerGroupDescribe from node %d: state %s, epoch %d, assignor %s, members %v", g.Coordinator.NodeID, g.State, g.Epoch, g.AssignorName, byMember)
	if g.Coordinator.NodeID == coord {
		t.Errorf("ConsumerGroupDescribe answered by node %d, the killed one", coord)
	}

	var after int
	killedMs := killedAt.UnixMilli()
	for _, ev := range c.events(t) {
		if ev.Name == "offsets_committed" && ev.Success && ev.Timestamp > killedMs {
			after++
		}
	}
	if after == 0 {
		t.Errorf("no successful commit after the kill")
	}
	c.stop(t)
	committed := vcCommitted(t, adm2, vkGroup, vkTopic)
	vcReport(t, newLedger(vkTopic), leo, committed, c)
	t.Logf("%d successful commits before the kill, %d after; done in %v", before, after, time.Since(start).Round(time.Millisecond))
}

// TestConsumerProtocolCoordinatorKilled: a Java consumer with
// group.protocol=consumer on a three-broker cluster, its group's
// coordinator killed with SIGKILL mid-way (runCoordinatorKillScenario).
// The killed broker stays down: the other two carry the group and the
// topic (three replicas) to the end.
func TestConsumerProtocolCoordinatorKilled(t *testing.T) {
	t.Parallel()
	vcTools(t)
	bs := startReplCluster(t, 3)
	runCoordinatorKillScenario(t, kafkaAddrs(bs), func(node int32) []string {
		brokerByID(t, bs, node).Kill(t)
		return kafkaAddrs(without(bs, node))
	})
}

// TestConsumerProtocolLedgerCheck feeds the ledger made-up event streams
// of two consumers handing partition 0 over, to show that its check finds
// what it is meant to find (no broker is started).
func TestConsumerProtocolLedgerCheck(t *testing.T) {
	const topic = "t"
	assigned := func(ts int64) vcEvent {
		return vcEvent{Timestamp: ts, Name: "partitions_assigned", Partitions: []vcPartition{{Topic: topic}}}
	}
	revoked := func(ts int64) vcEvent {
		return vcEvent{Timestamp: ts, Name: "partitions_revoked", Partitions: []vcPartition{{Topic: topic}}}
	}
	consumed := func(ts, from, to int64) vcEvent {
		return vcEvent{Timestamp: ts, Name: "records_consumed", Count: to - from + 1,
			Partitions: []vcPartition{{Topic: topic, Count: to - from + 1, MinOffset: from, MaxOffset: to}}}
	}
	committed := func(ts, off int64, ok bool) vcEvent {
		return vcEvent{Timestamp: ts, Name: "offsets_committed", Success: ok, Offsets: []vcPartition{{Topic: topic, Offset: off}}}
	}
	done := func(ts int64) vcEvent { return vcEvent{Timestamp: ts, Name: "shutdown_complete"} }

	// a reads 0-9 and commits 10, reads 10-14 and fails to commit 15,
	// then loses the partition; b must start at 10, 11, ... or 15.
	a := []vcEvent{assigned(1), consumed(2, 0, 9), committed(3, 10, true), consumed(4, 10, 14), committed(5, 15, false), revoked(6), done(7)}
	handover := func(bFrom int64, bAssigned int64) []vcEvent {
		return []vcEvent{assigned(bAssigned), consumed(11, bFrom, 19), committed(12, 20, true), done(13)}
	}
	for _, tc := range []struct {
		name  string
		b     []vcEvent
		end   int64
		final int64
		want  string // a substring of the one problem expected, "" for none
		dups  int64
	}{
		{"at the commit", handover(10, 10), 20, 20, "", 5},
		{"past the commit", handover(13, 10), 20, 20, "", 2},
		{"at the read end", handover(15, 10), 20, 20, "", 0},
		{"below the commit", handover(8, 10), 20, 20, "below 10", 0},
		{"a gap", handover(16, 10), 20, 20, "had not been read", 0},
		{"an overlap", handover(10, 5), 20, 20, "before a gave it up", 0},
		{"short of the log end", handover(10, 10), 21, 20, "never consumed", 0},
		{"commit regressed", []vcEvent{assigned(10), consumed(11, 10, 19), committed(12, 9, true), committed(13, 20, true), done(14)}, 20, 20, "strictly increase", 0},
		{"rewind", []vcEvent{assigned(10), consumed(11, 10, 15), consumed(12, 12, 19), committed(13, 20, true), done(14)}, 20, 20, "a gap or a rewind", 0},
		{"group offset", handover(10, 10), 20, 19, "committed offset is 19", 0},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			l := newLedger(topic)
			l.add("a", a, nil)
			l.add("b", tc.b, nil)
			v, errs := l.check(map[int32]int64{0: tc.end}, map[int32]int64{0: tc.final})
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Fatalf("problems %q, want none", errs)
			case tc.want != "" && (len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), tc.want)):
				t.Fatalf("problems %q, want one with %q", errs, tc.want)
			case tc.want == "" && v.duplicates != tc.dups:
				t.Fatalf("%d records read twice, want %d", v.duplicates, tc.dups)
			}
		})
	}

	// c is given partition 0 while it closes: the Java consumer warns, never
	// announces it, and revokes it as it leaves. Accepted once, for the
	// partitions the warning names only.
	warning := []byte("[2026-12-03 03:38:25,774] WARN [Consumer clientId=c, groupId=g] Leaving newly assigned partitions [t-0, other-1, t-x] marked as non-fetchable and not requiring initializing positions after onPartitionsAssigned callback failed.")
	if got := vcUnannounced(warning, topic); !maps.Equal(got, map[int32]bool{0: true}) {
		t.Fatalf("unannounced partitions %v, want [0]", got)
	}
	for _, tc := range []struct {
		name string
		c    []vcEvent
		want string
	}{
		{"closing revoke", []vcEvent{revoked(30), done(31)}, ""},
		{"revoked twice", []vcEvent{revoked(30), revoked(31), done(32)}, "c: revoked t/0 at 31, which it did not own"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			l := newLedger(topic)
			l.add("a", a, nil)
			l.add("b", handover(10, 10), nil)
			l.add("c", tc.c, vcUnannounced(warning, topic))
			_, errs := l.check(map[int32]int64{0: 20}, map[int32]int64{0: 20})
			if got := strings.Join(errs, "\n"); got != tc.want {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
		})
	}
	l := newLedger(topic)
	l.add("c", []vcEvent{revoked(30), done(31)}, nil)
	if len(l.errs) != 1 {
		t.Fatalf("a revoke of a partition neither owned nor named in a warning: problems %q, want one", l.errs)
	}
}
