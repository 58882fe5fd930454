package acl

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	txnID    = kmsg.ACLResourceTypeTransactionalId
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny

	opAll             = kmsg.ACLOperationAll
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

func binding(rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) controller.ACLBinding {
	return controller.ACLBinding{ResourceType: rt, ResourceName: name, PatternType: pattern, Principal: principal, Host: host, Operation: op, Permission: perm}
}

type request struct {
	principal, host string
	op              kmsg.ACLOperation
	rt              kmsg.ACLResourceType
	name            string
}

func (r request) String() string {
	return fmt.Sprintf("%s@%s %v %v:%s", r.principal, r.host, r.op, r.rt, r.name)
}

func TestAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	for _, tc := range []struct {
		name     string
		bindings []controller.ACLBinding
		allowed  []request
		denied   []request
	}{
		{
			name: "no ACL denies",
			denied: []request{
				{alice, "10.0.0.1", opRead, topic, "orders"},
				{alice, "10.0.0.1", opDescribe, cluster, controller.ClusterResourceName},
			},
		},
		{
			name:     "literal allow",
			bindings: []controller.ACLBinding{binding(topic, literal, "orders", alice, "*", opRead, allow)},
			allowed:  []request{{alice, "10.0.0.1", opRead, topic, "orders"}},
			denied: []request{
				{alice, "10.0.0.1", opWrite, topic, "orders"},
				{alice, "10.0.0.1", opRead, topic, "orders2"},
				{alice, "10.0.0.1", opRead, topic, "order"},
				{alice, "10.0.0.1", opRead, group, "orders"},
				{bob, "10.0.0.1", opRead, topic, "orders"},
				{"User:alicex", "10.0.0.1", opRead, topic, "orders"},
			},
		},
		{
			name:     "wildcard resource",
			bindings: []controller.ACLBinding{binding(topic, literal, "*", alice, "*", opWrite, allow)},
			allowed:  []request{{alice, "h", opWrite, topic, "a"}, {alice, "h", opWrite, topic, "*"}},
			denied:   []request{{alice, "h", opWrite, group, "a"}, {alice, "h", opRead, topic, "a"}},
		},
		{
			name:     "prefixed",
			bindings: []controller.ACLBinding{binding(topic, prefixed, "app-", alice, "*", opRead, allow), binding(topic, prefixed, "x", alice, "*", opWrite, allow)},
			allowed: []request{
				{alice, "h", opRead, topic, "app-"},
				{alice, "h", opRead, topic, "app-orders"},
				{alice, "h", opWrite, topic, "xyz"},
			},
			denied: []request{
				{alice, "h", opRead, topic, "app"},
				{alice, "h", opRead, topic, "ap"},
				{alice, "h", opRead, topic, "my-app-orders"},
				{alice, "h", opWrite, topic, "app-orders"},
			},
		},
		{
			name: "principal wildcard is per type",
			bindings: []controller.ACLBinding{
				binding(group, literal, "g", "User:*", "*", opRead, allow),
				binding(group, literal, "h", "Group:*", "*", opRead, allow),
			},
			allowed: []request{{alice, "h", opRead, group, "g"}, {"User:ANONYMOUS", "h", opRead, group, "g"}},
			denied: []request{
				{"CN=alice,O=weir", "h", opRead, group, "g"},
				{alice, "h", opRead, group, "h"},
			},
		},
		{
			name:     "host",
			bindings: []controller.ACLBinding{binding(topic, literal, "t", alice, "10.0.0.1", opAll, allow)},
			allowed:  []request{{alice, "10.0.0.1", opRead, topic, "t"}, {alice, "10.0.0.1", opDelete, topic, "t"}},
			denied:   []request{{alice, "10.0.0.2", opRead, topic, "t"}, {alice, "::1", opRead, topic, "t"}},
		},
		{
			name: "deny wins over allow, from any pattern",
			bindings: []controller.ACLBinding{
				binding(topic, literal, "*", alice, "*", opAll, allow),
				binding(topic, prefixed, "secret-", alice, "*", opRead, deny),
				binding(topic, literal, "audit", "User:*", "10.0.0.9", opWrite, deny),
			},
			allowed: []request{
				{alice, "h", opRead, topic, "public"},
				{alice, "h", opWrite, topic, "secret-plans"},
				{alice, "10.0.0.1", opWrite, topic, "audit"},
			},
			denied: []request{
				{alice, "h", opRead, topic, "secret-plans"},
				{alice, "10.0.0.9", opWrite, topic, "audit"},
			},
		},
		{
			name: "deny ALL denies every operation",
			bindings: []controller.ACLBinding{
				binding(topic, literal, "t", alice, "*", opRead, allow),
				binding(topic, literal, "t", alice, "*", opDescribe, allow),
				binding(topic, literal, "t", alice, "*", opAll, deny),
			},
			denied: []request{{alice, "h", opRead, topic, "t"}, {alice, "h", opDescribe, topic, "t"}},
		},
		{
			name: "allows imply DESCRIBE and DESCRIBE_CONFIGS",
			bindings: []controller.ACLBinding{
				binding(topic, literal, "r", alice, "*", opRead, allow),
				binding(topic, literal, "w", alice, "*", opWrite, allow),
				binding(topic, literal, "d", alice, "*", opDelete, allow),
				binding(topic, literal, "a", alice, "*", opAlter, allow),
				binding(topic, literal, "c", alice, "*", opCreate, allow),
				binding(topic, literal, "ac", alice, "*", opAlterConfigs, allow),
			},
			allowed: []request{
				{alice, "h", opDescribe, topic, "r"},
				{alice, "h", opDescribe, topic, "w"},
				{alice, "h", opDescribe, topic, "d"},
				{alice, "h", opDescribe, topic, "a"},
				{alice, "h", opDescribeConfigs, topic, "ac"},
			},
			denied: []request{
				{alice, "h", opDescribe, topic, "c"},
				{alice, "h", opDescribe, topic, "ac"},
				{alice, "h", opDescribeConfigs, topic, "a"},
				{alice, "h", opRead, topic, "w"},
				{alice, "h", opAlterConfigs, topic, "r"},
			},
		},
		{
			name: "a DENY implies nothing",
			bindings: []controller.ACLBinding{
				binding(topic, literal, "t", alice, "*", opDescribe, allow),
				binding(topic, literal, "t", alice, "*", opDescribeConfigs, allow),
				binding(topic, literal, "t", alice, "*", opRead, deny),
				binding(topic, literal, "t", alice, "*", opAlterConfigs, deny),
			},
			allowed: []request{{alice, "h", opDescribe, topic, "t"}, {alice, "h", opDescribeConfigs, topic, "t"}},
			denied:  []request{{alice, "h", opRead, topic, "t"}, {alice, "h", opAlterConfigs, topic, "t"}},
		},
		{
			name: "cluster and transactional ids",
			bindings: []controller.ACLBinding{
				binding(cluster, literal, controller.ClusterResourceName, alice, "*", opIdempotentWrite, allow),
				binding(cluster, literal, controller.ClusterResourceName, bob, "*", opClusterAction, allow),
				binding(txnID, prefixed, "app", alice, "*", opWrite, allow),
			},
			allowed: []request{
				{alice, "h", opIdempotentWrite, cluster, controller.ClusterResourceName},
				{alice, "h", opIdempotentWrite, cluster, ""}, // the cluster has one name
				{bob, "h", opClusterAction, cluster, controller.ClusterResourceName},
				{alice, "h", opWrite, txnID, "app-1"},
				{alice, "h", opDescribe, txnID, "app-1"},
			},
			denied: []request{
				{bob, "h", opIdempotentWrite, cluster, controller.ClusterResourceName},
				{alice, "h", opWrite, topic, "app-1"},
				{alice, "h", opWrite, txnID, "other"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.bindings, nil)
			for _, r := range tc.allowed {
				if !a.Authorize(r.principal, r.host, r.op, r.rt, r.name) {
					t.Errorf("%v: denied, want allowed", r)
				}
			}
			for _, r := range tc.denied {
				if a.Authorize(r.principal, r.host, r.op, r.rt, r.name) {
					t.Errorf("%v: allowed, want denied", r)
				}
			}
		})
	}
}

