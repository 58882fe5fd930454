package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Fault kinds the nemesis injects.
const (
	FaultKillLeader     = "kill -9 partition leader"
	FaultKillController = "kill -9 controller"
	FaultPause          = "SIGSTOP/SIGCONT broker"
	FaultWipeRestart    = "restart with wiped data"
	FaultIsolate        = "partition: isolate leader"
	FaultCutPair        = "partition: cut two brokers"
	FaultCrashUnsynced  = "kill -9 leader, unsynced writes lost"
)

// healTimeout bounds waiting, after a fault is undone, for every broker to
// be up and every partition to have a leader and all replicas in sync.
// The nemesis injects its next fault only then, so at most one broker is
// ever faulty: the fault model under which weir promises no acknowledged
// write is lost. With hundreds of partitions a broker restarted with a
// wiped data directory has each of its replicas re-added, caught up and
// promoted by its leader; on a loaded 2-core machine that once took over
// a minute (it usually takes 10-20 s), so the bound is two.
const healTimeout = 2 * time.Minute

// Nemesis injects faults into a cluster on a schedule drawn from a seed:
// the kinds, their order, the partitions and brokers chosen among
// candidates, and the durations all come from the seed; which broker leads
// what at the time is the cluster's. The first faults are every kind once,
// shuffled, so that even a short run covers them all; random kinds follow.
type Nemesis struct {
	c          *Cluster
	rng        *rand.Rand
	topic      string
	partitions int32
	logf       func(string, ...any)

	// Counts is how many faults of each kind were injected.
	Counts map[string]int
	// Events is the log of what was done, with times since the start.
	Events []string
	// HealFailures counts faults after which the cluster did not heal
	// within healTimeout (the nemesis stops injecting then).
	HealFailures int
	// Txn, when set before Run, adds the faults aimed at a transactional
	// workload (txn_nemesis.go).
	Txn *TxnTargets

	start time.Time
	cuts  map[[2]int]bool
}

// NewNemesis prepares a nemesis for topic's partitions on c.
func NewNemesis(c *Cluster, seed uint64, topic string, partitions int32, logf func(string, ...any)) *Nemesis {
	return &Nemesis{
		c:          c,
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		topic:      topic,
		partitions: partitions,
		logf:       logf,
		Counts:     map[string]int{},
		cuts:       map[[2]int]bool{},
	}
}

// Kinds are the fault kinds this cluster's network allows.
func (nm *Nemesis) Kinds() []string {
	kinds := []string{FaultKillLeader, FaultKillController, FaultPause, FaultWipeRestart, FaultCrashUnsynced, FaultReassign}
	if nm.c.Net.CanPartition() {
		kinds = append(kinds, FaultIsolate, FaultCutPair)
	}
	return append(kinds, nm.txnKinds()...)
}

func (nm *Nemesis) event(format string, args ...any) {
	line := fmt.Sprintf("%6.1fs ", time.Since(nm.start).Seconds()) + fmt.Sprintf(format, args...)
	nm.Events = append(nm.Events, line)
	nm.logf("nemesis: %s", line)
}

// Run injects faults for about d, and at least one of every kind (the last
// fault started is seen through), and leaves the cluster healed: every broker running and
// continued, every link restored.
func (nm *Nemesis) Run(ctx context.Context, d time.Duration) {
	nm.start = time.Now()
	defer nm.healAll()
	kinds := nm.Kinds()
	first := slices.Clone(kinds)
	nm.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	for step := 0; (step < len(first) || time.Since(nm.start) < d) && ctx.Err() == nil; step++ {
		kind := kinds[nm.rng.IntN(len(kinds))]
		if step < len(first) {
			kind = first[step]
		}
		hold := 2*time.Second + time.Duration(nm.rng.Int64N(int64(3*time.Second)))
		quiet := time.Second + time.Duration(nm.rng.Int64N(int64(2*time.Second)))
		marks := nm.logMarks()
		if err := nm.inject(ctx, kind, hold); err != nil {
			nm.event("%s: %v", kind, err)
		}
		err := nm.c.WaitHealthy(ctx, nm.healthTopics(), healTimeout)
		if err == nil && kind == FaultWipeRestart {
			err = nm.waitPromoted(ctx, marks)
		}
		if err != nil {
			nm.HealFailures++
			nm.event("the cluster did not heal after %q: %v; no further faults", kind, err)
			return
		}
		nm.event("healed")
		sleepCtx(ctx, quiet)
	}
}

