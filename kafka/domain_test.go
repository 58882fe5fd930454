package kafka

import (
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

// fakeSecurity is the security family without a broker: ACLs in a slice,
// authorization by principal.
type fakeSecurity struct {
	security          // the rest panics: the handler under test must not reach it
	allowed  []string // principals allowed everything
	bindings []controller.ACLBinding
	refuse   string // a resource name CreateACLs refuses
}

func (f *fakeSecurity) AuthorizationEnabled() bool { return true }

func (f *fakeSecurity) Authorize(principal, _ string, _ kmsg.ACLOperation, _ kmsg.ACLResourceType, _ string) bool {
	for _, p := range f.allowed {
		if p == principal {
			return true
		}
	}
	return false
}

func (f *fakeSecurity) CreateACLs(bindings []controller.ACLBinding) []error {
	errs := make([]error, len(bindings))
	for i, b := range bindings {
		if b.ResourceName == f.refuse {
			errs[i] = fmt.Errorf("%w: refused", kerr.InvalidRequest)
			continue
		}
		f.bindings = append(f.bindings, b)
	}
	return errs
}

// fakeConn is a connection from a client of principal on a listener.
func fakeConn(t *testing.T, s *Server, principal string) *clientConn {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	c := newListenerConn(s, server, &Listener{Name: "PLAINTEXT"})
	c.tlsPrincipal = principal
	t.Cleanup(c.close)
	return c
}

// A handler runs against the domain families it declares, here fakes:
// CreateAcls hands the bindings to the security family, answers each
// creation with its own error, and refuses all of them to a principal
// without ALTER on the cluster.
func TestCreateAclsAgainstFakeSecurity(t *testing.T) {
	sec := &fakeSecurity{allowed: []string{"User:admin"}, refuse: "bad"}
	s := &Server{domain: domain{security: sec}, logger: slog.New(slog.DiscardHandler), opts: Options{ConnectionMaxInflightRequests: 6}}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, name := range []string{"orders", "bad"} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
	}

	kresp, err := s.handleCreateAcls(fakeConn(t, s, "User:admin"), req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.CreateACLsResponse)
	if len(resp.Results) != 2 || resp.Results[0].ErrorCode != 0 || resp.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("results %+v: want success, then INVALID_REQUEST", resp.Results)
	}
	if len(sec.bindings) != 1 || sec.bindings[0].ResourceName != "orders" || sec.bindings[0].Principal != "User:alice" {
		t.Fatalf("bindings created: %+v", sec.bindings)
	}

	kresp, err = s.handleCreateAcls(fakeConn(t, s, "User:mallory"), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range kresp.(*kmsg.CreateACLsResponse).Results {
		if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("an unauthorized creation answered %d, want CLUSTER_AUTHORIZATION_FAILED", r.ErrorCode)
		}
	}
	if len(sec.bindings) != 1 {
		t.Fatalf("an unauthorized request created bindings: %+v", sec.bindings)
	}
}
