package scale

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// bench scale is the building block of .ci/bench-scale.sh, which measures
// what partitions cost a three-broker cluster (memory, threads, files, disk,
// CPU while idle, time to create them, to fail over and to catch up) on
// weir and on Apache Kafka with the same client. Each subcommand does one
// measurement and prints one document, so the script can drive brokers it
// started itself (killing and restarting them) between measurements, and
// report reads every document back at the end. Every subcommand speaks
// only the Kafka protocol and reads /proc, so it works on any broker.

const (
	// scaleMinInterval keeps the metadata polls from becoming a load on
	// the cluster being measured.
	scaleMinInterval = 20 * time.Millisecond

	waitSettled = "settled"
	waitMoved   = "moved"
	waitOut     = "out"
)

// NewCommand is weirctl bench scale.
func NewCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure what partitions cost a cluster (used by make bench-scale)",
		Long: "Subcommands measure one thing each and print one document:\n" +
			"  create   create a topic, time CreateTopics and the wait until every\n" +
			"           partition has a leader and a full ISR\n" +
			"  wait     time until every partition is settled again, or until no\n" +
			"           partition is led by a given (killed) broker\n" +
			"  layout   brokers, partitions and leaders per broker\n" +
			"  sample   RSS, threads, goroutines, open files, disk and CPU of\n" +
			"           broker processes over a window, from /proc\n" +
			"  report   tables and bench-scale.json from a directory of results\n" +
			"They work on any Kafka-protocol cluster. Times are wall-clock seconds.",
	}
	cmd.AddCommand(newBenchScaleCreateCommand(g), newBenchScaleWaitCommand(g), newBenchScaleLayoutCommand(g),
		newBenchScaleSampleCommand(g), newBenchScaleReportCommand(g))
	return cmd
}

func newBenchScaleCreateCommand(g *cli.Options) *cobra.Command {
	o := &scaleCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create TOPIC and time it until every partition is led with a full ISR",
		Long: "Sends CreateTopics (with --create-timeout as the request's timeout) and\n" +
			"times its answer, then polls Metadata every --interval until the topic\n" +
			"has --partitions partitions, each with a leader and an ISR as large as\n" +
			"its replica set, or --settle-timeout has passed since the request was\n" +
			"sent. Both times count from the moment CreateTopics was sent. A run\n" +
			"that does not settle in time is reported (settled: false) with how many\n" +
			"partitions were still pending, and is not an error.",
		Example: "  weirctl --format json bench scale create scale-1000 -p 1000 -r 3 --settle-timeout 5m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			res, err := scaleCreate(cmd.Context(), g, args[0], o)
			if err != nil {
				return err
			}
			return res.write(cmd.OutOrStdout(), g.Format)
		},
	}
	f := cmd.Flags()
	f.Int32VarP(&o.partitions, "partitions", "p", 0, "partitions to create (required)")
	f.Int16VarP(&o.replicas, "replication-factor", "r", 3, "replicas per partition")
	f.DurationVar(&o.createTimeout, "create-timeout", 5*time.Minute, "how long CreateTopics may take")
	f.DurationVar(&o.settleTimeout, "settle-timeout", 5*time.Minute, "how long to wait for leaders and full ISRs, from the request")
	f.DurationVar(&o.interval, "interval", 200*time.Millisecond, "Metadata poll interval")
	_ = cmd.MarkFlagRequired("partitions")
	return cmd
}

