package kafka

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

// fakeQuotas is the client quota family without a broker.
type fakeQuotas struct {
	clientQuotas // the rest panics
	altered      []controller.ClientQuotaAlteration
	validateOnly bool
	described    controller.ClientQuotaFilter
	list         []controller.ClientQuota
}

func (f *fakeQuotas) AlterClientQuotas(alts []controller.ClientQuotaAlteration, validateOnly bool) []error {
	errs := make([]error, len(alts))
	for i, a := range alts {
		if errs[i] = controller.ValidateClientQuotaAlteration(a); errs[i] == nil {
			f.altered = append(f.altered, a)
		}
	}
	f.validateOnly = validateOnly
	return errs
}

func (f *fakeQuotas) DescribeClientQuotas(filter controller.ClientQuotaFilter) ([]controller.ClientQuota, error) {
	f.described = filter
	if len(filter.Components) > 0 && filter.Components[0].EntityType == "bad" {
		return nil, &controller.Error{Code: kerr.UnsupportedVersion, Message: "Unsupported entity type bad"}
	}
	return f.list, nil
}

func quotaTestServer(q *fakeQuotas, sec *fakeSecurity) *Server {
	return &Server{domain: domain{security: sec, quotas: q}, logger: slog.New(slog.DiscardHandler), opts: Options{ConnectionMaxInflightRequests: 6}}
}

func alterEntry(parts [][2]*string, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range parts {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = *p[0], p[1]
		e.Entity = append(e.Entity, ent)
	}
	e.Ops = ops
	return e
}

func quotaOp(key string, value float64, remove bool) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value, op.Remove = key, value, remove
	return op
}

func sp(s string) *string { return &s }

func TestAlterClientQuotasAgainstFake(t *testing.T) {
	q := &fakeQuotas{}
	s := quotaTestServer(q, &fakeSecurity{allowed: []string{"User:admin"}})
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.ValidateOnly = true
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		alterEntry([][2]*string{{sp("client-id"), sp("c1")}}, quotaOp("producer_byte_rate", 1024, false), quotaOp("consumer_byte_rate", 0, true)),
		alterEntry([][2]*string{{sp("user"), nil}}, quotaOp("producer_byte_rate", 1.5, false)),
		alterEntry([][2]*string{{sp("user"), sp("bob")}}, quotaOp("request_percentage", 10, false), quotaOp("request_percentage", 20, false)),
		alterEntry([][2]*string{{sp("user"), sp("eve")}, {sp("client-id"), nil}}, quotaOp("request_percentage", 10, false)),
		alterEntry([][2]*string{{sp("client-id"), nil}, {sp("user"), sp("eve")}}, quotaOp("request_percentage", 20, false)),
	}
	resp := mustResp[*kmsg.AlterClientQuotasResponse](t)(s.handleAlterClientQuotas(fakeConn(t, s, "User:admin"), req))
	if len(resp.Entries) != 4 {
		t.Fatalf("%d entries, want one per distinct entity", len(resp.Entries))
	}
	want := []string{"", "producer_byte_rate cannot be a fractional value.", "Duplicate quota key request_percentage", "Ignoring duplicate entity"}
	for i, e := range resp.Entries {
		msg := ""
		if e.ErrorMessage != nil {
			msg = *e.ErrorMessage
		}
		if want[i] == "" && e.ErrorCode != 0 || want[i] != "" && (e.ErrorCode != kerr.InvalidRequest.Code || !strings.Contains(msg, want[i])) {
			t.Errorf("entry %d: %d %q, want %q", i, e.ErrorCode, msg, want[i])
		}
	}
	if resp.Entries[0].Entity[0].Type != "client-id" || *resp.Entries[0].Entity[0].Name != "c1" || resp.Entries[1].Entity[0].Name != nil {
		t.Fatalf("entities not echoed: %+v", resp.Entries)
	}
	if len(q.altered) != 1 || !q.validateOnly || q.altered[0].Set["producer_byte_rate"] != 1024 || q.altered[0].Remove[0] != "consumer_byte_rate" {
		t.Fatalf("altered %+v validateOnly %v", q.altered, q.validateOnly)
	}

	q.altered = nil
	resp = mustResp[*kmsg.AlterClientQuotasResponse](t)(s.handleAlterClientQuotas(fakeConn(t, s, "User:mallory"), req))
	for _, e := range resp.Entries {
		if e.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("unauthorized: %d", e.ErrorCode)
		}
	}
	if len(q.altered) != 0 {
		t.Fatal("an unauthorized request altered quotas")
	}
}

