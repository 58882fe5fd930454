package main

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl group: the parent command of group list, describe, delete and
// seek (each in its own group_*.go file), and the helpers they share.

func newGroupCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "group",
		Aliases: []string{"groups"},
		Short:   "List, describe, delete and seek consumer groups",
	}
	cmd.AddCommand(
		newGroupListCommand(g),
		newGroupDescribeCommand(g),
		newGroupDeleteCommand(g),
		newGroupSeekCommand(g),
	)
	return cmd
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func offsetCell(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}
