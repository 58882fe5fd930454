package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// ProduceOptions is what Produce sends: the part of bench produce's
// options that bench fanout's backlog shares.
type ProduceOptions struct {
	Records    int64
	RecordSize int
	Duration   time.Duration
	// TxnRecords > 0 writes the records in transactions of this many
	// each, committed one after the other; cl must be transactional.
	TxnRecords int64
}

// Produce is bench produce's loop, which also fills bench fanout's
// backlog: o.Records records of o.RecordSize bytes as fast as the client
// takes them (for at most o.Duration, when set), each timed from hand-off
// to acknowledgement.
func Produce(parent context.Context, g *cli.Options, cl *kgo.Client, errOut io.Writer, topic string, o *ProduceOptions) (Summary, error) {
	run := &Run{Target: o.Records}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	run.Cancel = cancel
	if o.Duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, o.Duration, context.DeadlineExceeded)
		defer stop()
	}

	// One shared random payload, as kafka-producer-perf-test does: random
	// letters keep compression honest-ish without paying to generate N
	// values, and franz-go never mutates a record's value.
	payload := make([]byte, o.RecordSize)
	for i := range payload {
		payload[i] = byte('a' + rand.IntN(26))
	}

	var (
		latMu sync.Mutex
		lat   = make([]time.Duration, 0, min(o.Records, 1<<24))
	)
	monCtx, stopMon := context.WithCancel(ctx)
	run.Started = time.Now()
	go run.Monitor(monCtx, errOut, "bench produce", g.Timeout)

	inTxn := false
	endTxn := func() {
		inTxn = false
		// A commit covers what was flushed (kgo's EndTransaction does
		// not flush).
		err := cl.Flush(ctx)
		if err == nil {
			err = cl.EndTransaction(ctx, kgo.TryCommit)
		}
		if err != nil && ctx.Err() == nil {
			run.Errs.Add(1)
			cancel(fmt.Errorf("commit a transaction to %s: %w", topic, err))
		}
	}
	for i := int64(0); i < o.Records && ctx.Err() == nil; i++ {
		if o.TxnRecords > 0 && !inTxn {
			if err := cl.BeginTransaction(); err != nil {
				cancel(fmt.Errorf("begin a transaction: %w", err))
				break
			}
			inTxn = true
		}
		start := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: payload}, func(r *kgo.Record, err error) {
			if err != nil {
				// Records failed because we stopped on purpose are
				// unsent, not broker errors.
				if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
					return
				}
				run.Errs.Add(1)
				cancel(fmt.Errorf("produce to %s: %s", topic, cli.StatusCell(err, "")))
				return
			}
			now := time.Now()
			latMu.Lock()
			lat = append(lat, now.Sub(start))
			latMu.Unlock()
			run.Bytes.Add(int64(len(r.Key) + len(r.Value)))
			run.Done.Add(1)
			run.Completed(now)
		})
		if inTxn && ((i+1)%o.TxnRecords == 0 || i+1 == o.Records) {
			endTxn() // the next transaction starts after its commit
		}
	}
	if inTxn {
		endTxn()
	}

	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), g.Timeout+time.Second)
	flushErr := cl.Flush(flushCtx)
	cancelFlush()
	stopMon()

	reason, runErr := StopReason(parent, ctx)
	if run.Done.Load() >= o.Records {
		// The last acks can land just as --duration or Ctrl-C fires;
		// a complete run is complete regardless.
		reason, runErr = StopRecords, nil
	}
	if runErr == nil && flushErr != nil {
		reason, runErr = StopFailed, g.DescribeCallErr("waiting for acks", flushErr)
	}
	latMu.Lock()
	defer latMu.Unlock()
	sum := NewSummary("produce", topic, run.Done.Load(), run.Bytes.Load(), run.Errs.Load(), run.Elapsed(), lat)
	sum.Stopped = reason
	return sum, runErr
}