func TestSuperusers(t *testing.T) {
	su := ParseSuperusers(" admin, User:root ,,Group:ops")
	if want := []string{"User:admin", "User:root", "Group:ops"}; !slices.Equal(su, want) {
		t.Fatalf("ParseSuperusers: %q, want %q", su, want)
	}
	if got := ParseSuperusers(""); len(got) != 0 {
		t.Fatalf("ParseSuperusers(\"\"): %q", got)
	}
	// Kafka's separator keeps a certificate subject whole.
	subjects := ParseSuperusers("User:CN=ops,O=acme; admin ;")
	if want := []string{"User:CN=ops,O=acme", "User:admin"}; !slices.Equal(subjects, want) {
		t.Fatalf("ParseSuperusers with semicolons: %q, want %q", subjects, want)
	}
	// A superuser is allowed even what a DENY names.
	a := New([]controller.ACLBinding{binding(topic, literal, "t", "User:*", "*", opAll, deny)}, su)
	for _, p := range []string{"User:admin", "User:root", "Group:ops"} {
		if !a.Superuser(p) || !a.Authorize(p, "h", opWrite, topic, "t") {
			t.Errorf("superuser %s refused", p)
		}
	}
	if a.Superuser("User:alice") || a.Authorize("User:alice", "h", opWrite, topic, "t") {
		t.Error("User:alice treated as a superuser")
	}
	if a.Superuser("admin") {
		t.Error("a bare name is not a principal")
	}
}

