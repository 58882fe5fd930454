package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka Streams 4.x: the word count of testdata/wordcount/WordCount.java,
// with a persistent (RocksDB) store backed by a changelog topic, at
// processing.guarantee=at_least_once, against a three-broker weir cluster.

const (
	streamsAppID        = "weir-wordcount"
	streamsInputTopic   = "wordcount-lines"
	streamsOutputTopic  = "wordcount-counts"
	streamsRepartition  = streamsAppID + "-words-repartition" // Grouped.with("words", ...)
	streamsChangelog    = streamsAppID + "-counts-changelog"  // the store "counts"
	streamsCompileTime  = 2 * time.Minute
	streamsReadyTimeout = 90 * time.Second // JVM start, internal topics, group, restore
	streamsCountTimeout = 60 * time.Second
)

// compileWordCount compiles WordCount.java against the Streams jars into a
// temporary directory and returns it.
func compileWordCount(t *testing.T, java, jars string) string {
	t.Helper()
	javac, err := exec.LookPath("javac")
	if err != nil {
		// A JDK's javac sits beside its java, even when only java is
		// on PATH.
		real, rerr := filepath.EvalSymlinks(java)
		javac = filepath.Join(filepath.Dir(real), "javac")
		if _, serr := os.Stat(javac); rerr != nil || serr != nil {
			t.Fatalf("javac not found on PATH or beside %s: the Kafka Streams test compiles its application, which needs a JDK, not only a JRE", java)
		}
	}
	src := filepath.Join(repoRoot(t), "integration", "testdata", "wordcount", "WordCount.java")
	classes := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), streamsCompileTime)
	defer cancel()
	cmd := exec.CommandContext(ctx, javac, "-Xlint:all", "-Werror", "-cp", frameworkClasspath(jars), "-d", classes, src)
	setProcAttrs(cmd)
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("javac %s: %v\n%s", src, err, out)
	}
	t.Logf("compiled %s in %v", filepath.Base(src), time.Since(start).Round(time.Millisecond))
	return classes
}

