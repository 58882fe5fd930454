package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl acl create: CreateAcls for every principal × host × resource ×
// operation the flags name.

func newACLCreateCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs",
		Long: "Create one ACL per principal, host, resource and operation named. Allowed\n" +
			"and denied principals may be mixed; a host applies to the principals of\n" +
			"the same permission (default * for every host). Creating an ACL that\n" +
			"exists succeeds and changes nothing. Needs ALTER on the cluster.",
		Example: "  weirctl acl create --allow-principal alice --operation read,describe --topic orders\n" +
			"  weirctl acl create --allow-principal User:svc --operation write --topic app- --resource-pattern-type prefixed\n" +
			"  weirctl acl create --deny-principal User:* --deny-host 10.0.0.9 --operation all --topic payments",
	}
	return newACLBindingsCommand(g, cmd, false, parsedACLFlags.createBuilder,
		func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error {
			results, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return g.DescribeCallErr("create ACLs", err)
			}
			return printCreatedACLs(cmd, g.Format, results)
		})
}

// printCreatedACLs prints one row per ACL with its outcome and fails when
// any creation failed.
func printCreatedACLs(cmd *cobra.Command, format string, results kadm.CreateACLsResults) error {
	rows := make([]aclRow, 0, len(results))
	var failures []string
	for _, r := range results {
		row := newACLRow(r.Principal, r.Host, r.Type, r.Name, r.Pattern, r.Operation, r.Permission)
		if r.Err != nil {
			row.Error, row.ErrorMessage = cli.KafkaErrName(r.Err), cli.KafkaErrDetail(r.Err, r.ErrMessage)
			failures = append(failures, fmt.Sprintf("%s %s %s to %s on %s %s: %s", row.Permission, row.Operation, row.PatternType,
				row.Principal, row.ResourceType, row.ResourceName, joinErr(row.Error, row.ErrorMessage)))
		}
		rows = append(rows, row)
	}
	return printACLResult(cmd.OutOrStdout(), format, rows, true, failures)
}
