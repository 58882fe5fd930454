package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func str(s string) *string { return &s }

func user(name *string) QuotaEntityPart { return QuotaEntityPart{Type: QuotaEntityUser, Name: name} }
func client(name *string) QuotaEntityPart {
	return QuotaEntityPart{Type: QuotaEntityClientID, Name: name}
}

func TestClientQuotaValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    ClientQuotaAlteration
		msg  string // "" for valid
	}{
		{"user", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(str("alice"))}, Set: map[string]float64{QuotaProducerByteRate: 1024}}, ""},
		{"default user and client", ClientQuotaAlteration{Entity: ClientQuotaEntity{client(nil), user(nil)},
			Set: map[string]float64{QuotaRequestPercentage: 12.5, QuotaControllerMutationRate: 0.5}}, ""},
		{"ip", ClientQuotaAlteration{Entity: ClientQuotaEntity{{Type: QuotaEntityIP, Name: str("10.0.0.1")}}, Set: map[string]float64{QuotaConnectionCreationRate: 10}}, ""},
		{"default ip", ClientQuotaAlteration{Entity: ClientQuotaEntity{{Type: QuotaEntityIP}}, Set: map[string]float64{QuotaConnectionCreationRate: 10}}, ""},
		{"empty", ClientQuotaAlteration{}, "Invalid empty client quota entity"},
		{"duplicate type", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil), user(str("a"))}}, "duplicate entity entry user"},
		{"unknown type", ClientQuotaAlteration{Entity: ClientQuotaEntity{{Type: "group", Name: str("g")}}}, "Unhandled client quota entity type: group"},
		{"empty name", ClientQuotaAlteration{Entity: ClientQuotaEntity{client(str(""))}}, "Empty client-id not supported"},
		{"ip with user", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil), {Type: QuotaEntityIP}}}, "IP entity should not be combined"},
		{"bad ip", ClientQuotaAlteration{Entity: ClientQuotaEntity{{Type: QuotaEntityIP, Name: str("not-an-ip")}}}, "not-an-ip is not a valid IP or resolvable host."},
		{"unknown key", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{"foo": 1}}, "Invalid configuration key foo"},
		{"ip key on user", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaConnectionCreationRate: 1}}, "Invalid configuration key connection_creation_rate"},
		{"zero", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaConsumerByteRate: 0}}, "Quota consumer_byte_rate must be greater than 0"},
		{"fraction", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaProducerByteRate: 1.5}}, "producer_byte_rate cannot be a fractional value."},
		{"too large", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaProducerByteRate: 1e19}}, "too large for a LONG"},
		{"int too large", ClientQuotaAlteration{Entity: ClientQuotaEntity{{Type: QuotaEntityIP}}, Set: map[string]float64{QuotaConnectionCreationRate: 1e10}}, "too large for an INT"},
		{"set and remove", ClientQuotaAlteration{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaProducerByteRate: 1}, Remove: []string{QuotaProducerByteRate}}, "Duplicate quota key producer_byte_rate"},
	} {
		err := ValidateClientQuotaAlteration(tc.a)
		switch {
		case tc.msg == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, kerr.InvalidRequest)):
			t.Errorf("%s: got %v, want INVALID_REQUEST %q", tc.name, err, tc.msg)
		}
	}
}

