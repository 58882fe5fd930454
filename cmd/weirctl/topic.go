package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func newTopicCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe and delete topics",
	}
	cmd.AddCommand(
		newTopicCreateCommand(g),
		newTopicListCommand(g),
		newTopicDescribeCommand(g),
		newTopicDeleteCommand(g),
	)
	return cmd
}

type topicCreateOptions struct {
	partitions int32
	replicas   int16
	configs    []string
	dryRun     bool
}

// topicResult is the JSON shape for create and delete; one per topic so a
// script can see exactly which names failed in a multi-topic call.
type topicResult struct {
	Topic        string `json:"topic"`
	ID           string `json:"id,omitempty"`
	Partitions   int32  `json:"partitions,omitempty"`
	Replicas     int16  `json:"replicas,omitempty"`
	DryRun       bool   `json:"dry_run,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

func newTopicCreateCommand(g *cli.Options) *cobra.Command {
	o := &topicCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME...",
		Short: "Create topics",
		Long: "Create one or more topics. -1 for partitions or replicas asks the broker\n" +
			"for its default. --dry-run asks the broker to validate without creating.",
		Example: "  weirctl topic create orders -p 6 -r 1 -c retention.ms=86400000 -c cleanup.policy=compact",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			configs, err := parseConfigs(o.configs)
			if err != nil {
				return err
			}
			if err := validateCreateCounts(o.partitions, o.replicas); err != nil {
				return err
			}
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				create := adm.CreateTopics
				if o.dryRun {
					create = adm.ValidateCreateTopics
				}
				resps, err := create(ctx, o.partitions, o.replicas, configs, args...)
				if err != nil {
					return g.DescribeCallErr("create topics", err)
				}
				return printCreateResults(cmd.OutOrStdout(), g.Format, args, resps, o.dryRun)
			})
		},
	}
	f := cmd.Flags()
	f.Int32VarP(&o.partitions, "partitions", "p", -1, "partitions per topic (-1: broker default)")
	f.Int16VarP(&o.replicas, "replicas", "r", -1, "replication factor (-1: broker default)")
	f.StringArrayVarP(&o.configs, "config", "c", nil, "topic config key=value (repeatable)")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate only; do not create")
	return cmd
}

func validateCreateCounts(partitions int32, replicas int16) error {
	if partitions == 0 || partitions < -1 {
		return fmt.Errorf("--partitions must be positive or -1, got %d", partitions)
	}
	if replicas == 0 || replicas < -1 {
		return fmt.Errorf("--replicas must be positive or -1, got %d", replicas)
	}
	return nil
}

// parseConfigs rejects malformed pairs locally: the broker would otherwise
// receive e.g. a config named "retention.ms" with a nil value, which Kafka
// treats as "use the default" and silently ignores the user's intent.
func parseConfigs(pairs []string) (map[string]*string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(map[string]*string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("config %q: want key=value", p)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("config %q given more than once", k)
		}
		out[k] = kadm.StringPtr(v)
	}
	return out, nil
}

func printCreateResults(w io.Writer, format string, names []string, resps kadm.CreateTopicResponses, dry bool) error {
	results := make([]topicResult, 0, len(names))
	failed := 0
	for _, name := range names {
		r, ok := resps[name]
		res := topicResult{Topic: name, DryRun: dry}
		switch {
		case !ok:
			res.Error = "MISSING_RESPONSE"
			res.ErrorMessage = "broker did not answer for this topic"
		case r.Err != nil:
			res.Error = cli.KafkaErrName(r.Err)
			res.ErrorMessage = cli.KafkaErrDetail(r.Err, r.ErrMessage)
		default:
			res.ID = cli.FormatTopicID(r.ID)
			res.Partitions = r.NumPartitions
			res.Replicas = r.ReplicationFactor
		}
		if res.Error != "" {
			failed++
		}
		results = append(results, res)
	}
	if err := emitTopicResults(w, format, results, dry); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d topics failed", failed, len(names))
	}
	return nil
}

func emitTopicResults(w io.Writer, format string, results []topicResult, dry bool) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, results)
	}
	t := cli.NewTable("TOPIC", "STATUS")
	for _, r := range results {
		status := "OK"
		if r.Error != "" {
			status = r.Error
			if r.ErrorMessage != "" && r.ErrorMessage != r.Error {
				status += ": " + r.ErrorMessage
			}
		} else if dry {
			status = "OK (dry run, not created)"
		}
		t.Row(r.Topic, status)
	}
	return t.Write(w)
}

// topicSummary is the JSON shape of one line of `topic list`.
type topicSummary struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replicas"`
	ID         string `json:"id"`
	Internal   bool   `json:"internal,omitempty"`
}

