package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

type consumeOptions struct {
	records   int64
	consumers int
	duration  time.Duration
	offset    string
}

func (o *consumeOptions) validate() error {
	switch {
	case o.records <= 0:
		return fmt.Errorf("--records must be positive, got %d", o.records)
	case o.consumers < 1:
		return fmt.Errorf("--consumers must be >= 1, got %d", o.consumers)
	case o.duration < 0:
		return fmt.Errorf("--duration must be >= 0, got %s", o.duration)
	}
	return nil
}

func newConsumeCommand(g *cli.Options) *cobra.Command {
	o := &consumeOptions{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Consume --records records as fast as possible",
		Long: "Consume --records records with --consumers clients, each reading a\n" +
			"disjoint share of TOPIC's partitions (no consumer group, so the group\n" +
			"protocol does not skew the numbers). Latency is end-to-end: consume time\n" +
			"minus the record's timestamp, so it is meaningful while a producer runs\n" +
			"(e.g. with -o end) and is simply the data's age otherwise.",
		Example: "  weirctl bench consume bench --records 1000000 --consumers 3",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			start, err := cli.ParseOffset(o.offset)
			if err != nil {
				return err
			}
			sum, runErr := benchConsume(cmd.Context(), g, cmd.ErrOrStderr(), args[0], start, o)
			if sum == nil {
				return runErr
			}
			if err := sum.Write(cmd.OutOrStdout(), g.Format); err != nil {
				return err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.records, "records", 0, "number of records to consume (required)")
	f.IntVarP(&o.consumers, "consumers", "c", 1, "number of concurrent consumer clients")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long even if --records are not done (0: no limit)")
	f.StringVarP(&o.offset, "offset", "o", "start", "where to start: start, end, or an exact OFFSET")
	_ = cmd.MarkFlagRequired("records")
	return cmd
}

// assignPartitions deals partitions round-robin so consumer loads differ by
// at most one partition; it never returns an empty share.
func assignPartitions(parts []int32, consumers int) [][]int32 {
	n := min(consumers, len(parts))
	shares := make([][]int32, n)
	for i, p := range parts {
		shares[i%n] = append(shares[i%n], p)
	}
	return shares
}

func benchConsume(parent context.Context, g *cli.Options, errOut io.Writer, topic string, start kgo.Offset, o *consumeOptions) (*harness.Summary, error) {
	meta, err := g.NewClient()
	if err != nil {
		return nil, err
	}
	parts, err := cli.TopicPartitions(parent, g, meta, topic)
	meta.Close()
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("topic %s has no partitions", topic)
	}
	shares := assignPartitions(parts, o.consumers)
	if len(shares) < o.consumers {
		fmt.Fprintf(errOut, "note: only %d partitions, using %d consumers\n", len(parts), len(shares))
	}

	run := &harness.Run{Target: o.records}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	run.Cancel = cancel
	if o.duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, o.duration, context.DeadlineExceeded)
		defer stop()
	}

	clients := make([]*kgo.Client, 0, len(shares))
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for _, share := range shares {
		offsets := make(map[int32]kgo.Offset, len(share))
		for _, p := range share {
			offsets[p] = start
		}
		cl, err := g.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
		if err != nil {
			return nil, err
		}
		clients = append(clients, cl)
	}

	monCtx, stopMon := context.WithCancel(ctx)
	defer stopMon()
	run.Started = time.Now()
	go run.Monitor(monCtx, errOut, "bench consume", g.Timeout)

	// Each worker keeps its own latencies so the hot path takes no lock.
	lats := make([][]time.Duration, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() { lats[i] = consumeWorker(ctx, cl, run) })
	}
	wg.Wait()
	stopMon()

	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	reason, runErr := harness.StopReason(parent, ctx)
	done := min(run.Done.Load(), o.records)
	if done == o.records {
		reason, runErr = harness.StopRecords, nil
	}
	sum := harness.NewSummary("consume", topic, done, run.Bytes.Load(), run.Errs.Load(), run.Elapsed(), all)
	sum.Stopped = reason
	return &sum, runErr
}

func consumeWorker(ctx context.Context, cl *kgo.Client, run *harness.Run) []time.Duration {
	var lat []time.Duration
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return lat
		}
		if err := cli.FirstFetchError(fetches); err != nil {
			run.Errs.Add(1)
			run.Cancel(err)
			return lat
		}
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			n := run.Done.Add(1)
			// Workers race past the target by up to one poll; records
			// beyond it are not counted so the totals are exact.
			if n > run.Target {
				return
			}
			lat = append(lat, now.Sub(r.Timestamp))
			run.Bytes.Add(int64(len(r.Key) + len(r.Value)))
			run.Completed(now)
			if n == run.Target {
				run.Cancel(harness.ErrTargetReached)
			}
		})
	}
	return lat
}
