package raft

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestIdleCost measures what idle groups cost: WEIR_RAFT_IDLE_GROUPS=100
// starts that many 3-voter groups over 3 in-process nodes, waits for every
// leader, lets them settle, then counts goroutines, open file descriptors
// and CPU time over WEIR_RAFT_IDLE_SECONDS (default 10). Skipped unless
// set: it is a measurement, not a check. WEIR_RAFT_IDLE_TIMERS=hashicorp
// uses hashicorp's default timers instead of weir's for comparison, and
// WEIR_RAFT_IDLE_TIMERS=partition the broker's partition timers.
// WEIR_RAFT_IDLE_PROFILE=file writes a CPU profile of the idle window
// only (-cpuprofile would include the start and the elections).
//
//	WEIR_RAFT_IDLE_GROUPS=100 go test -run TestIdleCost -v ./raft/
func TestIdleCost(t *testing.T) {
	groups, _ := strconv.Atoi(os.Getenv("WEIR_RAFT_IDLE_GROUPS"))
	if groups <= 0 {
		t.Skip("set WEIR_RAFT_IDLE_GROUPS to measure")
	}
	secs, _ := strconv.Atoi(os.Getenv("WEIR_RAFT_IDLE_SECONDS"))
	if secs <= 0 {
		secs = 10
	}
	cfg := func(group string, n *node, sm StateMachine) Config {
		c := Config{Group: group, NodeID: n.id, Dir: n.dir, StateMachine: sm}
		switch os.Getenv("WEIR_RAFT_IDLE_TIMERS") {
		case "hashicorp":
			c.HeartbeatTimeout, c.ElectionTimeout = time.Second, time.Second
			c.LeaderLeaseTimeout, c.CommitTimeout = 500*time.Millisecond, 50*time.Millisecond
		case "partition":
			c.HeartbeatTimeout, c.ElectionTimeout = 3*time.Second, 3*time.Second
			c.LeaderLeaseTimeout, c.CommitTimeout = 1500*time.Millisecond, 500*time.Millisecond
		}
		return c
	}
	nodes := newNodes(t, 3)
	time.Sleep(100 * time.Millisecond)
	g0, fd0 := runtime.NumGoroutine(), openFDs()

	all := make([][]*member, groups)
	for i := range all {
		all[i] = startGroup(t, nodes, fmt.Sprintf("idle-%04d", i), cfg)
	}
	for _, ms := range all {
		leader(t, ms, 60*time.Second)
		applyN(t, ms, 1) // one entry so replication has run
	}
	time.Sleep(5 * time.Second) // pipelines set up, elections over

	if path := os.Getenv("WEIR_RAFT_IDLE_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	st0 := nodes[0].mux.transportStats()
	u0, s0 := cpuTime()
	wall0 := time.Now()
	time.Sleep(time.Duration(secs) * time.Second)
	u1, s1 := cpuTime()
	st1 := nodes[0].mux.transportStats()
	wall := time.Since(wall0)
	g1, fd1 := runtime.NumGoroutine(), openFDs()

	cpu := (u1 - u0) + (s1 - s0)
	replicas := float64(groups * len(nodes))
	t.Logf("%d groups × %d nodes idle for %v (timers: %s)", groups, len(nodes), wall.Round(time.Millisecond), timersName())
	t.Logf("goroutines: %d → %d: %.1f per group (3 replicas), %.1f per replica", g0, g1,
		float64(g1-g0)/float64(groups), float64(g1-g0)/replicas)
	perSec := func(a, b uint64) float64 { return float64(b-a) / wall.Seconds() }
	t.Logf("node 0 transport per second: %.0f frames sent in %.0f writes, %.0f received, %.0f heartbeats in %.0f batches sent",
		perSec(st0.FramesSent, st1.FramesSent), perSec(st0.Writes, st1.Writes), perSec(st0.FramesReceived, st1.FramesReceived),
		perSec(st0.HeartbeatsSent, st1.HeartbeatsSent), perSec(st0.HeartbeatFramesSent, st1.HeartbeatFramesSent))
	t.Logf("open fds: %d → %d: %.1f per group", fd0, fd1, float64(fd1-fd0)/float64(groups))
	t.Logf("CPU: user %v sys %v = %.1f%% of one core in total; %.3f%% of a core per group (3 replicas), %.3f%% per replica",
		(u1 - u0).Round(time.Millisecond), (s1 - s0).Round(time.Millisecond),
		100*cpu.Seconds()/wall.Seconds(),
		100*cpu.Seconds()/wall.Seconds()/float64(groups), 100*cpu.Seconds()/wall.Seconds()/replicas)
}

func timersName() string {
	switch os.Getenv("WEIR_RAFT_IDLE_TIMERS") {
	case "hashicorp":
		return "hashicorp defaults 1s/1s/500ms/50ms"
	case "partition":
		return "partition timers 3s/3s/1.5s/500ms (broker/replication.go)"
	}
	return "weir defaults 2s/2s/1s/200ms"
}

func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
