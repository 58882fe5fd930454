package controller

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Client quotas (KIP-13, KIP-124, KIP-546, KIP-599): rates the brokers
// hold clients to, stored per quota entity as Kafka's controller stores
// them. An entity names a user, a client id, both, or an IP address; a
// part without a name is the default of its type (Kafka's <default>).
// Validation and its messages are Kafka's ClientQuotaControlManager's.

// Entity types.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// Quota keys.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// quotaKeyKind is how a quota key's value is typed in Kafka's config
// definitions: integral keys refuse fractions.
type quotaKeyKind uint8

const (
	quotaDouble quotaKeyKind = iota
	quotaLong
	quotaInt
)

var (
	userClientQuotaKeys = map[string]quotaKeyKind{
		QuotaProducerByteRate: quotaLong, QuotaConsumerByteRate: quotaLong,
		QuotaRequestPercentage: quotaDouble, QuotaControllerMutationRate: quotaDouble,
	}
	ipQuotaKeys = map[string]quotaKeyKind{QuotaConnectionCreationRate: quotaInt}
)

// QuotaEntityPart is one part of a quota entity. A nil Name is the
// default entity of Type.
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

// ClientQuotaEntity is a quota entity: its parts sorted by type, each
// type at most once (Canonical).
type ClientQuotaEntity []QuotaEntityPart