func TestDescribeClientQuotasAgainstFake(t *testing.T) {
	q := &fakeQuotas{list: []controller.ClientQuota{{
		Entity: controller.ClientQuotaEntity{{Type: "client-id", Name: nil}, {Type: "user", Name: sp("alice")}},
		Values: map[string]float64{"request_percentage": 25, "producer_byte_rate": 100},
	}}}
	s := quotaTestServer(q, &fakeSecurity{allowed: []string{"User:admin"}})
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	comp := kmsg.NewDescribeClientQuotasRequestComponent()
	comp.EntityType, comp.MatchType, comp.Match = "user", kmsg.QuotasMatchTypeExact, sp("alice")
	req.Components, req.Strict = append(req.Components, comp), true
	resp := mustResp[*kmsg.DescribeClientQuotasResponse](t)(s.handleDescribeClientQuotas(fakeConn(t, s, "User:admin"), req))
	if resp.ErrorCode != 0 || len(resp.Entries) != 1 {
		t.Fatalf("%+v", resp)
	}
	e := resp.Entries[0]
	if len(e.Entity) != 2 || e.Entity[0].Name != nil || *e.Entity[1].Name != "alice" ||
		len(e.Values) != 2 || e.Values[0].Key != "producer_byte_rate" || e.Values[1].Value != 25 {
		t.Fatalf("%+v", e)
	}
	if !q.described.Strict || q.described.Components[0].MatchType != controller.QuotaMatchExact || *q.described.Components[0].Match != "alice" {
		t.Fatalf("filter %+v", q.described)
	}

	// No match is an empty list, never null (null is an error to Java).
	q.list = nil
	if resp := mustResp[*kmsg.DescribeClientQuotasResponse](t)(s.handleDescribeClientQuotas(fakeConn(t, s, "User:admin"), req)); resp.Entries == nil {
		t.Fatal("no entries answered as null")
	}

	req.Components[0].EntityType = "bad"
	resp = mustResp[*kmsg.DescribeClientQuotasResponse](t)(s.handleDescribeClientQuotas(fakeConn(t, s, "User:admin"), req))
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != "Unsupported entity type bad" {
		t.Fatalf("%d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	resp = mustResp[*kmsg.DescribeClientQuotasResponse](t)(s.handleDescribeClientQuotas(fakeConn(t, s, "User:mallory"), req))
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Entries) != 0 {
		t.Fatalf("unauthorized: %d", resp.ErrorCode)
	}
}

// mustResp unpacks a handler's answer.
func mustResp[T kmsg.Response](t *testing.T) func(kmsg.Response, error) T {
	return func(r kmsg.Response, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		resp, ok := r.(T)
		if !ok {
			t.Fatal(fmt.Sprintf("response %T", r))
		}
		return resp
	}
}

// Through a real broker: set, describe, remove.
func TestClientQuotasRoundTrip(t *testing.T) {
	_, _, addr := startServer(t)
	c := dial(t, addr)
	alter := kmsg.NewPtrAlterClientQuotasRequest()
	alter.SetVersion(1)
	alter.Entries = []kmsg.AlterClientQuotasRequestEntry{
		alterEntry([][2]*string{{sp("client-id"), sp("c1")}}, quotaOp("producer_byte_rate", 1024, false)),
		alterEntry([][2]*string{{sp("user"), nil}}, quotaOp("consumer_byte_rate", 2048, false)),
	}
	ar := c.roundTrip(alter).(*kmsg.AlterClientQuotasResponse)
	if len(ar.Entries) != 2 || ar.Entries[0].ErrorCode != 0 || ar.Entries[1].ErrorCode != 0 {
		t.Fatalf("%+v", ar)
	}
	desc := kmsg.NewPtrDescribeClientQuotasRequest()
	desc.SetVersion(1)
	dr := c.roundTrip(desc).(*kmsg.DescribeClientQuotasResponse)
	if dr.ErrorCode != 0 || len(dr.Entries) != 2 {
		t.Fatalf("%+v", dr)
	}
	alter.Entries = []kmsg.AlterClientQuotasRequestEntry{alterEntry([][2]*string{{sp("user"), nil}}, quotaOp("consumer_byte_rate", 0, true))}
	if ar := c.roundTrip(alter).(*kmsg.AlterClientQuotasResponse); ar.Entries[0].ErrorCode != 0 {
		t.Fatalf("%+v", ar)
	}
	if dr := c.roundTrip(desc).(*kmsg.DescribeClientQuotasResponse); len(dr.Entries) != 1 || *dr.Entries[0].Entity[0].Name != "c1" {
		t.Fatalf("%+v", dr)
	}
}

// TestAuthorizeClientQuotas: describing needs DESCRIBE_CONFIGS on the
// cluster, altering ALTER_CONFIGS, as in Kafka.
func TestAuthorizeClientQuotas(t *testing.T) {
	f := newAuthorizationFixture(t)
	describe := func() int16 {
		return f.c.roundTrip(kmsg.NewPtrDescribeClientQuotasRequest()).(*kmsg.DescribeClientQuotasResponse).ErrorCode
	}
	alter := func() int16 {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.Entries = []kmsg.AlterClientQuotasRequestEntry{alterEntry([][2]*string{{sp("client-id"), sp("c1")}}, quotaOp("producer_byte_rate", 1024, false))}
		return f.c.roundTrip(req).(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode
	}
	codeIs(t, "describe without ACLs", describe(), kerr.ClusterAuthorizationFailed)
	codeIs(t, "alter without ACLs", alter(), kerr.ClusterAuthorizationFailed)
	grant := func(op kmsg.ACLOperation) {
		seedACLs(t, f.b, aclBinding(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, controller.ClusterResourceName,
			anonymousPrincipal, op, kmsg.ACLPermissionTypeAllow))
	}
	grant(kmsg.ACLOperationDescribeConfigs)
	codeIs(t, "describe with DESCRIBE_CONFIGS", describe(), nil)
	codeIs(t, "alter with DESCRIBE_CONFIGS", alter(), kerr.ClusterAuthorizationFailed)
	grant(kmsg.ACLOperationAlterConfigs)
	codeIs(t, "alter with ALTER_CONFIGS", alter(), nil)
}
