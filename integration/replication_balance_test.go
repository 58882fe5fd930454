package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// In-sync replicas and preferred leaders (docs/replication.md, "Leaders and
// epochs"): a leader drops a follower that has not caught up within
// replica_lag_time_max_ms from the ISR it reports to the controller, takes
// it back once it has, and hands leadership to a partition's preferred
// replica (its first) once that replica is live, in sync and caught up and
// the current leadership is at least 10 s old.

// isrPartition is one partition as a broker's Metadata describes it, the
// replicas in the order Metadata lists them.
type isrPartition struct {
	Leader   int32
	Epoch    int32
	Replicas []int32 // Metadata order: Replicas[0] is the preferred replica
	ISR      []int32
	Offline  []int32
	Err      int16
}

func (p isrPartition) String() string {
	s := fmt.Sprintf("leader %d epoch %d replicas %v isr %v", p.Leader, p.Epoch, p.Replicas, p.ISR)
	if len(p.Offline) > 0 {
		s += fmt.Sprintf(" offline %v", p.Offline)
	}
	if p.Err != 0 {
		s += fmt.Sprintf(" error %d (%s)", p.Err, errName(p.Err))
	}
	return s
}

// isrPartitions asks b for Metadata of topic and returns partition ->
// description (partition errors included, not refused), checking only that
// the topic is there without error with partitions 0..n-1 of rf replicas.
func isrPartitions(t testing.TB, b *Broker, topic string, n int32, rf int) (map[int32]isrPartition, error) {
	t.Helper()
	md, who, err := topicMetadata(t, b, topic)
	if err != nil {
		return nil, err
	}
	mt := md.Topics[0]
	out := map[int32]isrPartition{}
	for _, p := range mt.Partitions {
		if len(p.Replicas) != rf {
			return nil, fmt.Errorf("%s: partition %d replicas %v, want %d", who, p.Partition, p.Replicas, rf)
		}
		out[p.Partition] = isrPartition{
			Leader: p.Leader, Epoch: p.LeaderEpoch,
			Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR), Offline: slices.Clone(p.OfflineReplicas),
			Err: p.ErrorCode,
		}
	}
	for p := range n {
		if _, ok := out[p]; !ok || len(out) != int(n) {
			return nil, fmt.Errorf("%s: partitions %v, want 0..%d", who, sortedIDs(out), n-1)
		}
	}
	return out, nil
}

// isrViews asks every broker in on for the topic's partitions and returns
// node id -> its view.
func isrViews(t testing.TB, on []*Broker, topic string, n int32, rf int) (map[int32]map[int32]isrPartition, error) {
	t.Helper()
	views := map[int32]map[int32]isrPartition{}
	for _, b := range on {
		v, err := isrPartitions(t, b, topic, n, rf)
		if err != nil {
			return nil, err
		}
		views[int32(b.NodeID)] = v
	}
	return views, nil
}

// describeViews renders every broker's view of every partition, for
// failure messages and logs.
func describeViews(views map[int32]map[int32]isrPartition) string {
	var sb strings.Builder
	for _, node := range sortedIDs(views) {
		v := views[node]
		fmt.Fprintf(&sb, "\n  node %d:", node)
		for _, p := range sortedIDs(v) {
			fmt.Fprintf(&sb, " [p%d %v]", p, v[p])
		}
	}
	return sb.String()
}

// sameSet reports whether a and b hold the same node ids.
func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// agreedLeaders checks that every view names the same leader and epoch for
// every partition and returns the first view (by node id).
func agreedLeaders(views map[int32]map[int32]isrPartition) (map[int32]isrPartition, error) {
	nodes := sortedIDs(views)
	ref := views[nodes[0]]
	for _, node := range nodes[1:] {
		for p, d := range ref {
			o := views[node][p]
			if o.Leader != d.Leader || o.Epoch != d.Epoch {
				return nil, fmt.Errorf("partition %d: leader %d epoch %d from node %d, leader %d epoch %d from node %d", p, d.Leader, d.Epoch, nodes[0], o.Leader, o.Epoch, node)
			}
		}
	}
	return ref, nil
}

