package controller

import (
	"cmp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLs, Kafka's model: a binding allows or denies one principal, from one
// host, one operation on the resources its pattern names. The codes are
// Kafka's, as kmsg spells them, so bindings travel between the wire and
// the log unconverted.

// ClusterResourceName is the only name a CLUSTER resource has.
const ClusterResourceName = "kafka-cluster"

// WildcardResource is the literal resource name that matches every name;
// WildcardHost matches every host, and "Type:*" every principal of that
// type.
const (
	WildcardResource = "*"
	WildcardHost     = "*"
)

// ACLBinding is one ACL: a resource pattern and an access control entry
// (stored as acl_json.go encodes it).
type ACLBinding struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// ACLFilter selects bindings, as Kafka's AclBindingFilter: ANY matches
// every value of a field, a nil name, principal or host matches every
// one, and the MATCH pattern type selects the literal, wildcard and
// prefixed bindings that apply to ResourceName.
type ACLFilter struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName *string                     `json:"resource_name,omitempty"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    *string                     `json:"principal,omitempty"`
	Host         *string                     `json:"host,omitempty"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// CreateACLs adds bindings, all or nothing; a binding that exists already
// is left as it is.
type CreateACLs struct {
	Bindings []ACLBinding `json:"bindings"`
}

// DeleteACLs removes every binding any filter matches, all or nothing.
// Result.DeletedACLs lists, per filter, the bindings it matched in the
// state before the command (a binding two filters match is listed by
// both, as Kafka does).
type DeleteACLs struct {
	Filters []ACLFilter `json:"filters"`
}

func (CreateACLs) Type() CommandType { return CmdCreateACLs }
func (DeleteACLs) Type() CommandType { return CmdDeleteACLs }

// validPrincipal reports whether p is "Type:name" with both parts present.
func validPrincipal(p string) bool {
	typ, name, ok := strings.Cut(p, ":")
	return ok && typ != "" && name != ""
}

// ValidateACLBinding reports what makes b unacceptable in CreateAcls, as
// INVALID_REQUEST with Kafka's reasons.
func ValidateACLBinding(b ACLBinding) error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId:
	default:
		return errorf(kerr.InvalidRequest, "invalid resource type %v for an ACL binding (want TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID)", b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return errorf(kerr.InvalidRequest, "invalid pattern type %v for an ACL binding (want LITERAL or PREFIXED)", b.PatternType)
	}
	if b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationIdempotentWrite {
		return errorf(kerr.InvalidRequest, "invalid operation %v for an ACL binding", b.Operation)
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return errorf(kerr.InvalidRequest, "invalid permission type %v for an ACL binding (want ALLOW or DENY)", b.Permission)
	}
	switch {
	case b.ResourceName == "":
		return errorf(kerr.InvalidRequest, "invalid empty resource name")
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterResourceName:
		return errorf(kerr.InvalidRequest, "the only valid name for the CLUSTER resource is %s, not %q", ClusterResourceName, b.ResourceName)
	case !validPrincipal(b.Principal):
		return errorf(kerr.InvalidRequest, "could not parse principal %q: want Type:name, such as User:alice or User:*", b.Principal)
	case b.Host == "":
		return errorf(kerr.InvalidRequest, "empty host: use * for every host")
	}
	return nil
}

// ValidateACLFilter reports what makes f unacceptable in DescribeAcls or
// DeleteAcls: an UNKNOWN (or out of range) field.
func ValidateACLFilter(f ACLFilter) error {
	switch {
	case f.ResourceType <= kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser:
		return errorf(kerr.InvalidRequest, "unknown resource type %d in the ACL filter", f.ResourceType)
	case f.PatternType <= kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return errorf(kerr.InvalidRequest, "unknown pattern type %d in the ACL filter", f.PatternType)
	case f.Operation <= kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return errorf(kerr.InvalidRequest, "unknown operation %d in the ACL filter", f.Operation)
	case f.Permission <= kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return errorf(kerr.InvalidRequest, "unknown permission type %d in the ACL filter", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b (Kafka's AclBindingFilter.matches).
func (f ACLFilter) Matches(b ACLBinding) bool {
	return f.matchesPattern(b) &&
		(f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == b.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission)
}

func (f ACLFilter) matchesPattern(b ACLBinding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	anyPattern := f.PatternType == kmsg.ACLResourcePatternTypeAny || f.PatternType == kmsg.ACLResourcePatternTypeMatch
	if !anyPattern && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
		return name == b.ResourceName
	}
	// MATCH: the bindings that would apply to a resource called name.
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return b.ResourceName == name || b.ResourceName == WildcardResource
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// compareACLBindings is the order bindings are kept and listed in.
func compareACLBindings(a, b ACLBinding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

func (t *txn) createACLs(c CreateACLs) Result {
	for _, b := range c.Bindings {
		if err := ValidateACLBinding(b); err != nil {
			return Result{Err: err}
		}
	}
	next := slices.Clone(t.cur.acls)
	added := false
	for _, b := range c.Bindings {
		i, found := slices.BinarySearchFunc(next, b, compareACLBindings)
		if !found {
			next = slices.Insert(next, i, b)
			added = true
		}
	}
	if !added {
		return Result{}
	}
	t.next.acls, t.next.aclsIndex = next, t.index
	return Result{Changed: true}
}

func (t *txn) deleteACLs(c DeleteACLs) Result {
	for _, f := range c.Filters {
		if err := ValidateACLFilter(f); err != nil {
			return Result{Err: err}
		}
	}
	deleted := make([][]ACLBinding, len(c.Filters))
	gone := make([]bool, len(t.cur.acls))
	for i, f := range c.Filters {
		for j, b := range t.cur.acls {
			if f.Matches(b) {
				deleted[i] = append(deleted[i], b)
				gone[j] = true
			}
		}
	}
	var next []ACLBinding
	for j, b := range t.cur.acls {
		if !gone[j] {
			next = append(next, b)
		}
	}
	r := Result{DeletedACLs: deleted}
	if len(next) != len(t.cur.acls) {
		t.next.acls, t.next.aclsIndex = next, t.index
		r.Changed = true
	}
	return r
}

// ACLs lists every binding, sorted by resource type, pattern type,
// resource name, principal, host, operation and permission.
func (v *View) ACLs() []ACLBinding { return slices.Clone(v.acls) }

// MatchingACLs lists the bindings f selects, in the order of ACLs.
func (v *View) MatchingACLs(f ACLFilter) []ACLBinding {
	var out []ACLBinding
	for _, b := range v.acls {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// ACLsIndex is the log index of the entry that last changed the ACLs (0:
// never). Two views with the same ACLsIndex hold the same ACLs, so readers
// cache what they derive from them by it.
func (v *View) ACLsIndex() uint64 { return v.aclsIndex }
