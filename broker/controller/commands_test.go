package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/config"
)

func allCommands() []Command {
	return []Command{
		InitCluster{ClusterID: "c"},
		RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "h:9092", RPCAddr: "h:33145", Rack: "a", ClusterID: "c",
			Listeners: []ListenerEndpoint{{Name: "PLAINTEXT", Addr: "h:9092"}, {Name: "SSL", Addr: "h:9093", SecurityProtocol: "SSL"}}},
		Heartbeat{NodeID: 1, Epoch: 7},
		UnregisterBroker{NodeID: 1, Epoch: 7},
		CreateTopic{Name: "t", ID: topicID(1), Partitions: 3, ReplicationFactor: 2, Assignment: [][]int32{{1, 2}}, Configs: map[string]string{"b": "2", "a": "1"}, Internal: true, PlacementSeed: 99, ConfigRules: CurrentConfigRules},
		DeleteTopic{TopicRef{Name: "t", ID: topicID(1)}},
		CreatePartitions{TopicRef: TopicRef{Name: "t"}, Total: 5, Assignment: [][]int32{{2, 1}}, PlacementSeed: 3},
		AlterTopicConfig{TopicRef: TopicRef{ID: topicID(1)}, Ops: []ConfigOp{{Name: "x", Value: "1"}, {Name: "y", Op: ConfigDelete}}, Replace: true, ConfigRules: CurrentConfigRules},
		SetClusterProperties{ExpectedVersion: -1, Changes: []PropertyChange{{Name: "p", Value: "v"}, {Name: "q", Reset: true}}},
		SetLicense{Blob: []byte{0, 1, 2, 255}},
		ReportLeader{TopicID: topicID(1), Partition: 2, Leader: 3, LeaderEpoch: 4, Term: 5},
		AllocateProducerIDs{NodeID: 1, Epoch: 2, Count: 1000},
		AlterScramCredentials{Deletions: []ScramCredentialKey{{User: "bob", Mechanism: config.MechanismSCRAMSHA512}},
			Upsertions: []ScramCredential{testScramCredential("alice", config.MechanismSCRAMSHA256)}},
		CreateACLs{Bindings: []ACLBinding{aclTopicLiteral, aclCluster}},
		DeleteACLs{Filters: []ACLFilter{anyACL(), {ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: strp("orders"),
			PatternType: kmsg.ACLResourcePatternTypeMatch, Principal: strp("User:alice"), Host: strp("*"),
			Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}}},
		ReassignPartition{Topic: "t", Partition: 1, Target: []int32{3, 1, 2}},
		CompleteReassignment{TopicID: topicID(1), Partition: 1, Target: []int32{3, 1}},
		AlterClientQuotas{Alterations: []ClientQuotaAlteration{{Entity: ClientQuotaEntity{{Type: QuotaEntityUser, Name: strp("alice")}, {Type: QuotaEntityClientID}},
			Set: map[string]float64{QuotaProducerByteRate: 1024}, Remove: []string{QuotaRequestPercentage}}}},
	}
}

func TestEncodeDecodeEveryCommand(t *testing.T) {
	seen := map[CommandType]bool{}
	for _, c := range allCommands() {
		b, err := Encode(Entry{TimeMs: t0, Cmd: c})
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		if b[0] != commandMagic || CommandType(b[1]) != c.Type() || b[2] != currentVersion[c.Type()] || int64(binary.BigEndian.Uint64(b[3:])) != t0 {
			t.Fatalf("%T: header % x", c, b[:commandHeaderLen])
		}
		e, err := Decode(b)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		if e.TimeMs != t0 || !reflect.DeepEqual(e.Cmd, c) {
			t.Fatalf("%T: decoded %+v, want %+v", c, e.Cmd, c)
		}
		again, _ := Encode(e)
		if !bytes.Equal(again, b) {
			t.Fatalf("%T: re-encoding differs", c)
		}
		seen[c.Type()] = true
	}
	if len(seen) != len(currentVersion) {
		t.Fatalf("%d of %d command types covered", len(seen), len(currentVersion))
	}
}

// TestCommandFormatPinned: the bytes of a version 1 command never change
// (old logs must replay); a change of format needs a new version.
func TestCommandFormatPinned(t *testing.T) {
	b, err := Encode(Entry{TimeMs: 0x0102030405, Cmd: CreateTopic{Name: "t", ID: TopicID{1}, Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"b": "2", "a": "1"}, PlacementSeed: 5, ConfigRules: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{0xC7, 5, 1, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05},
		`{"name":"t","id":"AQAAAAAAAAAAAAAAAAAAAA","partitions":1,"replication_factor":1,"configs":{"a":"1","b":"2"},"placement_seed":5}`...)
	if !bytes.Equal(b, want) {
		t.Fatalf("got\n%q\nwant\n%q", b, want)
	}
	// And the pinned bytes decode, under the rules they were written by.
	e, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Cmd.(CreateTopic).ConfigRules; r != 1 {
		t.Fatalf("version 1 entry decoded with config rules %d", r)
	}
	// Version 2 differs from 1 only in the rules its configs are checked by.
	b, err = Encode(Entry{TimeMs: 0x0102030405, Cmd: CreateTopic{Name: "t", ID: TopicID{1}, Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"b": "2", "a": "1"}, PlacementSeed: 5}})
	if err != nil {
		t.Fatal(err)
	}
	want[2] = 2
	if !bytes.Equal(b, want) {
		t.Fatalf("got\n%q\nwant\n%q", b, want)
	}
}

