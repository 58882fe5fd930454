package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// wcACL is one binding of `weirctl acl create|list|delete --format json`.
type wcACL struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	Error        string `json:"error"`
}

func (a wcACL) String() string {
	return fmt.Sprintf("%s %s %s %s:%s:%s from %s", a.Permission, a.Principal, a.Operation, a.ResourceType, a.PatternType, a.ResourceName, a.Host)
}

// aclStrings renders bindings the way wcACL.String does, sorted, so that
// weirctl's answers and kadm's compare as lists.
func aclStrings[T any](items []T, render func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, render(it))
	}
	slices.Sort(out)
	return out
}

func describedString(d kadm.DescribedACL) string {
	return wcACL{Principal: d.Principal, Host: d.Host, ResourceType: d.Type.String(), ResourceName: d.Name,
		PatternType: d.Pattern.String(), Operation: d.Operation.String(), Permission: d.Permission.String()}.String()
}

func deletedString(d kadm.DeletedACL) string {
	return wcACL{Principal: d.Principal, Host: d.Host, ResourceType: d.Type.String(), ResourceName: d.Name,
		PatternType: d.Pattern.String(), Operation: d.Operation.String(), Permission: d.Permission.String()}.String()
}

// allACLs lists every binding through kadm, failing the test on any error.
func allACLs(t testing.TB, adm *kadm.Client) []string {
	t.Helper()
	b := kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny)
	results, err := adm.DescribeACLs(ctxTimeout(t, requestTimeout), b)
	if err != nil {
		t.Fatalf("DescribeACLs: %v", err)
	}
	var out []string
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("DescribeACLs: %v %s", r.Err, r.ErrMessage)
		}
		out = append(out, aclStrings(r.Described, describedString)...)
	}
	slices.Sort(out)
	return out
}

