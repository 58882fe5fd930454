package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestParseACLOperations(t *testing.T) {
	got, err := parseACLOperations([]string{"read", "WRITE", "describe_configs", "DescribeConfigs", "idempotent-write", " All "}, false)
	want := []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAll}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"any", "create_tokens", "describe-tokens", "bogus", ""} {
		if _, err := parseACLOperations([]string{bad}, false); err == nil {
			t.Errorf("create: %q accepted", bad)
		}
	}
	if got, err := parseACLOperations([]string{"any"}, true); err != nil || !slices.Equal(got, []kmsg.ACLOperation{kmsg.ACLOperationAny}) {
		t.Errorf("filter: any: %v %v", got, err)
	}
	if _, err := parseACLOperations([]string{"create_tokens"}, true); err == nil {
		t.Error("filter: create_tokens accepted")
	}
}

func TestParseACLPattern(t *testing.T) {
	for _, tc := range []struct {
		in        string
		filtering bool
		want      kmsg.ACLResourcePatternType
		ok        bool
	}{
		{"literal", false, kmsg.ACLResourcePatternTypeLiteral, true},
		{"PREFIXED", false, kmsg.ACLResourcePatternTypePrefixed, true},
		{"any", false, 0, false},
		{"match", false, 0, false},
		{"any", true, kmsg.ACLResourcePatternTypeAny, true},
		{"Match", true, kmsg.ACLResourcePatternTypeMatch, true},
		{"prefix", true, 0, false},
	} {
		got, err := parseACLPattern(tc.in, tc.filtering)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q (filtering %v): %v %v", tc.in, tc.filtering, got, err)
		}
	}
}

func TestParsePrincipals(t *testing.T) {
	got, err := parsePrincipals("allow-principal", []string{"alice", "User:bob", "User:*", "*", " alice ", "User:CN=carol,O=weir"})
	want := []string{"User:alice", "User:bob", "User:*", "User:CN=carol,O=weir"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"", "User:", ":alice"} {
		if _, err := parsePrincipals("allow-principal", []string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestACLFlagValidation: mistakes are refused before any network call.
// The brokers point at a closed port, so an error that got as far as the
// network would name it.
func TestACLFlagValidation(t *testing.T) {
	offline := []string{"--brokers", "127.0.0.1:1", "--timeout", "2s"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"create without resource", []string{"acl", "create", "--allow-principal", "alice", "--operation", "read"}, "name a resource"},
		{"create without principal", []string{"acl", "create", "--topic", "t", "--operation", "read"}, "name a principal"},
		{"create without operation", []string{"acl", "create", "--topic", "t", "--allow-principal", "alice"}, "name an operation"},
		{"create host without principal", []string{"acl", "create", "--topic", "t", "--deny-principal", "bob", "--allow-host", "10.0.0.1", "--operation", "read"}, "--allow-host needs --allow-principal"},
		{"create deny host without principal", []string{"acl", "create", "--topic", "t", "--allow-principal", "bob", "--deny-host", "10.0.0.1", "--operation", "read"}, "--deny-host needs --deny-principal"},
		{"create with any", []string{"acl", "create", "--topic", "t", "--allow-principal", "alice", "--operation", "any"}, `--operation "any"`},
		{"create with match", []string{"acl", "create", "--topic", "t", "--allow-principal", "alice", "--operation", "read", "--resource-pattern-type", "match"}, "must be literal or prefixed"},
		{"create with empty topic", []string{"acl", "create", "--topic", "", "--allow-principal", "alice", "--operation", "read"}, "--topic must not be empty"},
		{"create with empty host", []string{"acl", "create", "--topic", "t", "--allow-principal", "alice", "--allow-host", " ", "--operation", "read"}, "--allow-host must not be empty"},
		{"create with bad principal", []string{"acl", "create", "--topic", "t", "--allow-principal", "User:", "--operation", "read"}, "want User:name"},
		{"create with argument", []string{"acl", "create", "orders"}, "unknown command"},
		{"list with bad pattern", []string{"acl", "list", "--resource-pattern-type", "regex"}, "must be any, match, literal or prefixed"},
		{"list with bad operation", []string{"acl", "list", "--operation", "reed"}, `--operation "reed"`},
		{"delete without filter", []string{"acl", "delete"}, "name what to delete"},
		{"delete with operation only", []string{"acl", "delete", "--operation", "read"}, "name what to delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, "", append(offline, tc.args...)...)
			clitest.WantErrContains(t, err, tc.want)
			if strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Fatalf("the check reached the network: %v", err)
			}
		})
	}
}