// wordVocabulary are the words the test's lines are made of.
var wordVocabulary = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliett
	kilo lima mike november oscar papa quebec romeo sierra tango uniform victor
	whiskey xray yankee zulu raft log segment replica leader follower broker
	partition offset commit fetch produce`)

// produceLines produces n lines of random words from the vocabulary to
// the input topic, keyed so they spread over its partitions, and adds
// every word to want.
func produceLines(t *testing.T, cl *kgo.Client, rng *rand.Rand, first, n int, want map[string]int64) {
	t.Helper()
	recs := make([]*kgo.Record, 0, n)
	for i := first; i < first+n; i++ {
		words := make([]string, 1+rng.IntN(8))
		for j := range words {
			// Skewed: low indexes are much more frequent.
			words[j] = wordVocabulary[rng.IntN(1+rng.IntN(len(wordVocabulary)))]
			want[words[j]]++
		}
		recs = append(recs, &kgo.Record{
			Topic: streamsInputTopic,
			Key:   []byte("line-" + strconv.Itoa(i)),
			Value: []byte(strings.Join(words, " ")),
		})
	}
	produceAll(t, cl, recs, 30*time.Second)
}

// countReader reads the output topic from its start and keeps the latest
// count of every word: at_least_once may repeat an update, but the last
// one of a word must be its count.
type countReader struct {
	cl     *kgo.Client
	latest map[string]int64
	read   int
}

func newCountReader(t *testing.T, bs []*Broker) *countReader {
	t.Helper()
	cl, err := kgo.NewClient(append(replClientOpts(bs),
		kgo.ConsumeTopics(streamsOutputTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return &countReader{cl: cl, latest: map[string]int64{}}
}

// waitFor reads until the latest counts are exactly want, within timeout.
func (r *countReader) waitFor(t *testing.T, want map[string]int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var fetchErrs []error
	for {
		diff := countDiff(r.latest, want)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("word counts in %s not as expected within %v (%d updates read): %s; fetch errors: %v", streamsOutputTopic, timeout, r.read, diff, fetchErrs)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fs := r.cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && len(fetchErrs) < 10 {
				fetchErrs = append(fetchErrs, fmt.Errorf("%s/%d: %w", topic, p, err))
			}
		})
		fs.EachRecord(func(rec *kgo.Record) {
			if len(rec.Value) != 8 {
				t.Fatalf("%s/%d offset %d: value %x for word %q, want an 8-byte long", rec.Topic, rec.Partition, rec.Offset, rec.Value, rec.Key)
			}
			r.latest[string(rec.Key)] = int64(binary.BigEndian.Uint64(rec.Value))
			r.read++
		})
	}
}

// countDiff describes how got differs from want ("" if it does not), a
// few words at most.
func countDiff(got, want map[string]int64) string {
	var diffs []string
	for _, w := range wordVocabulary {
		g, gok := got[w]
		c, wok := want[w]
		if g != c || gok != wok {
			diffs = append(diffs, fmt.Sprintf("%s=%d want %d", w, g, c))
		}
	}
	for w := range got {
		if !slices.Contains(wordVocabulary, w) {
			diffs = append(diffs, fmt.Sprintf("unexpected word %q", w))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	slices.Sort(diffs)
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("and %d more", len(diffs)-8))
	}
	return strings.Join(diffs, ", ")
}

// waitCommitted waits until the application's group has committed the end
// offset of every partition of topics: every record read so far is
// processed and its effects (the store's changelog, the output) are
// written, so a crash now loses nothing and repeats nothing.
func waitCommitted(t *testing.T, adm *kadm.Client, group string, topics ...string) {
	t.Helper()
	pollUntil(t, 30*time.Second, "group "+group+" committing the end of "+strings.Join(topics, ", "), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for _, topic := range topics {
			for p, end := range endOffsets(t, adm, topic) {
				at := int64(0) // a partition never read has nothing committed
				if o, ok := committed.Lookup(topic, p); ok {
					if o.Err != nil {
						return fmt.Errorf("%s/%d: %v", topic, p, o.Err)
					}
					at = o.At
				}
				if at != end {
					return fmt.Errorf("%s/%d committed at %d, end offset %d", topic, p, at, end)
				}
			}
		}
		return nil
	})
}

// restoredRecords sums the RESTORED lines WordCount printed for the store's
// changelog and returns the total and the partitions restored, sorted.
func restoredRecords(t *testing.T, app *jvmProcess) (int64, []int) {
	t.Helper()
	var total int64
	var partitions []int
	for _, l := range app.outputLines("RESTORED ") {
		f := strings.Fields(l) // RESTORED store topic partition records
		if len(f) != 5 {
			t.Fatalf("WordCount printed %q, want RESTORED store topic partition records", l)
		}
		p, perr := strconv.Atoi(f[3])
		n, nerr := strconv.ParseInt(f[4], 10, 64)
		if f[1] != "counts" || f[2] != streamsChangelog || perr != nil || nerr != nil {
			t.Fatalf("WordCount printed %q, want RESTORED counts %s partition records", l, streamsChangelog)
		}
		total += n
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	// A partition restored again after a second rebalance is listed once.
	return total, slices.Compact(partitions)
}

// TestStreamsWordCountRestore runs a Kafka Streams word count with a
// RocksDB store against three weir brokers: Streams creates its
// repartition and changelog topics, and the counts it writes are exact.
// Then the application is killed (SIGKILL) once its offsets are committed,
// its state directory deleted and more lines produced; the restarted
// application restores the store from the changelog topic and the counts
// continue from there, exactly.
func TestStreamsWordCountRestore(t *testing.T) {
	java, jars := kafkaFrameworkJars.get(t) // skips without java or mvn
	classes := compileWordCount(t, java, jars)
	bs := startReplCluster(t, 3, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
	adm := kadmClient(t, bs)
	createReplicatedTopic(t, bs[0], streamsInputTopic, 3, 3, nil)
	createReplicatedTopic(t, bs[0], streamsOutputTopic, 3, 3, nil)
	waitReplicatedLeaders(t, bs, bs, streamsInputTopic, 3, 3, 15*time.Second, nil)
	waitReplicatedLeaders(t, bs, bs, streamsOutputTopic, 3, 3, 15*time.Second, nil)

	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	log4j := writeLog4jConfig(t, dir)
	startApp := func() *jvmProcess {
		start := time.Now()
		app := startJVM(t, "WordCount", java, filepath.Join(dir, "wordcount.log"),
			"-Xmx256m", log4j, "-cp", frameworkClasspath(jars, classes), "WordCount",
			strings.Join(kafkaAddrs(bs), ","), streamsAppID, stateDir, streamsInputTopic, streamsOutputTopic)
		app.waitLine(t, "STATE RUNNING", streamsReadyTimeout)
		t.Logf("WordCount running %v after its start", time.Since(start).Round(time.Millisecond))
		return app
	}

	producer, err := kgo.NewClient(replClientOpts(bs)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(producer.Close)
	counts := newCountReader(t, bs)
	rng := rand.New(rand.NewPCG(2026, 12))
	want := map[string]int64{}
	const firstLines, moreLines = 2000, 1000

	app := startApp()
	produceLines(t, producer, rng, 0, firstLines, want)
	counts.waitFor(t, want, streamsCountTimeout)
	wordsBefore := len(want)
	t.Logf("%d lines counted: %d distinct words, %d count updates read", firstLines, wordsBefore, counts.read)
	checkFrameworkTopic(t, adm, streamsRepartition, 3, 3, "delete")
	checkFrameworkTopic(t, adm, streamsChangelog, 3, 3, "compact")

	// A crash once everything is committed: at_least_once would repeat
	// (and count twice) whatever was processed but not committed.
	waitCommitted(t, adm, streamsAppID, streamsInputTopic, streamsRepartition)
	app.kill(t)
	if err := os.RemoveAll(stateDir); err != nil {
		t.Fatalf("deleting the state directory: %v", err)
	}
	produceLines(t, producer, rng, firstLines, moreLines, want)

	app = startApp()
	restored, partitions := restoredRecords(t, app)
	if !slices.Equal(partitions, []int{0, 1, 2}) || restored < int64(wordsBefore) {
		t.Fatalf("after its state directory was deleted, WordCount restored %d records from %s partitions %v; want partitions [0 1 2] and at least one record for each of the %d words counted", restored, streamsChangelog, partitions, wordsBefore)
	}
	t.Logf("the store was restored from %d changelog records", restored)
	counts.waitFor(t, want, streamsCountTimeout)
	t.Logf("%d lines counted: %d distinct words, %d count updates read", firstLines+moreLines, len(want), counts.read)
	if failed := app.outputLines("FAILED"); len(failed) > 0 {
		t.Errorf("WordCount reported a failure: %q", failed)
	}
}
