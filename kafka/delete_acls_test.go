package kafka

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func deleteFilter(rt kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal *string) kmsg.DeleteACLsRequestFilter {
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal = rt, name, pattern, principal
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return f
}

func deleteACLs(c *rawConn, version int16, filters ...kmsg.DeleteACLsRequestFilter) *kmsg.DeleteACLsResponse {
	req := kmsg.NewPtrDeleteACLsRequest()
	req.SetVersion(version)
	req.Filters = filters
	return c.roundTrip(req).(*kmsg.DeleteACLsResponse)
}

// matchedBindings lists the bindings a DeleteAcls result says it deleted.
func matchedBindings(t *testing.T, r kmsg.DeleteACLsResponseResult) []controller.ACLBinding {
	t.Helper()
	var out []controller.ACLBinding
	for _, m := range r.MatchingACLs {
		if m.ErrorCode != 0 {
			t.Fatalf("matching ACL with error %d", m.ErrorCode)
		}
		out = append(out, controller.ACLBinding{ResourceType: m.ResourceType, ResourceName: m.ResourceName, PatternType: m.ResourcePatternType,
			Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType})
	}
	return out
}

func TestDeleteAcls(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)
	seedACLs(t, b, allSeededACLs...)
	str := func(s string) *string { return &s }

	resp := deleteACLs(c, 3,
		deleteFilter(kmsg.ACLResourceTypeTopic, str("orders"), kmsg.ACLResourcePatternTypeMatch, nil),
		deleteFilter(kmsg.ACLResourceTypeUnknown, nil, kmsg.ACLResourcePatternTypeAny, nil),
		deleteFilter(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, str("User:bob")),
		deleteFilter(kmsg.ACLResourceTypeGroup, str("nothing"), kmsg.ACLResourcePatternTypeLiteral, nil),
	)
	if len(resp.Results) != 4 {
		t.Fatalf("%d results for 4 filters", len(resp.Results))
	}
	if got, want := matchedBindings(t, resp.Results[0]), []controller.ACLBinding{aclAnyTopic, aclOrdersRead, aclOrdersWrite, aclOrdPrefix}; resp.Results[0].ErrorCode != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("MATCH orders: error %d, deleted %+v\nwant %+v", resp.Results[0].ErrorCode, got, want)
	}
	if r := resp.Results[1]; r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || len(r.MatchingACLs) != 0 {
		t.Errorf("UNKNOWN filter: error %d %v, %d matches", r.ErrorCode, r.ErrorMessage, len(r.MatchingACLs))
	}
	// bob's bindings, including the two the first filter took as well.
	if got, want := matchedBindings(t, resp.Results[2]), []controller.ACLBinding{aclOrdersWrite, aclOrdPrefix, aclPayPrefix}; !reflect.DeepEqual(got, want) {
		t.Errorf("User:bob: deleted %+v\nwant %+v", got, want)
	}
	if r := resp.Results[3]; r.ErrorCode != 0 || len(r.MatchingACLs) != 0 {
		t.Errorf("a filter matching nothing: error %d, %d matches", r.ErrorCode, len(r.MatchingACLs))
	}
	left, _ := b.DescribeACLs(anyACLFilter)
	if want := []controller.ACLBinding{aclOrdersGroup}; !reflect.DeepEqual(left, want) {
		t.Fatalf("left %+v, want %+v", left, want)
	}

	// v0 has no pattern type: its filters delete LITERAL bindings only.
	seedACLs(t, b, aclPayPrefix)
	resp = deleteACLs(c, 0, deleteFilter(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil))
	if got := matchedBindings(t, resp.Results[0]); !reflect.DeepEqual(got, []controller.ACLBinding{aclOrdersGroup}) {
		t.Fatalf("v0 deleted %+v", got)
	}
	if left, _ := b.DescribeACLs(anyACLFilter); !reflect.DeepEqual(left, []controller.ACLBinding{aclPayPrefix}) {
		t.Fatalf("after v0, left %+v", left)
	}
}

func TestDeleteAclsNeedsClusterAlter(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)
	seedACLs(t, b, aclOrdersRead)
	enableAuthorization(t, b)
	resp := deleteACLs(c, 3, deleteFilter(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil))
	if r := resp.Results[0]; r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.MatchingACLs) != 0 {
		t.Fatalf("without ALTER on the cluster: error %d, %d matches", r.ErrorCode, len(r.MatchingACLs))
	}
	if left, _ := b.DescribeACLs(anyACLFilter); len(left) != 1 {
		t.Fatalf("a refused delete deleted: %+v left", left)
	}
	seedACLs(t, b, anonymousClusterAlter)
	resp = deleteACLs(c, 3, deleteFilter(kmsg.ACLResourceTypeTopic, nil, kmsg.ACLResourcePatternTypeAny, nil))
	if got := matchedBindings(t, resp.Results[0]); resp.Results[0].ErrorCode != 0 || !reflect.DeepEqual(got, []controller.ACLBinding{aclOrdersRead}) {
		t.Fatalf("with ALTER: error %d, deleted %+v", resp.Results[0].ErrorCode, got)
	}
}