func newTopicListCommand(g *cli.Options) *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				list := adm.ListTopics
				if internal {
					list = adm.ListTopicsWithInternal
				}
				details, err := list(ctx)
				if err != nil {
					return g.DescribeCallErr("list topics", err)
				}
				return printTopicList(cmd.OutOrStdout(), g.Format, details)
			})
		},
	}
	cmd.Flags().BoolVarP(&internal, "internal", "i", false, "include internal topics")
	return cmd
}

func printTopicList(w io.Writer, format string, details kadm.TopicDetails) error {
	summaries := make([]topicSummary, 0, len(details))
	var loadErrs []string
	for _, d := range details.Sorted() {
		if d.Err != nil {
			loadErrs = append(loadErrs, d.Topic+": "+cli.KafkaErrName(d.Err))
			continue
		}
		summaries = append(summaries, topicSummary{
			Name:       d.Topic,
			Partitions: len(d.Partitions),
			Replicas:   d.Partitions.NumReplicas(),
			ID:         cli.FormatTopicID(d.ID),
			Internal:   d.IsInternal,
		})
	}
	var err error
	if format != cli.FormatTable {
		err = cli.WriteDocument(w, format, summaries)
	} else {
		t := cli.NewTable("NAME", "PARTITIONS", "REPLICAS", "ID")
		for _, s := range summaries {
			t.Row(s.Name, s.Partitions, s.Replicas, s.ID)
		}
		err = t.Write(w)
	}
	if err != nil {
		return err
	}
	if len(loadErrs) > 0 {
		return fmt.Errorf("could not load %d topics: %s", len(loadErrs), strings.Join(loadErrs, ", "))
	}
	return nil
}