func TestACLBuildersValidate(t *testing.T) {
	p, err := (&aclFlags{allowPrincipals: []string{"alice"}, allowHosts: []string{"10.0.0.1"}, denyPrincipals: []string{"bob"},
		operations: []string{"read", "write"}, topics: []string{"a", "b"}, cluster: true, pattern: "prefixed"}).parse(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.createBuilder(); err != nil {
		t.Fatalf("create builder: %v", err)
	}
	// Every combination of filter flags makes a filter kadm accepts.
	for _, f := range []aclFlags{
		{pattern: "any"},
		{pattern: "match", topics: []string{"orders"}},
		{pattern: "any", allowPrincipals: []string{"alice"}},
		{pattern: "any", allowHosts: []string{"10.0.0.1"}},
		{pattern: "any", denyPrincipals: []string{"bob"}, denyHosts: []string{"*"}, groups: []string{"g"}},
		{pattern: "literal", allowPrincipals: []string{"alice"}, denyPrincipals: []string{"bob"}, operations: []string{"any"}},
	} {
		p, err := f.parse(true)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		if _, err := p.filterBuilder(); err != nil {
			t.Errorf("%+v: filter builder: %v", f, err)
		}
	}
}

func TestPrintACLRows(t *testing.T) {
	rows := sortACLRows([]aclRow{
		newACLRow("User:bob", "*", kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
		newACLRow("User:alice", "*", kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		newACLRow("User:bob", "*", kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
	})
	if len(rows) != 2 || rows[0].Principal != "User:alice" {
		t.Fatalf("sorted and deduplicated: %+v", rows)
	}
	var buf bytes.Buffer
	if err := printACLRows(&buf, cli.FormatTable, rows, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PRINCIPAL") || !strings.Contains(lines[1], "User:alice") || !strings.Contains(lines[1], "READ") {
		t.Fatalf("table:\n%s", buf.String())
	}
	buf.Reset()
	if err := printACLRows(&buf, cli.FormatJSON, nil, false); err != nil || strings.TrimSpace(buf.String()) != "[]" {
		t.Fatalf("empty JSON: %q %v", buf.String(), err)
	}
	buf.Reset()
	if err := printACLRows(&buf, cli.FormatJSON, rows, false); err != nil {
		t.Fatal(err)
	}
	var decoded []map[string]string
	if err := json.Unmarshal(buf.Bytes(), &decoded); err != nil || decoded[1]["principal"] != "User:bob" || decoded[1]["pattern_type"] != "LITERAL" ||
		decoded[1]["resource_type"] != "TOPIC" || decoded[1]["operation"] != "WRITE" || decoded[1]["permission"] != "ALLOW" {
		t.Fatalf("JSON %s: %v", buf.String(), err)
	}
}

func TestCreatedAndDeletedOutcomes(t *testing.T) {
	cmd := newACLCreateCommand(&cli.Options{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	err := printCreatedACLs(cmd, cli.FormatTable, kadm.CreateACLsResults{
		{Principal: "User:alice", Host: "*", Type: kmsg.ACLResourceTypeTopic, Name: "a", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		{Principal: "User:alice", Host: "*", Type: kmsg.ACLResourceTypeCluster, Name: "x", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeAllow,
			Err: kerr.InvalidRequest, ErrMessage: "the only valid name for the CLUSTER resource is kafka-cluster"},
	})
	clitest.WantErrContains(t, err, "INVALID_REQUEST: the only valid name for the CLUSTER resource")
	if !strings.Contains(out.String(), "OK") || !strings.Contains(out.String(), "INVALID_REQUEST") {
		t.Fatalf("create table:\n%s", out.String())
	}

	name := "orders"
	rows, problems := deletedACLRows(kadm.DeleteACLsResults{
		{Type: kmsg.ACLResourceTypeTopic, Name: &name, Pattern: kmsg.ACLResourcePatternTypeMatch, Deleted: kadm.DeletedACLs{
			{Principal: "User:alice", Host: "*", Type: kmsg.ACLResourceTypeTopic, Name: "orders", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		}},
		{Type: kmsg.ACLResourceTypeAny, Pattern: kmsg.ACLResourcePatternTypeAny, Deleted: kadm.DeletedACLs{
			{Principal: "User:alice", Host: "*", Type: kmsg.ACLResourceTypeTopic, Name: "orders", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		}},
		{Type: kmsg.ACLResourceTypeGroup, Pattern: kmsg.ACLResourcePatternTypeAny, Err: kerr.ClusterAuthorizationFailed},
	})
	if len(rows) != 1 || len(problems) != 1 || !strings.Contains(problems[0], "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("rows %+v, problems %q", rows, problems)
	}
}
