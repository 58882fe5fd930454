package soak

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	// soakValueHeader is the start of every value the soak produces: its
	// send time (Unix nanoseconds) and its sequence number in its
	// partition, both big-endian.
	soakValueHeader = 16

	// soakMinSample keeps --sample from turning the soak into a load
	// generator for the admin API: every sample scrapes every broker.
	soakMinSample = 100 * time.Millisecond

	// soakMinJudged is the fewest samples after warm-up that growth is
	// judged on: one for each third.
	soakMinJudged = 3

	// soakDefaultWarmup is --warmup's default share of --duration.
	soakDefaultWarmup = 0.2
)

// soakWarmup is --warmup: a share of --duration ("20%") or a duration
// ("2m"). A pflag.Value, so that both spellings are one flag.
type soakWarmup struct {
	share    float64
	duration time.Duration
	isShare  bool
}

func (w *soakWarmup) String() string {
	if w.isShare {
		return strconv.FormatFloat(100*w.share, 'f', -1, 64) + "%"
	}
	return w.duration.String()
}

func (w *soakWarmup) Set(s string) error {
	s = strings.TrimSpace(s)
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v >= 100 {
			return fmt.Errorf("want a share of --duration from 0%% up to (not including) 100%%, got %q", s)
		}
		*w = soakWarmup{share: v / 100, isShare: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration (2m) or a share of --duration (20%%), got %q", s)
	}
	*w = soakWarmup{duration: d}
	return nil
}

func (w *soakWarmup) Type() string { return "duration|percent" }

// of is the warm-up of a run lasting total.
func (w *soakWarmup) of(total time.Duration) time.Duration {
	if w.isShare {
		return time.Duration(w.share * float64(total))
	}
	return w.duration
}

type soakOptions struct {
	duration time.Duration
	warmup   soakWarmup
	sample   time.Duration

	topicPrefix string
	topics      int
	partitions  int
	replicas    int16

	connections int
	churn       float64
	connWait    time.Duration

	rate       int
	recordSize int
	producers  int

	groups    int
	consumers int

	pid       int
	tolerance float64
	drain     time.Duration
}

// validate checks everything that needs no broker.
func (o *soakOptions) validate() error {
	switch {
	case o.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %s", o.duration)
	case o.sample < soakMinSample:
		return fmt.Errorf("--sample must be at least %s, got %s", soakMinSample, o.sample)
	case o.warmup.of(o.duration) >= o.duration:
		return fmt.Errorf("--warmup (%s) must be shorter than --duration (%s)", o.warmup.of(o.duration), o.duration)
	case o.judgedSamples() < soakMinJudged:
		return fmt.Errorf("--duration %s with --warmup %s and --sample %s leaves %d samples after warm-up; growth needs at least %d (a longer --duration or a shorter --sample)",
			o.duration, o.warmup.of(o.duration), o.sample, o.judgedSamples(), soakMinJudged)
	case o.topicPrefix == "":
		return errors.New("--topic-prefix must not be empty")
	case o.topics < 1:
		return fmt.Errorf("--topics must be >= 1, got %d", o.topics)
	case o.partitions < o.topics:
		return fmt.Errorf("--partitions (%d) must be at least --topics (%d): every topic needs one", o.partitions, o.topics)
	case o.replicas == 0 || o.replicas < -1:
		return fmt.Errorf("--replication-factor must be positive or -1, got %d", o.replicas)
	case o.connections < 0:
		return fmt.Errorf("--connections must be >= 0, got %d", o.connections)
	case o.churn < 0 || math.IsNaN(o.churn) || math.IsInf(o.churn, 0):
		return fmt.Errorf("--churn must be >= 0, got %v", o.churn)
	case o.churn > 0 && o.connections == 0:
		return errors.New("--churn closes some of --connections, and there are none; give --connections or --churn 0")
	case o.connWait < time.Millisecond || o.connWait.Milliseconds() > math.MaxInt32:
		return fmt.Errorf("--connection-fetch-wait must be between 1ms and %d ms, got %s", math.MaxInt32, o.connWait)
	case o.rate < 1:
		return fmt.Errorf("--rate must be at least 1 record/s, got %d", o.rate)
	case o.recordSize < soakValueHeader:
		return fmt.Errorf("--record-size must be at least %d (each value starts with its send time and sequence number), got %d", soakValueHeader, o.recordSize)
	case o.producers < 1:
		return fmt.Errorf("--producers must be >= 1, got %d", o.producers)
	case o.producers > o.partitions:
		return fmt.Errorf("--producers (%d) must not exceed --partitions (%d): each partition has one producer, and each producer a partition", o.producers, o.partitions)
	case o.groups < 1:
		return fmt.Errorf("--groups must be >= 1, got %d", o.groups)
	case o.consumers < 1:
		return fmt.Errorf("--consumers must be >= 1, got %d", o.consumers)
	case o.pid < 0:
		return fmt.Errorf("--pid must be a process ID, got %d", o.pid)
	case o.tolerance <= 0 || math.IsNaN(o.tolerance) || math.IsInf(o.tolerance, 0):
		return fmt.Errorf("--tolerance must be a positive percentage, got %v", o.tolerance)
	case o.drain <= 0:
		return fmt.Errorf("--drain must be positive, got %s", o.drain)
	}
	return nil
}

// judgedSamples is how many samples fall after warm-up.
func (o *soakOptions) judgedSamples() int {
	return int((o.duration - o.warmup.of(o.duration)) / o.sample)
}