func newBenchScaleWaitCommand(g *cli.Options) *cobra.Command {
	o := &scaleWaitOptions{}
	var since int64
	cmd := &cobra.Command{
		Use:   "wait [TOPIC...]",
		Short: "Time until partitions are settled, or moved off a broker",
		Long: "Polls Metadata every --interval until the condition holds or --timeout\n" +
			"has passed since --since-unix-ms (default: now). The topics are the\n" +
			"named ones, or every non-internal topic.\n" +
			"  --until settled  every partition has a leader and a full ISR\n" +
			"  --until moved    every partition has a leader other than --broker\n" +
			"  --until out      every partition has a leader and --broker is in no ISR\n" +
			"Running out of time is reported (met: false), not an error. Give\n" +
			"--brokers without the broker that was killed: a dead seed only slows\n" +
			"the first poll down.",
		Example: "  weirctl --brokers 127.0.0.1:9093,127.0.0.1:9094 --timeout 2s --format json \\\n" +
			"      bench scale wait --until moved --broker 0 --timeout 60s --since-unix-ms $(date +%s%3N)",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.topics = args
			if cmd.Flags().Changed("since-unix-ms") {
				o.since = time.UnixMilli(since)
			} else {
				o.since = time.Now()
			}
			if err := o.validate(); err != nil {
				return err
			}
			res, err := scaleWait(cmd.Context(), g, o)
			if err != nil {
				return err
			}
			return res.write(cmd.OutOrStdout(), g.Format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.until, "until", waitSettled, "condition: settled, moved or out")
	f.Int32Var(&o.broker, "broker", -1, "with --until moved or out: the broker whose partitions must find another leader, or that must leave every ISR")
	f.DurationVar(&o.limit, "timeout", time.Minute, "give up this long after --since-unix-ms")
	f.DurationVar(&o.interval, "interval", 200*time.Millisecond, "Metadata poll interval")
	f.Int64Var(&since, "since-unix-ms", 0, "when the event being timed happened, in Unix milliseconds (default: now)")
	return cmd
}

func newBenchScaleLayoutCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "layout [TOPIC...]",
		Short: "Brokers, partitions, and how many partitions each broker leads",
		Long: "One Metadata request: the brokers, and for the named topics (default:\n" +
			"every non-internal topic) the partitions, how many each broker leads\n" +
			"and which broker leads the most (the one bench-scale kills).",
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := scaleLayout(cmd.Context(), g, args)
			if err != nil {
				return err
			}
			return res.write(cmd.OutOrStdout(), g.Format)
		},
	}
	return cmd
}

func newBenchScaleSampleCommand(g *cli.Options) *cobra.Command {
	o := &scaleSampleOptions{}
	var pids, dirs, metrics string
	cmd := &cobra.Command{
		Use:   "sample",
		Short: "RSS, threads, files, disk and CPU of broker processes over a window",
		Long: "Reads each process's CPU time (utime+stime of /proc/PID/stat), waits\n" +
			"--window, then reads it again together with VmRSS and Threads\n" +
			"(/proc/PID/status), open descriptors (/proc/PID/fd), the disk used by\n" +
			"its data directory (allocated blocks, as du) and, when given, the\n" +
			"go_goroutines gauge from its /metrics. CPU is percent of one core over\n" +
			"the window. Lists are comma-separated, one entry per broker, in the\n" +
			"same order; an empty --metrics-urls entry skips that broker's scrape.",
		Example: "  weirctl --format json bench scale sample --pids 101,102,103 \\\n" +
			"      --data-dirs d/node0,d/node1,d/node2 --window 30s \\\n" +
			"      --metrics-urls http://127.0.0.1:9644/metrics,http://127.0.0.1:9645/metrics,http://127.0.0.1:9646/metrics",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.parse(pids, dirs, metrics); err != nil {
				return err
			}
			res, err := scaleSample(cmd.Context(), g, o)
			if err != nil {
				return err
			}
			return res.write(cmd.OutOrStdout(), g.Format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&pids, "pids", "", "broker process ids (required)")
	f.StringVar(&dirs, "data-dirs", "", "each broker's data directory (required)")
	f.StringVar(&metrics, "metrics-urls", "", "each broker's Prometheus /metrics URL (optional)")
	f.DurationVar(&o.window, "window", 30*time.Second, "how long to measure CPU over (0: no CPU figure)")
	_ = cmd.MarkFlagRequired("pids")
	_ = cmd.MarkFlagRequired("data-dirs")
	return cmd
}

func newBenchScaleReportCommand(g *cli.Options) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report DIR",
		Short: "Tables and one JSON summary from the results bench-scale wrote to DIR",
		Long: "DIR/systems lists the systems measured, one directory name per line\n" +
			"(e.g. weir, kafka), in the order to show them; each directory holds\n" +
			"the documents of one run (see .ci/bench-scale.sh). Prints a table per\n" +
			"system and one side by side with ratios to the last system (the\n" +
			"reference, Kafka when it ran), and writes the whole summary as JSON\n" +
			"to --json-out. With --format json, prints that summary instead.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := loadScaleReport(args[0])
			if err != nil {
				return err
			}
			if out != "" {
				if err := rep.writeJSONFile(out); err != nil {
					return err
				}
			}
			return rep.write(cmd.OutOrStdout(), g.Format)
		},
	}
	cmd.Flags().StringVar(&out, "json-out", "", "also write the summary as JSON to this file")
	return cmd
}