// inject applies one fault, holds it, and undoes it.
func (nm *Nemesis) inject(ctx context.Context, kind string, hold time.Duration) error {
	switch kind {
	case FaultKillLeader, FaultKillController, FaultWipeRestart, FaultCrashUnsynced:
		target, what, err := nm.pickTarget(ctx, kind)
		if err != nil {
			return err
		}
		n := nm.c.Nodes[target]
		if kind == FaultCrashUnsynced {
			if err := n.LoseUnsyncedOnCrash(); err != nil {
				return err
			}
		}
		mark := n.logSize()
		if err := n.Kill(); err != nil {
			return err
		}
		if kind == FaultWipeRestart {
			if err := n.WipeData(); err != nil {
				return err
			}
		}
		nm.Counts[kind]++
		nm.event("%s: node %d (%s), down for %v", kind, target, what, hold.Round(100*time.Millisecond))
		sleepCtx(ctx, hold)
		if err := nm.restart(ctx, n); err != nil {
			return err
		}
		if kind == FaultCrashUnsynced {
			nm.event("node %d back: %s", n.ID, droppedWrites(n.logSince(mark)))
		}
		return nil
	case FaultPause:
		target := nm.rng.IntN(len(nm.c.Nodes))
		n := nm.c.Nodes[target]
		if err := n.Pause(); err != nil {
			return err
		}
		nm.Counts[kind]++
		nm.event("%s: node %d paused for %v", kind, target, hold.Round(100*time.Millisecond))
		sleepCtx(ctx, hold)
		return n.Resume()
	case FaultIsolate:
		target, what, err := nm.pickTarget(ctx, kind)
		if err != nil {
			return err
		}
		var peers []int
		for _, n := range nm.c.Nodes {
			if n.ID != target {
				peers = append(peers, n.ID)
			}
		}
		if err := nm.cut(target, peers...); err != nil {
			return err
		}
		nm.Counts[kind]++
		nm.event("%s: node %d (%s) cut from nodes %v for %v", kind, target, what, peers, hold.Round(100*time.Millisecond))
		sleepCtx(ctx, hold)
		return nm.healCuts()
	case FaultReassign:
		nm.Counts[kind]++
		return nm.reassignPartition(ctx, int32(nm.rng.IntN(int(nm.partitions))))
	case FaultCutPair:
		a := nm.rng.IntN(len(nm.c.Nodes))
		b := (a + 1 + nm.rng.IntN(len(nm.c.Nodes)-1)) % len(nm.c.Nodes)
		if err := nm.cut(a, b); err != nil {
			return err
		}
		nm.Counts[kind]++
		nm.event("%s: nodes %d and %d cut from each other for %v", kind, a, b, hold.Round(100*time.Millisecond))
		sleepCtx(ctx, hold)
		return nm.healCuts()
	}
	return nm.injectTxn(ctx, kind, hold)
}

// promoteTimeout bounds waitPromoted. Under steady produce traffic the
// promotion may not come at all (see waitPromoted), so it is short: the
// nemesis then stops injecting and the checks go on.
const promoteTimeout = 20 * time.Second

// logMarks are the brokers' log sizes now, for logSince.
func (nm *Nemesis) logMarks() []int64 {
	marks := make([]int64, len(nm.c.Nodes))
	for i, n := range nm.c.Nodes {
		marks[i] = n.logSize()
	}
	return marks
}

