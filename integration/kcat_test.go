package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatBinary returns kcat (or kafkacat) from PATH, or skips the test.
func kcatBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"kcat", "kafkacat"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("kcat not found on PATH (install it with .ci/test-deps.sh or apt-get install kcat); skipping the librdkafka interoperability tests")
	return ""
}

// runKcat runs kcat with args and stdin, bounded by timeout, and returns
// stdout; it fails the test on a non-zero exit.
func runKcat(t *testing.T, bin string, stdin []byte, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s timed out after %v\nstderr:\n%s", strings.Join(args, " "), timeout, stderr.String())
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// kcatConsume reads a topic from the beginning to the end with kcat -C -e
// and returns lines "partition|offset|key|value".
func kcatConsume(t *testing.T, bin string, b *Broker, topic string) []string {
	t.Helper()
	out := runKcat(t, bin, nil, 60*time.Second,
		"-b", b.KafkaAddr, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%p|%o|%k|%s\n")
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func TestKcatInterop(t *testing.T) {
	t.Parallel()
	bin := kcatBinary(t)
	// A new group's first member is not kept waiting for others.
	b := StartBroker(t, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
	if out := runKcat(t, bin, nil, 30*time.Second, "-V"); out != "" {
		t.Logf("%s", strings.SplitN(out, "\n", 2)[0])
	}

	t.Run("metadata", func(t *testing.T) {
		CreateTopic(t, b, "kcat-meta", 3, nil)
		out := runKcat(t, bin, nil, 30*time.Second, "-b", b.KafkaAddr, "-L", "-t", "kcat-meta")
		if !strings.Contains(out, `topic "kcat-meta" with 3 partitions`) {
			t.Errorf("kcat -L output does not show kcat-meta with 3 partitions:\n%s", out)
		}
	})

	for _, codec := range []string{"none", "lz4"} {
		t.Run("kcat produce "+codec+", both consume", func(t *testing.T) {
			topic := "kcat-in-" + codec
			CreateTopic(t, b, topic, 2, nil)
			const n = 200
			var in bytes.Buffer
			want := map[string]string{}
			for i := range n {
				k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("value-%03d-%s", i, strings.Repeat("z", 40))
				fmt.Fprintf(&in, "%s:%s\n", k, v)
				want[k] = v
			}
			runKcat(t, bin, in.Bytes(), 60*time.Second,
				"-b", b.KafkaAddr, "-P", "-t", topic, "-K", ":", "-z", codec, "-X", "acks=all")

			// franz-go reads what librdkafka wrote.
			got := consumeN(t, b, n, 30*time.Second, []string{topic})
			seen := map[string]bool{}
			for _, r := range got {
				k := string(r.Key)
				if want[k] != string(r.Value) {
					t.Errorf("franz-go read %s=%q, want %q", k, r.Value, want[k])
				}
				if seen[k] {
					t.Errorf("franz-go read key %s twice", k)
				}
				seen[k] = true
			}
			// Same key, same partition (librdkafka's partitioner).
			part := map[string]int32{}
			for _, r := range got {
				part[string(r.Key)] = r.Partition
			}

			// kcat reads it back too.
			lines := kcatConsume(t, bin, b, topic)
			if len(lines) != n {
				t.Fatalf("kcat -C read %d records, want %d:\n%s", len(lines), n, strings.Join(lines[:min(len(lines), 20)], "\n"))
			}
			for _, l := range lines {
				f := strings.SplitN(l, "|", 4)
				if len(f) != 4 {
					t.Fatalf("kcat line %q", l)
				}
				if want[f[2]] != f[3] {
					t.Errorf("kcat read %s=%q, want %q", f[2], f[3], want[f[2]])
				}
				if f[0] != fmt.Sprint(part[f[2]]) {
					t.Errorf("kcat read key %s from partition %s, franz-go from %d", f[2], f[0], part[f[2]])
				}
			}
		})
	}

	t.Run("franz-go zstd, kcat consumes", func(t *testing.T) {
		const topic, n = "kcat-zstd", 500
		CreateTopic(t, b, topic, 1, nil)
		prod := b.Client(t,
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.ZstdCompression()),
			kgo.ProducerLinger(20*time.Millisecond),
		)
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "z%03d", i), Value: compressibleValue(0, i)})
		}
		produceAll(t, prod, recs, 30*time.Second)
		lines := kcatConsume(t, bin, b, topic)
		if len(lines) != n {
			t.Fatalf("kcat -C read %d zstd records, want %d", len(lines), n)
		}
		for i, l := range lines {
			want := fmt.Sprintf("0|%d|z%03d|%s", i, i, compressibleValue(0, i))
			if l != want {
				t.Fatalf("kcat line %d: %q, want %q", i, l, want)
			}
		}
	})

	t.Run("kcat reads after DeleteRecords", func(t *testing.T) {
		// librdkafka must start at the log start offset when asked for
		// "beginning" after records were deleted.
		const topic = "kcat-trunc"
		CreateTopic(t, b, topic, 1, nil)
		prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := range 50 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "t%02d", i), Value: fmt.Appendf(nil, "v%02d", i)})
		}
		produceAll(t, prod, recs, 30*time.Second)
		runKcat(t, bin, nil, 30*time.Second, "-b", b.KafkaAddr, "-L") // warm up
		adm := b.Admin(t)
		resp, err := adm.DeleteRecords(ctxTimeout(t, requestTimeout), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 20}}})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 20 {
			t.Fatalf("DeleteRecords: %+v", r)
		}
		lines := kcatConsume(t, bin, b, topic)
		if len(lines) != 30 || lines[0] != "0|20|t20|v20" {
			t.Errorf("kcat after DeleteRecords(20): %d records, first lines %q; want 30 starting with \"0|20|t20|v20\"", len(lines), lines[:min(len(lines), 3)])
		}
	})

	t.Run("balanced consumer (kcat -G)", func(t *testing.T) { kcatGroup(t, bin, b) })
}

