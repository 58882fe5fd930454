// Package idlefetch is weirctl bench idle-fetch: what an idle consumer of
// many partitions costs the broker with KIP-227 fetch sessions and
// without, side by side in one run.
//
// An idle consumer long-polls every partition it owns and gets nothing:
// without sessions each fetch lists every partition both ways, with
// sessions an incremental fetch lists none. The bench runs one kgo
// consumer at the log end of an idle topic, sessions on (kgo's default)
// and off (kgo.DisableFetchSessions), and reports per fetch the request
// and response bytes kgo wrote and read, and the broker's CPU per
// consumer-second from /proc/PID/stat (utime+stime), less the broker's
// CPU with no consumer measured for as long just before (its baseline).
package idlefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

type options struct {
	partitions int32
	duration   time.Duration
	warmup     time.Duration
	maxWait    time.Duration
	sessions   string
	brokerPID  int
	consumers  int
	rounds     int
	settle     time.Duration
}

// NewCommand is weirctl bench idle-fetch.
func NewCommand(g *cli.Options) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "idle-fetch TOPIC",
		Short: "What an idle consumer of many partitions costs, with fetch sessions and without",
		Long: "Create TOPIC with --partitions partitions if it does not exist, then run one\n" +
			"consumer at its end for --duration, with fetch sessions (KIP-227), without,\n" +
			"or both one after the other, and report per fetch the request and response\n" +
			"bytes and, with --broker-pid, the broker's CPU per consumer-second less its\n" +
			"CPU with no consumer (measured for --duration first). Nothing may produce\n" +
			"to TOPIC meanwhile.",
		Example: "  weirctl bench idle-fetch idle --partitions 1000 --broker-pid $(pgrep -n weir)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			rows, err := run(cmd.Context(), g, cmd.ErrOrStderr(), args[0], o)
			if err != nil {
				return err
			}
			return write(cmd.OutOrStdout(), g.Format, rows)
		},
	}
	f := cmd.Flags()
	f.Int32Var(&o.partitions, "partitions", 1000, "partitions of TOPIC when it is created")
	f.DurationVar(&o.duration, "duration", 30*time.Second, "how long each mode is measured")
	f.DurationVar(&o.warmup, "warmup", 5*time.Second, "how long each consumer runs before it is measured")
	f.DurationVar(&o.maxWait, "fetch-max-wait", 500*time.Millisecond, "the consumer's fetch max wait (fetch.max.wait.ms; 500 ms is the Java default)")
	f.StringVar(&o.sessions, "sessions", "both", "fetch sessions: on, off, or both")
	f.IntVar(&o.brokerPID, "broker-pid", 0, "the broker's process id, to read its CPU time from /proc (0: no CPU figures)")
	f.IntVar(&o.consumers, "consumers", 1, "idle consumers run at once (figures are per consumer)")
	f.IntVar(&o.rounds, "rounds", 1, "rounds of baseline and modes, the modes' order alternating, summed")
	f.DurationVar(&o.settle, "settle", 20*time.Second, "wait after creating TOPIC before measuring, for the broker to settle")
	return cmd
}

func (o *options) validate() error {
	switch {
	case o.partitions < 1:
		return fmt.Errorf("--partitions must be positive, got %d", o.partitions)
	case o.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %s", o.duration)
	case o.warmup < 0:
		return fmt.Errorf("--warmup must be >= 0, got %s", o.warmup)
	case o.consumers < 1 || o.rounds < 1:
		return fmt.Errorf("--consumers and --rounds must be positive, got %d and %d", o.consumers, o.rounds)
	case o.sessions != "on" && o.sessions != "off" && o.sessions != "both":
		return fmt.Errorf("--sessions must be on, off or both, got %q", o.sessions)
	}
	return nil
}