func TestAuthorizeOddInput(t *testing.T) {
	a := New([]controller.ACLBinding{binding(topic, literal, "*", "User:*", "*", opAll, allow)}, nil)
	for _, rt := range []kmsg.ACLResourceType{-1, 0, kmsg.ACLResourceTypeAny, 100} {
		if a.Authorize("User:alice", "h", opRead, rt, "t") {
			t.Errorf("resource type %d allowed", rt)
		}
	}
	if !a.Authorize("User:alice", "", opRead, topic, "") {
		t.Error("the wildcard topic ACL did not apply to an empty name")
	}
	var empty Authorizer
	if empty.Authorize("User:alice", "h", opRead, topic, "t") {
		t.Error("the zero Authorizer allowed a request")
	}
}

// manyBindings is a cluster with a few thousand ACLs: per-user literal
// and prefixed topic bindings, group bindings and a few denies.
func manyBindings() []controller.ACLBinding {
	var out []controller.ACLBinding
	for u := range 200 {
		user := fmt.Sprintf("User:svc-%d", u)
		for t := range 5 {
			out = append(out, binding(topic, literal, fmt.Sprintf("svc-%d-topic-%d", u, t), user, "*", opRead, allow))
			out = append(out, binding(topic, literal, fmt.Sprintf("svc-%d-topic-%d", u, t), user, "*", opWrite, allow))
		}
		out = append(out, binding(topic, prefixed, fmt.Sprintf("svc-%d-", u), user, "*", opDescribe, allow))
		out = append(out, binding(group, literal, fmt.Sprintf("svc-%d-group", u), user, "*", opRead, allow))
		out = append(out, binding(topic, literal, fmt.Sprintf("svc-%d-topic-0", u), user, "10.9.9.9", opWrite, deny))
	}
	out = append(out, binding(topic, prefixed, "shared.", "User:*", "*", opRead, allow))
	return out
}