func TestDecodeStrict(t *testing.T) {
	hdr := func(typ CommandType, ver uint8, ts int64) []byte {
		b := []byte{commandMagic, byte(typ), ver, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(b[3:], uint64(ts))
		return b
	}
	for name, tc := range map[string]struct {
		b   []byte
		err error
	}{
		"short":          {[]byte{commandMagic, 1}, ErrMalformed},
		"magic":          {append([]byte{0x00, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1}, "{}"...), ErrMalformed},
		"unknown type":   {append(hdr(99, 1, 1), "{}"...), ErrUnsupportedVersion},
		"type 0":         {append(hdr(0, 1, 1), "{}"...), ErrUnsupportedVersion},
		"future version": {append(hdr(CmdHeartbeat, 2, 1), "{}"...), ErrUnsupportedVersion},
		"version 0":      {append(hdr(CmdHeartbeat, 0, 1), "{}"...), ErrUnsupportedVersion},
		"time 0":         {append(hdr(CmdHeartbeat, 1, 0), "{}"...), ErrMalformed},
		"time negative":  {append(hdr(CmdHeartbeat, 1, -5), "{}"...), ErrMalformed},
		"unknown field":  {append(hdr(CmdHeartbeat, 1, 1), `{"node_id":1,"shiny":2}`...), ErrMalformed},
		"trailing":       {append(hdr(CmdHeartbeat, 1, 1), `{"node_id":1}{}`...), ErrMalformed},
		"trailing junk":  {append(hdr(CmdHeartbeat, 1, 1), `{"node_id":1} x`...), ErrMalformed},
		"null":           {append(hdr(CmdHeartbeat, 1, 1), `null`...), ErrMalformed},
		"array":          {append(hdr(CmdHeartbeat, 1, 1), `[1]`...), ErrMalformed},
		"wrong type":     {append(hdr(CmdHeartbeat, 1, 1), `{"node_id":"one"}`...), ErrMalformed},
		"overflow":       {append(hdr(CmdHeartbeat, 1, 1), `{"node_id":4294967296}`...), ErrMalformed},
		"bad topic id":   {append(hdr(CmdDeleteTopic, 1, 1), `{"id":"short"}`...), ErrMalformed},
		"empty body":     {hdr(CmdHeartbeat, 1, 1), ErrMalformed},
	} {
		if _, err := Decode(tc.b); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", name, err, tc.err)
		}
	}
	if _, err := Encode(Entry{TimeMs: 0, Cmd: Heartbeat{}}); err == nil {
		t.Error("time 0 encoded")
	}
	if _, err := Encode(Entry{TimeMs: 1}); err == nil {
		t.Error("nil command encoded")
	}
}

// FuzzDecode: garbage never panics the decoder or the state machine, and
// whatever decodes re-encodes to something that decodes to the same entry.
func FuzzDecode(f *testing.F) {
	for _, c := range allCommands() {
		b, _ := Encode(Entry{TimeMs: t0, Cmd: c})
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{commandMagic, 5, 1, 0, 0, 0, 0, 0, 0, 0, 1, '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		s := New(testOptions())
		h := &harness{t: t, s: s, now: t0}
		h.register(3, 2)
		h.ok(CreateTopic{Name: "t", ID: topicID(1), Partitions: 2, ReplicationFactor: 2})
		r := s.Apply(h.index+1, b) // must not panic, decodable or not
		if err != nil {
			if r.Err == nil {
				t.Fatal("undecodable entry applied without error")
			}
			return
		}
		again, err := Encode(e)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", e, err)
		}
		e2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(e), normalize(e2)) {
			t.Fatalf("round trip: %+v != %+v", e, e2)
		}
		// Snapshots of whatever state resulted restore.
		snap, err := s.SnapshotBytes()
		if err != nil {
			t.Fatal(err)
		}
		if err := New(testOptions()).Restore(bytes.NewReader(snap)); err != nil {
			t.Fatalf("snapshot after %+v does not restore: %v", e, err)
		}
	})
}

// normalize maps empty and nil maps and slices alike in a command's
// fields (JSON omits or keeps them; the meaning is the same), for every
// command, so that a new one with a list needs nothing here.
func normalize(e Entry) Entry {
	v := reflect.New(reflect.TypeOf(e.Cmd)).Elem()
	v.Set(reflect.ValueOf(e.Cmd))
	if v.Kind() != reflect.Struct {
		return e
	}
	for i := range v.NumField() {
		if f := v.Field(i); (f.Kind() == reflect.Slice || f.Kind() == reflect.Map) && f.Len() == 0 && f.CanSet() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	e.Cmd = v.Interface().(Command)
	return e
}

// FuzzRestore: garbage snapshots are refused, never panic.
func FuzzRestore(f *testing.F) {
	h := newHarness(&testing.T{})
	h.register(2, 0)
	h.ok(CreateTopic{Name: "t", ID: topicID(1), Partitions: 2, ReplicationFactor: 2})
	snap, _ := h.s.SnapshotBytes()
	f.Add(snap)
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := New(testOptions())
		if err := s.Restore(bytes.NewReader(b)); err != nil {
			return
		}
		// What restored must snapshot and restore again identically.
		again, err := s.SnapshotBytes()
		if err != nil {
			t.Fatal(err)
		}
		s2 := New(testOptions())
		if err := s2.Restore(bytes.NewReader(again)); err != nil {
			t.Fatal(err)
		}
		if third, _ := s2.SnapshotBytes(); !bytes.Equal(third, again) {
			t.Fatal("snapshot not stable")
		}
	})
}
