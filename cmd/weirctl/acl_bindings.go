package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// What `acl create`, `acl list` and `acl delete` share: the command that
// runs them, the flags, in the style of rpk acl and kafka-acls.sh, how
// they become a kadm.ACLBuilder, and how bindings and the broker's
// refusals are printed.

// clusterResourceName is the one name the CLUSTER resource has.
const clusterResourceName = "kafka-cluster"

// aclFlags are the flags naming principals, hosts, operations and
// resources. Principals, hosts, groups and transactional ids are repeated
// rather than comma-separated: a certificate's principal contains commas.
type aclFlags struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []string
	topics, groups, txnIDs          []string
	cluster                         bool
	pattern                         string
}

// newACLBindingsCommand makes cmd, its usage and help set, one of `acl
// create`, `acl list` and `acl delete`: no arguments, the shared flags
// (filtering: those of list and delete), and a run that checks the flags,
// builds the request with build and sends it with send.
func newACLBindingsCommand(g *cli.Options, cmd *cobra.Command, filtering bool,
	build func(parsedACLFlags) (*kadm.ACLBuilder, error),
	send func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, b *kadm.ACLBuilder) error,
) *cobra.Command {
	o := &aclFlags{}
	cmd.Args = cobra.NoArgs
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		p, err := o.parse(filtering)
		if err != nil {
			return err
		}
		b, err := build(p)
		if err != nil {
			return err
		}
		return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
			return send(ctx, cmd, adm, b)
		})
	}
	addACLFlags(cmd, o, filtering)
	return cmd
}