// kcatGroupArgs are the arguments of a kcat balanced consumer (-G) of topic
// in group: librdkafka's group protocol (FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetFetch, OffsetCommit with its
// default auto commit), printing "partition|offset|value" lines.
func kcatGroupArgs(b *Broker, group, topic string, exitAtEnd bool) []string {
	args := []string{"-b", b.KafkaAddr, "-G", group, "-q", "-f", "%p|%o|%s\n",
		"-X", "auto.offset.reset=earliest",
		"-X", fmt.Sprintf("session.timeout.ms=%d", kcatSessionTimeout.Milliseconds()),
		"-X", "heartbeat.interval.ms=500",
		"-X", "auto.commit.interval.ms=500",
		"-X", "topic.metadata.refresh.interval.ms=2000"}
	if exitAtEnd {
		args = append(args, "-e")
	} else {
		args = append(args, "-u") // unbuffered: the test reads stdout while kcat runs
	}
	return append(args, topic)
}

// kcatSessionTimeout is the kcat members' session timeout (the broker's
// default minimum is 6 s).
const kcatSessionTimeout = 8 * time.Second

func kcatGroupValue(p int32, off int64) string { return fmt.Sprintf("kcat-group-p%d-o%d", p, off) }

// kcatGroupBatch appends perPartition records to every partition and
// advances ends.
func kcatGroupBatch(t *testing.T, b *Broker, topic string, ends []int64, perPartition int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range int32(len(ends)) {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(kcatGroupValue(p, ends[p]+int64(i)))})
		}
	}
	produceAll(t, cl, recs, 30*time.Second)
	cl.Close()
	for p := range ends {
		ends[p] += int64(perPartition)
	}
}

// checkKcatGroupLines checks that lines are exactly the records at offsets
// [from[p], ends[p]) of every partition, each once.
func checkKcatGroupLines(t *testing.T, what string, lines []string, from, ends []int64) {
	t.Helper()
	seen := map[string]bool{}
	for _, l := range lines {
		var p int32
		var o int64
		var v string
		f := strings.SplitN(l, "|", 3)
		if len(f) != 3 {
			t.Fatalf("%s: kcat line %q", what, l)
		}
		if _, err := fmt.Sscanf(f[0]+" "+f[1], "%d %d", &p, &o); err != nil {
			t.Fatalf("%s: kcat line %q: %v", what, l, err)
		}
		v = f[2]
		if p < 0 || int(p) >= len(ends) || o < from[p] || o >= ends[p] {
			t.Fatalf("%s: kcat read partition %d offset %d, outside the expected %v..%v", what, p, o, from, ends)
		}
		if v != kcatGroupValue(p, o) {
			t.Fatalf("%s: partition %d offset %d: value %q, want %q", what, p, o, v, kcatGroupValue(p, o))
		}
		if seen[f[0]+"|"+f[1]] {
			t.Fatalf("%s: kcat read partition %d offset %d twice", what, p, o)
		}
		seen[f[0]+"|"+f[1]] = true
	}
	var want int64
	for p := range ends {
		want += ends[p] - from[p]
	}
	if int64(len(seen)) != want {
		t.Fatalf("%s: kcat read %d records, want %d (offsets %v..%v)", what, len(seen), want, from, ends)
	}
}

// kcatCommitted returns the group's committed offsets of topic's partitions
// (-1: none) read with kadm FetchOffsets.
func kcatCommitted(t *testing.T, b *Broker, group, topic string, n int) []int64 {
	t.Helper()
	resp, err := b.Admin(t).FetchOffsets(ctxTimeout(t, requestTimeout), group)
	if err != nil {
		t.Fatalf("FetchOffsets(%s): %v", group, err)
	}
	out := make([]int64, n)
	for p := range int32(n) {
		out[p] = -1
		if r, ok := resp.Lookup(topic, p); ok {
			if r.Err != nil {
				t.Fatalf("FetchOffsets(%s) %s/%d: %v", group, topic, p, r.Err)
			}
			out[p] = r.At
		}
	}
	return out
}