func TestAlterClientQuotas(t *testing.T) {
	h := newHarness(t)
	h.ok(InitCluster{ClusterID: "weir-test"})
	if v := h.s.View(); v.ClientQuotasIndex() != 0 || len(v.ClientQuotas()) != 0 {
		t.Fatal("quotas before any were set")
	}
	r := h.ok(AlterClientQuotas{Alterations: []ClientQuotaAlteration{
		{Entity: ClientQuotaEntity{client(str("c1"))}, Set: map[string]float64{QuotaProducerByteRate: 1024, QuotaConsumerByteRate: 2048}},
		{Entity: ClientQuotaEntity{client(nil), user(str("alice"))}, Set: map[string]float64{QuotaRequestPercentage: 50}},
		{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaControllerMutationRate: 2}},
	}})
	v := h.s.View()
	if v.ClientQuotasIndex() != r.Index || len(v.ClientQuotas()) != 3 {
		t.Fatalf("index %d quotas %+v", v.ClientQuotasIndex(), v.ClientQuotas())
	}
	// Parts are stored sorted by type.
	got, err := v.DescribeClientQuotas(ClientQuotaFilter{Components: []QuotaFilterComponent{{EntityType: QuotaEntityUser, MatchType: QuotaMatchExact, Match: str("alice")}}})
	if err != nil || len(got) != 1 || got[0].Entity[0].Type != QuotaEntityClientID || got[0].Values[QuotaRequestPercentage] != 50 {
		t.Fatalf("%+v %v", got, err)
	}
	// The same values again change nothing.
	r = h.apply(AlterClientQuotas{Alterations: []ClientQuotaAlteration{{Entity: ClientQuotaEntity{client(str("c1"))}, Set: map[string]float64{QuotaProducerByteRate: 1024}}}})
	if r.Err != nil || r.Changed {
		t.Fatalf("%+v", r)
	}
	// Removing every key removes the entity; removing an unset key is no error.
	h.ok(AlterClientQuotas{Alterations: []ClientQuotaAlteration{{Entity: ClientQuotaEntity{client(str("c1"))}, Remove: []string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage}}}})
	if q := h.s.View().ClientQuotas(); len(q) != 2 {
		t.Fatalf("%+v", q)
	}
	// A duplicate entity or an invalid alteration refuses the command.
	h.fails(AlterClientQuotas{Alterations: []ClientQuotaAlteration{
		{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaProducerByteRate: 1}},
		{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{QuotaConsumerByteRate: 1}},
	}}, kerr.InvalidRequest)
	h.fails(AlterClientQuotas{Alterations: []ClientQuotaAlteration{{Entity: ClientQuotaEntity{user(nil)}, Set: map[string]float64{"x": 1}}}}, kerr.InvalidRequest)
	if q := h.s.View().ClientQuotas(); len(q) != 2 || len(q[1].Values) != 1 {
		t.Fatalf("a refused command changed the quotas: %+v", q)
	}
}

func TestDescribeClientQuotasFilters(t *testing.T) {
	h := newHarness(t)
	h.ok(InitCluster{ClusterID: "weir-test"})
	set := map[string]float64{QuotaProducerByteRate: 1}
	h.ok(AlterClientQuotas{Alterations: []ClientQuotaAlteration{
		{Entity: ClientQuotaEntity{user(str("alice"))}, Set: set},
		{Entity: ClientQuotaEntity{user(nil)}, Set: set},
		{Entity: ClientQuotaEntity{user(str("alice")), client(str("c1"))}, Set: set},
		{Entity: ClientQuotaEntity{user(nil), client(nil)}, Set: set},
		{Entity: ClientQuotaEntity{client(str("c1"))}, Set: set},
		{Entity: ClientQuotaEntity{{Type: QuotaEntityIP, Name: str("::1")}}, Set: map[string]float64{QuotaConnectionCreationRate: 3}},
	}})
	v := h.s.View()
	count := func(f ClientQuotaFilter) int {
		t.Helper()
		q, err := v.DescribeClientQuotas(f)
		if err != nil {
			t.Fatal(err)
		}
		return len(q)
	}
	comp := func(typ string, mt int8, m *string) QuotaFilterComponent {
		return QuotaFilterComponent{EntityType: typ, MatchType: mt, Match: m}
	}
	for _, tc := range []struct {
		f    ClientQuotaFilter
		want int
	}{
		{ClientQuotaFilter{}, 6},
		{ClientQuotaFilter{Strict: true}, 0},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchExact, str("alice"))}}, 2},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchExact, str("alice"))}, Strict: true}, 1},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchDefault, nil)}}, 2},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchDefault, nil)}, Strict: true}, 1},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchSpecified, nil)}}, 4},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("client-id", QuotaMatchSpecified, nil)}, Strict: true}, 1},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchSpecified, nil), comp("client-id", QuotaMatchSpecified, nil)}}, 2},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("ip", QuotaMatchSpecified, nil)}}, 1},
	} {
		if got := count(tc.f); got != tc.want {
			t.Errorf("%+v: %d entities, want %d", tc.f, got, tc.want)
		}
	}
	for _, tc := range []struct {
		f    ClientQuotaFilter
		code *kerr.Error
		msg  string
	}{
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("", QuotaMatchSpecified, nil)}}, kerr.InvalidRequest, "Invalid empty entity type."},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchSpecified, nil), comp("user", QuotaMatchDefault, nil)}}, kerr.InvalidRequest, "cannot appear more than once"},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("group", QuotaMatchSpecified, nil)}}, kerr.UnsupportedVersion, "Unsupported entity type group"},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchExact, nil)}}, kerr.InvalidRequest, "MATCH_TYPE_EXACT, but set match string to null"},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchDefault, str("a"))}}, kerr.InvalidRequest, "MATCH_TYPE_DEFAULT, but also specified"},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", QuotaMatchSpecified, str("a"))}}, kerr.InvalidRequest, "MATCH_TYPE_SPECIFIED, but also specified"},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("user", 7, nil)}}, kerr.InvalidRequest, "Unknown match type 7"},
		{ClientQuotaFilter{Components: []QuotaFilterComponent{comp("ip", QuotaMatchSpecified, nil), comp("user", QuotaMatchDefault, nil)}}, kerr.InvalidRequest, "IP filter component should not be used"},
	} {
		_, err := v.DescribeClientQuotas(tc.f)
		if !errors.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%+v: %v, want %v %q", tc.f, err, tc.code, tc.msg)
		}
	}
}

func TestClientQuotasSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.ok(InitCluster{ClusterID: "weir-test"})
	plain, err := h.s.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte("client_quotas")) {
		t.Fatal("a snapshot without quotas names them")
	}
	h.ok(AlterClientQuotas{Alterations: []ClientQuotaAlteration{
		{Entity: ClientQuotaEntity{user(str("alice")), client(nil)}, Set: map[string]float64{QuotaProducerByteRate: 1 << 20, QuotaRequestPercentage: 33.3}},
		{Entity: ClientQuotaEntity{{Type: QuotaEntityIP}}, Set: map[string]float64{QuotaConnectionCreationRate: 5}},
	}})
	snap, err := h.s.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	restored := New(testOptions())
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if a, b := h.s.View(), restored.View(); !reflect.DeepEqual(a.ClientQuotas(), b.ClientQuotas()) || a.ClientQuotasIndex() != b.ClientQuotasIndex() {
		t.Fatalf("restored quotas differ:\n%+v\n%+v", a.ClientQuotas(), b.ClientQuotas())
	}
	again, _ := restored.SnapshotBytes()
	if !bytes.Equal(snap, again) {
		t.Fatal("snapshot of the restored state differs")
	}
	// An invalid quota in a snapshot is refused.
	bad := strings.Replace(string(snap[10:len(snap)-4]), `"connection_creation_rate":5`, `"connection_creation_rate":-5`, 1)
	if bad == string(snap[10:len(snap)-4]) {
		t.Fatal("test snapshot has no connection_creation_rate")
	}
	if err := New(testOptions()).Restore(bytes.NewReader(reframeSnapshot([]byte(bad)))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("restore of a negative quota: %v", err)
	}
}

func TestAlterClientQuotasEncoding(t *testing.T) {
	cmd := AlterClientQuotas{Alterations: []ClientQuotaAlteration{{Entity: ClientQuotaEntity{client(nil)}, Set: map[string]float64{QuotaConsumerByteRate: 10}, Remove: []string{QuotaProducerByteRate}}}}
	b, err := Encode(Entry{TimeMs: 1, Cmd: cmd})
	if err != nil {
		t.Fatal(err)
	}
	if b[1] != 16 {
		t.Fatalf("type %d", b[1])
	}
	e, err := Decode(b)
	if err != nil || !reflect.DeepEqual(e.Cmd, cmd) {
		t.Fatalf("%+v %v", e.Cmd, err)
	}
	if got := string(b[commandHeaderLen:]); got != `{"alterations":[{"entity":[{"type":"client-id","name":null}],"set":{"consumer_byte_rate":10},"remove":["producer_byte_rate"]}]}` {
		t.Fatal(got)
	}
}

// reframeSnapshot wraps a snapshot body in the header and checksum.
func reframeSnapshot(body []byte) []byte {
	var buf bytes.Buffer
	buf.WriteString(snapshotMagic)
	binary.Write(&buf, binary.BigEndian, uint16(snapshotVersion))
	buf.Write(body)
	binary.Write(&buf, binary.BigEndian, crc32.Checksum(body, castagnoli))
	return buf.Bytes()
}