// addACLFlags registers the shared flags; filtering commands (list,
// delete) also accept the ANY and MATCH pattern types and the ANY
// operation.
func addACLFlags(cmd *cobra.Command, o *aclFlags, filtering bool) {
	f := cmd.Flags()
	f.StringArrayVar(&o.allowPrincipals, "allow-principal", nil, "principal to allow, User:name or just name (repeatable; User:* is every user)")
	f.StringArrayVar(&o.denyPrincipals, "deny-principal", nil, "principal to deny, User:name or just name (repeatable)")
	f.StringArrayVar(&o.allowHosts, "allow-host", nil, "host the allowed principals connect from (repeatable; default * for every host)")
	f.StringArrayVar(&o.denyHosts, "deny-host", nil, "host the denied principals connect from (repeatable; default * for every host)")
	f.StringArrayVar(&o.topics, "topic", nil, "topic name, or prefix with --resource-pattern-type prefixed (repeatable; * is every topic)")
	f.StringArrayVar(&o.groups, "group", nil, "consumer group id (repeatable; * is every group)")
	f.StringArrayVar(&o.txnIDs, "transactional-id", nil, "transactional id (repeatable; * is every transactional id)")
	f.BoolVar(&o.cluster, "cluster", false, "the cluster resource ("+clusterResourceName+")")
	opHelp := "operation (repeatable or comma-separated): " + strings.ToLower(strings.Join(aclOperationNames(false), ", "))
	patterns := []string{"literal", "prefixed"}
	defaultPattern := "literal"
	if filtering {
		opHelp = "only this operation (repeatable or comma-separated; default any): " + strings.ToLower(strings.Join(aclOperationNames(true), ", "))
		patterns = []string{"any", "match", "literal", "prefixed"}
		defaultPattern = "any"
	}
	f.StringSliceVar(&o.operations, "operation", nil, opHelp)
	f.StringVar(&o.pattern, "resource-pattern-type", defaultPattern, "how resource names match: "+strings.Join(patterns, ", "))
	_ = cmd.RegisterFlagCompletionFunc("resource-pattern-type", cobra.FixedCompletions(patterns, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("operation", cobra.FixedCompletions(lowered(aclOperationNames(filtering)), cobra.ShellCompDirectiveNoFileComp))
}

func lowered(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToLower(n)
	}
	return out
}

// aclOperations are the operations weir's ACLs grant, in Kafka's order.
func aclOperations() []kmsg.ACLOperation {
	return []kmsg.ACLOperation{kmsg.ACLOperationAll, kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite}
}

func aclOperationNames(withAny bool) []string {
	var names []string
	if withAny {
		names = append(names, kmsg.ACLOperationAny.String())
	}
	for _, op := range aclOperations() {
		names = append(names, op.String())
	}
	return names
}

// parseACLOperations reads --operation values as Kafka spells them, in
// any case: describe_configs, and also kafka-acls.sh's DescribeConfigs
// and describe-configs.
func parseACLOperations(values []string, withAny bool) ([]kmsg.ACLOperation, error) {
	var ops []kmsg.ACLOperation
	for _, v := range values {
		op, err := kmsg.ParseACLOperation(v)
		valid := err == nil && (slices.Contains(aclOperations(), op) || withAny && op == kmsg.ACLOperationAny)
		if !valid {
			return nil, fmt.Errorf("--operation %q: want one of %s", v, strings.ToLower(strings.Join(aclOperationNames(withAny), ", ")))
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

func parseACLPattern(s string, filtering bool) (kmsg.ACLResourcePatternType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "literal":
		return kmsg.ACLResourcePatternTypeLiteral, nil
	case "prefixed":
		return kmsg.ACLResourcePatternTypePrefixed, nil
	case "any":
		if filtering {
			return kmsg.ACLResourcePatternTypeAny, nil
		}
	case "match":
		if filtering {
			return kmsg.ACLResourcePatternTypeMatch, nil
		}
	}
	if filtering {
		return 0, fmt.Errorf("--resource-pattern-type must be any, match, literal or prefixed, got %q", s)
	}
	return 0, fmt.Errorf("--resource-pattern-type must be literal or prefixed, got %q", s)
}

// parsePrincipals makes each principal "Type:name": a bare name is a user.
func parsePrincipals(flag string, values []string) ([]string, error) {
	out := make([]string, 0, len(values))
	for _, v := range values {
		v = strings.TrimSpace(v)
		if !strings.Contains(v, ":") {
			v = "User:" + v
		}
		typ, name, _ := strings.Cut(v, ":")
		if typ == "" || name == "" {
			return nil, fmt.Errorf("--%s %q: want User:name (or just name)", flag, v)
		}
		out = append(out, v)
	}
	return dedupe(out), nil
}

func parseHosts(flag string, values []string) ([]string, error) {
	out := make([]string, 0, len(values))
	for _, v := range values {
		if v = strings.TrimSpace(v); v == "" {
			return nil, fmt.Errorf("--%s must not be empty (* is every host)", flag)
		}
		out = append(out, v)
	}
	return dedupe(out), nil
}

func nonEmptyNames(flag string, values []string) ([]string, error) {
	for _, v := range values {
		if v == "" {
			return nil, fmt.Errorf("--%s must not be empty", flag)
		}
	}
	return dedupe(values), nil
}

// parsedACLFlags are the flags checked and normalised.
type parsedACLFlags struct {
	allow, deny           []string
	allowHosts, denyHosts []string
	ops                   []kmsg.ACLOperation
	topics, groups, txns  []string
	cluster               bool
	pattern               kmsg.ACLResourcePatternType
}

func (o *aclFlags) parse(filtering bool) (p parsedACLFlags, err error) {
	if p.allow, err = parsePrincipals("allow-principal", o.allowPrincipals); err != nil {
		return p, err
	}
	if p.deny, err = parsePrincipals("deny-principal", o.denyPrincipals); err != nil {
		return p, err
	}
	if p.allowHosts, err = parseHosts("allow-host", o.allowHosts); err != nil {
		return p, err
	}
	if p.denyHosts, err = parseHosts("deny-host", o.denyHosts); err != nil {
		return p, err
	}
	if p.ops, err = parseACLOperations(o.operations, filtering); err != nil {
		return p, err
	}
	if p.topics, err = nonEmptyNames("topic", o.topics); err != nil {
		return p, err
	}
	if p.groups, err = nonEmptyNames("group", o.groups); err != nil {
		return p, err
	}
	if p.txns, err = nonEmptyNames("transactional-id", o.txnIDs); err != nil {
		return p, err
	}
	p.cluster = o.cluster
	p.pattern, err = parseACLPattern(o.pattern, filtering)
	return p, err
}

func (p parsedACLFlags) hasResource() bool {
	return len(p.topics)+len(p.groups)+len(p.txns) > 0 || p.cluster
}

func (p parsedACLFlags) hasPrincipalOrHost() bool {
	return len(p.allow)+len(p.deny)+len(p.allowHosts)+len(p.denyHosts) > 0
}

// createBuilder is the builder for `acl create`: every principal × host
// × resource × operation.
func (p parsedACLFlags) createBuilder() (*kadm.ACLBuilder, error) {
	switch {
	case !p.hasResource():
		return nil, errors.New("name a resource: --topic, --group, --transactional-id or --cluster")
	case len(p.allow)+len(p.deny) == 0:
		return nil, errors.New("name a principal: --allow-principal or --deny-principal")
	case len(p.allowHosts) > 0 && len(p.allow) == 0:
		return nil, errors.New("--allow-host needs --allow-principal")
	case len(p.denyHosts) > 0 && len(p.deny) == 0:
		return nil, errors.New("--deny-host needs --deny-principal")
	case len(p.ops) == 0:
		return nil, errors.New("name an operation: --operation (all for every operation)")
	}
	b := kadm.NewACLs().
		MaybeTopics(p.topics...).MaybeGroups(p.groups...).MaybeTransactionalIDs(p.txns...).MaybeClusters(p.cluster).
		MaybeAllow(p.allow...).MaybeAllowHosts(p.allowHosts...).
		MaybeDeny(p.deny...).MaybeDenyHosts(p.denyHosts...).
		Operations(p.ops...).ResourcePatternType(p.pattern)
	return b, b.ValidateCreate()
}

// filterBuilder is the builder for `acl list` and `acl delete`. What is
// not named matches anything: no resource flag is every resource, no
// principal or host flag every principal and host with either
// permission; naming only allowed (or only denied) principals or hosts
// matches only ALLOW (or DENY) bindings.
func (p parsedACLFlags) filterBuilder() (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs().ResourcePatternType(p.pattern)
	if p.hasResource() {
		b.MaybeTopics(p.topics...).MaybeGroups(p.groups...).MaybeTransactionalIDs(p.txns...).MaybeClusters(p.cluster)
	} else {
		b.AnyResource()
	}
	if !p.hasPrincipalOrHost() {
		b.Allow().AllowHosts().Deny().DenyHosts()
	} else {
		side := func(principals, hosts []string, set, setHosts func(...string) *kadm.ACLBuilder, maybe, maybeHosts func(...string) *kadm.ACLBuilder) {
			if len(principals)+len(hosts) == 0 {
				maybe()
				maybeHosts()
				return
			}
			if len(principals) == 0 {
				set()
			} else {
				maybe(principals...)
			}
			if len(hosts) == 0 {
				setHosts()
			} else {
				maybeHosts(hosts...)
			}
		}
		side(p.allow, p.allowHosts, b.Allow, b.AllowHosts, b.MaybeAllow, b.MaybeAllowHosts)
		side(p.deny, p.denyHosts, b.Deny, b.DenyHosts, b.MaybeDeny, b.MaybeDenyHosts)
	}
	b.Operations(p.ops...) // none: any operation
	return b, b.ValidateFilter()
}

// aclRow is one binding as weirctl prints it.
type aclRow struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

func newACLRow(principal, host string, rt kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclRow {
	return aclRow{Principal: principal, Host: host, ResourceType: rt.String(), ResourceName: name,
		PatternType: pattern.String(), Operation: op.String(), Permission: perm.String()}
}

// sortACLRows orders rows by resource, then principal, host, operation
// and permission, dropping repeats (a binding two filters matched).
func sortACLRows(rows []aclRow) []aclRow {
	slices.SortFunc(rows, func(a, b aclRow) int {
		return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceName, b.ResourceName),
			cmp.Compare(a.PatternType, b.PatternType), cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host),
			cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
	})
	return slices.Compact(rows)
}

// printACLResult prints the bindings, then fails naming the problems, if
// any: what was done is shown even when some of it failed.
func printACLResult(w io.Writer, format string, rows []aclRow, withStatus bool, problems []string) error {
	if err := printACLRows(w, format, rows, withStatus); err != nil {
		return err
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// printACLRows prints bindings; withStatus adds create's outcome column.
func printACLRows(w io.Writer, format string, rows []aclRow, withStatus bool) error {
	if rows == nil {
		rows = []aclRow{}
	}
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, rows)
	}
	headers := []string{"PRINCIPAL", "HOST", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN", "OPERATION", "PERMISSION"}
	if withStatus {
		headers = append(headers, "STATUS")
	}
	t := cli.NewTable(headers...)
	for _, r := range rows {
		cells := []any{r.Principal, r.Host, r.ResourceType, r.ResourceName, r.PatternType, r.Operation, r.Permission}
		if withStatus {
			status := "OK"
			if r.Error != "" {
				status = joinErr(r.Error, r.ErrorMessage)
			}
			cells = append(cells, status)
		}
		t.Row(cells...)
	}
	return t.Write(w)
}

// refusedFilter says that the broker refused a filter of `acl list` or
// `acl delete` (verb), naming the filter.
func refusedFilter(verb string, rt kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType, err error, message string,
) string {
	orAny := func(s *string) string {
		if s == nil {
			return "any"
		}
		return *s
	}
	return fmt.Sprintf("%s %s %s %s, principal %s, host %s, operation %s, permission %s: %s",
		verb, pattern, rt, orAny(name), orAny(principal), orAny(host), op, perm, cli.StatusCell(err, message))
}
