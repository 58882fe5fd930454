package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Compatibility with the reference client, Java kafka-clients 4.x.
//
// integration/compat/java is a small Maven project whose shaded jar runs
// one scenario against a broker and asserts as it goes (see its Main.java):
//
//	admin            AdminClient: create/list/describe/delete topics,
//	                 describe/alter configs, create partitions, describe
//	                 cluster, delete records, list offsets.
//	produce-consume  idempotent KafkaProducer (defaults) with each
//	                 compression codec, read back by a group-less
//	                 KafkaConsumer (read_uncommitted and read_committed);
//	                 headers, null keys and values.
//	timestamps       CreateTime and LogAppendTime, offsetsForTimes.
//	group            classic consumer groups (see GroupScenario.java):
//	                 KafkaConsumer with group.protocol=classic and
//	                 RangeAssignor, CooperativeStickyAssignor and static
//	                 membership; members join and leave, partitions are
//	                 split and records read exactly once, commitSync and
//	                 committed(); AdminClient listGroups,
//	                 describeConsumerGroups, listConsumerGroupOffsets,
//	                 alterConsumerGroupOffsets, deleteConsumerGroupOffsets,
//	                 removeMembersFromConsumerGroup, deleteConsumerGroups,
//	                 including the errors Kafka gives while the group has
//	                 members. The broker runs with
//	                 cluster.group_initial_rebalance_delay_ms=0.
//	transactions     transactional producers on three brokers (see
//	                 TxnScenario.java and java_transactions_test.go):
//	                 commit, abort, fencing, consume-transform-produce
//	                 with sendOffsetsToTransaction, a transaction left
//	                 open for kafka-transactions to find.
//
// The test skips without java or mvn. The jar is built once per test
// binary with mvn (Maven Central must be reachable the first time; the
// default local repository caches it). WEIR_JAVA_COMPAT_LOG_LEVEL=debug
// passes the Java client's debug logs through, to see every request and
// response.

const (
	javaBuildTimeout    = 5 * time.Minute
	javaScenarioTimeout = 5 * time.Minute // the program's own watchdog fires at 4
	javaCompatJarName   = "weir-java-compat.jar"
)

var (
	javaJarOnce sync.Once
	javaJarPath string
	javaJarErr  error
)

// javaCompatJar builds integration/compat/java once per test binary and
// returns the shaded jar's path.
func javaCompatJar(t *testing.T, mvn string) string {
	t.Helper()
	javaJarOnce.Do(func() {
		dir := filepath.Join(repoRoot(t), "integration", "compat", "java")
		ctx, cancel := context.WithTimeout(context.Background(), javaBuildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-Dstyle.color=never", "package", "-DskipTests")
		cmd.Dir = dir
		cmd.WaitDelay = 10 * time.Second
		setProcAttrs(cmd)
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		start := time.Now()
		err := cmd.Run()
		switch {
		case ctx.Err() != nil:
			javaJarErr = fmt.Errorf("mvn package in %s timed out after %v\n%s", dir, javaBuildTimeout, out.String())
			return
		case err != nil:
			javaJarErr = fmt.Errorf("mvn package in %s: %v\n%s", dir, err, out.String())
			return
		}
		jar := filepath.Join(dir, "target", javaCompatJarName)
		if _, err := os.Stat(jar); err != nil {
			javaJarErr = fmt.Errorf("mvn package succeeded but %s is missing: %v\n%s", jar, err, out.String())
			return
		}
		t.Logf("built %s with mvn in %v", jar, time.Since(start).Round(time.Millisecond))
		javaJarPath = jar
	})
	if javaJarErr != nil {
		t.Fatalf("building the Java compatibility jar: %v", javaJarErr)
	}
	return javaJarPath
}

// runJavaScenario runs one scenario of the jar against b and fails the
// test, with the program's output, unless it exits 0. props are JVM
// system properties (name=value) the scenario reads. It returns what the
// program printed.
func runJavaScenario(t *testing.T, java, jar string, b *Broker, scenario string, props ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), javaScenarioTimeout)
	defer cancel()
	args := []string{"-Xmx512m"}
	if lvl := os.Getenv("WEIR_JAVA_COMPAT_LOG_LEVEL"); lvl != "" {
		args = append(args, "-Dorg.slf4j.simpleLogger.defaultLogLevel="+lvl)
	}
	for _, p := range props {
		args = append(args, "-D"+p)
	}
	args = append(args, "-jar", jar, b.KafkaAddr, scenario)
	cmd := exec.CommandContext(ctx, java, args...)
	cmd.Dir = filepath.Dir(filepath.Dir(jar))
	cmd.WaitDelay = 10 * time.Second
	setProcAttrs(cmd)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start).Round(time.Millisecond)
	switch {
	case ctx.Err() != nil:
		t.Fatalf("java %s timed out after %v; output:\n%s", strings.Join(args, " "), javaScenarioTimeout, out.String())
	case err != nil:
		t.Fatalf("java scenario %s failed (%v) after %v; output:\n%s", scenario, err, elapsed, out.String())
	}
	if testing.Verbose() {
		t.Logf("java scenario %s passed in %v; output:\n%s", scenario, elapsed, out.String())
		return out.String()
	}
	t.Logf("java scenario %s passed in %v: %s", scenario, elapsed, javaLastLine(out.String(), "PASS:"))
	return out.String()
}