// Canonical returns e's parts sorted by type. Validation refuses a type
// named twice.
func (e ClientQuotaEntity) Canonical() ClientQuotaEntity {
	out := make(ClientQuotaEntity, len(e))
	copy(out, e)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// Key identifies the entity as a map key, whatever the order of its
// parts: "type=" and the name's length and the name, or "type=-" for the
// default, so that no name can pass for another entity's key.
func (e ClientQuotaEntity) Key() string {
	c := e.Canonical()
	var b strings.Builder
	for i, p := range c {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(p.Type)
		if p.Name == nil {
			b.WriteString("=-")
		} else {
			fmt.Fprintf(&b, "=%d:%s", len(*p.Name), *p.Name)
		}
	}
	return b.String()
}

// String prints e as Kafka prints a ClientQuotaEntity's entries.
func (e ClientQuotaEntity) String() string {
	parts := make([]string, len(e))
	for i, p := range e {
		name := "<default>"
		if p.Name != nil {
			name = *p.Name
		}
		parts[i] = p.Type + "=" + name
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Name returns the name of the part of type typ; has is false when e has
// no such part, and name nil when it is the default.
func (e ClientQuotaEntity) Name(typ string) (name *string, has bool) {
	for _, p := range e {
		if p.Type == typ {
			return p.Name, true
		}
	}
	return nil, false
}

// ClientQuota is an entity and its quotas.
type ClientQuota struct {
	Entity ClientQuotaEntity  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// ClientQuotaAlteration changes one entity's quotas: Set sets keys,
// Remove removes them (a key not set is no error).
type ClientQuotaAlteration struct {
	Entity ClientQuotaEntity  `json:"entity"`
	Set    map[string]float64 `json:"set,omitempty"`
	Remove []string           `json:"remove,omitempty"`
}

// AlterClientQuotas applies alterations together, all or nothing (the
// broker refuses invalid ones before proposing, each on its own, as
// Kafka answers per entity). An entity left without quotas is removed.
type AlterClientQuotas struct {
	Alterations []ClientQuotaAlteration `json:"alterations"`
}

func (AlterClientQuotas) Type() CommandType { return CmdAlterClientQuotas }

// ValidateClientQuotaEntity checks an entity's types, names and their
// combination.
func ValidateClientQuotaEntity(e ClientQuotaEntity) error {
	if len(e) == 0 {
		return errorf(kerr.InvalidRequest, "Invalid empty client quota entity")
	}
	seen := map[string]bool{}
	for _, p := range e {
		if seen[p.Type] {
			return errorf(kerr.InvalidRequest, "Invalid client quota entity, duplicate entity entry %s", p.Type)
		}
		seen[p.Type] = true
		switch p.Type {
		case QuotaEntityUser, QuotaEntityClientID, QuotaEntityIP:
		default:
			return errorf(kerr.InvalidRequest, "Unhandled client quota entity type: %s", p.Type)
		}
		if p.Name != nil && *p.Name == "" {
			return errorf(kerr.InvalidRequest, "Empty %s not supported", p.Type)
		}
	}
	if seen[QuotaEntityIP] {
		if seen[QuotaEntityUser] || seen[QuotaEntityClientID] {
			return errorf(kerr.InvalidRequest, "Invalid quota entity combination, IP entity should not be combined with User or ClientId")
		}
		// Kafka also accepts a host name it can resolve; the controller
		// applies entries deterministically, without DNS, so only IP
		// literals are stored.
		if ip, _ := e.Name(QuotaEntityIP); ip != nil && net.ParseIP(*ip) == nil {
			return errorf(kerr.InvalidRequest, "%s is not a valid IP or resolvable host.", *ip)
		}
	}
	return nil
}

func quotaKeysOf(e ClientQuotaEntity) map[string]quotaKeyKind {
	if _, ip := e.Name(QuotaEntityIP); ip {
		return ipQuotaKeys
	}
	return userClientQuotaKeys
}

// ValidateClientQuotaValue checks one key set on entity e (valid itself).
func ValidateClientQuotaValue(e ClientQuotaEntity, key string, value float64) error {
	kind, ok := quotaKeysOf(e)[key]
	if !ok {
		return errorf(kerr.InvalidRequest, "Invalid configuration key %s", key)
	}
	if !(value > 0) { // NaN too
		return errorf(kerr.InvalidRequest, "Quota %s must be greater than 0", key)
	}
	switch kind {
	case quotaLong:
		if value > math.MaxInt64 {
			return errorf(kerr.InvalidRequest, "Proposed value for %s is too large for a LONG.", key)
		}
	case quotaInt:
		if value > math.MaxInt32 {
			return errorf(kerr.InvalidRequest, "Proposed value for %s is too large for an INT.", key)
		}
	default:
		if math.IsInf(value, 0) {
			return errorf(kerr.InvalidRequest, "Proposed value for %s is not finite.", key)
		}
		return nil
	}
	if math.Abs(math.Mod(value, 1)) > 1e-6 {
		return errorf(kerr.InvalidRequest, "%s cannot be a fractional value.", key)
	}
	return nil
}

// ValidateClientQuotaAlteration checks an alteration as Kafka does:
// the entity, then each key set (removals are not checked: removing a
// key that is not set changes nothing).
func ValidateClientQuotaAlteration(a ClientQuotaAlteration) error {
	if err := ValidateClientQuotaEntity(a.Entity); err != nil {
		return err
	}
	keys := make([]string, 0, len(a.Set))
	for k := range a.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ValidateClientQuotaValue(a.Entity, k, a.Set[k]); err != nil {
			return err
		}
	}
	for _, k := range a.Remove {
		if _, dup := a.Set[k]; dup {
			return errorf(kerr.InvalidRequest, "Duplicate quota key %s not updating quota for this entity %s", k, a.Entity)
		}
	}
	return nil
}

func (t *txn) alterClientQuotas(c AlterClientQuotas) Result {
	seen := map[string]bool{}
	for _, a := range c.Alterations {
		if err := ValidateClientQuotaAlteration(a); err != nil {
			return Result{Err: err}
		}
		k := a.Entity.Key()
		if seen[k] {
			return Result{Err: errorf(kerr.InvalidRequest, "Ignoring duplicate entity %s", a.Entity)}
		}
		seen[k] = true
	}
	next := make(map[string]ClientQuota, len(t.cur.quotas)+len(c.Alterations))
	for k, q := range t.cur.quotas {
		next[k] = q // values copied below before any change
	}
	changed := false
	for _, a := range c.Alterations {
		k := a.Entity.Key()
		old := next[k]
		values := make(map[string]float64, len(old.Values)+len(a.Set))
		for key, v := range old.Values {
			values[key] = v
		}
		for _, key := range a.Remove {
			delete(values, key)
		}
		for key, v := range a.Set {
			values[key] = v
		}
		if quotaValuesEqual(old.Values, values) {
			continue
		}
		changed = true
		if len(values) == 0 {
			delete(next, k)
			continue
		}
		next[k] = ClientQuota{Entity: cloneEntity(a.Entity.Canonical()), Values: values}
	}
	if !changed {
		return Result{}
	}
	if len(next) == 0 {
		next = nil
	}
	t.next.quotas, t.next.quotasIndex = next, t.index
	return Result{Changed: true}
}

func quotaValuesEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func cloneEntity(e ClientQuotaEntity) ClientQuotaEntity {
	out := make(ClientQuotaEntity, len(e))
	for i, p := range e {
		out[i].Type = p.Type
		if p.Name != nil {
			n := *p.Name
			out[i].Name = &n
		}
	}
	return out
}

func cloneClientQuota(q ClientQuota) ClientQuota {
	values := make(map[string]float64, len(q.Values))
	for k, v := range q.Values {
		values[k] = v
	}
	return ClientQuota{Entity: cloneEntity(q.Entity), Values: values}
}

// ClientQuotasIndex is the log index of the entry that last changed the
// client quotas (0: never). Two views with the same ClientQuotasIndex
// hold the same quotas, so the brokers' quota managers rebuild only when
// it moves.
func (v *View) ClientQuotasIndex() uint64 { return v.quotasIndex }

// ClientQuotas lists every entity's quotas, sorted by entity key.
func (v *View) ClientQuotas() []ClientQuota {
	keys := make([]string, 0, len(v.quotas))
	for k := range v.quotas {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ClientQuota, len(keys))
	for i, k := range keys {
		out[i] = cloneClientQuota(v.quotas[k])
	}
	return out
}

// Match types of a quota filter component (DescribeClientQuotas).
const (
	QuotaMatchExact     int8 = 0
	QuotaMatchDefault   int8 = 1
	QuotaMatchSpecified int8 = 2
)

// QuotaFilterComponent selects entities by one entity type: EXACT the
// entities whose part of the type is Match, DEFAULT those whose part is
// the default, SPECIFIED those that have a part of the type.
type QuotaFilterComponent struct {
	EntityType string
	MatchType  int8
	Match      *string
}

// ClientQuotaFilter is DescribeClientQuotas' filter: entities matching
// every component; with Strict, only entities with no other parts.
type ClientQuotaFilter struct {
	Components []QuotaFilterComponent
	Strict     bool
}

// DescribeClientQuotas lists the quotas of the entities f selects, sorted
// by entity key. A malformed filter is INVALID_REQUEST (an unknown entity
// type UNSUPPORTED_VERSION), with Kafka's messages.
func (v *View) DescribeClientQuotas(f ClientQuotaFilter) ([]ClientQuota, error) {
	exact := map[string]*string{}
	specified := map[string]bool{}
	for _, c := range f.Components {
		_, inExact := exact[c.EntityType]
		switch {
		case c.EntityType == "":
			return nil, errorf(kerr.InvalidRequest, "Invalid empty entity type.")
		case inExact || specified[c.EntityType]:
			return nil, errorf(kerr.InvalidRequest, "Entity type %s cannot appear more than once in the filter.", c.EntityType)
		case c.EntityType != QuotaEntityUser && c.EntityType != QuotaEntityClientID && c.EntityType != QuotaEntityIP:
			return nil, errorf(kerr.UnsupportedVersion, "Unsupported entity type %s", c.EntityType)
		}
		switch c.MatchType {
		case QuotaMatchExact:
			if c.Match == nil {
				return nil, errorf(kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			exact[c.EntityType] = c.Match
		case QuotaMatchDefault:
			if c.Match != nil {
				return nil, errorf(kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			exact[c.EntityType] = nil
		case QuotaMatchSpecified:
			if c.Match != nil {
				return nil, errorf(kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			specified[c.EntityType] = true
		default:
			return nil, errorf(kerr.InvalidRequest, "Unknown match type %d", c.MatchType)
		}
	}
	has := func(typ string) bool {
		_, ok := exact[typ]
		return ok || specified[typ]
	}
	if has(QuotaEntityIP) && (has(QuotaEntityUser) || has(QuotaEntityClientID)) {
		return nil, errorf(kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	var out []ClientQuota
	for _, q := range v.ClientQuotas() {
		if quotaFilterMatches(q.Entity, exact, specified, f.Strict) {
			out = append(out, q)
		}
	}
	return out, nil
}

func quotaFilterMatches(e ClientQuotaEntity, exact map[string]*string, specified map[string]bool, strict bool) bool {
	if strict && len(e) != len(exact)+len(specified) {
		return false
	}
	for typ, want := range exact {
		name, ok := e.Name(typ)
		if !ok {
			return false
		}
		if (name == nil) != (want == nil) || name != nil && *name != *want {
			return false
		}
	}
	for typ := range specified {
		if _, ok := e.Name(typ); !ok {
			return false
		}
	}
	return true
}

// decodeClientQuotas restores a snapshot's quotas: each entity valid,
// once, with valid values.
func decodeClientQuotas(list []ClientQuota) (map[string]ClientQuota, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]ClientQuota, len(list))
	for _, q := range list {
		if err := ValidateClientQuotaAlteration(ClientQuotaAlteration{Entity: q.Entity, Set: q.Values}); err != nil {
			return nil, fmt.Errorf("client quota of %s: %w", q.Entity, err)
		}
		if len(q.Values) == 0 {
			return nil, fmt.Errorf("client quota of %s has no values", q.Entity)
		}
		k := q.Entity.Key()
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("client quota of %s twice", q.Entity)
		}
		q.Entity = q.Entity.Canonical()
		out[k] = q
	}
	return out, nil
}
