package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka Streams 4.x: the word count of testdata/wordcount/WordCount.java,
// with a persistent (RocksDB) store backed by a changelog topic, against a
// three-broker weir cluster: at processing.guarantee=at_least_once
// (TestStreamsWordCountRestore) and exactly_once_v2
// (TestStreamsWordCountExactlyOnce), where every commit is a transaction.

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
// count of every word, and every count read of it in order: at_least_once
// may repeat an update, but the last one of a word must be its count.
type countReader struct {
	cl      *kgo.Client
	latest  map[string]int64
	history map[string][]int64
	read    int
	errs    []error // fetch errors, the first few
}

// newCountReader reads the output topic at the isolation level given.
func newCountReader(t *testing.T, bs []*Broker, isolation kgo.IsolationLevel) *countReader {
	t.Helper()
	cl, err := kgo.NewClient(append(replClientOpts(bs),
		kgo.ConsumeTopics(streamsOutputTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolation),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return &countReader{cl: cl, latest: map[string]int64{}, history: map[string][]int64{}}
}

// poll reads what one fetch returns, waiting until deadline at most.
func (r *countReader) poll(t *testing.T, deadline time.Time) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	fs := r.cl.PollFetches(ctx)
	cancel()
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && len(r.errs) < 10 {
			r.errs = append(r.errs, fmt.Errorf("%s/%d: %w", topic, p, err))
		}
	})
	fs.EachRecord(func(rec *kgo.Record) {
		if len(rec.Value) != 8 {
			t.Fatalf("%s/%d offset %d: value %x for word %q, want an 8-byte long", rec.Topic, rec.Partition, rec.Offset, rec.Value, rec.Key)
		}
		n := int64(binary.BigEndian.Uint64(rec.Value))
		r.latest[string(rec.Key)] = n
		r.history[string(rec.Key)] = append(r.history[string(rec.Key)], n)
		r.read++
	})
}

// waitFor reads until the latest counts are exactly want, within timeout.
func (r *countReader) waitFor(t *testing.T, want map[string]int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		diff := countDiff(r.latest, want)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("word counts in %s not as expected within %v (%d updates read): %s; fetch errors: %v", streamsOutputTopic, timeout, r.read, diff, r.errs)
		}
		r.poll(t, deadline)
	}
}

// waitRead reads until n count updates in all have been read, within
// timeout.
func (r *countReader) waitRead(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for r.read < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d count updates read from %s within %v, want %d; fetch errors: %v", r.read, streamsOutputTopic, timeout, n, r.errs)
		}
		r.poll(t, deadline)
	}
}

// checkSteps checks that every word's counts, in the order read, are
// exactly 1, 2, 3, ...: each increment written once, none lost, none
// repeated, none ahead of the words produced.
func (r *countReader) checkSteps(t *testing.T) {
	t.Helper()
	bad := 0
	for _, w := range slices.Sorted(maps.Keys(r.history)) {
		h := r.history[w]
		for i, n := range h {
			if n != int64(i+1) {
				t.Errorf("word %q: update #%d of its count is %d, want %d (the %d counts read: %s)", w, i+1, n, i+1, len(h), countsAround(h, i))
				bad++
				break
			}
		}
		if bad >= 5 {
			t.Fatalf("and maybe more words")
		}
	}
}