// TestReplicationISRAndPreferredLeader: a 3-broker cluster with
// replica_lag_time_max_ms=2000 and an RF 3 topic of 3 partitions, every
// partition's ISR all three replicas and leadership on the preferred
// replicas. The leader X of partition 0 is killed (SIGKILL): the survivors
// lead X's partitions, every partition's ISR drops X within the lag time
// plus reporting, and produce continues through the survivors. X is
// started again: it rejoins every ISR and, after the balancer's hold-off,
// leads again the partitions whose preferred replica it is. Every
// acknowledged record is then read back once, and the replicas' logs are
// identical.
func TestReplicationISRAndPreferredLeader(t *testing.T) {
	t.Parallel()
	const (
		topic      = "repl-balance"
		partitions = 3
		rf         = 3
		lagMax     = 2 * time.Second
		// shrinkTimeout: the lag time, plus the leaders' 1 s reporting
		// and the controller round trip, plus an election.
		shrinkTimeout = 20 * time.Second
		// returnTimeout: catch-up, ISR report, and the balancer's 10 s
		// hold-off from the new leaders' election.
		returnTimeout = 60 * time.Second
	)
	testStart := time.Now()
	bs := startReplCluster(t, 3, WithSet("cluster.replica_lag_time_max_ms", fmt.Sprint(lagMax.Milliseconds())))
	createReplicatedTopic(t, bs[0], topic, partitions, rf, nil)
	created := time.Now()
	waitReplicatedLeaders(t, bs, bs, topic, partitions, rf, leaderTimeout, nil)
	id := topicIDOf(t, bs[0], topic)

	// Every partition led, with all three replicas in its ISR, on every
	// broker's Metadata.
	var initial map[int32]isrPartition
	pollUntil(t, leaderTimeout, "every partition led with ISR = all 3 replicas in every broker's Metadata", func() error {
		views, err := isrViews(t, bs, topic, partitions, rf)
		if err != nil {
			return err
		}
		ref, err := agreedLeaders(views)
		if err != nil {
			return err
		}
		for node, v := range views {
			for p, d := range v {
				if d.Err != 0 || d.Leader < 0 {
					return fmt.Errorf("node %d: partition %d: %v", node, p, d)
				}
				if !sameSet(d.ISR, d.Replicas) {
					return fmt.Errorf("node %d: partition %d ISR %v, want all replicas %v", node, p, d.ISR, d.Replicas)
				}
			}
		}
		initial = ref
		return nil
	})
	preferred := map[int32]int32{}
	for p, d := range initial {
		preferred[p] = d.Replicas[0]
	}
	t.Logf("full ISR on every partition %v after the topic was created: %s", time.Since(created).Round(10*time.Millisecond), describeViews(map[int32]map[int32]isrPartition{-1: initial}))
	t.Logf("preferred replicas (Replicas[0] in Metadata): %v", preferred)

	// Elections place the first leaders anywhere; the balancer moves them
	// to the preferred replicas once their leadership is 10 s old. Wait for
	// that, so that the broker killed below leads exactly the partitions it
	// prefers and "led by X again" means what it says.
	var balanced map[int32]isrPartition
	pollUntil(t, 30*time.Second, "every partition led by its preferred replica with a full ISR (initial leader balancing)", func() error {
		views, err := isrViews(t, bs, topic, partitions, rf)
		if err != nil {
			return err
		}
		ref, err := agreedLeaders(views)
		if err != nil {
			return err
		}
		for p, d := range ref {
			if d.Leader != d.Replicas[0] {
				return fmt.Errorf("partition %d led by %d, preferred replica %d (%v)", p, d.Leader, d.Replicas[0], d)
			}
			if !sameSet(d.ISR, d.Replicas) {
				return fmt.Errorf("partition %d ISR %v, want all replicas %v", p, d.ISR, d.Replicas)
			}
		}
		balanced = ref
		return nil
	})
	t.Logf("leaders on their preferred replicas %v after the topic was created: %s", time.Since(created).Round(10*time.Millisecond), describeViews(map[int32]map[int32]isrPartition{-1: balanced}))

	// Some acknowledged records (acks=-1) in every partition.
	p := newSeqProducer(t, bs, topic, partitions)
	p.produceSync(50)
	t.Logf("before the kill: %s", p.summary())

	before, err := isrViews(t, bs, topic, partitions, rf)
	if err != nil {
		t.Fatal(err)
	}
	beforeRef, err := agreedLeaders(before)
	if err != nil {
		t.Fatal(err)
	}
	xID := beforeRef[0].Leader
	x := brokerByID(t, bs, xID)
	survivors := without(bs, xID)
	var xLeads, xPrefers []int32
	for _, part := range sortedIDs(beforeRef) {
		if beforeRef[part].Leader == xID {
			xLeads = append(xLeads, part)
		}
		if preferred[part] == xID {
			xPrefers = append(xPrefers, part)
		}
	}
	if len(xPrefers) == 0 {
		t.Fatalf("node %d leads partitions %v but is the preferred replica of none (preferred %v)", xID, xLeads, preferred)
	}
	controller, err := clusterView(t, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("X = node %d (leader of partition 0): leads partitions %v, preferred replica of %v; controller node %d", xID, xLeads, xPrefers, controller)

	// Kill X. Survivors' Metadata: X's partitions led by a survivor with a
	// newer epoch; every partition's ISR without X, then exactly the two
	// survivors.
	t.Logf("SIGKILL node %d", xID)
	x.Kill(t)
	killed := time.Now()
	absent := newAbsenceLog(t)
	var (
		failoverP = map[int32]time.Duration{} // X's partitions: new leader agreed by the survivors
		excludedP = map[int32]time.Duration{} // X out of the ISR on every survivor
		shrunkP   = map[int32]time.Duration{} // ISR exactly the survivors on every survivor
		offlineAt time.Duration
		lastView  map[int32]map[int32]isrPartition
	)
	pollPhase(t, killed, shrinkTimeout, fmt.Sprintf("after the kill of node %d: failover of %v and every ISR without it", xID, xLeads), func(now time.Duration) error {
		views, err := isrViews(t, survivors, topic, partitions, rf)
		if err != nil {
			return err
		}
		lastView = views
		ref, err := agreedLeaders(views)
		if err != nil {
			return err
		}
		absent.check("after the kill", now, views, survivors)
		var errs []string
		for _, part := range xLeads {
			d := ref[part]
			switch {
			case d.Leader == xID || d.Leader < 0 || d.Err != 0:
				errs = append(errs, fmt.Sprintf("partition %d not led by a survivor yet (%v)", part, d))
			case d.Epoch <= beforeRef[part].Epoch:
				errs = append(errs, fmt.Sprintf("partition %d: leader %d epoch %d, want an epoch above %d", part, d.Leader, d.Epoch, beforeRef[part].Epoch))
			case !slices.Contains(nodeIDs32(survivors), d.Leader):
				errs = append(errs, fmt.Sprintf("partition %d led by %d, not a survivor", part, d.Leader))
			default:
				firstAt(failoverP, part, now)
			}
		}
		allOffline := true
		for part := range int32(partitions) {
			excluded, shrunk := true, true
			for node, v := range views {
				d := v[part]
				if d.Leader == xID {
					errs = append(errs, fmt.Sprintf("node %d: partition %d still led by the killed node %d", node, part, xID))
				}
				if !slices.Contains(d.Offline, xID) {
					allOffline = false
				}
				if slices.Contains(d.ISR, xID) {
					excluded = false
					errs = append(errs, fmt.Sprintf("node %d: partition %d ISR %v holds the killed node %d (%v)", node, part, d.ISR, xID, d))
				}
				if !sameSet(d.ISR, nodeIDs32(survivors)) {
					shrunk = false
					errs = append(errs, fmt.Sprintf("node %d: partition %d ISR %v, want the survivors %v (%v)", node, part, d.ISR, nodeIDs(survivors), d))
				}
			}
			if excluded {
				firstAt(excludedP, part, now)
			}
			if shrunk {
				firstAt(shrunkP, part, now)
			}
		}
		if allOffline && offlineAt == 0 {
			offlineAt = now
		}
		// The three conditions must all have been seen, not necessarily
		// in the same poll.
		if len(failoverP) == len(xLeads) && len(excludedP) == partitions && len(shrunkP) == partitions {
			t.Logf("after the kill: %s", describeViews(views))
			return nil
		}
		return errors.New(strings.Join(errs, "; "))
	}, func() string { return describeViews(lastView) })
	// Each partition's ISR drops X within the lag time plus reporting,
	// counted from the kill or, for a partition X led, from its new
	// leader's election (a new leader counts its followers in sync from
	// the start of its leadership, as Kafka's does), plus the time the
	// controller needs to take a report (a controller election if X was
	// the controller).
	for part, at := range excludedP {
		base, from := time.Duration(0), "the kill"
		if f, ok := failoverP[part]; ok {
			base, from = f, "its new leader was named"
		}
		if at-base > lagMax+6*time.Second {
			t.Errorf("partition %d: node %d left the ISR %v after the kill, %v after %s; want within replica_lag_time_max_ms (%v) plus a few seconds of reporting",
				part, xID, at.Round(10*time.Millisecond), (at - base).Round(10*time.Millisecond), from, lagMax)
		}
	}

	// Produce through the survivors: acknowledged.
	prodStart := time.Now()
	p.produceSync(50)
	t.Logf("50 more records per partition acknowledged by the survivors in %v; %s", time.Since(prodStart).Round(10*time.Millisecond), p.summary())

	// Start X again.
	restartAt := time.Now()
	x.Start(t)
	waitClusterView(t, bs, rejoinTimeout)
	rejoined := time.Since(restartAt)
	t.Logf("node %d ready and in every broker's cluster view %v after its start (%v after the kill)", xID, rejoined.Round(10*time.Millisecond), time.Since(killed).Round(10*time.Millisecond))

	// Every broker's Metadata: X back in every ISR; X leading again every
	// partition it prefers.
	var (
		expandP = map[int32]time.Duration{} // X in the ISR on every broker
		returnP = map[int32]time.Duration{} // X's preferred partitions led by X on every broker
		final   map[int32]isrPartition
	)
	lastView = nil
	pollPhase(t, restartAt, returnTimeout, fmt.Sprintf("after the restart of node %d: back in every ISR and leading %v", xID, xPrefers), func(now time.Duration) error {
		views, err := isrViews(t, bs, topic, partitions, rf)
		if err != nil {
			return err
		}
		lastView = views
		ref, err := agreedLeaders(views)
		if err != nil {
			return err
		}
		final = ref
		absent.check("after the restart", now, views, survivors)
		var errs []string
		for part := range int32(partitions) {
			in := true
			for node, v := range views {
				if d := v[part]; !slices.Contains(d.ISR, xID) {
					in = false
					errs = append(errs, fmt.Sprintf("node %d: partition %d ISR %v without the restarted node %d (%v)", node, part, d.ISR, xID, d))
				}
			}
			if in {
				firstAt(expandP, part, now)
			}
		}
		for _, part := range xPrefers {
			if d := ref[part]; d.Leader != xID || d.Err != 0 {
				errs = append(errs, fmt.Sprintf("partition %d (preferred replica %d) led by %d (%v)", part, xID, d.Leader, d))
			} else {
				firstAt(returnP, part, now)
			}
		}
		// X must be in every ISR and lead its partitions in the same
		// poll at the end: leadership moved back and X still in sync.
		if len(errs) == 0 {
			t.Logf("after the restart: %s", describeViews(views))
			return nil
		}
		return errors.New(strings.Join(errs, "; "))
	}, func() string { return describeViews(lastView) })
	for part, d := range final {
		if d.Leader != preferred[part] {
			t.Logf("note: partition %d led by %d, preferred replica %d", part, d.Leader, preferred[part])
		}
	}

	offline := "not seen while polling"
	if offlineAt > 0 {
		offline = offlineAt.Round(10 * time.Millisecond).String()
	}
	t.Logf("timings after the kill of node %d (controller was node %d): failover %s, node out of every ISR %s, ISR = the two survivors %s, node listed offline %s",
		xID, controller, fmtTimes(failoverP), fmtTimes(excludedP), fmtTimes(shrunkP), offline)
	t.Logf("timings after its start (%v after the kill): ready and in the cluster view %v, ISR expand %s, leadership return %s (%v after the kill)",
		restartAt.Sub(killed).Round(10*time.Millisecond), rejoined.Round(10*time.Millisecond),
		fmtTimes(expandP), fmtTimes(returnP), (restartAt.Sub(killed) + maxTime(returnP)).Round(10*time.Millisecond))
	absent.summary()

	// A few more records, through X as a leader again, then every
	// acknowledged record read back once from the leaders, and the
	// replicas' logs compared.
	p.produceSync(20)
	t.Logf("%s", p.summary())
	verifyReplicatedTopic(t, bs, topic, id, partitions, p)
	t.Logf("test took %v", time.Since(testStart).Round(10*time.Millisecond))
}

// pollPhase calls check every 100 ms with the time since from until it
// returns nil or timeout passes since from, then fails the test with what,
// check's last error and describe().
func pollPhase(t testing.TB, from time.Time, timeout time.Duration, what string, check func(now time.Duration) error, describe func() string) {
	t.Helper()
	deadline := from.Add(timeout)
	for {
		err := check(time.Since(from))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v\nlast view:%s", what, timeout, err, describe())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// firstAt records now for key unless a time is recorded already.
func firstAt(m map[int32]time.Duration, key int32, now time.Duration) {
	if _, ok := m[key]; !ok {
		m[key] = now
	}
}

func maxTime(m map[int32]time.Duration) time.Duration {
	var out time.Duration
	for _, d := range m {
		out = max(out, d)
	}
	return out
}

// fmtTimes renders partition -> time as "max [p0 …, p1 …]".
func fmtTimes(m map[int32]time.Duration) string {
	parts := make([]string, 0, len(m))
	for _, part := range sortedIDs(m) {
		parts = append(parts, fmt.Sprintf("p%d %v", part, m[part].Round(10*time.Millisecond)))
	}
	return fmt.Sprintf("%v [%s]", maxTime(m).Round(10*time.Millisecond), strings.Join(parts, ", "))
}

func nodeIDs32(bs []*Broker) []int32 {
	out := make([]int32, len(bs))
	for i, b := range bs {
		out[i] = int32(b.NodeID)
	}
	return out
}

// absenceLog notes every poll in which a broker that stayed up all along
// (a survivor) was missing from a partition's ISR in some broker's
// Metadata. Nothing is produced while the test polls, so such a replica is
// caught up and, by the ISR rule, in sync: its absence is logged as an
// anomaly (the test asserts what it must, this is for the reader).
type absenceLog struct {
	t      testing.TB
	spells map[string]*absenceSpell
	order  []string
}

type absenceSpell struct {
	phase           string
	first, last     time.Duration
	polls           int
	firstSeenInView string
}

func newAbsenceLog(t testing.TB) *absenceLog {
	return &absenceLog{t: t, spells: map[string]*absenceSpell{}}
}

func (a *absenceLog) check(phase string, now time.Duration, views map[int32]map[int32]isrPartition, stayed []*Broker) {
	for _, node := range sortedIDs(views) {
		v := views[node]
		for _, part := range sortedIDs(v) {
			d := v[part]
			for _, s := range nodeIDs32(stayed) {
				if !slices.Contains(d.Replicas, s) || slices.Contains(d.ISR, s) {
					continue
				}
				key := fmt.Sprintf("%s: node %d missing from partition %d's ISR (Metadata of node %d)", phase, s, part, node)
				sp := a.spells[key]
				if sp == nil {
					sp = &absenceSpell{phase: phase, first: now, firstSeenInView: d.String()}
					a.spells[key] = sp
					a.order = append(a.order, key)
					a.t.Logf("anomaly: %s, %v into the phase: %v", key, now.Round(10*time.Millisecond), d)
				}
				sp.last = now
				sp.polls++
			}
		}
	}
}

func (a *absenceLog) summary() {
	if len(a.order) == 0 {
		a.t.Logf("no broker that stayed up was ever missing from an ISR while polling")
		return
	}
	for _, key := range a.order {
		sp := a.spells[key]
		a.t.Logf("anomaly summary: %s in %d poll(s) between %v and %v (first: %s)", key, sp.polls, sp.first.Round(10*time.Millisecond), sp.last.Round(10*time.Millisecond), sp.firstSeenInView)
	}
}
