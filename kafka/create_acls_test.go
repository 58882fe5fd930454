package kafka

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func aclCreation(b controller.ACLBinding) kmsg.CreateACLsRequestCreation {
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
	return cr
}

func createACLs(c *rawConn, version int16, bindings ...controller.ACLBinding) *kmsg.CreateACLsResponse {
	req := kmsg.NewPtrCreateACLsRequest()
	req.SetVersion(version)
	for _, b := range bindings {
		req.Creations = append(req.Creations, aclCreation(b))
	}
	return c.roundTrip(req).(*kmsg.CreateACLsResponse)
}

func TestCreateAcls(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)
	invalid := func(mutate func(*controller.ACLBinding)) controller.ACLBinding {
		b := aclOrdersGroup
		mutate(&b)
		return b
	}
	bindings := []controller.ACLBinding{
		aclOrdersRead,
		invalid(func(b *controller.ACLBinding) {
			b.ResourceType, b.ResourceName = kmsg.ACLResourceTypeCluster, "my-cluster"
		}),
		aclPayPrefix,
		invalid(func(b *controller.ACLBinding) { b.ResourceType = kmsg.ACLResourceTypeAny }),
		invalid(func(b *controller.ACLBinding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }),
		invalid(func(b *controller.ACLBinding) { b.Operation = kmsg.ACLOperationAny }),
		invalid(func(b *controller.ACLBinding) { b.Permission = kmsg.ACLPermissionTypeUnknown }),
		invalid(func(b *controller.ACLBinding) { b.Principal = "alice" }),
		invalid(func(b *controller.ACLBinding) { b.Principal = "" }),
		invalid(func(b *controller.ACLBinding) { b.ResourceName = "" }),
		aclOrdersRead, // twice in one request: stored once
	}
	resp := createACLs(c, 3, bindings...)
	if len(resp.Results) != len(bindings) {
		t.Fatalf("%d results for %d creations", len(resp.Results), len(bindings))
	}
	for i, r := range resp.Results {
		valid := controller.ValidateACLBinding(bindings[i]) == nil
		switch {
		case valid && r.ErrorCode != 0:
			t.Errorf("creation %d (%+v): error %d", i, bindings[i], r.ErrorCode)
		case !valid && r.ErrorCode != kerr.InvalidRequest.Code:
			t.Errorf("creation %d (%+v): error %d, want INVALID_REQUEST", i, bindings[i], r.ErrorCode)
		case !valid && (r.ErrorMessage == nil || strings.HasPrefix(*r.ErrorMessage, "INVALID_REQUEST")):
			t.Errorf("creation %d: error message %v, want the reason alone", i, r.ErrorMessage)
		}
	}
	stored, _ := b.DescribeACLs(anyACLFilter)
	if want := []controller.ACLBinding{aclOrdersRead, aclPayPrefix}; !reflect.DeepEqual(stored, want) {
		t.Fatalf("stored %+v\nwant %+v", stored, want)
	}

	// Creating it again succeeds and changes nothing.
	if resp := createACLs(c, 2, aclOrdersRead); resp.Results[0].ErrorCode != 0 {
		t.Fatalf("re-creating: error %d", resp.Results[0].ErrorCode)
	}
	// v0 has no pattern type: what it creates is LITERAL.
	v0 := aclOrdersGroup
	v0.PatternType = kmsg.ACLResourcePatternTypePrefixed // not sent at v0
	if resp := createACLs(c, 0, v0); resp.Results[0].ErrorCode != 0 {
		t.Fatalf("v0: error %d", resp.Results[0].ErrorCode)
	}
	stored, _ = b.DescribeACLs(anyACLFilter)
	if want := []controller.ACLBinding{aclOrdersRead, aclPayPrefix, aclOrdersGroup}; !reflect.DeepEqual(stored, want) {
		t.Fatalf("after v0: %+v\nwant %+v", stored, want)
	}
}

func TestCreateAclsNeedsClusterAlter(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)
	enableAuthorization(t, b)
	resp := createACLs(c, 3, aclOrdersRead, aclOrdersWrite)
	for i, r := range resp.Results {
		if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("result %d: error %d, want CLUSTER_AUTHORIZATION_FAILED", i, r.ErrorCode)
		}
	}
	if stored, _ := b.DescribeACLs(anyACLFilter); len(stored) != 0 {
		t.Fatalf("a refused request stored %+v", stored)
	}
	// DESCRIBE on the cluster is not enough; ALTER is.
	seedACLs(t, b, aclBinding(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, controller.ClusterResourceName,
		anonymousPrincipal, kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow))
	if resp := createACLs(c, 3, aclOrdersRead); resp.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("with DESCRIBE: error %d", resp.Results[0].ErrorCode)
	}
	seedACLs(t, b, anonymousClusterAlter)
	if resp := createACLs(c, 3, aclOrdersRead); resp.Results[0].ErrorCode != 0 {
		t.Fatalf("with ALTER: error %d", resp.Results[0].ErrorCode)
	}
}