// Row is one mode's figures; the field names are what .ci scripts read.
type Row struct {
	Sessions           string  `json:"sessions"`
	Fetches            int64   `json:"fetches"`
	RequestBytesFetch  float64 `json:"request_bytes_per_fetch"`
	ResponseBytesFetch float64 `json:"response_bytes_per_fetch"`
	// BrokerCPUMillisPerSec is the broker's CPU per consumer-second, less
	// its baseline; BaselineCPUMillisPerSec is that baseline (-1: no
	// --broker-pid).
	BrokerCPUMillisPerSec   float64 `json:"broker_cpu_ms_per_s"`
	BaselineCPUMillisPerSec float64 `json:"baseline_cpu_ms_per_s"`
}

func run(ctx context.Context, g *cli.Options, errOut io.Writer, topic string, o *options) ([]Row, error) {
	created, err := ensureTopic(ctx, g, topic, o.partitions)
	if err != nil {
		return nil, err
	}
	if created {
		fmt.Fprintf(errOut, "idle-fetch: created %s, settling %s\n", topic, o.settle)
		if err := sleep(ctx, o.settle); err != nil {
			return nil, err
		}
	}
	var modes []bool
	switch o.sessions {
	case "on":
		modes = []bool{true}
	case "off":
		modes = []bool{false}
	default:
		modes = []bool{true, false}
	}
	totals := make(map[bool]*tally, len(modes))
	for _, on := range modes {
		totals[on] = &tally{}
	}
	var baselineMs float64
	for round := range o.rounds {
		if o.brokerPID > 0 {
			fmt.Fprintf(errOut, "idle-fetch: round %d, broker baseline, no consumer, %s\n", round+1, o.duration)
			ms, err := cpuOver(ctx, o.brokerPID, o.duration)
			if err != nil {
				return nil, err
			}
			baselineMs += ms
		}
		for i := range modes {
			on := modes[(i+round)%len(modes)]
			if err := measure(ctx, g, errOut, topic, on, o, totals[on]); err != nil {
				return nil, err
			}
		}
	}
	secs := float64(o.rounds) * o.duration.Seconds()
	var rows []Row
	for _, on := range modes {
		t := totals[on]
		r := Row{Sessions: map[bool]string{true: "on", false: "off"}[on], Fetches: t.fetches, BrokerCPUMillisPerSec: -1, BaselineCPUMillisPerSec: -1}
		if t.fetches > 0 {
			r.RequestBytesFetch = float64(t.written) / float64(t.fetches)
			r.ResponseBytesFetch = float64(t.read) / float64(t.fetches)
		}
		if o.brokerPID > 0 {
			r.BaselineCPUMillisPerSec = baselineMs / secs
			r.BrokerCPUMillisPerSec = (t.cpuMs/secs - r.BaselineCPUMillisPerSec) / float64(o.consumers)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// tally sums a mode's rounds.
type tally struct {
	fetches, written, read int64
	cpuMs                  float64
}

// ensureTopic creates the topic unless it exists, and reports whether it
// did.
func ensureTopic(ctx context.Context, g *cli.Options, topic string, partitions int32) (created bool, err error) {
	err = g.WithAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil:
			created = true
		case !errors.Is(err, kerr.TopicAlreadyExists):
			return fmt.Errorf("creating %s: %w", topic, err)
		}
		return nil
	})
	return created, err
}

// fetchBytes counts what a client wrote and read for Fetch requests.
type fetchBytes struct {
	fetches, written, read atomic.Int64
}

func (f *fetchBytes) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		f.written.Add(int64(n))
	}
}

func (f *fetchBytes) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		f.fetches.Add(1)
		f.read.Add(int64(n))
	}
}

