package fanout

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// partitionOffsets returns a partition's log start and end (high
// watermark) offsets.
func partitionOffsets(ctx context.Context, g *cli.Options, cl *kgo.Client, topic string, partition int32) (start, end int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	lookup := func(what string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		offsets, err := list(ctx, topic)
		if err != nil {
			return 0, g.DescribeCallErr(fmt.Sprintf("listing the %s offset of %s/%d", what, topic, partition), err)
		}
		o, ok := offsets.Lookup(topic, partition)
		switch {
		case !ok:
			return 0, fmt.Errorf("%s/%d: the broker listed no %s offset for it (does the partition exist?)", topic, partition, what)
		case o.Err != nil:
			return 0, fmt.Errorf("listing the %s offset of %s/%d: %s", what, topic, partition, cli.StatusCell(o.Err, ""))
		}
		return o.Offset, nil
	}
	if start, err = lookup("start", adm.ListStartOffsets); err != nil {
		return 0, 0, err
	}
	if end, err = lookup("end", adm.ListEndOffsets); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

// prepareBacklog makes partition 0 hold at least --records records and
// returns the first --records of them, which every preload run reads.
// It produces only what is missing, with bench produce's loop, so a
// repeated invocation reuses the backlog instead of growing it.
func (f *fanoutBench) prepareBacklog(ctx context.Context, cl *kgo.Client) (harness.OffsetRange, error) {
	want := f.o.records
	start, end, err := partitionOffsets(ctx, f.g, cl, f.topic, fanoutPartition)
	if err != nil {
		return harness.OffsetRange{}, err
	}
	have := end - start
	switch {
	case have >= want:
		fmt.Fprintf(f.errOut, "reusing the first %d of the %d records in %s/%d as the backlog (their sizes are as written, whatever --record-size says)\n",
			want, have, f.topic, fanoutPartition)
		return harness.OffsetRange{Start: start, End: start + want}, nil
	case have > 0:
		fmt.Fprintf(f.errOut, "%s/%d holds %d records; producing %d more for a backlog of %d\n", f.topic, fanoutPartition, have, want-have, want)
	default:
		fmt.Fprintf(f.errOut, "producing a backlog of %d records of %d bytes to %s/%d\n", want, f.o.recordSize, f.topic, fanoutPartition)
	}
	sum, err := harness.Produce(ctx, f.g, cl, f.errOut, f.topic, &harness.ProduceOptions{Records: want - have, RecordSize: f.o.recordSize})
	if err != nil {
		return harness.OffsetRange{}, fmt.Errorf("producing the backlog: %w", err)
	}
	if sum.Records < want-have {
		return harness.OffsetRange{}, fmt.Errorf("producing the backlog: %d of %d records acknowledged", sum.Records, want-have)
	}
	if start, end, err = partitionOffsets(ctx, f.g, cl, f.topic, fanoutPartition); err != nil {
		return harness.OffsetRange{}, err
	}
	if end-start < want {
		return harness.OffsetRange{}, fmt.Errorf("%s/%d holds %d records after producing the backlog, want %d: did retention delete some?", f.topic, fanoutPartition, end-start, want)
	}
	return harness.OffsetRange{Start: start, End: start + want}, nil
}

// produceTail sends n records at --rate, open loop: each record is due at
// a fixed time from the start, and a producer that fell behind catches up
// rather than stretching the run. Each value starts with its send time.
// Failures go to fail, which ends the run.
func (f *fanoutBench) produceTail(ctx context.Context, cl *kgo.Client, n int64, fail func(error)) {
	payload := make([]byte, f.o.recordSize)
	for i := range payload {
		payload[i] = byte('a' + rand.IntN(26))
	}
	interval := float64(time.Second) / float64(f.o.rate)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	for i := int64(0); i < n && ctx.Err() == nil; i++ {
		if wait := time.Until(start.Add(time.Duration(float64(i) * interval))); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		// Each record needs its own value: franz-go keeps it until the
		// record is acknowledged.
		value := append([]byte(nil), payload...)
		binary.BigEndian.PutUint64(value, uint64(time.Now().UnixNano()))
		cl.Produce(ctx, &kgo.Record{Topic: f.topic, Partition: fanoutPartition, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("producing to %s/%d: %s", f.topic, fanoutPartition, cli.StatusCell(err, "")))
			}
		})
	}
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.g.Timeout+time.Second)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil && ctx.Err() == nil {
		fail(f.g.DescribeCallErr("waiting for produce acks", err))
	}
}
