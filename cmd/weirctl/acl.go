package main

import (
	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl acl: the parent of the access-control commands: the ACLs
// themselves (create, list, delete; acl_create.go, acl_list.go,
// acl_delete.go) and `acl user` (SASL/SCRAM credentials, acl_user.go).

func newACLCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Manage ACLs and SASL/SCRAM users",
		Long: "Access control over the Kafka protocol. `acl create`, `acl list` and\n" +
			"`acl delete` manage the ACLs (CreateAcls, DescribeAcls, DeleteAcls) that\n" +
			"decide, when the cluster sets kafka_enable_authorization, what each\n" +
			"principal may do; `acl user` creates, deletes and lists SCRAM credentials\n" +
			"(KIP-554). The controller stores both and every broker applies them.\n" +
			"Against a secured cluster, connect with --sasl-mechanism, --sasl-user and\n" +
			"--sasl-password (and --tls...) as a superuser or a principal with ALTER\n" +
			"(DESCRIBE to list) on the cluster.",
	}
	cmd.AddCommand(newACLCreateCommand(g), newACLListCommand(g), newACLDeleteCommand(g), newACLUserCommand(g))
	return cmd
}