// measure runs the consumers in one mode, adding what it measured to t.
func measure(ctx context.Context, g *cli.Options, errOut io.Writer, topic string, sessions bool, o *options, t *tally) error {
	counts := &fetchBytes{}
	opts := []kgo.Opt{
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchMaxWait(o.maxWait), kgo.WithHooks(counts),
	}
	if !sessions {
		opts = append(opts, kgo.DisableFetchSessions())
	}
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan error, o.consumers)
	started := 0
	stop := func() error {
		stopPolling()
		var errs []error
		for range started {
			errs = append(errs, <-polled)
		}
		return errors.Join(errs...)
	}
	for range o.consumers {
		cl, err := g.NewClient(opts...)
		if err != nil {
			return errors.Join(err, stop())
		}
		started++
		go func() {
			defer cl.Close()
			polled <- poll(pollCtx, cl)
		}()
	}
	fmt.Fprintf(errOut, "idle-fetch: sessions %s, %d consumers, warming up %s, measuring %s\n",
		map[bool]string{true: "on", false: "off"}[sessions], o.consumers, o.warmup, o.duration)
	if err := sleep(ctx, o.warmup); err != nil {
		return errors.Join(err, stop())
	}
	f0, w0, r0 := counts.fetches.Load(), counts.written.Load(), counts.read.Load()
	if o.brokerPID > 0 {
		ms, err := cpuOver(ctx, o.brokerPID, o.duration)
		if err != nil {
			return errors.Join(err, stop())
		}
		t.cpuMs += ms
	} else if err := sleep(ctx, o.duration); err != nil {
		return errors.Join(err, stop())
	}
	t.fetches += counts.fetches.Load() - f0
	t.written += counts.written.Load() - w0
	t.read += counts.read.Load() - r0
	return stop()
}

// poll keeps the consumer fetching until ctx ends; records or errors on
// an idle topic mean the run is not measuring what it says.
func poll(ctx context.Context, cl *kgo.Client) error {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := cli.FirstFetchError(fs); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if n := fs.NumRecords(); n > 0 {
			return fmt.Errorf("the topic is not idle: %d records arrived", n)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cpuOver is the CPU milliseconds process pid used over d.
func cpuOver(ctx context.Context, pid int, d time.Duration) (float64, error) {
	before, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	if err := sleep(ctx, d); err != nil {
		return 0, err
	}
	after, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	// Linux reports in clock ticks of 1/100 s (USER_HZ) on every
	// architecture Go supports.
	return float64(after-before) * 10, nil
}

// cpuTicks is utime+stime of pid from /proc/PID/stat.
func cpuTicks(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("broker CPU: %w", err)
	}
	return parseStatTicks(string(raw))
}

// parseStatTicks reads utime and stime (fields 14 and 15) after the
// command name, which may itself hold spaces and parentheses.
func parseStatTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("broker CPU: malformed /proc stat %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state): utime is field 14, stime 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("broker CPU: short /proc stat %q", stat)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("broker CPU: %w", err)
	}
	return utime + stime, nil
}

func write(w io.Writer, format string, rows []Row) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, map[string]any{"modes": rows, "ratios": ratios(rows)})
	}
	t := cli.NewTable("SESSIONS", "FETCHES", "REQ-B/FETCH", "RESP-B/FETCH", "BROKER-CPU-MS/S", "BASELINE-CPU-MS/S")
	for _, r := range rows {
		t.Row(r.Sessions, strconv.FormatInt(r.Fetches, 10), r.RequestBytesFetch, r.ResponseBytesFetch, r.BrokerCPUMillisPerSec, r.BaselineCPUMillisPerSec)
	}
	if err := t.Write(w); err != nil {
		return err
	}
	if r := ratios(rows); r != nil {
		_, err := fmt.Fprintf(w, "off/on: request bytes %.1fx, response bytes %.1fx, broker CPU %.1fx\n",
			r["request_bytes"], r["response_bytes"], r["broker_cpu"])
		return err
	}
	return nil
}

// ratios are off/on of each figure, when both modes ran.
func ratios(rows []Row) map[string]float64 {
	var on, off *Row
	for i := range rows {
		if rows[i].Sessions == "on" {
			on = &rows[i]
		} else {
			off = &rows[i]
		}
	}
	if on == nil || off == nil {
		return nil
	}
	div := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	return map[string]float64{
		"request_bytes":  div(off.RequestBytesFetch, on.RequestBytesFetch),
		"response_bytes": div(off.ResponseBytesFetch, on.ResponseBytesFetch),
		"broker_cpu":     div(off.BrokerCPUMillisPerSec, on.BrokerCPUMillisPerSec),
	}
}