// awaitKcatCommitted waits (≤15 s) until the group's committed offsets are want.
func awaitKcatCommitted(t *testing.T, b *Broker, group, topic string, want []int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := kcatCommitted(t, b, group, topic, len(want))
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets of %s: %v, want %v", group, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockedBuffer is a bytes.Buffer safe for a process to write while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lockedBuffer) lines() []string {
	s := strings.TrimSuffix(l.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// kcatMember is a kcat -G process running until stopped.
type kcatMember struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan error
}

func startKcatMember(t *testing.T, bin string, args []string) *kcatMember {
	t.Helper()
	m := &kcatMember{cmd: exec.Command(bin, args...), done: make(chan error, 1)}
	m.cmd.Stdout = &m.stdout
	m.cmd.Stderr = &m.stderr
	m.cmd.WaitDelay = 5 * time.Second
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting kcat %s: %v", strings.Join(args, " "), err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(func() {
		if m.cmd.ProcessState == nil {
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	})
	return m
}

// stop sends SIGTERM (kcat closes the consumer: final commit, LeaveGroup)
// and waits up to 20 s for a clean exit.
func (m *kcatMember) stop(t *testing.T) {
	t.Helper()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.done:
		if err != nil {
			t.Fatalf("kcat -G exited with %v after SIGTERM\nstderr:\n%s", err, m.stderr.String())
		}
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		t.Fatalf("kcat -G did not exit within 20s of SIGTERM\nstderr:\n%s", m.stderr.String())
	}
}

