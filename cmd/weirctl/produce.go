package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

type produceOptions struct {
	key         string
	partition   int32
	value       string
	compression string
	acks        string
}

func newProduceCommand(g *cli.Options) *cobra.Command {
	o := &produceOptions{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce records, one per stdin line",
		Long: "Produce one record per line read from stdin (the trailing newline is not\n" +
			"part of the value; empty lines become empty records), or a single record\n" +
			"given with --value. For each record, prints partition@offset in input\n" +
			"order, or one JSON object per line with --format json (with --format yaml,\n" +
			"one YAML document per record, each opened by ---). With --acks 0\n" +
			"the broker reports nothing back, so the offset prints as -1.",
		Example: "  printf 'a\\nb\\n' | weirctl produce orders -k customer-7\n" +
			"  weirctl produce orders --value hello -p 0 --acks 1 --compression zstd",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			codec, err := cli.ParseCompression(o.compression)
			if err != nil {
				return err
			}
			acks, err := cli.ParseAcks(o.acks)
			if err != nil {
				return err
			}
			if o.partition < -1 {
				return fmt.Errorf("--partition must be >= 0 (or -1 to let the partitioner choose), got %d", o.partition)
			}
			var key []byte
			if cmd.Flags().Changed("key") {
				key = []byte(o.key)
			}
			var in io.Reader = cmd.InOrStdin()
			if cmd.Flags().Changed("value") {
				// Appending the newline lets --value share the line path,
				// so both inputs get identical record semantics.
				in = strings.NewReader(o.value + "\n")
			}
			opts := g.ProducerOpts(codec, acks)
			opts = append(opts, kgo.DefaultProduceTopic(args[0]))
			if o.partition >= 0 {
				opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			}
			cl, err := g.NewClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			return produceLines(cmd.Context(), g, cl, in, cmd.OutOrStdout(), cmd.ErrOrStderr(), key, o.partition, acks)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.key, "key", "k", "", "key for every record (default: no key)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "partition to produce to (-1: partitioner chooses)")
	f.StringVar(&o.value, "value", "", "produce this single value instead of reading stdin")
	f.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	f.StringVar(&o.acks, "acks", "-1", "required acks: -1 (all), 1 (leader), 0 (none)")
	return cmd
}

const maxShownRecordErrors = 10

// produceResult is the JSON shape of one produced record.
type produceResult struct {
	Line         int    `json:"line"`
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// inOrder releases results in input order. Promises fire per partition, so
// without it, output lines would not line up with input lines whenever
// records spread across partitions.
type inOrder struct {
	mu      sync.Mutex
	next    int
	pending map[int]produceResult
	emit    func(produceResult)
}

func newInOrder(emit func(produceResult)) *inOrder {
	return &inOrder{pending: make(map[int]produceResult), emit: emit}
}

func (o *inOrder) done(i int, r produceResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending[i] = r
	for {
		r, ok := o.pending[o.next]
		if !ok {
			return
		}
		delete(o.pending, o.next)
		o.emit(r)
		o.next++
	}
}

// readLines feeds lines to a channel so that the produce loop can stop on
// Ctrl-C even while a terminal read is blocked.
func readLines(ctx context.Context, in io.Reader, lines chan<- []byte, errc chan<- error) {
	defer close(lines)
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		// ReadBytes has no line-length cap, unlike bufio.Scanner, so one
		// huge record is limited only by what the broker accepts.
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			select {
			case lines <- trimEOL(line):
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				errc <- fmt.Errorf("reading input: %w", err)
			}
			return
		}
	}
}

// trimEOL drops one line terminator, accepting CRLF so files written on
// Windows do not grow a stray \r on every value.
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

func produceLines(ctx context.Context, g *cli.Options, cl *kgo.Client, in io.Reader, out, errOut io.Writer, key []byte, partition int32, acks kgo.Acks) error {
	var (
		failMu   sync.Mutex
		failed   int
		firstErr error
		writeErr error
	)
	shownErrs := 0
	ordered := newInOrder(func(r produceResult) {
		if writeErr != nil {
			return
		}
		switch {
		case g.Format != cli.FormatTable:
			writeErr = cli.WriteStreamDocument(out, g.Format, r)
		case r.Error != "":
			// A dead broker fails every record the same way; a wall of
			// identical lines would bury the summary error.
			shownErrs++
			if shownErrs <= maxShownRecordErrors {
				fmt.Fprintf(errOut, "line %d: %s\n", r.Line, joinErr(r.Error, r.ErrorMessage))
			} else if shownErrs == maxShownRecordErrors+1 {
				fmt.Fprintln(errOut, "(further record errors not shown)")
			}
		default:
			_, writeErr = fmt.Fprintf(out, "%d@%d\n", r.Partition, r.Offset)
		}
	})

	lines := make(chan []byte, 128)
	readErr := make(chan error, 1)
	go readLines(ctx, in, lines, readErr)

	n := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			i := n
			n++
			rec := &kgo.Record{Key: key, Value: line, Partition: partition}
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				res := produceResult{Line: i + 1, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
				if acks == kgo.NoAck() {
					// With acks=0 the broker never says where the record
					// landed; franz-go leaves 0, which would look real.
					res.Offset = -1
				}
				if err != nil {
					res.Error = cli.KafkaErrName(err)
					res.ErrorMessage = cli.KafkaErrDetail(err, "")
					res.Partition, res.Offset = -1, -1
					failMu.Lock()
					failed++
					if firstErr == nil {
						firstErr = err
					}
					failMu.Unlock()
				}
				ordered.done(i, res)
			})
		}
	}

	// Flush even after Ctrl-C: records already handed to the client should
	// get a definite outcome printed rather than vanish silently.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(g.Timeout, time.Second)+time.Second)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil {
		return g.DescribeCallErr("flushing records", err)
	}

	select {
	case err := <-readErr:
		return err
	default:
	}
	ordered.mu.Lock()
	werr := writeErr
	ordered.mu.Unlock()
	if werr != nil {
		return werr
	}
	failMu.Lock()
	defer failMu.Unlock()
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed; first error: %s", failed, n, cli.StatusCell(firstErr, ""))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted after %d records", n)
	}
	return nil
}

func joinErr(name, msg string) string {
	if msg == "" || msg == name {
		return name
	}
	return name + ": " + msg
}
