package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/acl"
	"github.com/weir-broker/weir/broker/controller"
)

// authorizerCache keeps the authorizer built from the controller's ACLs
// and the superusers property, rebuilt when either changes: a broker
// applies new ACLs with the Raft entry that carries them, and the request
// path only compares an index and a string.
type authorizerCache struct {
	current atomic.Pointer[cachedAuthorizer]
	buildMu sync.Mutex // one rebuild at a time
}

type cachedAuthorizer struct {
	aclsIndex  uint64 // controller.View.ACLsIndex it was built from
	superusers string // the superusers property it was built from
	authz      *acl.Authorizer
}

// authorizer returns the authorizer for the current ACLs and superusers.
func (b *Broker) authorizer() *acl.Authorizer {
	superusers := b.props.String("superusers")
	aclsIndex := b.aclView().ACLsIndex()
	if c := b.authz.current.Load(); c != nil && c.aclsIndex == aclsIndex && c.superusers == superusers {
		return c.authz
	}
	b.authz.buildMu.Lock()
	defer b.authz.buildMu.Unlock()
	view := b.aclView()
	if c := b.authz.current.Load(); c != nil && c.aclsIndex == view.ACLsIndex() && c.superusers == superusers {
		return c.authz
	}
	c := &cachedAuthorizer{aclsIndex: view.ACLsIndex(), superusers: superusers,
		authz: acl.New(view.ACLs(), acl.ParseSuperusers(superusers))}
	b.authz.current.Store(c)
	return c.authz
}

// aclView is the controller view ACLs are read from.
func (b *Broker) aclView() *controller.View { return b.ctrl.state.View() }

// AuthorizationEnabled reports whether Kafka requests are checked against
// the ACLs (kafka_enable_authorization).
func (b *Broker) AuthorizationEnabled() bool {
	return b.props.Bool("kafka_enable_authorization")
}

// Superuser reports whether principal ("User:alice") is named by the
// superusers property, as "User:alice" or as "alice".
func (b *Broker) Superuser(principal string) bool {
	return b.authorizer().Superuser(principal)
}

// Authorize reports whether principal, connecting from host, may perform
// op on the resource of type rt called name. Everything is allowed while
// authorization is off, and to superusers; otherwise the ACLs decide
// (see package acl).
func (b *Broker) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if !b.AuthorizationEnabled() {
		return true
	}
	return b.authorizer().Authorize(principal, host, op, rt, name)
}

// AuthorizeByResourceType reports whether principal, from host, may
// perform op on some resource of type rt, existing or not (Kafka's
// authorizeByResourceType: InitProducerId asks it for WRITE on topics).
func (b *Broker) AuthorizeByResourceType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if !b.AuthorizationEnabled() {
		return true
	}
	return b.authorizer().AuthorizeByResourceType(principal, host, op, rt)
}

// CreateACLs stores bindings through the controller and returns one error
// per binding, nil for each one stored (or already there). Invalid
// bindings get INVALID_REQUEST and do not stop the others, as in Kafka.
func (b *Broker) CreateACLs(bindings []controller.ACLBinding) []error {
	errs := make([]error, len(bindings))
	var valid []controller.ACLBinding
	var validAt []int
	for i, binding := range bindings {
		if errs[i] = controller.ValidateACLBinding(binding); errs[i] == nil {
			errs[i] = aclStringsFit(binding)
		}
		if errs[i] == nil {
			valid = append(valid, binding)
			validAt = append(validAt, i)
		}
	}
	if len(valid) == 0 {
		return errs
	}
	if _, err := b.propose(controller.CreateACLs{Bindings: valid}); err != nil {
		for _, i := range validAt {
			errs[i] = err
		}
		return errs
	}
	b.logger.Info("created ACLs", "count", len(valid))
	return errs
}

// maxACLStringBytes is the longest string DescribeAcls v0-v1 can carry
// (an int16 length). CreateAcls v2+ can send longer ones, and a binding
// holding one would make every DescribeAcls answer at those versions
// unreadable, for every client. Checked here, where bindings are created,
// not by the controller's state machine, so that entries and snapshots
// written before the check still apply.
const maxACLStringBytes = 32767

// aclStringsFit refuses a binding with a string DescribeAcls v0-v1 could
// not carry.
func aclStringsFit(b controller.ACLBinding) error {
	if len(b.ResourceName) > maxACLStringBytes || len(b.Principal) > maxACLStringBytes || len(b.Host) > maxACLStringBytes {
		return fmt.Errorf("%w: resource name, principal or host over %d bytes", kerr.InvalidRequest, maxACLStringBytes)
	}
	return nil
}

// ACLDeletion is what one DeleteACLs filter did.
type ACLDeletion struct {
	Deleted []controller.ACLBinding
	Err     error
}

// DeleteACLs removes the bindings each filter matches, through the
// controller. An invalid filter gets INVALID_REQUEST and does not stop
// the others.
func (b *Broker) DeleteACLs(filters []controller.ACLFilter) []ACLDeletion {
	out := make([]ACLDeletion, len(filters))
	var valid []controller.ACLFilter
	var validAt []int
	for i, f := range filters {
		if out[i].Err = controller.ValidateACLFilter(f); out[i].Err == nil {
			valid = append(valid, f)
			validAt = append(validAt, i)
		}
	}
	if len(valid) == 0 {
		return out
	}
	res, err := b.propose(controller.DeleteACLs{Filters: valid})
	if err == nil && len(res.DeletedACLs) != len(valid) {
		err = errors.New("the controller answered a different number of ACL filters")
	}
	deleted := 0
	for j, i := range validAt {
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Deleted = res.DeletedACLs[j]
		deleted += len(res.DeletedACLs[j])
	}
	if err == nil {
		b.logger.Info("deleted ACLs", "filters", len(valid), "matched", deleted)
	}
	return out
}

// DescribeACLs lists the bindings filter selects, as this broker last
// applied them.
func (b *Broker) DescribeACLs(filter controller.ACLFilter) ([]controller.ACLBinding, error) {
	if err := controller.ValidateACLFilter(filter); err != nil {
		return nil, err
	}
	return b.aclView().MatchingACLs(filter), nil
}
