package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl acl list: DescribeAcls with the filters the flags make.

func newACLListCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls", "describe"},
		Short:   "List ACLs",
		Long: "List the ACLs the flags select; without flags, every ACL. Resources,\n" +
			"principals, hosts and operations not named match anything. With\n" +
			"--resource-pattern-type match, --topic NAME lists every ACL that applies\n" +
			"to the topic NAME: literal, the * wildcard, and prefixes of NAME.\n" +
			"Needs DESCRIBE on the cluster.",
		Example: "  weirctl acl list\n" +
			"  weirctl acl list --allow-principal alice\n" +
			"  weirctl acl list --topic orders --resource-pattern-type match --format json",
	}
	return newACLBindingsCommand(g, cmd, true, parsedACLFlags.filterBuilder,
		func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error {
			return listACLs(ctx, g, cmd, adm, b)
		})
}

// listACLs prints the ACLs b's filters match: `acl list`, and `acl
// delete --dry-run`.
func listACLs(ctx context.Context, g *cli.Options, cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error {
	results, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		return g.DescribeCallErr("list ACLs", err)
	}
	rows, problems := describedACLRows(results)
	return printACLResult(cmd.OutOrStdout(), g.Format, rows, false, problems)
}

// describedACLRows merges the filters' answers, and lists the filters the
// broker refused.
func describedACLRows(results kadm.DescribeACLsResults) (rows []aclRow, problems []string) {
	for _, r := range results {
		if r.Err != nil {
			problems = append(problems, refusedFilter("list", r.Type, r.Name, r.Pattern, r.Principal, r.Host, r.Operation, r.Permission, r.Err, r.ErrMessage))
			continue
		}
		for _, d := range r.Described {
			rows = append(rows, newACLRow(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission))
		}
	}
	return sortACLRows(rows), problems
}