// countsAround is h around index i, for a message.
func countsAround(h []int64, i int) string {
	from, to := max(0, i-3), min(len(h), i+4)
	return fmt.Sprintf("...%v...", h[from:to])
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

// wordCountRig is a three-broker cluster with the word count's input and
// output topics (3 partitions, RF 3) and the compiled application.
type wordCountRig struct {
	bs                                 []*Broker
	adm                                *kadm.Client
	java, jars, classes, dir, stateDir string
	log4j                              string
	configs                            []string
}

// newWordCountRig compiles WordCount, starts the cluster and creates the
// topics; the application will run with the Streams configs given
// (name=value), at_least_once without any.
func newWordCountRig(t *testing.T, configs ...string) *wordCountRig {
	t.Helper()
	java, jars := kafkaFrameworkJars.get(t) // skips without java or mvn
	w := &wordCountRig{java: java, jars: jars, configs: configs}
	w.classes = compileWordCount(t, java, jars)
	w.bs = startReplCluster(t, 3, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
	w.adm = kadmClient(t, w.bs)
	createReplicatedTopic(t, w.bs[0], streamsInputTopic, 3, 3, nil)
	createReplicatedTopic(t, w.bs[0], streamsOutputTopic, 3, 3, nil)
	waitReplicatedLeaders(t, w.bs, w.bs, streamsInputTopic, 3, 3, 15*time.Second, nil)
	waitReplicatedLeaders(t, w.bs, w.bs, streamsOutputTopic, 3, 3, 15*time.Second, nil)
	w.dir = t.TempDir()
	w.stateDir = filepath.Join(w.dir, "state")
	w.log4j = writeLog4jConfig(t, w.dir)
	return w
}

// start starts the application and waits until it runs.
func (w *wordCountRig) start(t *testing.T) *jvmProcess {
	t.Helper()
	start := time.Now()
	args := []string{"-Xmx256m", w.log4j, "-cp", frameworkClasspath(w.jars, w.classes), "WordCount",
		strings.Join(kafkaAddrs(w.bs), ","), streamsAppID, w.stateDir, streamsInputTopic, streamsOutputTopic}
	app := startJVM(t, "WordCount", w.java, filepath.Join(w.dir, "wordcount.log"), append(args, w.configs...)...)
	app.waitLine(t, "STATE RUNNING", streamsReadyTimeout)
	t.Logf("WordCount %v running %v after its start", w.configs, time.Since(start).Round(time.Millisecond))
	return app
}

// TestStreamsWordCountRestore runs a Kafka Streams word count with a
// RocksDB store against three weir brokers: Streams creates its
// repartition and changelog topics, and the counts it writes are exact.
// Then the application is killed (SIGKILL) once its offsets are committed,
// its state directory deleted and more lines produced; the restarted
// application restores the store from the changelog topic and the counts
// continue from there, exactly.
func TestStreamsWordCountRestore(t *testing.T) {
	t.Parallel()
	w := newWordCountRig(t)
	bs, adm := w.bs, w.adm

	producer, err := kgo.NewClient(replClientOpts(bs)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(producer.Close)
	counts := newCountReader(t, bs, kgo.ReadUncommitted())
	rng := rand.New(rand.NewPCG(2026, 12))
	want := map[string]int64{}
	const firstLines, moreLines = 2000, 1000

	app := w.start(t)
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
	if err := os.RemoveAll(w.stateDir); err != nil {
		t.Fatalf("deleting the state directory: %v", err)
	}
	produceLines(t, producer, rng, firstLines, moreLines, want)

	app = w.start(t)
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

// lineProducer produces lines of words to the input topic in the
// background, a batch every tick, until stopped.
type lineProducer struct {
	cl       *kgo.Client
	rng      *rand.Rand
	want     map[string]int64 // the goroutine's until done is closed
	lines    atomic.Int64     // lines acknowledged
	err      error            // set before done is closed
	stopOnce sync.Once
	stopc    chan struct{}
	done     chan struct{}
}

// startLineProducer produces batch lines every tick, maxLines at most.
func startLineProducer(t *testing.T, bs []*Broker, rng *rand.Rand, batch int, tick time.Duration, maxLines int) *lineProducer {
	t.Helper()
	cl, err := kgo.NewClient(replClientOpts(bs)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	p := &lineProducer{cl: cl, rng: rng, want: map[string]int64{}, stopc: make(chan struct{}), done: make(chan struct{})}
	go p.run(batch, tick, maxLines)
	t.Cleanup(func() { p.stopOnce.Do(func() { close(p.stopc) }); <-p.done })
	return p
}

func (p *lineProducer) run(batch int, tick time.Duration, maxLines int) {
	defer close(p.done)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for i := 0; i < maxLines; i += batch {
		select {
		case <-p.stopc:
			return
		case <-ticker.C:
		}
		recs := make([]*kgo.Record, 0, batch)
		for j := i; j < i+batch; j++ {
			words := make([]string, 1+p.rng.IntN(8))
			for k := range words {
				words[k] = wordVocabulary[p.rng.IntN(1+p.rng.IntN(len(wordVocabulary)))]
				p.want[words[k]]++
			}
			recs = append(recs, &kgo.Record{Topic: streamsInputTopic, Key: []byte("line-" + strconv.Itoa(j)), Value: []byte(strings.Join(words, " "))})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.cl.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			p.err = fmt.Errorf("producing lines %d..%d: %w", i, i+batch-1, err)
			return
		}
		p.lines.Add(int64(batch))
	}
	p.err = fmt.Errorf("produced %d lines, the most allowed, before being stopped", maxLines)
}

// stop stops producing and returns how many times each word was produced.
func (p *lineProducer) stop(t *testing.T) map[string]int64 {
	t.Helper()
	p.stopOnce.Do(func() { close(p.stopc) })
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("the line producer did not stop within 45s")
	}
	if p.err != nil {
		t.Fatalf("line producer: %v", p.err)
	}
	return p.want
}

// streamsOngoingTxn waits until the application's producer has a
// transaction open with a partition of the output topic in it, and
// returns its transactional id and producer epoch.
func streamsOngoingTxn(t *testing.T, adm *kadm.Client, timeout time.Duration) (string, int16) {
	t.Helper()
	var id string
	var epoch int16
	pollUntil(t, timeout, "a transaction of "+streamsAppID+" open with "+streamsOutputTopic+" in it", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
		if err != nil {
			return err
		}
		for _, tx := range listed.Sorted() {
			if !strings.HasPrefix(tx.TxnID, streamsAppID+"-") {
				continue
			}
			d, err := adm.DescribeTransactions(ctx, tx.TxnID)
			if err != nil {
				return err
			}
			if dt := d[tx.TxnID]; dt.Err == nil && dt.State == "Ongoing" && len(dt.Topics[streamsOutputTopic]) > 0 {
				id, epoch = tx.TxnID, dt.ProducerEpoch
				return nil
			}
		}
		return fmt.Errorf("none among %+v", listed.Sorted())
	})
	return id, epoch
}

// describeTxn describes one transactional id.
func describeTxn(t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	d, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, err)
	}
	if d[id].Err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, d[id].Err)
	}
	return d[id]
}

