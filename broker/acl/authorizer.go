package acl

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

// Authorizer answers Authorize for one set of bindings and superusers. It
// is safe for concurrent use: nothing in it changes once built.
type Authorizer struct {
	superusers map[string]struct{}
	// byType is indexed by kmsg.ACLResourceType; types no binding can
	// have stay empty.
	byType [kmsg.ACLResourceTypeUser + 1]resourceIndex
}

// resourceIndex holds one resource type's bindings by how their pattern
// matches a name.
type resourceIndex struct {
	literal  map[string][]entry // LITERAL bindings other than "*", by name
	wildcard []entry            // LITERAL "*"
	prefixed map[string][]entry // PREFIXED bindings, by prefix
	// prefixLens lists the lengths of the prefixes in prefixed, so a name
	// is looked up once per length rather than compared with every prefix.
	prefixLens []int
}

// entry is a binding without its resource pattern.
type entry struct {
	// principal is the binding's principal; for a wildcard ("User:*")
	// principalType holds "User:" and principal is empty.
	principal     string
	principalType string
	host          string
	op            kmsg.ACLOperation
	deny          bool
}

// New builds an authorizer from bindings and superuser principals
// ("User:alice"). Bindings are assumed valid (controller.ValidateACLBinding);
// one of a resource type the index has no room for is ignored.
func New(bindings []controller.ACLBinding, superusers []string) *Authorizer {
	a := &Authorizer{superusers: make(map[string]struct{}, len(superusers))}
	for _, su := range superusers {
		a.superusers[su] = struct{}{}
	}
	for _, b := range bindings {
		if b.ResourceType < 0 || int(b.ResourceType) >= len(a.byType) {
			continue
		}
		e := entry{principal: b.Principal, host: b.Host, op: b.Operation, deny: b.Permission == kmsg.ACLPermissionTypeDeny}
		if typ, name, _ := strings.Cut(b.Principal, ":"); name == "*" {
			e.principal, e.principalType = "", typ+":"
		}
		a.byType[b.ResourceType].add(b.PatternType, b.ResourceName, e)
	}
	return a
}

func (ri *resourceIndex) add(pattern kmsg.ACLResourcePatternType, name string, e entry) {
	switch {
	case pattern == kmsg.ACLResourcePatternTypePrefixed:
		if ri.prefixed == nil {
			ri.prefixed = map[string][]entry{}
		}
		if _, seen := ri.prefixed[name]; !seen && !containsInt(ri.prefixLens, len(name)) {
			ri.prefixLens = append(ri.prefixLens, len(name))
		}
		ri.prefixed[name] = append(ri.prefixed[name], e)
	case name == controller.WildcardResource:
		ri.wildcard = append(ri.wildcard, e)
	default:
		if ri.literal == nil {
			ri.literal = map[string][]entry{}
		}
		ri.literal[name] = append(ri.literal[name], e)
	}
}

func containsInt(s []int, n int) bool {
	for _, v := range s {
		if v == n {
			return true
		}
	}
	return false
}

// Superuser reports whether principal is one of the superusers.
func (a *Authorizer) Superuser(principal string) bool {
	_, ok := a.superusers[principal]
	return ok
}

// Authorize reports whether principal, connecting from host, may perform
// op on the resource of type rt called name. The cluster has one name, so
// for CLUSTER name is not looked at.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.Superuser(principal) {
		return true
	}
	if rt < 0 || int(rt) >= len(a.byType) {
		return false
	}
	if rt == kmsg.ACLResourceTypeCluster {
		name = controller.ClusterResourceName
	}
	ri := &a.byType[rt]
	var v verdict
	v.scan(ri.literal[name], principal, host, op)
	v.scan(ri.wildcard, principal, host, op)
	for _, n := range ri.prefixLens {
		if n <= len(name) {
			v.scan(ri.prefixed[name[:n]], principal, host, op)
		}
	}
	return v.allowed && !v.denied
}

// verdict accumulates what the applying entries say.
type verdict struct{ allowed, denied bool }

func (v *verdict) scan(entries []entry, principal, host string, op kmsg.ACLOperation) {
	for i := range entries {
		e := &entries[i]
		if v.denied {
			return
		}
		if !e.appliesTo(principal, host, op) {
			continue
		}
		if e.deny {
			v.denied = true
		} else {
			v.allowed = true
		}
	}
}

func (e *entry) appliesTo(principal, host string, op kmsg.ACLOperation) bool {
	if e.principalType != "" {
		if !strings.HasPrefix(principal, e.principalType) {
			return false
		}
	} else if e.principal != principal {
		return false
	}
	if e.host != controller.WildcardHost && e.host != host {
		return false
	}
	if e.op == kmsg.ACLOperationAll || e.op == op {
		return true
	}
	return !e.deny && implies(e.op, op)
}

// implies reports whether allowing granted also allows op, beyond the
// operation itself.
func implies(granted, op kmsg.ACLOperation) bool {
	switch op {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// ParseSuperusers reads the superusers property: principals separated by
// semicolons as in Kafka's super.users, or by commas when there is no
// semicolon; a bare name stands for "User:name". Semicolons let a
// certificate subject with several attributes ("User:CN=ops,O=acme") be
// named.
func ParseSuperusers(property string) []string {
	sep := ","
	if strings.Contains(property, ";") {
		sep = ";"
	}
	var out []string
	for _, su := range strings.Split(property, sep) {
		su = strings.TrimSpace(su)
		if su == "" {
			continue
		}
		if !strings.Contains(su, ":") {
			su = "User:" + su
		}
		out = append(out, su)
	}
	return out
}
