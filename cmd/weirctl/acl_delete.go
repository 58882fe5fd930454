package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl acl delete: DeleteAcls with the filters the flags make, printing
// what was deleted.

func newACLDeleteCommand(g *cli.Options) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:     "delete",
		Aliases: []string{"rm"},
		Short:   "Delete ACLs and print them",
		Long: "Delete the ACLs the flags select, as `acl list` selects them, and print\n" +
			"each one deleted. At least a resource or a principal (or host) must be\n" +
			"named, so that a bare `acl delete` cannot remove every ACL.\n" +
			"--dry-run prints what would be deleted and deletes nothing.\n" +
			"Needs ALTER on the cluster.",
		Example: "  weirctl acl delete --allow-principal alice --topic orders\n" +
			"  weirctl acl delete --topic orders --resource-pattern-type match --dry-run",
	}
	newACLBindingsCommand(g, cmd, true, deleteBuilder,
		func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error {
			if dryRun {
				return listACLs(ctx, g, cmd, adm, b)
			}
			results, err := adm.DeleteACLs(ctx, b)
			if err != nil {
				return g.DescribeCallErr("delete ACLs", err)
			}
			rows, problems := deletedACLRows(results)
			return printACLResult(cmd.OutOrStdout(), g.Format, rows, false, problems)
		})
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	return cmd
}

// deleteBuilder is list's filter, refused when it would match every ACL.
func deleteBuilder(p parsedACLFlags) (*kadm.ACLBuilder, error) {
	if !p.hasResource() && !p.hasPrincipalOrHost() {
		return nil, errors.New("name what to delete: a resource (--topic, --group, --transactional-id, --cluster) or a principal (--allow-principal, --deny-principal)")
	}
	return p.filterBuilder()
}

// deletedACLRows merges the filters' deletions (a binding two filters
// matched once), and lists the filters the broker refused.
func deletedACLRows(results kadm.DeleteACLsResults) (rows []aclRow, problems []string) {
	for _, r := range results {
		if r.Err != nil {
			problems = append(problems, refusedFilter("delete", r.Type, r.Name, r.Pattern, r.Principal, r.Host, r.Operation, r.Permission, r.Err, r.ErrMessage))
			continue
		}
		for _, d := range r.Deleted {
			row := newACLRow(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
			if d.Err != nil {
				problems = append(problems, fmt.Sprintf("delete %s %s %s of %s on %s %s: %s", row.Permission, row.Operation,
					row.PatternType, row.Principal, row.ResourceType, row.ResourceName, cli.StatusCell(d.Err, d.ErrMessage)))
				continue
			}
			rows = append(rows, row)
		}
	}
	return sortACLRows(rows), problems
}