// TestACLs: one broker with SCRAM-SHA-256 on its Kafka listener,
// superusers=admin and kafka_enable_authorization=true. The superuser
// creates, lists and deletes ACLs with weirctl (checked against kadm's
// DescribeAcls) and with kadm, prefixed patterns and a MATCH delete
// included; alice, who is not a superuser and has no ALTER on the cluster,
// is refused with CLUSTER_AUTHORIZATION_FAILED by weirctl and kadm alike.
func TestACLs(t *testing.T) {
	t.Parallel()
	const alicePassword = "alice-secret"
	b := StartBroker(t)
	w := newWeirctl(t, b)
	// Bootstrap in the documented order: users, then superusers and
	// authorization, then SASL on the listener.
	w.ok(t, "", "acl", "user", "create", adminUser, "--password", adminPassword)
	w.ok(t, "", "acl", "user", "create", "alice", "--password", alicePassword)
	w.ok(t, "", "cluster", "config", "--admin-url", "http://"+b.AdminAddr, "set",
		"superusers=User:"+adminUser, "kafka_enable_authorization=true")
	b.Stop(t)
	b.spec.sets = append(b.spec.sets, "kafka_sasl_mechanisms=SCRAM-SHA-256")
	b.args = b.buildArgs()
	adminAuth := kgo.SASL(scram.Auth{User: adminUser, Pass: adminPassword}.AsSha256Mechanism())
	b.spec.pingOpts = []kgo.Opt{adminAuth}
	b.Start(t)

	asAdmin := func(args ...string) []string {
		return append([]string{"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", adminUser, "--sasl-password", adminPassword}, args...)
	}
	asAlice := func(args ...string) []string {
		return append([]string{"--sasl-mechanism", "scram-sha-256", "--sasl-user", "alice", "--sasl-password", alicePassword}, args...)
	}
	adm := kadm.NewClient(b.Client(t, adminAuth))
	aliceAdm := kadm.NewClient(b.Client(t, kgo.SASL(scram.Auth{User: "alice", Pass: alicePassword}.AsSha256Mechanism())))

	// weirctl acl create: one binding per principal, resource and
	// operation, each reported.
	created := decodeJSON[[]wcACL](t, w.ok(t, "", asAdmin("acl", "create", "--allow-principal", "alice",
		"--operation", "read,describe", "--topic", "orders", "--group", "orders-app", "--format", "json")...))
	if len(created) != 4 {
		t.Fatalf("created %d bindings, want 4: %v", len(created), created)
	}
	for _, c := range created {
		if c.Error != "" || c.Principal != "User:alice" || c.Host != "*" || c.PatternType != "LITERAL" || c.Permission != "ALLOW" {
			t.Fatalf("created %v (error %q)", c, c.Error)
		}
	}
	w.ok(t, "", asAdmin("acl", "create", "--allow-principal", "User:alice", "--operation", "write",
		"--topic", "app-", "--resource-pattern-type", "prefixed")...)
	w.ok(t, "", asAdmin("acl", "create", "--deny-principal", "User:*", "--deny-host", "10.9.9.9",
		"--operation", "all", "--topic", "orders")...)
	w.fails(t, "--transactional-id must not be empty", asAdmin("acl", "create", "--allow-principal", "alice", "--operation", "read",
		"--transactional-id", "")...)
	table := w.ok(t, "", asAdmin("acl", "list")...)
	if !strings.Contains(table.stdout, "PRINCIPAL") || !strings.Contains(table.stdout, "app-") || !strings.Contains(table.stdout, "PREFIXED") {
		t.Fatalf("acl list table:\n%s", table)
	}

	// weirctl's list is the broker's DescribeAcls answer.
	listed := aclStrings(decodeJSON[[]wcACL](t, w.ok(t, "", asAdmin("acl", "list", "--format", "json")...)), wcACL.String)
	if want := allACLs(t, adm); !slices.Equal(listed, want) || len(listed) != 6 {
		t.Fatalf("weirctl acl list:\n%q\nkadm DescribeACLs:\n%q", listed, want)
	}
	// MATCH: what applies to the topic app-orders.
	matched := decodeJSON[[]wcACL](t, w.ok(t, "", asAdmin("acl", "list", "--topic", "app-orders", "--resource-pattern-type", "match", "--format", "json")...))
	if len(matched) != 1 || matched[0].ResourceName != "app-" || matched[0].Operation != "WRITE" {
		t.Fatalf("MATCH app-orders: %v", matched)
	}
	// Filtering on an allowed principal leaves out the DENY for User:*.
	alices := decodeJSON[[]wcACL](t, w.ok(t, "", asAdmin("acl", "list", "--allow-principal", "alice", "--format", "json")...))
	if len(alices) != 5 {
		t.Fatalf("alice's ALLOW bindings: %v", alices)
	}

	// Delete by a MATCH filter prints what it deleted.
	deleted := decodeJSON[[]wcACL](t, w.ok(t, "", asAdmin("acl", "delete", "--topic", "app-orders", "--resource-pattern-type", "match", "--format", "json")...))
	if len(deleted) != 1 || deleted[0].String() != "ALLOW User:alice WRITE TOPIC:PREFIXED:app- from *" {
		t.Fatalf("deleted %v", deleted)
	}
	dry := decodeJSON[[]wcACL](t, w.ok(t, "", asAdmin("acl", "delete", "--deny-principal", "User:*", "--dry-run", "--format", "json")...))
	if len(dry) != 1 || dry[0].Permission != "DENY" || len(allACLs(t, adm)) != 5 {
		t.Fatalf("dry run listed %v and left %d bindings", dry, len(allACLs(t, adm)))
	}
	w.ok(t, "", asAdmin("acl", "delete", "--deny-principal", "User:*")...)
	if got := allACLs(t, adm); len(got) != 4 || slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "DENY") }) {
		t.Fatalf("after the deletes: %q", got)
	}

	// kadm: a prefixed group binding and a cluster binding, listed, then
	// deleted by a MATCH filter naming a group the prefix covers.
	cb := kadm.NewACLs().Allow("User:bob").Groups("batch-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpDescribe)
	results, err := adm.CreateACLs(ctxTimeout(t, requestTimeout), cb)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("kadm CreateACLs %s %s: %v %s", r.Name, r.Operation, r.Err, r.ErrMessage)
		}
	}
	results, err = adm.CreateACLs(ctxTimeout(t, requestTimeout), kadm.NewACLs().Allow("User:ops").Clusters().Operations(kadm.OpAlter))
	if err != nil || results[0].Err != nil {
		t.Fatalf("kadm CreateACLs cluster: %v %v", err, results)
	}
	if got := allACLs(t, adm); !slices.Contains(got, "ALLOW User:bob READ GROUP:PREFIXED:batch- from *") ||
		!slices.Contains(got, "ALLOW User:ops ALTER CLUSTER:LITERAL:kafka-cluster from *") {
		t.Fatalf("after kadm's creates: %q", got)
	}
	db := kadm.NewACLs().Groups("batch-nightly").ResourcePatternType(kadm.ACLPatternMatch).
		Allow().AllowHosts().Deny().DenyHosts().Operations()
	dels, err := adm.DeleteACLs(ctxTimeout(t, requestTimeout), db)
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, d := range dels {
		if d.Err != nil {
			t.Fatalf("kadm DeleteACLs: %v %s", d.Err, d.ErrMessage)
		}
		gone = append(gone, aclStrings(d.Deleted, deletedString)...)
	}
	if want := []string{"ALLOW User:bob DESCRIBE GROUP:PREFIXED:batch- from *", "ALLOW User:bob READ GROUP:PREFIXED:batch- from *"}; !slices.Equal(gone, want) {
		t.Fatalf("MATCH batch-nightly deleted %q, want %q", gone, want)
	}

	// alice is not a superuser and has no ALTER or DESCRIBE on the
	// cluster: every ACL API refuses her, and nothing changes.
	before := allACLs(t, adm)
	w.fails(t, "CLUSTER_AUTHORIZATION_FAILED", asAlice("acl", "create", "--allow-principal", "alice", "--operation", "all", "--topic", "*")...)
	w.fails(t, "CLUSTER_AUTHORIZATION_FAILED", asAlice("acl", "list")...)
	w.fails(t, "CLUSTER_AUTHORIZATION_FAILED", asAlice("acl", "delete", "--allow-principal", "alice")...)
	results, err = aliceAdm.CreateACLs(ctxTimeout(t, requestTimeout), kadm.NewACLs().Allow("User:alice").Topics("*").Operations(kadm.OpAll))
	if err != nil || len(results) != 1 || !errors.Is(results[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice's CreateACLs: %v %+v", err, results)
	}
	described, err := aliceAdm.DescribeACLs(ctxTimeout(t, requestTimeout), kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described) != 1 || !errors.Is(described[0].Err, kerr.ClusterAuthorizationFailed) || len(described[0].Described) != 0 {
		t.Fatalf("alice's DescribeACLs: %v %+v", err, described)
	}
	dels, err = aliceAdm.DeleteACLs(ctxTimeout(t, requestTimeout), kadm.NewACLs().Allow("User:alice").AllowHosts().Topics().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(dels) != 1 || !errors.Is(dels[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice's DeleteACLs: %v %+v", err, dels)
	}
	if after := allACLs(t, adm); !slices.Equal(after, before) {
		t.Fatalf("alice's refused calls changed the ACLs:\n%q\n%q", before, after)
	}

	// The ACLs survive a restart (the controller's snapshot and log).
	b.Restart(t)
	adm = kadm.NewClient(b.Client(t, adminAuth))
	if after := allACLs(t, adm); !slices.Equal(after, before) {
		t.Fatalf("after a restart:\n%q\nwant\n%q", after, before)
	}
}

// createACLsVia sends CreateAcls to broker b itself and fails the test
// unless every creation succeeds.
func createACLsVia(t testing.TB, b *Broker, creations ...kmsg.CreateACLsRequestCreation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = creations
	resp, err := ask(t, b, req)
	if err != nil {
		t.Fatalf("CreateAcls to node %d: %v", b.NodeID, err)
	}
	for i, r := range resp.(*kmsg.CreateACLsResponse).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("CreateAcls to node %d, creation %d: %s %s", b.NodeID, i, errName(r.ErrorCode), derefStr(r.ErrorMessage))
		}
	}
}