// TestStreamsWordCountExactlyOnce runs the word count with
// processing.guarantee=exactly_once_v2 and the record cache off, so that
// every increment of a count is written, against three weir brokers: the
// application's producer writes the repartition topic, the changelog, the
// output and the consumed offsets (TxnOffsetCommit) in one transaction per
// commit, and its consumers read read_committed. Lines are produced all
// along; the application is killed (SIGKILL) mid-stream, with a
// transaction open, and restarted on the same state directory: its
// producer (the same transactional id) fences the old one, whose open
// transaction the coordinator aborts, and the store, which Streams does
// not trust after a crash under EOS, is restored from the changelog's
// committed records.
//
// The check is the strongest exactly_once_v2 gives in Kafka itself: read
// read_committed, every word's counts are exactly 1, 2, ..., N, N being
// how often it was produced. So none is repeated (at_least_once after a
// crash would repeat, or count twice), none is lost, none is ever above
// the true count, and the last is exact. A read_uncommitted reader may see
// more: the aborted transaction's updates, repeated after the restart.
func TestStreamsWordCountExactlyOnce(t *testing.T) {
	t.Parallel()
	// A transaction a second, so that a kill finds one open.
	w := newWordCountRig(t, "processing.guarantee=exactly_once_v2", "statestore.cache.max.bytes=0", "commit.interval.ms=1000")
	counts := newCountReader(t, w.bs, kgo.ReadCommitted())

	app := w.start(t)
	// About 60 lines (270 words) a second, until stopped.
	lines := startLineProducer(t, w.bs, rand.New(rand.NewPCG(2026, 13)), 3, 50*time.Millisecond, 20_000)

	// Mid-stream: the application has counted a good part of what was
	// produced, lines keep coming, and it has a transaction open.
	counts.waitRead(t, 1000, streamsCountTimeout)
	txnID, epoch := streamsOngoingTxn(t, w.adm, 15*time.Second)
	app.kill(t)
	atKill := lines.lines.Load()
	killed := describeTxn(t, w.adm, txnID)
	t.Logf("WordCount killed after %d lines produced and %d count updates read; its transaction: %s %s epoch %d, partitions %v",
		atKill, counts.read, txnID, killed.State, killed.ProducerEpoch, killed.Topics)

	app = w.start(t)
	restored, partitions := restoredRecords(t, app)
	t.Logf("the store was restored from %d changelog records of partitions %v", restored, partitions)
	// Counting goes on after the restart, while lines are produced.
	counts.waitRead(t, counts.read+1000, streamsCountTimeout)
	want := lines.stop(t)
	produced := lines.lines.Load()
	if produced <= atKill {
		t.Fatalf("%d lines produced in all, %d when the application was killed: the input stopped flowing", produced, atKill)
	}
	counts.waitFor(t, want, streamsCountTimeout)
	counts.checkSteps(t)
	t.Logf("%d lines (%d when killed) counted exactly: %d distinct words, %d count updates read, each word's counts 1, 2, ..., N", produced, atKill, len(want), counts.read)
	checkFrameworkTopic(t, w.adm, streamsRepartition, 3, 3, "delete")
	checkFrameworkTopic(t, w.adm, streamsChangelog, 3, 3, "compact")
	waitCommitted(t, w.adm, streamsAppID, streamsInputTopic, streamsRepartition)

	// The restarted application has the same process id (Kafka Streams
	// keeps it in the state directory), so the same transactional id
	// (application id, process id, thread). Its producer's InitProducerId
	// fenced the killed one: one epoch bump that aborted the transaction
	// left open, if it still was, and one for the new producer.
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	listed, err := w.adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatalf("ListTransactions: %v", err)
	}
	var ids []string
	for _, tx := range listed.Sorted() {
		if strings.HasPrefix(tx.TxnID, streamsAppID+"-") {
			ids = append(ids, tx.TxnID)
		}
	}
	if !slices.Equal(ids, []string{txnID}) {
		t.Errorf("ListTransactions: transactional ids of %s %v, want [%s], the killed application's", streamsAppID, ids, txnID)
	}
	bumps := int16(1)
	if killed.State == "Ongoing" {
		bumps = 2
	}
	if now := describeTxn(t, w.adm, txnID); now.ProducerID != killed.ProducerID || now.ProducerEpoch < epoch+bumps {
		t.Errorf("%s after the restart: producer %d epoch %d; want producer %d, epoch %d at least (%d when killed, then %s)",
			txnID, now.ProducerID, now.ProducerEpoch, killed.ProducerID, epoch+bumps, epoch, killed.State)
	}

	// What read_uncommitted sees beyond: the aborted transactions.
	all := newCountReader(t, w.bs, kgo.ReadUncommitted())
	all.waitRead(t, counts.read, streamsCountTimeout)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		all.poll(t, deadline)
	}
	t.Logf("read_uncommitted: %d count updates, %d of them in aborted transactions", all.read, all.read-counts.read)
	if failed := app.outputLines("FAILED"); len(failed) > 0 {
		t.Errorf("WordCount reported a failure: %q", failed)
	}
}
