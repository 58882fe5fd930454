package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRegisterBrokerV1StillDecodes: a registration written before named
// listeners (version 1, pinned bytes) replays as a registration with its
// KafkaAddr as the only endpoint, and a version 1 body carrying listeners
// is malformed rather than silently half-read.
func TestRegisterBrokerV1StillDecodes(t *testing.T) {
	body := `{"node_id":1,"incarnation":"qwAAAAAAAAAAAAAAAAAAAQ","kafka_addr":"h:9092","rpc_addr":"h:33145","rack":"a"}`
	entry := func(ver uint8, body string) []byte {
		b := []byte{commandMagic, byte(CmdRegisterBroker), ver, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(b[3:], uint64(t0))
		return append(b, body...)
	}
	e, err := Decode(entry(1, body))
	if err != nil {
		t.Fatal(err)
	}
	want := RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "h:9092", RPCAddr: "h:33145", Rack: "a"}
	if !reflect.DeepEqual(e.Cmd, want) {
		t.Fatalf("decoded %+v, want %+v", e.Cmd, want)
	}
	withListeners := `{"node_id":1,"incarnation":"qwAAAAAAAAAAAAAAAAAAAQ","kafka_addr":"h:9092","rpc_addr":"h:33145","listeners":[{"name":"SSL","addr":"h:9093"}]}`
	if _, err := Decode(entry(1, withListeners)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("version 1 with listeners: %v, want ErrMalformed", err)
	}
	if e, err := Decode(entry(2, withListeners)); err != nil || len(e.Cmd.(RegisterBroker).Listeners) != 1 {
		t.Fatalf("version 2 with listeners: %+v, %v", e.Cmd, err)
	}
	// A new registration without listeners (a node config built by hand)
	// still encodes as the current version and decodes the same.
	b, err := Encode(Entry{TimeMs: t0, Cmd: want})
	if err != nil {
		t.Fatal(err)
	}
	if b[2] != 2 || !bytes.HasSuffix(b, []byte(body)) {
		t.Fatalf("encoded %q", b)
	}
}

func TestRegisterBrokerListeners(t *testing.T) {
	h := newHarness(t)
	h.ok(InitCluster{ClusterID: "c"})
	h.ok(RegisterBroker{NodeID: 1, Incarnation: incarnation(1), KafkaAddr: "int1:9092", RPCAddr: "int1:33145",
		Listeners: []ListenerEndpoint{
			{Name: "internal", Addr: "int1:9092", SecurityProtocol: "PLAINTEXT"},
			{Name: "EXTERNAL", Addr: "ext1.example.com:19093", SecurityProtocol: "SSL"},
		}})
	// Registered before named listeners: KafkaAddr under any name.
	h.ok(RegisterBroker{NodeID: 2, Incarnation: incarnation(2), KafkaAddr: "old2:9092", RPCAddr: "old2:33145"})

	v := h.s.View()
	one, _ := v.Broker(1)
	two, _ := v.Broker(2)
	for _, tc := range []struct {
		reg      BrokerRegistration
		listener string
		addr     string
		ok       bool
	}{
		{one, "INTERNAL", "int1:9092", true},
		{one, "external", "ext1.example.com:19093", true},
		{one, "PLAINTEXT", "", false},
		{two, "EXTERNAL", "old2:9092", true},
		{two, "anything", "old2:9092", true},
	} {
		addr, ok := tc.reg.Endpoint(tc.listener)
		if addr != tc.addr || ok != tc.ok {
			t.Errorf("node %d on %q: %q %v, want %q %v", tc.reg.NodeID, tc.listener, addr, ok, tc.addr, tc.ok)
		}
	}

	// The listeners survive a snapshot.
	snap, err := h.s.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	restored := New(testOptions())
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if got, _ := restored.View().Broker(1); !reflect.DeepEqual(got.Listeners, one.Listeners) {
		t.Fatalf("restored listeners %+v, want %+v", got.Listeners, one.Listeners)
	}

	h.fails(RegisterBroker{NodeID: 3, Incarnation: incarnation(3), KafkaAddr: "h3:9092", RPCAddr: "h3:33145",
		Listeners: []ListenerEndpoint{{Name: "a", Addr: "h3:9092"}, {Name: "A", Addr: "h3:9093"}}}, kerr.InvalidRegistration)
	h.fails(RegisterBroker{NodeID: 3, Incarnation: incarnation(3), KafkaAddr: "h3:9092", RPCAddr: "h3:33145",
		Listeners: []ListenerEndpoint{{Name: "a", Addr: ""}}}, kerr.InvalidRegistration)
}
