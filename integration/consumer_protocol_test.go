package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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

// vcEvent is one JSON line of VerifiableProducer or VerifiableConsumer.
type vcEvent struct {
	Timestamp int64  `json:"timestamp"`
	Name      string `json:"name"`

	// producer_send_success / producer_send_error
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
	Exception string  `json:"exception"`
	Message   string  `json:"message"`
	// tool_data
	Sent  int64 `json:"sent"`
	Acked int64 `json:"acked"`

	// records_consumed, partitions_assigned, partitions_revoked
	Count      int64         `json:"count"`
	Partitions []vcPartition `json:"partitions"`
	// offsets_committed
	Offsets []vcPartition `json:"offsets"`
	Success bool          `json:"success"`
	Error   string        `json:"error"`
}

type vcPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Count     int64  `json:"count"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	Offset    int64  `json:"offset"`
}

// vcProc is one run of a verifiable tool: stdout (events) and stderr (its
// log) go to separate files in dir.
type vcProc struct {
	name       string
	eventsPath string
	logPath    string
	cmd        *exec.Cmd
	done       chan struct{}
	stopped    bool // the test sent SIGTERM
}

// vcTools returns java and the Kafka jars, or skips the test.
func vcTools(t *testing.T) (java, libs string) {
	t.Helper()
	return kafkaLibs(t)
}

// startVerifiable starts class (a kafka-tools main class) with args. The
// process is killed at cleanup if it still runs; if the test failed, the
// tail of its log and of its events is logged.
func startVerifiable(t *testing.T, java, libs, dir, name, class string, args ...string) *vcProc {
	t.Helper()
	cfg := filepath.Join(dir, "log4j2-stderr.properties")
	if _, err := os.Stat(cfg); err != nil {
		if err := os.WriteFile(cfg, []byte(vcLog4jConfig), 0o644); err != nil {
			t.Fatalf("writing %s: %v", cfg, err)
		}
	}
	p := &vcProc{
		name:       name,
		eventsPath: filepath.Join(dir, name+".events"),
		logPath:    filepath.Join(dir, name+".log"),
		done:       make(chan struct{}),
	}
	stdout, err := os.Create(p.eventsPath)
	if err != nil {
		t.Fatalf("creating %s: %v", p.eventsPath, err)
	}
	stderr, err := os.Create(p.logPath)
	if err != nil {
		stdout.Close()
		t.Fatalf("creating %s: %v", p.logPath, err)
	}
	argv := append([]string{"-Xmx256m", "-Dlog4j2.configurationFile=" + cfg, "-cp", filepath.Join(libs, "*"), class}, args...)
	fmt.Fprintf(stderr, "=== test: starting %s at %s: %s %s\n", name, time.Now().Format(time.RFC3339Nano), java, strings.Join(argv, " "))
	p.cmd = exec.Command(java, argv...)
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	p.cmd.Dir = dir
	setProcAttrs(p.cmd)
	if err := p.cmd.Start(); err != nil {
		stdout.Close()
		stderr.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		stdout.Close()
		stderr.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			if !p.waitExit(jvmKillTimeout) {
				t.Errorf("%s (pid %d) did not exit within %v of SIGKILL", name, p.cmd.Process.Pid, jvmKillTimeout)
			}
		}
		if t.Failed() {
			t.Logf("--- %s log (%s), last 16 KiB ---\n%s", name, p.logPath, fileTail(p.logPath, 16<<10))
			t.Logf("--- %s events (%s), last 4 KiB ---\n%s", name, p.eventsPath, fileTail(p.eventsPath, 4<<10))
		}
	})
	return p
}

func (p *vcProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *vcProc) waitExit(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-p.done:
		return true
	case <-tm.C:
		return false
	}
}

// stop sends SIGTERM (the tools close their client in a shutdown hook:
// the consumer revokes its partitions and leaves the group) and fails the
// test unless the process exits with status 0 within vcStopGrace and
// printed shutdown_complete.
func (p *vcProc) stop(t *testing.T) {
	t.Helper()
	if p.exited() {
		t.Fatalf("%s exited (%s) before it was stopped; log:\n%s", p.name, p.cmd.ProcessState, fileTail(p.logPath, 16<<10))
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if !p.waitExit(vcStopGrace) {
		_ = p.cmd.Process.Kill()
		p.waitExit(jvmKillTimeout)
		t.Fatalf("%s did not exit within %v of SIGTERM (killed)", p.name, vcStopGrace)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 && code != 143 {
		// 143: the JVM's status for SIGTERM when a shutdown hook ran.
		t.Fatalf("%s exited with %s after SIGTERM", p.name, p.cmd.ProcessState)
	}
	p.checkClean(t)
}

// checkClean fails the test unless the run printed shutdown_complete and
// its log has no error of the tool's own.
func (p *vcProc) checkClean(t *testing.T) {
	t.Helper()
	evs := p.events(t)
	if len(evs) == 0 || evs[len(evs)-1].Name != "shutdown_complete" {
		last := "(no event)"
		if len(evs) > 0 {
			last = evs[len(evs)-1].Name
		}
		t.Errorf("%s: last event %s, want shutdown_complete", p.name, last)
	}
	log, _ := os.ReadFile(p.logPath)
	for _, bad := range []string{"Error during processing", "UnsupportedVersionException", "Exception in thread"} {
		if i := bytes.Index(log, []byte(bad)); i >= 0 {
			end := min(len(log), i+2000)
			t.Errorf("%s logged %q:\n%s", p.name, bad, log[max(0, i-200):end])
		}
	}
}

// alive fails the test if the process exited although the test never
// stopped it: VerifiableConsumer stops on any error of its consumer
// (UnsupportedVersionException from a broker without KIP-848 among them)
// and still exits 0.
func (p *vcProc) alive(t *testing.T) {
	t.Helper()
	if p.exited() && !p.stopped {
		t.Fatalf("%s exited on its own (%s); its log and events follow", p.name, p.cmd.ProcessState)
	}
}

// events parses the complete JSON lines printed so far.
func (p *vcProc) events(t testing.TB) []vcEvent {
	t.Helper()
	f, err := os.Open(p.eventsPath)
	if err != nil {
		t.Fatalf("opening %s: %v", p.eventsPath, err)
	}
	defer f.Close()
	var out []vcEvent
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // EOF: a last line without its newline is not complete yet
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var ev vcEvent
		if jerr := json.Unmarshal(line, &ev); jerr != nil {
			t.Fatalf("%s: bad event line %q: %v", p.name, line, jerr)
		}
		out = append(out, ev)
	}
	return out
}

// lineCount counts the lines in path (0 if it cannot be read).
func lineCount(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte{'\n'})
}

func fileTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if len(b) > n {
		return fmt.Sprintf("... (%d bytes omitted)\n%s", len(b)-n, b[len(b)-n:])
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// Cluster-side helpers, with nothing weir-specific: the scenarios below
// also run against Apache Kafka.

// vcAdmin is a kadm client over a kgo client seeded with addrs.
func vcAdmin(t testing.TB, addrs []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		kgo.RetryTimeout(20*time.Second),
		kgo.RequestTimeoutOverhead(3*time.Second),
		kgo.DialTimeout(2*time.Second),
	)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// vcCreateTopic creates topic with partitions partitions of rf replicas
// and waits until Metadata shows a leader and rf replicas for each.
func vcCreateTopic(t testing.TB, adm *kadm.Client, topic string, partitions int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopic %s (%d partitions, RF %d): %v", topic, partitions, rf, err)
	}
	pollUntil(t, 30*time.Second, fmt.Sprintf("topic %s with %d partitions, RF %d, led", topic, partitions, rf), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		d := td[topic]
		if d.Err != nil {
			return d.Err
		}
		if len(d.Partitions) != int(partitions) {
			return fmt.Errorf("%d partitions", len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != int(rf) {
				return fmt.Errorf("partition %d: leader %d replicas %v err %v", p.Partition, p.Leader, p.Replicas, p.Err)
			}
		}
		return nil
	})
}

// vcEndOffsets returns partition -> log end offset (high watermark).
func vcEndOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	var out map[int32]int64
	pollUntil(t, 30*time.Second, "end offsets of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lo, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return err
		}
		out = map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return nil
	})
	return out
}

// vcCommitted returns the group's committed offsets of topic.
func vcCommitted(t testing.TB, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	var out map[int32]int64
	pollUntil(t, 30*time.Second, "committed offsets of "+group, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fo, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = fo.Error()
		}
		if err != nil {
			return err
		}
		out = map[int32]int64{}
		fo.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				out[o.Partition] = o.At
			}
		})
		return nil
	})
	return out
}

// vcCoordinator returns the node id coordinating group.
func vcCoordinator(t testing.TB, adm *kadm.Client, group string) int32 {
	t.Helper()
	var id int32
	pollUntil(t, 30*time.Second, "FindCoordinator for "+group, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rs := adm.FindGroupCoordinators(ctx, group)
		r, ok := rs[group]
		if !ok {
			return fmt.Errorf("no answer for %s in %v", group, rs)
		}
		if r.Err != nil {
			return r.Err
		}
		id = r.NodeID
		return nil
	})
	return id
}

// vcDescribe waits until ConsumerGroupDescribe shows group Stable with
// members members, every member at the group's epoch with its target
// assignment reached, the members' partitions of topic disjoint and all
// partitions assigned, and the assignor named assignor (if not empty).
// It returns member id -> partitions.
func vcDescribe(t testing.TB, adm *kadm.Client, group, topic string, partitions int32, members int, assignor string, timeout time.Duration) (kadm.DescribedConsumerGroup, map[string][]int32) {
	t.Helper()
	var (
		g   kadm.DescribedConsumerGroup
		out map[string][]int32
	)
	pollUntil(t, timeout, fmt.Sprintf("ConsumerGroupDescribe of %s: Stable, %d members, all %d partitions of %s assigned", group, members, partitions, topic), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return err
		}
		var ok bool
		if g, ok = ds[group]; !ok {
			return fmt.Errorf("group missing from %v", ds.Names())
		}
		if g.Err != nil {
			return g.Err
		}
		if g.State != "Stable" || len(g.Members) != members {
			return fmt.Errorf("state %s with %d members (epoch %d, assignment epoch %d)", g.State, len(g.Members), g.Epoch, g.AssignmentEpoch)
		}
		if assignor != "" && g.AssignorName != assignor {
			return fmt.Errorf("assignor %q, want %q", g.AssignorName, assignor)
		}
		out = map[string][]int32{}
		seen := map[int32]string{}
		for _, m := range g.Members {
			if m.MemberEpoch != g.Epoch {
				return fmt.Errorf("member %s at epoch %d, group at %d", m.MemberID, m.MemberEpoch, g.Epoch)
			}
			got, want := setPartitions(m.Assignment, topic), setPartitions(m.TargetAssignment, topic)
			if !slices.Equal(got, want) {
				return fmt.Errorf("member %s owns %v, target %v", m.MemberID, got, want)
			}
			for _, p := range got {
				if o, dup := seen[p]; dup {
					return fmt.Errorf("partition %d assigned to %s and %s", p, o, m.MemberID)
				}
				seen[p] = m.MemberID
			}
			out[m.MemberID] = got
		}
		if len(seen) != int(partitions) {
			return fmt.Errorf("%d of %d partitions assigned: %v", len(seen), partitions, out)
		}
		return nil
	})
	return g, out
}

// setPartitions returns the partitions of topic in s, sorted.
func setPartitions(s kadm.TopicsSet, topic string) []int32 {
	out := make([]int32, 0, len(s[topic]))
	for p := range s[topic] {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// vcOwned returns the partitions each run owns at the end of its events.
func vcOwned(evs []vcEvent) []int32 {
	owned := map[int32]bool{}
	for _, ev := range evs {
		switch ev.Name {
		case "partitions_assigned":
			for _, tp := range ev.Partitions {
				owned[tp.Partition] = true
			}
		case "partitions_revoked":
			for _, tp := range ev.Partitions {
				delete(owned, tp.Partition)
			}
		case "shutdown_complete":
			clear(owned)
		}
	}
	out := make([]int32, 0, len(owned))
	for p := range owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// vcAssigned waits until run has been assigned a partition.
func vcAssigned(t *testing.T, p *vcProc, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, p.name+" assigned partitions", func() error {
		p.alive(t)
		if len(vcOwned(p.events(t))) == 0 {
			return errors.New("no partitions_assigned yet")
		}
		return nil
	})
}

// vcFirstRecords waits until run has consumed a record.
func vcFirstRecords(t *testing.T, p *vcProc, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, p.name+" consuming its first records", func() error {
		p.alive(t)
		for _, ev := range p.events(t) {
			if ev.Name == "records_consumed" && ev.Count > 0 {
				return nil
			}
		}
		return errors.New("no records_consumed yet")
	})
}

// vcProducerResult checks a finished VerifiableProducer run and returns
// the acknowledged offsets per partition and the number of send errors.
func vcProducerResult(t *testing.T, p *vcProc, topic string) (map[int32][]int64, int) {
	t.Helper()
	acked := map[int32][]int64{}
	var (
		nerr   int
		firstE string
		done   bool
		sent   int64
		nacked int64
	)
	for _, ev := range p.events(t) {
		switch ev.Name {
		case "producer_send_success":
			if ev.Topic != topic {
				t.Fatalf("producer acknowledged a record of %s", ev.Topic)
			}
			acked[ev.Partition] = append(acked[ev.Partition], ev.Offset)
		case "producer_send_error":
			nerr++
			if firstE == "" {
				firstE = ev.Exception + ": " + ev.Message
			}
		case "tool_data":
			sent, nacked = ev.Sent, ev.Acked
		case "shutdown_complete":
			done = true
		}
	}
	if !done {
		t.Fatalf("producer: no shutdown_complete event")
	}
	n := 0
	for _, offs := range acked {
		n += len(offs)
	}
	if int64(n) != nacked {
		t.Errorf("producer: %d producer_send_success events, tool_data says %d acked (of %d sent)", n, nacked, sent)
	}
	if nerr > 0 {
		t.Logf("producer: %d send errors; first: %s", nerr, firstE)
	}
	return acked, nerr
}

// vcCheckAcked fails the test unless every acknowledged offset lies below
// the log end (the check of the ledger then proves it was consumed) and
// no offset was acknowledged twice.
func vcCheckAcked(t *testing.T, acked map[int32][]int64, leo map[int32]int64) {
	t.Helper()
	bad := 0
	for p, offs := range acked {
		seen := map[int64]bool{}
		for _, o := range offs {
			switch {
			case o < 0 || o >= leo[p]:
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: offset %d acknowledged, but the log ends at %d: an acknowledged record is lost", p, o, leo[p])
				}
			case seen[o]:
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: offset %d acknowledged twice", p, o)
				}
			}
			seen[o] = true
		}
	}
}

func vcReport(t *testing.T, l *vcLedger, leo, committed map[int32]int64, runs ...*vcProc) vcVerdict {
	t.Helper()
	var joins []string
	for _, r := range runs {
		evs := r.events(t)
		l.add(r.name, evs)
		joins = append(joins, r.name+" "+vcJoinTime(evs))
	}
	t.Logf("from startup_complete to the first partitions assigned: %s", strings.Join(joins, ", "))
	v, errs := l.check(leo, committed)
	var total int64
	for _, e := range leo {
		total += e
	}
	t.Logf("%d records in the log (end offsets %v), %d consumed (%d read again after a change of owner), %d ownerships, %d commits (%d failed: %v); committed %v",
		total, leo, l.records, v.duplicates, v.owners, l.commitsOK+l.commitsFailed, l.commitsFailed, l.failures, committed)
	for i, e := range errs {
		if i == 20 {
			t.Errorf("... %d problems in all", len(errs))
			break
		}
		t.Error(e)
	}
	return v
}

// vcJoinTime is how long a run took from startup_complete to its first
// partitions_assigned naming a partition.
func vcJoinTime(evs []vcEvent) string {
	var started int64 = -1
	for _, ev := range evs {
		switch {
		case ev.Name == "startup_complete":
			started = ev.Timestamp
		case ev.Name == "partitions_assigned" && len(ev.Partitions) > 0 && started >= 0:
			return (time.Duration(ev.Timestamp-started) * time.Millisecond).String()
		}
	}
	return "never"
}

// vcWaitDrained waits until the successful commits of the runs reach the
// log end of every partition, failing if a run exits on its own.
func vcWaitDrained(t *testing.T, topic string, leo map[int32]int64, running []*vcProc, all []*vcProc, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, "the consumers committing the log end of every partition", func() error {
		for _, r := range running {
			r.alive(t)
		}
		best := map[int32]int64{}
		for _, r := range all {
			for _, ev := range r.events(t) {
				if ev.Name == "offsets_committed" && ev.Success {
					for _, c := range ev.Offsets {
						if c.Topic == topic {
							best[c.Partition] = max(best[c.Partition], c.Offset)
						}
					}
				}
			}
		}
		for p, end := range leo {
			if best[p] < end {
				return fmt.Errorf("committed %v, log ends %v", best, leo)
			}
		}
		return nil
	})
}

func vcConsumerArgs(addrs []string, topic, group, assignor string) []string {
	args := []string{
		"--bootstrap-server", strings.Join(addrs, ","),
		"--topic", topic,
		"--group-id", group,
		"--group-protocol", "consumer",
		"--reset-policy", "earliest",
	}
	if assignor != "" {
		args = append(args, "--group-remote-assignor", assignor)
	}
	return args
}

func vcProducerArgs(addrs []string, topic string, records, throughput int) []string {
	return []string{
		"--bootstrap-server", strings.Join(addrs, ","),
		"--topic", topic,
		"--max-messages", strconv.Itoa(records),
		"--throughput", strconv.Itoa(throughput),
		"--acks", "-1",
		// Keys spread the records over every partition (the default
		// sticky partitioner would fill one partition per batch).
		"--repeating-keys", "1000",
	}
}

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
			l.add("a", a)
			l.add("b", tc.b)
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
}
