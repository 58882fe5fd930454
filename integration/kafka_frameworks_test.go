package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Apache Kafka's own frameworks, unchanged, against weir clusters:
// Kafka Connect's distributed worker (connect_test.go) and a Kafka Streams
// application with a persistent state store (streams_test.go). Their jars
// (connect-runtime, connect-file, connect-json, kafka-streams with
// rocksdbjni, and their dependencies from Maven Central) are fetched by
// .ci/kafka.sh fetch-frameworks once; the tests skip without java or mvn.
//
// Both run long-lived JVMs that a test starts, stops or kills, and
// restarts: unlike kafkaTool's one-shot runs, the test acts while they
// run and reads their output as it grows.

// jvmLog4jConfig logs INFO and above to the console, which a jvmProcess
// writes to its log file: what the framework did is there when a test
// fails.
const jvmLog4jConfig = `status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
`

// jvmKillTimeout bounds the wait for a JVM to exit after SIGKILL.
const jvmKillTimeout = 10 * time.Second

// jvmProcess is one run of a JVM. Its stdout and stderr are appended to
// logPath, which later runs of the same program may share: offset is
// where this run's output begins.
type jvmProcess struct {
	name    string
	logPath string
	offset  int64
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process exited
}

// writeLog4jConfig writes jvmLog4jConfig into dir and returns the JVM flag
// that selects it.
func writeLog4jConfig(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(path, []byte(jvmLog4jConfig), 0o644); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return "-Dlog4j2.configurationFile=" + path
}

// startJVM starts java with args, its output appended to logPath. The
// process is killed at cleanup if it still runs, and this run's output is
// logged if the test failed.
func startJVM(t testing.TB, name, java, logPath string, args ...string) *jvmProcess {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("opening %s: %v", logPath, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		t.Fatalf("stat %s: %v", logPath, err)
	}
	fmt.Fprintf(f, "=== test: starting %s at %s: %s %s\n", name, time.Now().Format(time.RFC3339Nano), java, strings.Join(args, " "))
	p := &jvmProcess{name: name, logPath: logPath, offset: st.Size(), done: make(chan struct{})}
	p.cmd = exec.Command(java, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Dir = filepath.Dir(logPath)
	setProcAttrs(p.cmd) // no JVM outlives a test binary that crashed
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		f.Close()
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
			t.Logf("--- %s output (%s), last %d KiB ---\n%s", name, logPath, logTailBytes>>10, p.tail(logTailBytes))
		}
	})
	return p
}

func (p *jvmProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *jvmProcess) waitExit(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-p.done:
		return true
	case <-tm.C:
		return false
	}
}

// stop sends SIGTERM, which runs the JVM's shutdown hooks (Connect and
// Streams close cleanly in theirs), and waits up to grace for the exit;
// then it sends SIGKILL. It reports whether the process exited within
// grace.
func (p *jvmProcess) stop(t testing.TB, grace time.Duration) bool {
	t.Helper()
	if p.exited() {
		t.Fatalf("%s exited before it was stopped (%s); output:\n%s", p.name, p.cmd.ProcessState, p.tail(logTailBytes))
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if p.waitExit(grace) {
		return true
	}
	t.Logf("%s did not exit within %v of SIGTERM; sending SIGKILL", p.name, grace)
	p.kill(t)
	return false
}

// kill sends SIGKILL and waits for the exit: a crash.
func (p *jvmProcess) kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	if !p.waitExit(jvmKillTimeout) {
		t.Fatalf("%s (pid %d) did not exit within %v of SIGKILL", p.name, p.cmd.Process.Pid, jvmKillTimeout)
	}
}

// output returns what this run printed so far.
func (p *jvmProcess) output() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	defer f.Close()
	if _, err := f.Seek(p.offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(output seek: %v)", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(output read: %v)", err)
	}
	return string(b)
}

// tail returns at most the last n bytes of this run's output.
func (p *jvmProcess) tail(n int) string {
	out := p.output()
	if len(out) > n {
		return fmt.Sprintf("... (%d bytes omitted)\n%s", len(out)-n, out[len(out)-n:])
	}
	return out
}

// outputLines returns this run's complete lines that start with prefix.
func (p *jvmProcess) outputLines(prefix string) []string {
	var lines []string
	out := p.output()
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[:i]
	} else {
		out = ""
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	return lines
}

// waitLine waits up to timeout for this run to print a line starting with
// prefix, failing the test if the process exits first.
func (p *jvmProcess) waitLine(t testing.TB, prefix string, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, fmt.Sprintf("%s printing a line starting %q", p.name, prefix), func() error {
		if len(p.outputLines(prefix)) > 0 {
			return nil
		}
		if p.exited() {
			t.Fatalf("%s exited (%s) before printing %q; output:\n%s", p.name, p.cmd.ProcessState, prefix, p.tail(logTailBytes))
		}
		return errors.New("not yet")
	})
}

// frameworkClasspath is the JVM classpath of Connect's and Streams' jars,
// with extra entries (compiled test programs) first.
func frameworkClasspath(jars string, extra ...string) string {
	return strings.Join(append(extra, filepath.Join(jars, "*")), string(os.PathListSeparator))
}

// checkFrameworkTopic checks a topic a framework created for itself: it
// exists with replication factor rf on every partition (and partitions
// partitions, unless that is 0), and its cleanup.policy is policy.
func checkFrameworkTopic(t testing.TB, adm *kadm.Client, topic string, partitions int, rf int, policy string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("ListTopics %s: %v", topic, err)
	}
	d, ok := details[topic]
	switch {
	case !ok || d.Err != nil:
		t.Fatalf("topic %s: not in metadata (%v)", topic, d.Err)
	case partitions > 0 && len(d.Partitions) != partitions:
		t.Errorf("topic %s: %d partitions, want %d", topic, len(d.Partitions), partitions)
	}
	for _, p := range d.Partitions.Sorted() {
		if len(p.Replicas) != rf {
			t.Errorf("topic %s partition %d: replicas %v, want %d of them", topic, p.Partition, p.Replicas, rf)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("DescribeConfigs %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatalf("DescribeConfigs %s: %v", topic, err)
	}
	got := "(missing)"
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			got = derefStr(c.Value)
		}
	}
	if got != policy {
		t.Errorf("topic %s: cleanup.policy %q, want %q", topic, got, policy)
	}
}
