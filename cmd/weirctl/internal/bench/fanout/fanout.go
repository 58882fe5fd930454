package fanout

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	fanoutPreload = "preload"
	fanoutTail    = "tail"

	coalescingOn   = "on"
	coalescingOff  = "off"
	coalescingBoth = "both"

	// fanoutPartition is the one partition every consumer reads: the
	// coalescer only shares reads of the same partition and offset.
	fanoutPartition int32 = 0

	// sendTimestampBytes is the prefix of a tail-mode value that holds its
	// send time (Unix nanoseconds, big-endian).
	sendTimestampBytes = 8
)

// fanoutFetch is the fetch configuration every consumer shares; equal
// settings are what let the broker's coalescer treat their reads as one.
type fanoutFetch struct {
	MaxBytes          int32 `json:"max_bytes"`
	MaxPartitionBytes int32 `json:"max_partition_bytes"`
	MaxWaitMs         int64 `json:"max_wait_ms"`
	MinBytes          int32 `json:"min_bytes"`
}

type fanoutOptions struct {
	mode        string
	consumers   int
	records     int64
	recordSize  int
	rate        int
	duration    time.Duration
	partitions  int32
	replicas    int16
	fetch       fanoutFetch
	maxWait     time.Duration
	linger      time.Duration
	coalescing  string
	runs        int
	maxDuration time.Duration
}

// tailRecords is how many records a tail run produces.
func (o *fanoutOptions) tailRecords() int64 {
	return int64(float64(o.rate) * o.duration.Seconds())
}

// validate checks everything that needs no broker. changed tells which
// flags were given, because a flag of the other mode is a mistake worth
// pointing out rather than ignoring.
func (o *fanoutOptions) validate(changed func(string) bool, timeout time.Duration) error {
	switch o.mode {
	case fanoutPreload:
		for _, f := range []string{"rate", "duration", "linger"} {
			if changed(f) {
				return fmt.Errorf("--%s applies to --mode tail; preload consumes a backlog of --records", f)
			}
		}
		if o.records <= 0 {
			return fmt.Errorf("--records must be positive, got %d", o.records)
		}
		if o.recordSize < 0 {
			return fmt.Errorf("--record-size must be >= 0, got %d", o.recordSize)
		}
	case fanoutTail:
		if changed("records") {
			return errors.New("--records applies to --mode preload; tail produces --rate records/s for --duration")
		}
		switch {
		case o.rate < 1:
			return fmt.Errorf("--rate must be at least 1 record/s, got %d", o.rate)
		case o.duration <= 0:
			return fmt.Errorf("--duration must be positive, got %s", o.duration)
		case o.tailRecords() < 1:
			return fmt.Errorf("--rate %d for --duration %s produces no record", o.rate, o.duration)
		case o.recordSize < sendTimestampBytes:
			return fmt.Errorf("--record-size must be at least %d in tail mode (each value starts with its send time), got %d", sendTimestampBytes, o.recordSize)
		case time.Second/time.Duration(o.rate) >= timeout:
			return fmt.Errorf("--rate %d sends a record less often than --timeout %s, which would be taken for a stall", o.rate, timeout)
		case o.linger < 0:
			return fmt.Errorf("--linger must be >= 0, got %s", o.linger)
		case o.maxDuration <= o.duration:
			return fmt.Errorf("--max-duration (%s) must be longer than --duration (%s)", o.maxDuration, o.duration)
		}
	default:
		return fmt.Errorf("--mode must be %s or %s, got %q", fanoutPreload, fanoutTail, o.mode)
	}
	switch {
	case o.consumers < 1:
		return fmt.Errorf("--consumers must be >= 1, got %d", o.consumers)
	case o.partitions < 1:
		return fmt.Errorf("--partitions must be >= 1 (the bench reads partition %d), got %d", fanoutPartition, o.partitions)
	case o.replicas == 0 || o.replicas < -1:
		return fmt.Errorf("--replication-factor must be positive or -1, got %d", o.replicas)
	case o.fetch.MaxBytes < 1 || o.fetch.MaxBytes > harness.MaxFetchMaxBytes:
		return fmt.Errorf("--fetch-max-bytes must be between 1 and %d, got %d", harness.MaxFetchMaxBytes, o.fetch.MaxBytes)
	case o.fetch.MaxPartitionBytes < 1:
		return fmt.Errorf("--fetch-max-partition-bytes must be positive, got %d", o.fetch.MaxPartitionBytes)
	case o.maxWait < time.Millisecond:
		return fmt.Errorf("--fetch-max-wait must be at least 1ms, got %s", o.maxWait)
	case o.fetch.MinBytes < 0:
		return fmt.Errorf("--fetch-min-bytes must be >= 0, got %d", o.fetch.MinBytes)
	case o.runs < 1:
		return fmt.Errorf("--runs must be >= 1, got %d", o.runs)
	case o.maxDuration <= 0:
		return fmt.Errorf("--max-duration must be positive, got %s", o.maxDuration)
	}
	switch o.coalescing {
	case "", coalescingOn, coalescingOff, coalescingBoth:
	default:
		return fmt.Errorf("--coalescing must be %s, %s or %s, got %q", coalescingOn, coalescingOff, coalescingBoth, o.coalescing)
	}
	o.fetch.MaxWaitMs = o.maxWait.Milliseconds()
	return nil
}

