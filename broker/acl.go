package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/acl"
	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
)

// Security is the broker's authorization and its users: the authorizer
// built from the controller's ACLs and the superusers property, ACL and
// SCRAM credential changes through the controller (scram.go), and the
// password check SASL PLAIN and the admin API share. The Broker composes
// it; what it needs of the rest of the broker it is handed.
type Security struct {
	props   *config.Values
	view    func() *controller.View // the controller's latest applied view
	propose func(controller.Command) (controller.Result, error)
	logger  *slog.Logger
	authz   authorizerCache
}

func newSecurity(props *config.Values, view func() *controller.View, propose func(controller.Command) (controller.Result, error), logger *slog.Logger) Security {
	return Security{props: props, view: view, propose: propose, logger: logger}
}

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
func (s *Security) authorizer() *acl.Authorizer {
	superusers := s.props.String("superusers")
	aclsIndex := s.view().ACLsIndex()
	if c := s.authz.current.Load(); c != nil && c.aclsIndex == aclsIndex && c.superusers == superusers {
		return c.authz
	}
	s.authz.buildMu.Lock()
	defer s.authz.buildMu.Unlock()
	view := s.view()
	if c := s.authz.current.Load(); c != nil && c.aclsIndex == view.ACLsIndex() && c.superusers == superusers {
		return c.authz
	}
	c := &cachedAuthorizer{aclsIndex: view.ACLsIndex(), superusers: superusers,
		authz: acl.New(view.ACLs(), acl.ParseSuperusers(superusers))}
	s.authz.current.Store(c)
	return c.authz
}

// AuthorizationEnabled reports whether Kafka requests are checked against
// the ACLs (kafka_enable_authorization).
func (s *Security) AuthorizationEnabled() bool {
	return s.props.Bool("kafka_enable_authorization")
}

// Superuser reports whether principal ("User:alice") is named by the
// superusers property, as "User:alice" or as "alice".
func (s *Security) Superuser(principal string) bool {
	return s.authorizer().Superuser(principal)
}

// Authorize reports whether principal, connecting from host, may perform
// op on the resource of type rt called name. Everything is allowed while
// authorization is off, and to superusers; otherwise the ACLs decide
// (see package acl).
func (s *Security) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if !s.AuthorizationEnabled() {
		return true
	}
	return s.authorizer().Authorize(principal, host, op, rt, name)
}

// AuthorizeByResourceType reports whether principal, from host, may
// perform op on some resource of type rt, existing or not (Kafka's
// authorizeByResourceType: InitProducerId asks it for WRITE on topics).
func (s *Security) AuthorizeByResourceType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if !s.AuthorizationEnabled() {
		return true
	}
	return s.authorizer().AuthorizeByResourceType(principal, host, op, rt)
}

// CreateACLs stores bindings through the controller and returns one error
// per binding, nil for each one stored (or already there). Invalid
// bindings get INVALID_REQUEST and do not stop the others, as in Kafka.
func (s *Security) CreateACLs(bindings []controller.ACLBinding) []error {
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
	if _, err := s.propose(controller.CreateACLs{Bindings: valid}); err != nil {
		for _, i := range validAt {
			errs[i] = err
		}
		return errs
	}
	s.logger.Info("created ACLs", "count", len(valid))
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
func (s *Security) DeleteACLs(filters []controller.ACLFilter) []ACLDeletion {
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
	res, err := s.propose(controller.DeleteACLs{Filters: valid})
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
		s.logger.Info("deleted ACLs", "filters", len(valid), "matched", deleted)
	}
	return out
}

// DescribeACLs lists the bindings filter selects, as this broker last
// applied them.
func (s *Security) DescribeACLs(filter controller.ACLFilter) ([]controller.ACLBinding, error) {
	if err := controller.ValidateACLFilter(filter); err != nil {
		return nil, err
	}
	return s.view().MatchingACLs(filter), nil
}