// waitPromoted waits, after a wiped restart, until every partition group
// that demoted the wiped replica to a non-voter promoted it back, as the
// leaders' logs say. Metadata cannot tell: its in-sync replicas include a
// non-voter that is still being caught up, and while one is, the group
// has only two voters, so one more fault would leave it without a
// majority for good (docs/reliability.md, findings).
func (nm *Nemesis) waitPromoted(ctx context.Context, marks []int64) error {
	ctx, cancel := context.WithTimeout(ctx, promoteTimeout)
	defer cancel()
	start := time.Now()
	for {
		demoted, promoted := map[string]bool{}, map[string]bool{}
		for i, n := range nm.c.Nodes {
			for line := range strings.Lines(n.logSince(marks[i])) {
				if !strings.Contains(line, `msg="partition group membership"`) {
					continue
				}
				key := membershipKey(line)
				switch {
				case strings.Contains(line, "demoted a replica with new data"):
					demoted[key] = true
				case strings.Contains(line, "promoted a caught-up replica"):
					promoted[key] = true
				}
			}
		}
		var waiting []string
		for key := range demoted {
			if !promoted[key] {
				waiting = append(waiting, key)
			}
		}
		if len(demoted) > 0 && len(waiting) == 0 {
			nm.event("the wiped replica is a voter again in all %d groups (%v after Metadata showed it in sync)", len(demoted), time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if ctx.Err() != nil {
			slices.Sort(waiting)
			return fmt.Errorf("the wiped replica is still a non-voter in %d of %d groups after %v (Metadata lists it in sync): %v", len(waiting), len(demoted), promoteTimeout, waiting)
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// membershipKey is the "topic=... partition=... replica=..." of a
// membership log line.
func membershipKey(line string) string {
	var parts []string
	for _, f := range strings.Fields(line) {
		if strings.HasPrefix(f, "topic=") || strings.HasPrefix(f, "partition=") || strings.HasPrefix(f, "replica=") {
			parts = append(parts, f)
		}
	}
	return strings.Join(parts, " ")
}

// restartTimeout bounds restarting a broker: one whose previous run is
// still registered as live (a wiped restart within the controller's 9 s
// broker session of the kill) waits for that registration to expire
// before it becomes ready.
const restartTimeout = 45 * time.Second

// restart starts n again and waits until it is ready.
func (nm *Nemesis) restart(ctx context.Context, n *Node) error {
	if err := n.Start(); err != nil {
		return err
	}
	return n.WaitReady(ctx, restartTimeout)
}

// droppedWrites finds the chaos build's report of the writes it dropped at
// start in a broker's log.
func droppedWrites(log string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, "dropped the partition logs' unsynced writes") {
			_, kv, _ := strings.Cut(line, `as a machine crash would"`)
			return "dropped unsynced log writes:" + strings.TrimRight(kv, "\n")
		}
	}
	return "no report of dropped unsynced writes (not a weirchaos build?)"
}

// pickTarget chooses the broker a fault hits: the controller for
// FaultKillController, otherwise the leader of a partition drawn from the
// seed (for a wiped restart: any broker, drawn).
func (nm *Nemesis) pickTarget(ctx context.Context, kind string) (int, string, error) {
	switch kind {
	case FaultKillController:
		id, err := nm.c.Controller(ctx)
		return id, "the controller", err
	case FaultWipeRestart:
		id := nm.rng.IntN(len(nm.c.Nodes))
		return id, "drawn", nil
	default:
		p := int32(nm.rng.IntN(int(nm.partitions)))
		id, err := nm.c.PartitionLeader(ctx, nm.topic, p)
		return id, fmt.Sprintf("leader of %s/%d", nm.topic, p), err
	}
}

func (nm *Nemesis) cut(a int, peers ...int) error {
	for _, b := range peers {
		if err := nm.c.Net.Cut(a, b); err != nil {
			return err
		}
		nm.cuts[[2]int{a, b}] = true
	}
	return nil
}

func (nm *Nemesis) healCuts() error {
	var errs []string
	for pair := range nm.cuts {
		if err := nm.c.Net.Heal(pair[0], pair[1]); err != nil {
			errs = append(errs, err.Error())
		}
		delete(nm.cuts, pair)
	}
	if len(errs) > 0 {
		return fmt.Errorf("healing links: %s", strings.Join(errs, "; "))
	}
	return nil
}

// healAll undoes whatever a fault interrupted may have left: links cut,
// brokers paused or stopped.
func (nm *Nemesis) healAll() {
	if err := nm.healCuts(); err != nil {
		nm.event("%v", err)
	}
	for _, n := range nm.c.Nodes {
		if n.Paused() {
			if err := n.Resume(); err != nil {
				nm.event("resuming node %d: %v", n.ID, err)
			}
		}
		if !n.Running() {
			if err := nm.restart(context.Background(), n); err != nil {
				nm.event("restarting node %d: %v", n.ID, err)
			}
		}
	}
}
