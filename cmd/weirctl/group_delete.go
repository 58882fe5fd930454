package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl group delete: delete groups with their committed offsets and
// report the outcome per group.

type groupResult struct {
	Group        string `json:"group"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

func newGroupDeleteCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "delete GROUP...",
		Aliases: []string{"rm"},
		Short:   "Delete consumer groups and their committed offsets",
		Long: "Delete groups with their committed offsets. The broker refuses groups\n" +
			"that still have members (NON_EMPTY_GROUP).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names := dedupe(args)
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.DeleteGroups(ctx, names...)
				var se *kadm.ShardErrors
				// A partial failure (say, no coordinator for one group)
				// is reported per group; when nothing got through, the
				// error itself is the news.
				if err != nil && (!errors.As(err, &se) || se.AllFailed) {
					return g.DescribeCallErr("delete groups", err)
				}
				return printGroupDeleteResults(cmd.OutOrStdout(), g.Format, names, resps, se)
			})
		},
	}
}

// printGroupDeleteResults reports one line per requested group. Groups whose
// request never got an answer (for example, no coordinator could be found)
// carry the error of their shard.
func printGroupDeleteResults(w io.Writer, format string, names []string, resps kadm.DeleteGroupResponses, se *kadm.ShardErrors) error {
	shardErr := map[string]error{}
	if se != nil {
		for _, e := range se.Errs {
			if req, ok := e.Req.(*kmsg.DeleteGroupsRequest); ok {
				for _, grp := range req.Groups {
					shardErr[grp] = e.Err
				}
			}
		}
	}
	results := make([]groupResult, 0, len(names))
	failed := 0
	for _, name := range names {
		res := groupResult{Group: name}
		r, ok := resps[name]
		switch {
		case ok && r.Err != nil:
			res.Error = cli.KafkaErrName(r.Err)
			res.ErrorMessage = cli.KafkaErrDetail(r.Err, r.ErrMessage)
		case ok:
		case shardErr[name] != nil:
			res.Error = cli.KafkaErrName(shardErr[name])
			res.ErrorMessage = cli.KafkaErrDetail(shardErr[name], "")
		default:
			res.Error = "MISSING_RESPONSE"
			res.ErrorMessage = "broker did not answer for this group"
		}
		if res.Error != "" {
			failed++
		}
		results = append(results, res)
	}
	var err error
	if format != cli.FormatTable {
		err = cli.WriteDocument(w, format, results)
	} else {
		t := cli.NewTable("GROUP", "STATUS")
		for _, r := range results {
			status := "OK"
			if r.Error != "" {
				status = joinErr(r.Error, r.ErrorMessage)
			}
			t.Row(r.Group, status)
		}
		err = t.Write(w)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d groups failed", failed, len(names))
	}
	return nil
}