func describeACLsOn(t testing.TB, b *Broker) ([]string, error) {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := ask(t, b, req)
	if err != nil {
		return nil, err
	}
	dr := resp.(*kmsg.DescribeACLsResponse)
	if dr.ErrorCode != 0 {
		return nil, fmt.Errorf("DescribeAcls on node %d: %s", b.NodeID, errName(dr.ErrorCode))
	}
	var out []string
	for _, r := range dr.Resources {
		for _, a := range r.ACLs {
			out = append(out, wcACL{Principal: a.Principal, Host: a.Host, ResourceType: r.ResourceType.String(), ResourceName: r.ResourceName,
				PatternType: r.ResourcePatternType.String(), Operation: a.Operation.String(), Permission: a.PermissionType.String()}.String())
		}
	}
	slices.Sort(out)
	return out, nil
}

// TestACLsAcrossBrokers: ACLs created through one broker of three are
// listed by DescribeAcls on the other two, and a DeleteAcls sent to a
// broker that is not the controller answers the bindings it deleted and
// removes them everywhere.
func TestACLsAcrossBrokers(t *testing.T) {
	bs := StartCluster(t, 3)
	controllerID := waitClusterView(t, bs, clusterTimeout)
	var followers []*Broker
	for _, b := range bs {
		if int32(b.NodeID) != controllerID {
			followers = append(followers, b)
		}
	}
	creation := func(rt kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
		return c
	}
	createACLsVia(t, followers[0],
		creation(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead),
		creation(kmsg.ACLResourceTypeTopic, "app-", kmsg.ACLResourcePatternTypePrefixed, "User:bob", kmsg.ACLOperationWrite))
	want := []string{"ALLOW User:alice READ TOPIC:LITERAL:orders from *", "ALLOW User:bob WRITE TOPIC:PREFIXED:app- from *"}
	for _, b := range bs {
		pollUntil(t, 20*time.Second, fmt.Sprintf("node %d listing the new ACLs", b.NodeID), func() error {
			got, err := describeACLsOn(t, b)
			if err == nil && !slices.Equal(got, want) {
				err = fmt.Errorf("listed %q", got)
			}
			return err
		})
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("app-events"), kmsg.ACLResourcePatternTypeMatch
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	resp, err := ask(t, followers[1], del)
	if err != nil {
		t.Fatalf("DeleteAcls to node %d: %v", followers[1].NodeID, err)
	}
	results := resp.(*kmsg.DeleteACLsResponse).Results
	if len(results) != 1 || results[0].ErrorCode != 0 || len(results[0].MatchingACLs) != 1 ||
		results[0].MatchingACLs[0].ResourceName != "app-" || results[0].MatchingACLs[0].Principal != "User:bob" {
		t.Fatalf("DeleteAcls to node %d (not the controller, node %d) answered %+v", followers[1].NodeID, controllerID, results)
	}
	for _, b := range bs {
		pollUntil(t, 20*time.Second, fmt.Sprintf("node %d without the deleted ACL", b.NodeID), func() error {
			got, err := describeACLsOn(t, b)
			if err == nil && !slices.Equal(got, want[:1]) {
				err = fmt.Errorf("listed %q", got)
			}
			return err
		})
	}
}
