package controller

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testACL(rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) ACLBinding {
	return ACLBinding{ResourceType: rt, ResourceName: name, PatternType: pattern, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

func strp(s string) *string { return &s }

// anyACL matches every binding.
func anyACL() ACLFilter {
	return ACLFilter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
}

var (
	aclTopicLiteral  = testACL(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "orders", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	aclTopicWildcard = testACL(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "*", "User:*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow)
	aclTopicPrefixed = testACL(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "ord", "User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow)
	aclTopicOther    = testACL(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "pay", "User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny)
	aclGroup         = testACL(kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, "orders", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	aclCluster       = testACL(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, ClusterResourceName, "User:ops", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow)
)

func TestCreateACLs(t *testing.T) {
	h := newHarness(t)
	if v := h.s.View(); len(v.ACLs()) != 0 || v.ACLsIndex() != 0 {
		t.Fatalf("a new state has ACLs: %v (index %d)", v.ACLs(), v.ACLsIndex())
	}
	r := h.ok(CreateACLs{Bindings: []ACLBinding{aclGroup, aclTopicLiteral, aclCluster}})
	if !r.Changed {
		t.Fatal("creating ACLs did not change the state")
	}
	v := h.s.View()
	want := []ACLBinding{aclTopicLiteral, aclGroup, aclCluster} // sorted by resource type first
	if got := v.ACLs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ACLs %+v\nwant %+v", got, want)
	}
	if v.ACLsIndex() != h.index {
		t.Fatalf("ACLsIndex %d, want %d", v.ACLsIndex(), h.index)
	}

	// Duplicates are idempotent: nothing changes, not even ACLsIndex.
	created := h.index
	if r := h.ok(CreateACLs{Bindings: []ACLBinding{aclGroup, aclGroup}}); r.Changed {
		t.Fatal("re-creating an existing ACL changed the state")
	}
	if got := h.s.View().ACLsIndex(); got != created {
		t.Fatalf("ACLsIndex moved to %d on a no-op", got)
	}
	h.ok(CreateACLs{Bindings: []ACLBinding{aclTopicPrefixed, aclTopicPrefixed}})
	if n := len(h.s.View().ACLs()); n != 4 {
		t.Fatalf("%d ACLs after adding one twice, want 4", n)
	}
	if len(v.ACLs()) != 3 {
		t.Fatal("a published view changed")
	}

	// Every invalid binding refuses the whole command.
	bad := func(mutate func(*ACLBinding)) ACLBinding {
		b := testACL(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "new", "User:carol", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
		mutate(&b)
		return b
	}
	for name, b := range map[string]ACLBinding{
		"resource ANY":       bad(func(b *ACLBinding) { b.ResourceType = kmsg.ACLResourceTypeAny }),
		"resource UNKNOWN":   bad(func(b *ACLBinding) { b.ResourceType = kmsg.ACLResourceTypeUnknown }),
		"resource 99":        bad(func(b *ACLBinding) { b.ResourceType = 99 }),
		"pattern MATCH":      bad(func(b *ACLBinding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }),
		"pattern ANY":        bad(func(b *ACLBinding) { b.PatternType = kmsg.ACLResourcePatternTypeAny }),
		"pattern UNKNOWN":    bad(func(b *ACLBinding) { b.PatternType = kmsg.ACLResourcePatternTypeUnknown }),
		"operation ANY":      bad(func(b *ACLBinding) { b.Operation = kmsg.ACLOperationAny }),
		"operation UNKNOWN":  bad(func(b *ACLBinding) { b.Operation = kmsg.ACLOperationUnknown }),
		"operation tokens":   bad(func(b *ACLBinding) { b.Operation = kmsg.ACLOperationCreateTokens }),
		"permission ANY":     bad(func(b *ACLBinding) { b.Permission = kmsg.ACLPermissionTypeAny }),
		"permission UNKNOWN": bad(func(b *ACLBinding) { b.Permission = kmsg.ACLPermissionTypeUnknown }),
		"empty name":         bad(func(b *ACLBinding) { b.ResourceName = "" }),
		"cluster name":       bad(func(b *ACLBinding) { b.ResourceType, b.ResourceName = kmsg.ACLResourceTypeCluster, "my-cluster" }),
		"empty principal":    bad(func(b *ACLBinding) { b.Principal = "" }),
		"principal no type":  bad(func(b *ACLBinding) { b.Principal = "carol" }),
		"principal no name":  bad(func(b *ACLBinding) { b.Principal = "User:" }),
		"principal ':carol'": bad(func(b *ACLBinding) { b.Principal = ":carol" }),
		"empty host":         bad(func(b *ACLBinding) { b.Host = "" }),
	} {
		t.Run(name, func(t *testing.T) {
			if err := ValidateACLBinding(b); ErrorCode(err) != kerr.InvalidRequest.Code {
				t.Fatalf("ValidateACLBinding: %v", err)
			}
			h.fails(CreateACLs{Bindings: []ACLBinding{aclTopicOther, b}}, kerr.InvalidRequest)
		})
	}
	if len(h.s.View().MatchingACLs(ACLFilter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeDeny})) != 0 {
		t.Fatal("a refused command stored its valid binding")
	}
	// The wildcard resource, the wildcard principal, a host and a
	// prefixed cluster pattern are all valid.
	h.ok(CreateACLs{Bindings: []ACLBinding{aclTopicWildcard,
		{ResourceType: kmsg.ACLResourceTypeTransactionalId, ResourceName: "tx", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:*", Host: "10.0.0.1", Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeDeny}}})
	if n := len(h.s.View().ACLs()); n != 6 {
		t.Fatalf("%d ACLs, want 6", n)
	}
}

func TestACLFilterMatches(t *testing.T) {
	all := []ACLBinding{aclTopicLiteral, aclTopicWildcard, aclTopicPrefixed, aclTopicOther, aclGroup, aclCluster}
	filter := func(mutate func(*ACLFilter)) ACLFilter {
		f := anyACL()
		mutate(&f)
		return f
	}
	for name, tc := range map[string]struct {
		f    ACLFilter
		want []ACLBinding
	}{
		"any":               {anyACL(), all},
		"topics":            {filter(func(f *ACLFilter) { f.ResourceType = kmsg.ACLResourceTypeTopic }), all[:4]},
		"name, any pattern": {filter(func(f *ACLFilter) { f.ResourceName = strp("orders") }), []ACLBinding{aclTopicLiteral, aclGroup}},
		"literal name": {filter(func(f *ACLFilter) {
			f.ResourceName, f.PatternType = strp("orders"), kmsg.ACLResourcePatternTypeLiteral
		}), []ACLBinding{aclTopicLiteral, aclGroup}},
		"literal wildcard is only itself": {filter(func(f *ACLFilter) {
			f.ResourceName, f.PatternType = strp("*"), kmsg.ACLResourcePatternTypeLiteral
		}), []ACLBinding{aclTopicWildcard}},
		"prefixed name": {filter(func(f *ACLFilter) {
			f.ResourceName, f.PatternType = strp("ord"), kmsg.ACLResourcePatternTypePrefixed
		}), []ACLBinding{aclTopicPrefixed}},
		"prefixed, no name": {filter(func(f *ACLFilter) { f.PatternType = kmsg.ACLResourcePatternTypePrefixed }), []ACLBinding{aclTopicPrefixed, aclTopicOther}},
		"match topic orders": {filter(func(f *ACLFilter) {
			f.ResourceType, f.ResourceName, f.PatternType = kmsg.ACLResourceTypeTopic, strp("orders"), kmsg.ACLResourcePatternTypeMatch
		}), []ACLBinding{aclTopicLiteral, aclTopicWildcard, aclTopicPrefixed}},
		"match topic ord": {filter(func(f *ACLFilter) {
			f.ResourceType, f.ResourceName, f.PatternType = kmsg.ACLResourceTypeTopic, strp("ord"), kmsg.ACLResourcePatternTypeMatch
		}), []ACLBinding{aclTopicWildcard, aclTopicPrefixed}},
		"match topic or": {filter(func(f *ACLFilter) {
			f.ResourceType, f.ResourceName, f.PatternType = kmsg.ACLResourceTypeTopic, strp("or"), kmsg.ACLResourcePatternTypeMatch
		}), []ACLBinding{aclTopicWildcard}},
		"match, no name":                    {filter(func(f *ACLFilter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch }), all},
		"principal":                         {filter(func(f *ACLFilter) { f.Principal = strp("User:bob") }), []ACLBinding{aclTopicPrefixed, aclTopicOther}},
		"wildcard principal is only itself": {filter(func(f *ACLFilter) { f.Principal = strp("User:*") }), []ACLBinding{aclTopicWildcard}},
		"host":                              {filter(func(f *ACLFilter) { f.Host = strp("10.0.0.1") }), nil},
		"host *":                            {filter(func(f *ACLFilter) { f.Host = strp("*") }), all},
		"operation":                         {filter(func(f *ACLFilter) { f.Operation = kmsg.ACLOperationWrite }), []ACLBinding{aclTopicPrefixed, aclTopicOther}},
		"operation ALL":                     {filter(func(f *ACLFilter) { f.Operation = kmsg.ACLOperationAll }), nil},
		"deny":                              {filter(func(f *ACLFilter) { f.Permission = kmsg.ACLPermissionTypeDeny }), []ACLBinding{aclTopicOther}},
		"cluster":                           {filter(func(f *ACLFilter) { f.ResourceType = kmsg.ACLResourceTypeCluster }), []ACLBinding{aclCluster}},
		"delegation token":                  {filter(func(f *ACLFilter) { f.ResourceType = kmsg.ACLResourceTypeDelegationToken }), nil},
	} {
		var got []ACLBinding
		for _, b := range all {
			if tc.f.Matches(b) {
				got = append(got, b)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: matched %+v\nwant %+v", name, got, tc.want)
		}
	}
}

func TestDeleteACLs(t *testing.T) {
	h := newHarness(t)
	h.ok(CreateACLs{Bindings: []ACLBinding{aclTopicLiteral, aclTopicWildcard, aclTopicPrefixed, aclTopicOther, aclGroup, aclCluster}})
	created := h.index

	// Deleting nothing changes nothing and answers an empty list per
	// filter.
	r := h.ok(DeleteACLs{Filters: []ACLFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: strp("nothing"),
		PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}})
	if r.Changed || len(r.DeletedACLs) != 1 || len(r.DeletedACLs[0]) != 0 || h.s.View().ACLsIndex() != created {
		t.Fatalf("a delete matching nothing: %+v", r)
	}

	// A MATCH filter removes what applies to the topic "orders", and an
	// overlapping filter reports the binding it shares with it.
	match := ACLFilter{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: strp("orders"), PatternType: kmsg.ACLResourcePatternTypeMatch,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	bob := anyACL()
	bob.Principal = strp("User:bob")
	r = h.ok(DeleteACLs{Filters: []ACLFilter{match, bob}})
	if !r.Changed || h.s.View().ACLsIndex() != h.index {
		t.Fatalf("delete: changed %v, ACLsIndex %d (index %d)", r.Changed, h.s.View().ACLsIndex(), h.index)
	}
	want := [][]ACLBinding{{aclTopicWildcard, aclTopicLiteral, aclTopicPrefixed}, {aclTopicPrefixed, aclTopicOther}} // in the order ACLs lists
	if !reflect.DeepEqual(r.DeletedACLs, want) {
		t.Fatalf("deleted %+v\nwant %+v", r.DeletedACLs, want)
	}
	if got := h.s.View().ACLs(); !reflect.DeepEqual(got, []ACLBinding{aclGroup, aclCluster}) {
		t.Fatalf("left %+v", got)
	}

	// An invalid filter refuses the whole command.
	for name, f := range map[string]ACLFilter{
		"resource UNKNOWN":   {ResourceType: 0, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
		"pattern UNKNOWN":    {ResourceType: kmsg.ACLResourceTypeAny, PatternType: 0, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
		"pattern 9":          {ResourceType: kmsg.ACLResourceTypeAny, PatternType: 9, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny},
		"operation UNKNOWN":  {ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: 0, Permission: kmsg.ACLPermissionTypeAny},
		"permission UNKNOWN": {ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: 0},
	} {
		if err := ValidateACLFilter(f); ErrorCode(err) != kerr.InvalidRequest.Code {
			t.Errorf("%s: ValidateACLFilter: %v", name, err)
		}
		h.fails(DeleteACLs{Filters: []ACLFilter{anyACL(), f}}, kerr.InvalidRequest)
	}

	// ANY everything empties the list.
	r = h.ok(DeleteACLs{Filters: []ACLFilter{anyACL()}})
	if len(r.DeletedACLs[0]) != 2 || len(h.s.View().ACLs()) != 0 {
		t.Fatalf("delete all: %+v, left %+v", r.DeletedACLs, h.s.View().ACLs())
	}
}

// TestACLsReplicate: replicas applying the same log agree on the ACLs and
// on what each delete answered; a snapshot carries them.
func TestACLsReplicate(t *testing.T) {
	h := newHarness(t)
	h.ok(CreateACLs{Bindings: []ACLBinding{aclCluster, aclTopicOther, aclTopicLiteral}})
	h.ok(CreateACLs{Bindings: []ACLBinding{aclTopicPrefixed, aclTopicLiteral, aclGroup}})
	del := h.ok(DeleteACLs{Filters: []ACLFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: strp("payments"),
		PatternType: kmsg.ACLResourcePatternTypeMatch, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}})

	replica := New(testOptions())
	var last Result
	for i, b := range h.log {
		last = replica.Apply(uint64(i+1), b)
	}
	if !reflect.DeepEqual(last.DeletedACLs, del.DeletedACLs) || !reflect.DeepEqual(del.DeletedACLs, [][]ACLBinding{{aclTopicOther}}) {
		t.Fatalf("replica deleted %+v, leader %+v", last.DeletedACLs, del.DeletedACLs)
	}
	if a, b := h.s.View(), replica.View(); !reflect.DeepEqual(a.ACLs(), b.ACLs()) || a.ACLsIndex() != b.ACLsIndex() {
		t.Fatalf("replica ACLs %+v (index %d), leader %+v (index %d)", b.ACLs(), b.ACLsIndex(), a.ACLs(), a.ACLsIndex())
	}

	snap, err := h.s.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	restored := New(testOptions())
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if got := restored.View(); !reflect.DeepEqual(got.ACLs(), h.s.View().ACLs()) || got.ACLsIndex() != h.s.View().ACLsIndex() {
		t.Fatalf("restored ACLs %+v (index %d)", got.ACLs(), got.ACLsIndex())
	}
}

func TestRestoreRefusesBadACLs(t *testing.T) {
	withACLs := func(acls ...ACLBinding) []byte {
		body, err := json.Marshal(snapshotV1{ACLs: acls, ACLsIndex: 3})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.WriteString(snapshotMagic)
		binary.Write(&buf, binary.BigEndian, uint16(snapshotVersion))
		buf.Write(body)
		binary.Write(&buf, binary.BigEndian, crc32.Checksum(body, castagnoli))
		return buf.Bytes()
	}
	if err := New(testOptions()).Restore(bytes.NewReader(withACLs(aclTopicLiteral, aclGroup))); err != nil {
		t.Fatalf("a well-formed snapshot: %v", err)
	}
	invalid := aclGroup
	invalid.Principal = "nobody"
	for name, snap := range map[string][]byte{
		"out of order": withACLs(aclGroup, aclTopicLiteral),
		"repeated":     withACLs(aclGroup, aclGroup),
		"invalid":      withACLs(aclTopicLiteral, invalid),
	} {
		if err := New(testOptions()).Restore(bytes.NewReader(snap)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
