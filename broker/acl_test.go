package broker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func TestBrokerAuthorize(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	const alice = "User:alice"
	readOrders := func() bool {
		return b.Authorize(alice, "127.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders")
	}
	if b.AuthorizationEnabled() || !readOrders() {
		t.Fatal("with authorization off, a request was refused")
	}
	for name, value := range map[string]string{"kafka_enable_authorization": "true", "superusers": "admin"} {
		if err := b.SetClusterProperty(name, value); err != nil {
			t.Fatal(err)
		}
	}
	if !b.AuthorizationEnabled() || readOrders() {
		t.Fatal("with authorization on and no ACL, alice may read")
	}
	if !b.Superuser("User:admin") || b.Superuser(alice) {
		t.Fatal("superusers=admin not applied")
	}

	allowRead := controller.ACLBinding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "ord", PatternType: kmsg.ACLResourcePatternTypePrefixed,
		Principal: alice, Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	invalid := allowRead
	invalid.Principal = "alice"
	// Longer than DescribeAcls v0-v1 can carry.
	long := allowRead
	long.Principal = "User:" + strings.Repeat("a", maxACLStringBytes)
	errs := b.CreateACLs([]controller.ACLBinding{allowRead, invalid, long})
	if len(errs) != 3 || errs[0] != nil || controller.ErrorCode(errs[1]) != kerr.InvalidRequest.Code || controller.ErrorCode(errs[2]) != kerr.InvalidRequest.Code {
		t.Fatalf("CreateACLs: %v", errs)
	}
	if !readOrders() {
		t.Fatal("the new ACL is not applied")
	}
	if b.Authorize(alice, "127.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, "orders") {
		t.Fatal("READ allowed WRITE")
	}

	// superusers is read again when it changes.
	if err := b.SetClusterProperty("superusers", "User:alice"); err != nil {
		t.Fatal(err)
	}
	if !b.Authorize(alice, "127.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, "orders") || b.Superuser("User:admin") {
		t.Fatal("the changed superusers are not applied")
	}
	if err := b.SetClusterProperty("superusers", ""); err != nil {
		t.Fatal(err)
	}

	anyTopic := controller.ACLFilter{ResourceType: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	got, err := b.DescribeACLs(anyTopic)
	if err != nil || !reflect.DeepEqual(got, []controller.ACLBinding{allowRead}) {
		t.Fatalf("DescribeACLs: %+v %v", got, err)
	}
	if _, err := b.DescribeACLs(controller.ACLFilter{}); controller.ErrorCode(err) != kerr.InvalidRequest.Code {
		t.Fatalf("DescribeACLs of an UNKNOWN filter: %v", err)
	}

	dels := b.DeleteACLs([]controller.ACLFilter{{}, anyTopic})
	if len(dels) != 2 || controller.ErrorCode(dels[0].Err) != kerr.InvalidRequest.Code || dels[1].Err != nil ||
		!reflect.DeepEqual(dels[1].Deleted, []controller.ACLBinding{allowRead}) {
		t.Fatalf("DeleteACLs: %+v", dels)
	}
	if readOrders() {
		t.Fatal("the deleted ACL still allows")
	}
}

// TestBrokerAuthorizeAllocatesNothing: once built, the authorizer is
// reused, so a check on the produce and fetch paths allocates nothing.
func TestBrokerAuthorizeAllocatesNothing(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	if err := b.SetClusterProperty("kafka_enable_authorization", "true"); err != nil {
		t.Fatal(err)
	}
	errs := b.CreateACLs([]controller.ACLBinding{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders",
		PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeAllow}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	allocs := testing.AllocsPerRun(100, func() {
		if !b.Authorize("User:alice", "10.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, "orders") {
			t.Fatal("denied")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Authorize", allocs)
	}
}
