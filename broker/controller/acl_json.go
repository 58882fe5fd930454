package controller

import (
	"encoding/json"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Raft log and snapshots store an ACL's enums as Kafka's wire codes:
// numbers round-trip whatever their value, while kmsg's text forms, which
// encoding/json would otherwise use, refuse to parse UNKNOWN, so a
// decoded entry could not always be encoded and decoded again.

type aclEnums struct {
	ResourceType int8 `json:"resource_type"`
	PatternType  int8 `json:"pattern_type"`
	Operation    int8 `json:"operation"`
	Permission   int8 `json:"permission"`
}

func enumsOf(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclEnums {
	return aclEnums{ResourceType: int8(rt), PatternType: int8(pt), Operation: int8(op), Permission: int8(perm)}
}

type aclBindingJSON struct {
	aclEnums
	ResourceName string `json:"resource_name"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
}

// MarshalJSON stores b with numeric enums.
func (b ACLBinding) MarshalJSON() ([]byte, error) {
	return json.Marshal(aclBindingJSON{
		aclEnums:     enumsOf(b.ResourceType, b.PatternType, b.Operation, b.Permission),
		ResourceName: b.ResourceName, Principal: b.Principal, Host: b.Host,
	})
}

// UnmarshalJSON reads what MarshalJSON stores.
func (b *ACLBinding) UnmarshalJSON(data []byte) error {
	var j aclBindingJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*b = ACLBinding{
		ResourceType: kmsg.ACLResourceType(j.ResourceType), ResourceName: j.ResourceName,
		PatternType: kmsg.ACLResourcePatternType(j.PatternType), Principal: j.Principal, Host: j.Host,
		Operation: kmsg.ACLOperation(j.Operation), Permission: kmsg.ACLPermissionType(j.Permission),
	}
	return nil
}

type aclFilterJSON struct {
	aclEnums
	ResourceName *string `json:"resource_name,omitempty"`
	Principal    *string `json:"principal,omitempty"`
	Host         *string `json:"host,omitempty"`
}

// MarshalJSON stores f with numeric enums.
func (f ACLFilter) MarshalJSON() ([]byte, error) {
	return json.Marshal(aclFilterJSON{
		aclEnums:     enumsOf(f.ResourceType, f.PatternType, f.Operation, f.Permission),
		ResourceName: f.ResourceName, Principal: f.Principal, Host: f.Host,
	})
}

// UnmarshalJSON reads what MarshalJSON stores.
func (f *ACLFilter) UnmarshalJSON(data []byte) error {
	var j aclFilterJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*f = ACLFilter{
		ResourceType: kmsg.ACLResourceType(j.ResourceType), ResourceName: j.ResourceName,
		PatternType: kmsg.ACLResourcePatternType(j.PatternType), Principal: j.Principal, Host: j.Host,
		Operation: kmsg.ACLOperation(j.Operation), Permission: kmsg.ACLPermissionType(j.Permission),
	}
	return nil
}