type scaleCreateOptions struct {
	partitions    int32
	replicas      int16
	createTimeout time.Duration
	settleTimeout time.Duration
	interval      time.Duration
}

func (o *scaleCreateOptions) validate() error {
	switch {
	case o.partitions < 1:
		return fmt.Errorf("--partitions must be >= 1, got %d", o.partitions)
	case o.replicas < 1:
		return fmt.Errorf("--replication-factor must be >= 1, got %d", o.replicas)
	case o.createTimeout <= 0 || o.createTimeout.Milliseconds() > int64(^uint32(0)>>1):
		return fmt.Errorf("--create-timeout must be positive and fit the request's int32 milliseconds, got %s", o.createTimeout)
	case o.settleTimeout <= 0:
		return fmt.Errorf("--settle-timeout must be positive, got %s", o.settleTimeout)
	case o.interval < scaleMinInterval:
		return fmt.Errorf("--interval must be at least %s, got %s", scaleMinInterval, o.interval)
	}
	return nil
}

type scaleWaitOptions struct {
	topics   []string
	until    string
	broker   int32
	limit    time.Duration
	interval time.Duration
	since    time.Time
}

func (o *scaleWaitOptions) validate() error {
	switch {
	case o.until != waitSettled && o.until != waitMoved && o.until != waitOut:
		return fmt.Errorf("--until must be %s, %s or %s, got %q", waitSettled, waitMoved, waitOut, o.until)
	case o.until != waitSettled && o.broker < 0:
		return fmt.Errorf("--until %s needs --broker", o.until)
	case o.limit <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.limit)
	case o.interval < scaleMinInterval:
		return fmt.Errorf("--interval must be at least %s, got %s", scaleMinInterval, o.interval)
	}
	return nil
}

type scaleSampleOptions struct {
	pids       []int
	dataDirs   []string
	metricURLs []string
	window     time.Duration
}

// parse splits the per-broker lists and checks that they line up, since
// a figure attributed to the wrong broker would go unnoticed.
func (o *scaleSampleOptions) parse(pids, dirs, metrics string) error {
	o.pids = nil
	for _, p := range splitList(pids) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return fmt.Errorf("--pids: %q is not a process id", p)
		}
		o.pids = append(o.pids, n)
	}
	if len(o.pids) == 0 {
		return errors.New("--pids: no process given")
	}
	o.dataDirs = splitList(dirs)
	if len(o.dataDirs) != len(o.pids) {
		return fmt.Errorf("--data-dirs names %d directories for %d processes", len(o.dataDirs), len(o.pids))
	}
	o.metricURLs = nil
	if strings.TrimSpace(metrics) != "" {
		// Kept positional: an empty entry means no scrape for that broker.
		for _, u := range strings.Split(metrics, ",") {
			o.metricURLs = append(o.metricURLs, strings.TrimSpace(u))
		}
		if len(o.metricURLs) != len(o.pids) {
			return fmt.Errorf("--metrics-urls names %d URLs for %d processes", len(o.metricURLs), len(o.pids))
		}
	}
	if o.window < 0 {
		return fmt.Errorf("--window must be >= 0, got %s", o.window)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