// javaLastLine returns the last line of s starting with prefix, or "".
func javaLastLine(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i]
		}
	}
	return ""
}

// checkJavaBatches reads back, with franz-go, the first record of each
// topic the produce-consume scenario wrote and checks what the Java
// producer's defaults put on the wire survived: a producer ID (the
// producer was idempotent) and the batch's compression codec.
func checkJavaBatches(t *testing.T, b *Broker) {
	t.Helper()
	codecs := map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	topics := make([]string, 0, len(codecs))
	for c := range codecs {
		topics = append(topics, "java-pc-"+c)
	}
	cl := b.Client(t,
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	first := map[string]*kgo.Record{}
	deadline := time.Now().Add(30 * time.Second)
	var errs []error
	for len(first) < len(topics) && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && len(errs) < 10 {
				errs = append(errs, fmt.Errorf("%s/%d: %w", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if first[r.Topic] == nil {
				first[r.Topic] = r
			}
		})
	}
	for codec, want := range codecs {
		topic := "java-pc-" + codec
		r := first[topic]
		if r == nil {
			t.Errorf("franz-go read no record of %s within 30s; fetch errors: %v", topic, errs)
			continue
		}
		if r.ProducerID < 0 {
			t.Errorf("%s/%d offset %d: producer ID %d; the Java producer's default is idempotent, so the batch should carry one", topic, r.Partition, r.Offset, r.ProducerID)
		}
		if got := r.Attrs.CompressionType(); got != want {
			t.Errorf("%s/%d offset %d: batch compression codec %d, want %d (%s)", topic, r.Partition, r.Offset, got, want, codec)
		}
	}
}

// javaTools finds java and the compatibility jar (built with mvn), or
// skips the test.
func javaTools(t *testing.T) (java, jar string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("java not found on PATH; skipping the Java kafka-clients compatibility test (needs a JDK 17+ and Maven)")
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		t.Skip("mvn not found on PATH; skipping the Java kafka-clients compatibility test (needs a JDK 17+ and Maven)")
	}
	return java, javaCompatJar(t, mvn)
}

func TestJavaClientCompat(t *testing.T) {
	t.Parallel()
	java, jar := javaTools(t)

	for _, scenario := range []string{"admin", "produce-consume", "timestamps", "group"} {
		t.Run(scenario, func(t *testing.T) {
			var opts []BrokerOption
			if scenario == "group" {
				// The first member of a new group is not kept waiting
				// for others (Kafka's group.initial.rebalance.delay.ms).
				opts = append(opts, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
			}
			b := StartBroker(t, opts...)
			runJavaScenario(t, java, jar, b, scenario)
			if scenario == "produce-consume" {
				checkJavaBatches(t, b)
			}
		})
	}
}
