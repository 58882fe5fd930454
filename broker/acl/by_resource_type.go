package acl

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

// AuthorizeByResourceType reports whether principal, from host, may
// perform op on at least one resource of type rt — existing or not —
// as Kafka's Authorizer.authorizeByResourceType decides it (used by
// InitProducerId: an idempotent producer needs WRITE on some topic). An
// ALLOW counts unless a DENY dominates it: a DENY on the wildcard denies
// everything; an allowed literal is dominated by a DENY on the same
// literal or on a prefix of it; an allowed prefix by a DENY on a prefix
// of it. Only the operation itself or ALL matches, without implied
// operations, as in Kafka.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if a.Superuser(principal) {
		return true
	}
	if rt < 0 || int(rt) >= len(a.byType) {
		return false
	}
	ri := &a.byType[rt]
	applies := func(entries []entry, deny bool) bool {
		for i := range entries {
			e := &entries[i]
			if e.deny == deny && e.appliesExactly(principal, host, op) {
				return true
			}
		}
		return false
	}
	if applies(ri.wildcard, true) {
		return false
	}
	if applies(ri.wildcard, false) {
		return true
	}
	deniedUnder := func(name string) bool {
		for _, n := range ri.prefixLens {
			if n <= len(name) && applies(ri.prefixed[name[:n]], true) {
				return true
			}
		}
		return false
	}
	for name, entries := range ri.literal {
		if name != controller.WildcardResource && applies(entries, false) && !applies(entries, true) && !deniedUnder(name) {
			return true
		}
	}
	for prefix, entries := range ri.prefixed {
		if applies(entries, false) && !deniedUnder(prefix) {
			return true
		}
	}
	return false
}

// appliesExactly is appliesTo without implied operations.
func (e *entry) appliesExactly(principal, host string, op kmsg.ACLOperation) bool {
	if e.op != kmsg.ACLOperationAll && e.op != op {
		return false
	}
	return e.appliesTo(principal, host, op)
}