// coalescingPlan lists the setting of each run: "" (leave the property
// as it is) for every run when --coalescing is not given. For both, the
// order alternates off, on, on, off, ... so that warm-up and drift over
// the invocation weigh on both settings alike instead of favouring
// whichever runs second.
func coalescingPlan(coalescing string, runs int) []string {
	plan := make([]string, 0, 2*runs)
	for i := range runs {
		switch {
		case coalescing != coalescingBoth:
			plan = append(plan, coalescing)
		case i%2 == 0:
			plan = append(plan, coalescingOff, coalescingOn)
		default:
			plan = append(plan, coalescingOn, coalescingOff)
		}
	}
	return plan
}

// NewCommand is weirctl bench fanout.
func NewCommand(g *cli.Options) *cobra.Command {
	o := &fanoutOptions{}
	cmd := &cobra.Command{
		Use:   "fanout TOPIC",
		Short: "Measure many consumers reading the same partition (fetch read coalescing)",
		Long: "Starts --consumers independent consumers (one client and connection each, no\n" +
			"group) on partition 0 of TOPIC, all at the same offset with the same fetch\n" +
			"settings, and measures delivery and the brokers' cost of it.\n\n" +
			"--mode preload produces a backlog of --records records (only what the\n" +
			"partition lacks; TOPIC is created if missing) and measures every consumer\n" +
			"reading it from the start; P50/P99 are then each consumer's time from the\n" +
			"start to its last record. --mode tail starts the consumers at the end and\n" +
			"produces --rate records/s for --duration, each value starting with its send\n" +
			"time; P50/P99 are end-to-end latencies over all deliveries, and the P99 is\n" +
			"split in two: over records, the latency of each one's first delivery (the\n" +
			"producer's and the write path's share), and over deliveries, how long each\n" +
			"came after its record's first (the fan-out's share).\n\n" +
			"Broker figures come from the /metrics of every live broker (found through\n" +
			"GET /v1/brokers on the admin API), read before and after the consume phase:\n" +
			"CPU seconds per delivered GiB, bytes allocated per Fetch request and the fetch\n" +
			"read coalescer's counters (in tail mode they include serving the producer).\n" +
			"Without the admin API only client figures are shown.\n\n" +
			"--coalescing on|off sets kafka_fetch_read_coalescing_enabled before the runs;\n" +
			"both runs the workload with it off and on (alternating, --runs times each)\n" +
			"and compares them. The property is restored when the bench ends.\n\n" +
			"Every consumer must get every record exactly once and in order, or the command\n" +
			"fails. Nothing else may write to TOPIC during the bench. A run fails when no\n" +
			"record arrives for --timeout or it lasts longer than --max-duration.\n" +
			admin.URLHelp,
		Example: "  weirctl bench fanout fanout --consumers 16 --records 200000 --record-size 1024 --coalescing both\n" +
			"  weirctl bench fanout fanout-tail --mode tail --consumers 32 --rate 5000 --duration 30s --coalescing both --runs 2",
		Args: cobra.ExactArgs(1),
	}
	client := admin.AddURLFlag(cmd, g)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(cmd.Flags().Changed, g.Timeout); err != nil {
			return err
		}
		f := &fanoutBench{g: g, o: o, topic: args[0], admin: client(), errOut: cmd.ErrOrStderr()}
		sum, runErr := f.run(cmd.Context())
		if sum != nil && len(sum.Runs) > 0 {
			if err := sum.write(cmd.OutOrStdout(), g.Format); err != nil {
				return errors.Join(runErr, err)
			}
		}
		return runErr
	}
	fl := cmd.Flags()
	fl.StringVar(&o.mode, "mode", fanoutPreload, "preload (read a backlog from the start) or tail (read while producing)")
	fl.IntVarP(&o.consumers, "consumers", "c", 8, "number of consumers, each its own client and connection")
	fl.Int64Var(&o.records, "records", 100000, "preload: records in the backlog each consumer reads")
	fl.IntVar(&o.recordSize, "record-size", 1024, "value size in bytes (tail: at least 8, for the send time)")
	fl.IntVar(&o.rate, "rate", 1000, "tail: records produced per second")
	fl.DurationVar(&o.duration, "duration", 10*time.Second, "tail: how long to produce")
	fl.DurationVar(&o.linger, "linger", 5*time.Millisecond, "tail: the producer's linger (linger.ms; 5ms is the Java client's default since 4.0)")
	fl.Int32VarP(&o.partitions, "partitions", "p", 1, "partitions if TOPIC has to be created (partition 0 is read)")
	fl.Int16VarP(&o.replicas, "replication-factor", "r", -1, "replication factor if TOPIC has to be created (-1: broker default)")
	fl.Int32Var(&o.fetch.MaxBytes, "fetch-max-bytes", 50<<20, "every consumer's FetchMaxBytes")
	fl.Int32Var(&o.fetch.MaxPartitionBytes, "fetch-max-partition-bytes", 1<<20, "every consumer's FetchMaxPartitionBytes")
	fl.DurationVar(&o.maxWait, "fetch-max-wait", 500*time.Millisecond, "every consumer's FetchMaxWait")
	fl.Int32Var(&o.fetch.MinBytes, "fetch-min-bytes", 1, "every consumer's FetchMinBytes")
	fl.StringVar(&o.coalescing, "coalescing", "", "set kafka_fetch_read_coalescing_enabled: on, off, or both (one run each, compared); default: leave it")
	fl.IntVar(&o.runs, "runs", 1, "measured runs per coalescing setting")
	fl.DurationVar(&o.maxDuration, "max-duration", 5*time.Minute, "fail a run whose consume phase lasts longer than this")
	// Errors here only mean a misspelt flag name, which any test run of
	// the tree catches.
	_ = cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions([]string{fanoutPreload, fanoutTail}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("coalescing", cobra.FixedCompletions([]string{coalescingOn, coalescingOff, coalescingBoth}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// fanoutBench is one invocation: its settings, and what it found out
// about the cluster before the runs.
type fanoutBench struct {
	g      *cli.Options
	o      *fanoutOptions
	topic  string
	admin  *admin.Client
	errOut io.Writer

	// brokers are the brokers whose /metrics are read; nil when the
	// admin API did not answer (brokerNote says why).
	brokers    []admin.Broker
	brokerNote string
}