func TestAuthorizeAllocatesNothing(t *testing.T) {
	a := New(manyBindings(), []string{"User:admin"})
	allocs := testing.AllocsPerRun(100, func() {
		if !a.Authorize("User:svc-17", "10.0.0.1", opWrite, topic, "svc-17-topic-3") {
			t.Fatal("denied")
		}
		if a.Authorize("User:svc-17", "10.9.9.9", opWrite, topic, "svc-17-topic-0") {
			t.Fatal("allowed")
		}
		if !a.Authorize("User:svc-3", "10.0.0.1", opRead, topic, "shared.events") {
			t.Fatal("denied")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Authorize", allocs)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	a := New(manyBindings(), []string{"User:admin"})
	for _, bc := range []struct {
		name string
		req  request
	}{
		{"literal-allow", request{"User:svc-17", "10.0.0.1", opWrite, topic, "svc-17-topic-3"}},
		{"prefixed-describe", request{"User:svc-17", "10.0.0.1", opDescribe, topic, "svc-17-topic-3"}},
		{"no-acl", request{"User:nobody", "10.0.0.1", opRead, topic, "unrelated"}},
		{"superuser", request{"User:admin", "10.0.0.1", opWrite, topic, "svc-17-topic-3"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			r := bc.req
			for b.Loop() {
				a.Authorize(r.principal, r.host, r.op, r.rt, r.name)
			}
		})
	}
}

// TestAuthorizeByResourceType follows Kafka's authorizeByResourceType: an
// ALLOW anywhere in the resource type counts unless a DENY dominates it.
func TestAuthorizeByResourceType(t *testing.T) {
	const alice = "User:alice"
	allow := func(pattern kmsg.ACLResourcePatternType, name string, op kmsg.ACLOperation) controller.ACLBinding {
		return binding(topic, pattern, name, alice, "*", op, kmsg.ACLPermissionTypeAllow)
	}
	denyOf := func(pattern kmsg.ACLResourcePatternType, name string) controller.ACLBinding {
		return binding(topic, pattern, name, alice, "*", opWrite, kmsg.ACLPermissionTypeDeny)
	}
	prefixed := kmsg.ACLResourcePatternTypePrefixed
	for _, tc := range []struct {
		name     string
		bindings []controller.ACLBinding
		want     bool
	}{
		{"nothing", nil, false},
		{"literal allow", []controller.ACLBinding{allow(literal, "t", opWrite)}, true},
		{"ALL allows", []controller.ACLBinding{allow(literal, "t", opAll)}, true},
		{"no implied operations", []controller.ACLBinding{allow(literal, "t", kmsg.ACLOperationRead)}, false},
		{"prefix allow", []controller.ACLBinding{allow(prefixed, "logs-", opWrite)}, true},
		{"literal denied by the same literal", []controller.ACLBinding{allow(literal, "t", opWrite), denyOf(literal, "t")}, false},
		{"literal denied by a prefix", []controller.ACLBinding{allow(literal, "logs-a", opWrite), denyOf(prefixed, "logs-")}, false},
		{"prefix denied by a shorter prefix", []controller.ACLBinding{allow(prefixed, "logs-eu", opWrite), denyOf(prefixed, "logs")}, false},
		{"prefix not denied by a longer prefix", []controller.ACLBinding{allow(prefixed, "logs", opWrite), denyOf(prefixed, "logs-eu")}, true},
		{"wildcard deny", []controller.ACLBinding{allow(literal, "t", opWrite), denyOf(literal, "*")}, false},
		{"wildcard allow", []controller.ACLBinding{allow(literal, "*", opWrite)}, true},
		{"one of two allows undenied", []controller.ACLBinding{allow(literal, "a", opWrite), allow(literal, "b", opWrite), denyOf(literal, "a")}, true},
		{"another principal's allow", []controller.ACLBinding{binding(topic, literal, "t", "User:bob", "*", opWrite, kmsg.ACLPermissionTypeAllow)}, false},
	} {
		a := New(tc.bindings, nil)
		if got := a.AuthorizeByResourceType(alice, "h", opWrite, topic); got != tc.want {
			t.Errorf("%s: AuthorizeByResourceType = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !New(nil, []string{alice}).AuthorizeByResourceType(alice, "h", opWrite, topic) {
		t.Error("a superuser is refused")
	}
}