// kcatGroup: kcat -G -e reads a 4-partition topic and commits; kadm sees
// the committed offsets; a second run of the group reads nothing old and
// a third only what was produced since; then two kcat -G members run
// together, split the partitions (the broker's view checked with kadm
// DescribeGroups) and read a new batch exactly once between them; one is
// killed, and when its session times out the other owns every partition
// and reads the next batch; after a broker restart the group resumes at its
// committed offsets. The broker restarts: keep this subtest last.
func kcatGroup(t *testing.T, bin string, b *Broker) {
	const topic, group, parts = "kcat-group", "kcat-group-1", 4
	CreateTopic(t, b, topic, parts, nil)
	ends := make([]int64, parts)
	kcatGroupBatch(t, b, topic, ends, 50)
	zero := make([]int64, parts)

	start := time.Now()
	out := runKcat(t, bin, nil, 60*time.Second, kcatGroupArgs(b, group, topic, true)...)
	checkKcatGroupLines(t, "first run", splitLines(out), zero, ends)
	t.Logf("kcat -G -e read %d records in %v", ends[0]*parts, time.Since(start).Round(time.Millisecond))
	awaitKcatCommitted(t, b, group, topic, ends)

	adm := b.Admin(t)
	dg, err := adm.DescribeGroups(ctxTimeout(t, requestTimeout), group)
	if err != nil {
		t.Fatalf("DescribeGroups(%s): %v", group, err)
	}
	if d := dg[group]; d.Err != nil || d.State != "Empty" || d.ProtocolType != "consumer" || len(d.Members) != 0 {
		t.Errorf("DescribeGroups(%s) after kcat exited: state %q protocol type %q, %d members, err %v; want Empty, consumer, 0", group, d.State, d.ProtocolType, len(d.Members), d.Err)
	}
	lg, err := adm.ListGroups(ctxTimeout(t, requestTimeout))
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if l, ok := lg[group]; !ok || l.ProtocolType != "consumer" {
		t.Errorf("ListGroups: %s listed %v (%+v), want it with protocol type consumer", group, ok, l)
	}

	// Same group again: starts at the committed offsets, reads nothing.
	out = runKcat(t, bin, nil, 60*time.Second, kcatGroupArgs(b, group, topic, true)...)
	if lines := splitLines(out); len(lines) != 0 {
		t.Fatalf("second run of group %s read %d records (first %q), want none: it should start at the committed offsets %v", group, len(lines), lines[0], ends)
	}
	// Only what is new.
	from := slices.Clone(ends)
	kcatGroupBatch(t, b, topic, ends, 10)
	out = runKcat(t, bin, nil, 60*time.Second, kcatGroupArgs(b, group, topic, true)...)
	checkKcatGroupLines(t, "third run", splitLines(out), from, ends)
	awaitKcatCommitted(t, b, group, topic, ends)

	// Two members at once.
	m1 := startKcatMember(t, bin, kcatGroupArgs(b, group, topic, false))
	m2 := startKcatMember(t, bin, kcatGroupArgs(b, group, topic, false))
	deadline := time.Now().Add(45 * time.Second)
	var last string
	for {
		d, err := adm.DescribeGroups(ctxTimeout(t, requestTimeout), group)
		if err != nil {
			t.Fatalf("DescribeGroups(%s): %v", group, err)
		}
		g := d[group]
		owned := map[int32]int{}
		sizes := []int{}
		for _, mem := range g.Members {
			ca, ok := mem.Assigned.AsConsumer()
			n := 0
			if ok {
				for _, tp := range ca.Topics {
					for _, p := range tp.Partitions {
						if tp.Topic == topic {
							owned[p]++
							n++
						}
					}
				}
			}
			sizes = append(sizes, n)
		}
		last = fmt.Sprintf("state %q protocol %q, member partition counts %v, owned %v", g.State, g.Protocol, sizes, owned)
		if g.State == "Stable" && slices.Equal(sizes, []int{2, 2}) && len(owned) == parts {
			t.Logf("two kcat members: %s", last)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two kcat -G members did not settle on 2 partitions each within 45s: %s\nkcat 1 stderr:\n%s\nkcat 2 stderr:\n%s", last, m1.stderr.String(), m2.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	from = slices.Clone(ends)
	kcatGroupBatch(t, b, topic, ends, 25)
	want := int((ends[0] - from[0]) * parts)
	deadline = time.Now().Add(45 * time.Second)
	for len(m1.stdout.lines())+len(m2.stdout.lines()) < want {
		if time.Now().After(deadline) {
			t.Fatalf("two kcat members read %d + %d of %d new records within 45s", len(m1.stdout.lines()), len(m2.stdout.lines()), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // duplicates?
	l1, l2 := m1.stdout.lines(), m2.stdout.lines()
	if len(l1) == 0 || len(l2) == 0 {
		t.Errorf("two kcat members: %d and %d records; want both to read some", len(l1), len(l2))
	}
	checkKcatGroupLines(t, "two members", append(l1, l2...), from, ends)
	awaitKcatCommitted(t, b, group, topic, ends) // auto commit, every 500 ms

	// The second member dies (SIGKILL: no LeaveGroup): once its session
	// times out the coordinator rebalances and the first gets everything.
	_ = m2.cmd.Process.Kill()
	<-m2.done
	killed := time.Now()
	deadline = killed.Add(kcatSessionTimeout + 20*time.Second)
	for {
		d, err := adm.DescribeGroups(ctxTimeout(t, requestTimeout), group)
		if err != nil {
			t.Fatalf("DescribeGroups(%s): %v", group, err)
		}
		g := d[group]
		n := -1
		if len(g.Members) == 1 {
			if ca, ok := g.Members[0].Assigned.AsConsumer(); ok {
				n = 0
				for _, tp := range ca.Topics {
					n += len(tp.Partitions)
				}
			}
		}
		if g.State == "Stable" && n == parts {
			since := time.Since(killed)
			t.Logf("killed member expired: the other has all %d partitions %v after the kill", parts, since.Round(time.Millisecond))
			if since < kcatSessionTimeout/2 {
				t.Errorf("the killed member was dropped after %v, well before its %v session timeout", since, kcatSessionTimeout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after killing one of two kcat members the group is %q with %d members (partitions of the first: %d); want the survivor to own all %d\nkcat 1 stderr:\n%s", time.Since(killed).Round(time.Millisecond), g.State, len(g.Members), n, parts, m1.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	before := len(m1.stdout.lines())
	from = slices.Clone(ends)
	kcatGroupBatch(t, b, topic, ends, 10)
	want = int((ends[0] - from[0]) * parts)
	deadline = time.Now().Add(30 * time.Second)
	for len(m1.stdout.lines())-before < want {
		if time.Now().After(deadline) {
			t.Fatalf("the surviving kcat member read %d of %d new records within 30s", len(m1.stdout.lines())-before, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // duplicates?
	m1.stop(t)
	checkKcatGroupLines(t, "survivor", m1.stdout.lines()[before:], from, ends)
	awaitKcatCommitted(t, b, group, topic, ends)

	// The offsets are durable: after a restart the group resumes there.
	b.Restart(t)
	if got := kcatCommitted(t, b, group, topic, parts); !slices.Equal(got, ends) {
		t.Fatalf("committed offsets of %s after a restart: %v, want %v", group, got, ends)
	}
	from = slices.Clone(ends)
	kcatGroupBatch(t, b, topic, ends, 5)
	out = runKcat(t, bin, nil, 60*time.Second, kcatGroupArgs(b, group, topic, true)...)
	checkKcatGroupLines(t, "after a restart", splitLines(out), from, ends)
	awaitKcatCommitted(t, b, group, topic, ends)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