type partitionInfo struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset int64   `json:"log_start_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	Error          string  `json:"error,omitempty"`
}

type configInfo struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
}

type topicDescription struct {
	Name       string          `json:"name"`
	ID         string          `json:"id"`
	Internal   bool            `json:"internal"`
	Partitions []partitionInfo `json:"partitions"`
	Configs    []configInfo    `json:"configs"`
}

func newTopicDescribeCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "describe NAME",
		Aliases: []string{"info"},
		Short:   "Show a topic's partitions, offsets and configs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				desc, err := describeTopic(ctx, g, adm, args[0])
				if err != nil {
					return err
				}
				return printTopicDescription(cmd.OutOrStdout(), g.Format, desc)
			})
		},
	}
}

func describeTopic(ctx context.Context, g *cli.Options, adm *kadm.Client, name string) (*topicDescription, error) {
	details, err := adm.ListTopicsWithInternal(ctx, name)
	if err != nil {
		return nil, g.DescribeCallErr("describe "+name, err)
	}
	d, ok := details[name]
	if !ok {
		return nil, fmt.Errorf("describe %s: broker returned no metadata for it", name)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("describe %s: %s", name, cli.StatusCell(d.Err, ""))
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		return nil, g.DescribeCallErr("list log start offsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		return nil, g.DescribeCallErr("list high watermarks", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return nil, g.DescribeCallErr("describe configs", err)
	}
	rc, err := rcs.On(name, nil)
	if err != nil {
		return nil, fmt.Errorf("describe configs of %s: %s", name, cli.StatusCell(err, ""))
	}
	if rc.Err != nil {
		return nil, fmt.Errorf("describe configs of %s: %s", name, cli.StatusCell(rc.Err, rc.ErrMessage))
	}

	desc := &topicDescription{
		Name:       name,
		ID:         cli.FormatTopicID(d.ID),
		Internal:   d.IsInternal,
		Partitions: []partitionInfo{},
		Configs:    []configInfo{},
	}
	for _, p := range d.Partitions.Sorted() {
		pi := partitionInfo{
			Partition:      p.Partition,
			Leader:         p.Leader,
			LeaderEpoch:    p.LeaderEpoch,
			Replicas:       nonNil(p.Replicas),
			ISR:            nonNil(p.ISR),
			LogStartOffset: -1,
			HighWatermark:  -1,
		}
		var errs []string
		if p.Err != nil {
			errs = append(errs, cli.KafkaErrName(p.Err))
		}
		if o, ok := starts.Lookup(name, p.Partition); ok {
			if o.Err != nil {
				errs = append(errs, "log start: "+cli.KafkaErrName(o.Err))
			} else {
				pi.LogStartOffset = o.Offset
			}
		}
		if o, ok := ends.Lookup(name, p.Partition); ok {
			if o.Err != nil {
				errs = append(errs, "high watermark: "+cli.KafkaErrName(o.Err))
			} else {
				pi.HighWatermark = o.Offset
			}
		}
		pi.Error = strings.Join(errs, "; ")
		desc.Partitions = append(desc.Partitions, pi)
	}
	for _, c := range rc.Configs {
		desc.Configs = append(desc.Configs, configInfo{
			Name:      c.Key,
			Value:     c.Value,
			Source:    configSourceName(c.Source),
			Sensitive: c.Sensitive,
		})
	}
	sort.Slice(desc.Configs, func(i, j int) bool { return desc.Configs[i].Name < desc.Configs[j].Name })
	return desc, nil
}

// nonNil keeps JSON arrays as [] rather than null, which saves every script
// a null check.
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func configSourceName(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "dynamic-broker"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "dynamic-default-broker"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "static-broker"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	case kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return "broker-logger"
	default:
		return "unknown"
	}
}

func printTopicDescription(w io.Writer, format string, d *topicDescription) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, d)
	}
	summary := cli.NewTable()
	summary.Row("NAME", d.Name)
	summary.Row("ID", d.ID)
	summary.Row("INTERNAL", d.Internal)
	summary.Row("PARTITIONS", len(d.Partitions))
	if len(d.Partitions) > 0 {
		summary.Row("REPLICAS", len(d.Partitions[0].Replicas))
	}
	if err := summary.Write(w); err != nil {
		return err
	}

	fmt.Fprintln(w)
	parts := cli.NewTable("PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK", "ERROR")
	for _, p := range d.Partitions {
		parts.Row(p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.LogStartOffset, p.HighWatermark, p.Error)
	}
	if err := parts.Write(w); err != nil {
		return err
	}

	fmt.Fprintln(w)
	cfgs := cli.NewTable("CONFIG", "VALUE", "SOURCE")
	for _, c := range d.Configs {
		v := "<null>"
		switch {
		case c.Sensitive:
			v = "<sensitive>"
		case c.Value != nil:
			v = *c.Value
		}
		cfgs.Row(c.Name, v, c.Source)
	}
	return cfgs.Write(w)
}

func newTopicDeleteCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME...",
		Aliases: []string{"rm"},
		Short:   "Delete topics",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.DeleteTopics(ctx, args...)
				if err != nil {
					return g.DescribeCallErr("delete topics", err)
				}
				return printDeleteResults(cmd.OutOrStdout(), g.Format, args, resps)
			})
		},
	}
}

func printDeleteResults(w io.Writer, format string, names []string, resps kadm.DeleteTopicResponses) error {
	results := make([]topicResult, 0, len(names))
	failed := 0
	for _, name := range names {
		res := topicResult{Topic: name}
		r, ok := resps[name]
		switch {
		case !ok:
			res.Error = "MISSING_RESPONSE"
			res.ErrorMessage = "broker did not answer for this topic"
		case r.Err != nil:
			res.Error = cli.KafkaErrName(r.Err)
			res.ErrorMessage = cli.KafkaErrDetail(r.Err, r.ErrMessage)
		default:
			res.ID = cli.FormatTopicID(r.ID)
		}
		if res.Error != "" {
			failed++
		}
		results = append(results, res)
	}
	if err := emitTopicResults(w, format, results, false); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d topics failed", failed, len(names))
	}
	return nil
}
