package main

import (
	"github.com/spf13/cobra"
)

// weirctl acl: the parent of the access-control commands. Today it holds
// `acl user` (SASL/SCRAM credentials, in acl_user.go); the ACL commands
// themselves (create, list, delete) will join it.

func newACLCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Manage SASL/SCRAM users",
		Long: "Access control over the Kafka protocol. `acl user` creates, deletes and\n" +
			"lists SCRAM credentials (KIP-554), which the controller stores and every\n" +
			"broker applies.",
	}
	cmd.AddCommand(newACLUserCommand(g))
	return cmd
}
