package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

type consumeOptions struct {
	group     string
	offset    string
	count     int
	isolation string
	// bufferMemory is --buffer-memory as given; consume_memory.go maps it.
	bufferMemory string
}

func newConsumeCommand(g *cli.Options) *cobra.Command {
	o := &consumeOptions{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records from a topic",
		Long: "Print records (partition, offset, timestamp, key, value) from every\n" +
			"partition of TOPIC. With -n, stops after that many records; otherwise\n" +
			"runs until interrupted. With -g, joins the consumer group and commits\n" +
			"exactly the records it printed; -o then only applies to partitions the\n" +
			"group has no committed offset for. --format json prints one object per\n" +
			"line; --format yaml prints one YAML document per record, each opened by ---.\n\n" +
			"--buffer-memory bounds the fetched bytes held at once (Kafka's consumer\n" +
			"buffer.memory, KIP-81). Its 2 fetches take turns between brokers: with more\n" +
			"than 2, a broker with nothing new can hold a turn for up to the fetch wait (5s).",
		Example: "  weirctl consume orders -n 10\n" +
			"  weirctl consume orders -o end -g audit --format json | jq .value",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, err := cli.ParseOffset(o.offset)
			if err != nil {
				return err
			}
			iso, err := parseIsolation(o.isolation)
			if err != nil {
				return err
			}
			if o.count < 0 {
				return fmt.Errorf("--num must be >= 0, got %d", o.count)
			}
			memOpts, err := bufferMemoryOpts(o.bufferMemory)
			if err != nil {
				return err
			}
			topic := args[0]
			opts := []kgo.Opt{
				kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(start),
				kgo.FetchIsolationLevel(iso),
			}
			opts = append(opts, memOpts...)
			if o.group != "" {
				// Marks rather than plain autocommit: with -n we poll
				// past the last printed record, and committing those
				// would silently skip them for the group's next run.
				opts = append(opts, kgo.ConsumerGroup(o.group), kgo.AutoCommitMarks())
			}
			cl, err := g.NewClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := checkTopicExists(cmd.Context(), g, cl, topic); err != nil {
				return err
			}
			return consumeRecords(cmd.Context(), g, cl, cmd.OutOrStdout(), o.count, o.group != "")
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.group, "group", "g", "", "consumer group to join and commit to (default: no group)")
	f.StringVarP(&o.offset, "offset", "o", "start", "where to start: start, end, or an exact OFFSET")
	f.IntVarP(&o.count, "num", "n", 0, "stop after this many records (0: run until interrupted)")
	f.StringVar(&o.isolation, "isolation", "read_uncommitted", "read_committed or read_uncommitted")
	f.StringVar(&o.bufferMemory, "buffer-memory", "", bufferMemoryHelp)
	return cmd
}

func parseIsolation(s string) (kgo.IsolationLevel, error) {
	switch strings.ToLower(s) {
	case "read_uncommitted", "uncommitted":
		return kgo.ReadUncommitted(), nil
	case "read_committed", "committed":
		return kgo.ReadCommitted(), nil
	}
	return kgo.ReadUncommitted(), fmt.Errorf("--isolation must be read_committed or read_uncommitted; got %q", s)
}

// checkTopicExists turns a missing topic into an immediate error. franz-go
// would otherwise keep refreshing metadata forever and the user would stare
// at a silent terminal.
func checkTopicExists(ctx context.Context, g *cli.Options, cl *kgo.Client, topic string) error {
	_, err := cli.TopicPartitions(ctx, g, cl, topic)
	return err
}

// consumedRecord is the JSON shape of one consumed record.
type consumedRecord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp string  `json:"timestamp"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// recordPrinter writes records as they arrive. The table form uses fixed
// column widths instead of tabwriter because a stream cannot be aligned
// after the fact.
type recordPrinter struct {
	w          io.Writer
	format     string
	headerDone bool
}

const recordRowFormat = "%-9v  %-10v  %-24v  %-12v  %v\n"

func (p *recordPrinter) print(r *kgo.Record) error {
	if p.format != cli.FormatTable {
		return cli.WriteStreamDocument(p.w, p.format, consumedRecord{
			Topic:     r.Topic,
			Partition: r.Partition,
			Offset:    r.Offset,
			Timestamp: r.Timestamp.UTC().Format(timestampLayout),
			Key:       cli.JSONBytes(r.Key),
			Value:     cli.JSONBytes(r.Value),
		})
	}
	if !p.headerDone {
		p.headerDone = true
		if _, err := fmt.Fprintf(p.w, recordRowFormat, "PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE"); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(p.w, recordRowFormat, r.Partition, r.Offset,
		r.Timestamp.UTC().Format(timestampLayout), cli.DisplayBytes(r.Key), cli.DisplayBytes(r.Value))
	return err
}

func consumeRecords(ctx context.Context, g *cli.Options, cl *kgo.Client, out io.Writer, limit int, inGroup bool) (err error) {
	pr := &recordPrinter{w: out, format: g.Format}
	seen := 0
	if inGroup {
		defer func() {
			// The run context may already be cancelled by Ctrl-C; the
			// commit still deserves its own bounded attempt.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Timeout)
			defer cancel()
			if cerr := cl.CommitMarkedOffsets(cctx); cerr != nil && err == nil {
				err = g.DescribeCallErr("committing offsets", cerr)
			}
		}()
	}
	for limit == 0 || seen < limit {
		want := -1
		if limit > 0 {
			want = limit - seen
		}
		fetches := cl.PollRecords(ctx, want)
		if ctx.Err() != nil {
			break
		}
		if fetches.IsClientClosed() {
			return errors.New("client closed while consuming")
		}
		if ferr := cli.FirstFetchError(fetches); ferr != nil {
			return ferr
		}
		var perr error
		fetches.EachRecord(func(r *kgo.Record) {
			if perr != nil {
				return
			}
			if perr = pr.print(r); perr == nil {
				seen++
				if inGroup {
					cl.MarkCommitRecords(r)
				}
			}
		})
		if perr != nil {
			return perr
		}
	}
	if limit > 0 && seen < limit {
		return fmt.Errorf("interrupted after %d of %d records", seen, limit)
	}
	return nil
}