// topicNames are the soak's topics: --topic-prefix-0, -1, ...
func (o *soakOptions) topicNames() []string {
	names := make([]string, o.topics)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", o.topicPrefix, i)
	}
	return names
}

// topicPartitions spreads --partitions over the topics, the first ones
// taking one more when they do not divide evenly.
func (o *soakOptions) topicPartitions() []int32 {
	out := make([]int32, o.topics)
	for i := range out {
		out[i] = int32(o.partitions / o.topics)
		if i < o.partitions%o.topics {
			out[i]++
		}
	}
	return out
}

// NewCommand is weirctl bench soak.
func NewCommand(g *cli.Options) *cobra.Command {
	o := &soakOptions{warmup: soakWarmup{share: soakDefaultWarmup, isShare: true}}
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Hold thousands of connections and steady traffic for a while, and check the brokers do not grow",
		Long: "For --duration, against a running broker or cluster: creates --topics topics with\n" +
			"--partitions partitions between them (named --topic-prefix-N; existing ones are\n" +
			"reused), holds --connections raw connections, produces --rate records/s with\n" +
			"acks=-1 and has --groups consumer groups of --consumers consumers each read it all.\n\n" +
			"Each raw connection asks ApiVersions, Metadata and ListOffsets, then long-polls one\n" +
			"partition's end with Fetch (min_bytes 1 MiB, max_wait --connection-fetch-wait), asking\n" +
			"Metadata again every few polls, as an idle consumer would. --churn of them a second\n" +
			"are closed (by turns with FIN and with RST, usually in the middle of a long poll)\n" +
			"and opened again, so that connections that end leaving something behind show up.\n\n" +
			"Every --sample: produced and delivered records/s, produce-to-consume latency p50 and\n" +
			"p99 (each value carries its send time), and from every broker's /metrics (found\n" +
			"through GET /v1/brokers on the admin API) resident memory (or VmRSS of --pid),\n" +
			"goroutines, open Kafka connections, heap in use and live heap (what the last\n" +
			"garbage collection kept, from its next goal), summed over the brokers.\n\n" +
			"Growth of RSS, live heap, goroutines and connections is judged on the samples after\n" +
			"--warmup: a series grew when the mean of the last third exceeds the mean of the\n" +
			"first third by more than --tolerance percent (and a small absolute floor) and its\n" +
			"least-squares slope is positive. Once every client has left, the brokers must be\n" +
			"back to the goroutines and connections they had before the load.\n\n" +
			"When producing stops, the consumers get --drain to catch up; every group must then\n" +
			"have received every acknowledged record, with offsets contiguous in every partition\n" +
			"and sequence numbers never going back. The command fails on growth, on a missing,\n" +
			"skipped or repeated record, and on any error; errors are counted and shown.\n" +
			admin.URLHelp,
		Example: "  weirctl bench soak --admin-url 127.0.0.1:9644\n" +
			"  weirctl bench soak --duration 2m --connections 2000 --partitions 300 --pid $(pgrep -n weir)",
		Args: cobra.NoArgs,
	}
	client := admin.AddURLFlag(cmd, g)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		b := &soakBench{g: g, o: o, admin: client(), errOut: cmd.ErrOrStderr()}
		sum, runErr := b.run(cmd.Context())
		if sum != nil {
			if err := sum.write(cmd.OutOrStdout(), g.Format); err != nil {
				return errors.Join(runErr, err)
			}
		}
		return runErr
	}
	fl := cmd.Flags()
	fl.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to apply the load and sample")
	fl.Var(&o.warmup, "warmup", "samples left out of the growth verdict: a duration, or a share of --duration")
	fl.DurationVar(&o.sample, "sample", 10*time.Second, "how often to sample throughput, latency and the brokers' /metrics")
	fl.StringVar(&o.topicPrefix, "topic-prefix", "soak", "topics are named PREFIX-0, PREFIX-1, ...")
	fl.IntVar(&o.topics, "topics", 10, "number of topics")
	fl.IntVarP(&o.partitions, "partitions", "p", 300, "partitions over all topics, spread evenly")
	fl.Int16VarP(&o.replicas, "replication-factor", "r", -1, "replication factor of topics the soak creates (-1: broker default)")
	fl.IntVar(&o.connections, "connections", 2000, "raw connections held open (the producers' and consumers' own come on top)")
	fl.Float64Var(&o.churn, "churn", 10, "raw connections closed and opened again per second")
	fl.DurationVar(&o.connWait, "connection-fetch-wait", 5*time.Second, "max_wait of the raw connections' long polls")
	fl.IntVar(&o.rate, "rate", 1000, "records produced per second, over all partitions")
	fl.IntVar(&o.recordSize, "record-size", 512, "value size in bytes (at least 16: send time and sequence number)")
	fl.IntVar(&o.producers, "producers", 4, "producer clients; each partition is written by one of them")
	fl.IntVar(&o.groups, "groups", 2, "consumer groups, each reading every record")
	fl.IntVarP(&o.consumers, "consumers", "c", 3, "consumers (clients) in each group")
	fl.IntVar(&o.pid, "pid", 0, "read resident memory from /proc/PID/status (a single broker's process) rather than /metrics")
	fl.Float64Var(&o.tolerance, "tolerance", 10, "growth allowed from the first third to the last, in percent")
	fl.DurationVar(&o.drain, "drain", time.Minute, "how long the consumers get to catch up once producing stops")
	return cmd
}

// soakBench is one invocation: its settings, and what it found out about
// the cluster before the load started.
type soakBench struct {
	g      *cli.Options
	o      *soakOptions
	admin  *admin.Client
	errOut io.Writer

	brokers []admin.Broker
}
