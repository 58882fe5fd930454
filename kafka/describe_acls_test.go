package kafka

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
)

func aclBinding(rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) controller.ACLBinding {
	return controller.ACLBinding{ResourceType: rt, ResourceName: name, PatternType: pattern, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

var (
	aclOrdersRead         = aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "orders", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	aclOrdersWrite        = aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "orders", "User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow)
	aclAnyTopic           = aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "*", "User:*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow)
	aclOrdPrefix          = aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "ord", "User:bob", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny)
	aclPayPrefix          = aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "pay", "User:bob", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	aclOrdersGroup        = aclBinding(kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, "orders", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	allSeededACLs         = []controller.ACLBinding{aclOrdersRead, aclOrdersWrite, aclAnyTopic, aclOrdPrefix, aclPayPrefix, aclOrdersGroup}
	anyACLFilter          = controller.ACLFilter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	anonymousClusterAlter = aclBinding(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, controller.ClusterResourceName, anonymousPrincipal, kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow)
)

func seedACLs(t *testing.T, b *broker.Broker, bindings ...controller.ACLBinding) {
	t.Helper()
	for i, err := range b.CreateACLs(bindings) {
		if err != nil {
			t.Fatalf("creating %+v: %v", bindings[i], err)
		}
	}
}

// enableAuthorization turns ACLs on; the test connections are
// User:ANONYMOUS.
func enableAuthorization(t *testing.T, b *broker.Broker) {
	t.Helper()
	if err := b.SetClusterProperty("kafka_enable_authorization", "true"); err != nil {
		t.Fatal(err)
	}
}

func describeACLs(c *rawConn, version int16, rt kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType) *kmsg.DescribeACLsResponse {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.SetVersion(version)
	req.ResourceType, req.ResourceName, req.ResourcePatternType = rt, name, pattern
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return c.roundTrip(req).(*kmsg.DescribeACLsResponse)
}

// describedBindings flattens a DescribeAcls response.
func describedBindings(resp *kmsg.DescribeACLsResponse) []controller.ACLBinding {
	var out []controller.ACLBinding
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, controller.ACLBinding{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
				Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType})
		}
	}
	return out
}

func TestDescribeAcls(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)
	seedACLs(t, b, allSeededACLs...)
	name := func(s string) *string { return &s }

	all := describeACLs(c, 3, kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny)
	if all.ErrorCode != 0 {
		t.Fatalf("describe all: error %d", all.ErrorCode)
	}
	// One resource per pattern, its bindings together.
	var resources []string
	for _, r := range all.Resources {
		resources = append(resources, r.ResourceType.String()+":"+r.ResourcePatternType.String()+":"+r.ResourceName)
	}
	wantResources := []string{"TOPIC:LITERAL:*", "TOPIC:LITERAL:orders", "TOPIC:PREFIXED:ord", "TOPIC:PREFIXED:pay", "GROUP:LITERAL:orders"}
	if !reflect.DeepEqual(resources, wantResources) || len(all.Resources[1].ACLs) != 2 {
		t.Fatalf("resources %v (orders has %d ACLs), want %v", resources, len(all.Resources[1].ACLs), wantResources)
	}
	if got := describedBindings(all); len(got) != len(allSeededACLs) {
		t.Fatalf("described %d bindings, want %d", len(got), len(allSeededACLs))
	}

	// MATCH: what applies to the topic "orders".
	match := describedBindings(describeACLs(c, 3, kmsg.ACLResourceTypeTopic, name("orders"), kmsg.ACLResourcePatternTypeMatch))
	if want := []controller.ACLBinding{aclAnyTopic, aclOrdersRead, aclOrdersWrite, aclOrdPrefix}; !reflect.DeepEqual(match, want) {
		t.Fatalf("MATCH orders: %+v\nwant %+v", match, want)
	}
	// A LITERAL filter names one pattern exactly.
	if got := describedBindings(describeACLs(c, 3, kmsg.ACLResourceTypeTopic, name("ord"), kmsg.ACLResourcePatternTypeLiteral)); len(got) != 0 {
		t.Fatalf("LITERAL ord: %+v", got)
	}
	// v0 has no pattern type: LITERAL bindings only.
	v0 := describedBindings(describeACLs(c, 0, kmsg.ACLResourceTypeTopic, nil, kmsg.ACLResourcePatternTypePrefixed))
	if want := []controller.ACLBinding{aclAnyTopic, aclOrdersRead, aclOrdersWrite}; !reflect.DeepEqual(v0, want) {
		t.Fatalf("v0: %+v\nwant %+v", v0, want)
	}
	// An UNKNOWN field is INVALID_REQUEST, with a reason.
	bad := describeACLs(c, 3, kmsg.ACLResourceTypeUnknown, nil, kmsg.ACLResourcePatternTypeAny)
	if bad.ErrorCode != kerr.InvalidRequest.Code || bad.ErrorMessage == nil || len(bad.Resources) != 0 {
		t.Fatalf("UNKNOWN resource type: error %d %v", bad.ErrorCode, bad.ErrorMessage)
	}
	if bad := describeACLs(c, 3, kmsg.ACLResourceTypeTopic, nil, kmsg.ACLResourcePatternTypeUnknown); bad.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("UNKNOWN pattern type: error %d", bad.ErrorCode)
	}
}

func TestDescribeAclsNeedsClusterDescribe(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)
	seedACLs(t, b, aclOrdersRead)
	enableAuthorization(t, b)
	resp := describeACLs(c, 3, kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Resources) != 0 {
		t.Fatalf("without DESCRIBE on the cluster: error %d, %d resources", resp.ErrorCode, len(resp.Resources))
	}
	// ALTER implies DESCRIBE.
	seedACLs(t, b, anonymousClusterAlter)
	resp = describeACLs(c, 3, kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny)
	if resp.ErrorCode != 0 || len(describedBindings(resp)) != 2 {
		t.Fatalf("with ALTER on the cluster: error %d, %+v", resp.ErrorCode, describedBindings(resp))
	}
}
