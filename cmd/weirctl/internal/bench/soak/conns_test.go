package soak

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func TestApplyLeader(t *testing.T) {
	resp := func(leader int32, code int16) *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		for _, id := range []int32{1, 2} {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = id, "127.0.0.1", 9090+id
			r.Brokers = append(r.Brokers, b)
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr("t")
		for p := range int32(2) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.ErrorCode = p, leader, code
			mt.Partitions = append(mt.Partitions, mp)
		}
		r.Topics = append(r.Topics, mt)
		return r
	}
	target := soakTarget{topic: "t", partition: 1, leader: 1, addr: "127.0.0.1:9091"}
	if err := applyLeader(&target, resp(1, 0)); err != nil {
		t.Errorf("same leader: %v", err)
	}
	if err := applyLeader(&target, resp(2, 0)); !errors.Is(err, errLeaderMoved) || target.leader != 2 || target.addr != "127.0.0.1:9092" {
		t.Errorf("moved: %v, %+v", err, target)
	}
	if err := applyLeader(&target, resp(-1, kerr.LeaderNotAvailable.Code)); !errors.Is(err, errLeaderMoved) {
		t.Errorf("election: %v", err)
	}
	if err := applyLeader(&target, resp(7, 0)); err == nil || !strings.Contains(err.Error(), "leader 7 is not among the brokers") {
		t.Errorf("unknown leader: %v", err)
	}
	r := resp(1, 0)
	r.Topics[0].ErrorCode = kerr.UnknownTopicOrPartition.Code
	if err := applyLeader(&target, r); err == nil || errors.Is(err, errLeaderMoved) {
		t.Errorf("topic error: %v", err)
	}
	if err := applyLeader(&soakTarget{topic: "t", partition: 5}, resp(1, 0)); err == nil {
		t.Error("a partition missing from the answer")
	}
	if err := applyLeader(&soakTarget{topic: "u"}, resp(1, 0)); err == nil {
		t.Error("a topic missing from the answer")
	}
}

// encodeResponse frames resp as a broker does: size, correlation ID,
// header tags when flexible (not for ApiVersions), body.
func encodeResponse(resp kmsg.Response, corr int32) []byte {
	out := binary.BigEndian.AppendUint32(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func TestDecodeSoakResponse(t *testing.T) {
	for _, req := range []kmsg.Request{
		&kmsg.ApiVersionsRequest{Version: 3},
		&kmsg.MetadataRequest{Version: 12},
		&kmsg.FetchRequest{Version: 12},
		&kmsg.FetchRequest{Version: 4}, // not flexible: no header tags
	} {
		want := req.ResponseKind()
		want.SetVersion(req.GetVersion())
		if f, ok := want.(*kmsg.FetchResponse); ok {
			f.ThrottleMillis = 7
		}
		frame := encodeResponse(want, 42)[4:]
		got := req.ResponseKind()
		if err := decodeSoakResponse(req, got, 42, frame); err != nil {
			t.Errorf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
			continue
		}
		if f, ok := got.(*kmsg.FetchResponse); ok && f.ThrottleMillis != 7 {
			t.Errorf("fetch v%d decoded throttle %d", req.GetVersion(), f.ThrottleMillis)
		}
		if err := decodeSoakResponse(req, req.ResponseKind(), 41, frame); err == nil || !strings.Contains(err.Error(), "response to request 42 where 41 was due") {
			t.Errorf("wrong correlation ID: %v", err)
		}
	}
	if err := decodeSoakResponse(&kmsg.MetadataRequest{Version: 12}, kmsg.NewPtrMetadataResponse(), 1, []byte{0, 0}); err == nil {
		t.Error("a truncated frame decoded")
	}
}

// fakeSoakBroker answers the raw connections' requests: ApiVersions,
// Metadata naming itself leader of t/0, ListOffsets with offset 5, and
// Fetch after a pause, with a high watermark that grows by one a poll.
type fakeSoakBroker struct {
	ln       net.Listener
	polls    atomic.Int64
	accepted atomic.Int64
	// fetchCode, when set, is every Fetch answer's partition error.
	fetchCode atomic.Int32
}

func newFakeSoakBroker(t *testing.T) *fakeSoakBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSoakBroker{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeSoakBroker) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		rd := kbin.Reader{Src: msg}
		key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
		rd.NullableString() // client ID
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.IsFlexible() {
			kmsg.SkipTags(&rd)
		}
		if err := req.ReadFrom(rd.Src); err != nil {
			return
		}
		resp := req.ResponseKind()
		resp.SetVersion(version)
		switch rq := req.(type) {
		case *kmsg.MetadataRequest:
			m := resp.(*kmsg.MetadataResponse)
			host, port, _ := net.SplitHostPort(f.ln.Addr().String())
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host = 1, host
			fmt.Sscan(port, &b.Port)
			m.Brokers = append(m.Brokers, b)
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rq.Topics[0].Topic
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Leader = 1
			mt.Partitions = append(mt.Partitions, mp)
			m.Topics = append(m.Topics, mt)
		case *kmsg.ListOffsetsRequest:
			l := resp.(*kmsg.ListOffsetsResponse)
			lt := kmsg.NewListOffsetsResponseTopic()
			lt.Topic = rq.Topics[0].Topic
			lp := kmsg.NewListOffsetsResponseTopicPartition()
			lp.Offset = 5
			lt.Partitions = append(lt.Partitions, lp)
			l.Topics = append(l.Topics, lt)
		case *kmsg.FetchRequest:
			if rq.MinBytes != soakConnMinBytes || rq.MaxBytes < rq.MinBytes || rq.Topics[0].Partitions[0].PartitionMaxBytes != 1 {
				return // not the long poll the soak means to send
			}
			time.Sleep(10 * time.Millisecond)
			fr := resp.(*kmsg.FetchResponse)
			ft := kmsg.NewFetchResponseTopic()
			ft.Topic = rq.Topics[0].Topic
			fp := kmsg.NewFetchResponseTopicPartition()
			fp.ErrorCode = int16(f.fetchCode.Load())
			fp.HighWatermark = rq.Topics[0].Partitions[0].FetchOffset + 1
			ft.Partitions = append(ft.Partitions, fp)
			fr.Topics = append(fr.Topics, ft)
			f.polls.Add(1)
		}
		if _, err := conn.Write(encodeResponse(resp, corr)); err != nil {
			return
		}
	}
}

// waitFor polls cond until it holds or a 10s deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSoakConnsAgainstFakeBroker(t *testing.T) {
	f := newFakeSoakBroker(t)
	b := &soakBench{g: &cli.Options{Timeout: 5 * time.Second}, o: &soakOptions{connWait: 10 * time.Millisecond}}
	var errs soakErrors
	target := soakTarget{topic: "t", partition: 0, leader: 1, addr: f.ln.Addr().String()}
	cs := newSoakConns(b, []soakTarget{target}, 4, &errs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs.start(ctx)
	if cs.stats.open.Load() != 4 || cs.stats.opened.Load() != 4 || errs.n.Load() != 0 {
		t.Fatalf("open %d, opened %d, errors %d (%s)", cs.stats.open.Load(), cs.stats.opened.Load(), errs.n.Load(), errs.latest())
	}
	// Polls go on, past a Metadata request every soakMetadataEvery.
	waitFor(t, "long polls", func() bool { return f.polls.Load() >= 4*2*soakMetadataEvery })

	// A churned connection, FIN or RST, is replaced and is no error.
	for i, reset := range []bool{false, true} {
		if !cs.slots[i].churn(reset) {
			t.Fatalf("slot %d had no connection to churn", i)
		}
	}
	waitFor(t, "replacements", func() bool { return cs.stats.opened.Load() == 6 && cs.stats.open.Load() == 4 })
	if errs.n.Load() != 0 {
		t.Errorf("churn counted as errors: %s", errs.latest())
	}

	// A partition error is an error, and the slot keeps trying.
	f.fetchCode.Store(int32(kerr.CorruptMessage.Code))
	waitFor(t, "a Fetch error", func() bool { return errs.n.Load() > 0 })
	if !strings.Contains(errs.latest(), "CORRUPT_MESSAGE") {
		t.Errorf("latest error: %s", errs.latest())
	}
	f.fetchCode.Store(0)

	cs.close()
	if cs.stats.open.Load() != 0 {
		t.Errorf("%d connections open after close", cs.stats.open.Load())
	}
	if cs.slots[0].churn(false) {
		t.Error("a closed slot churned")
	}
}

func TestSoakConnsDialFailureDoesNotHang(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	b := &soakBench{g: &cli.Options{Timeout: time.Second}, o: &soakOptions{connWait: time.Second}}
	var errs soakErrors
	cs := newSoakConns(b, []soakTarget{{topic: "t", addr: addr}}, 3, &errs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs.start(ctx) // returns once every slot failed its first attempt
	if errs.n.Load() < 3 || cs.stats.open.Load() != 0 || !strings.Contains(errs.latest(), "connecting to "+addr) {
		t.Errorf("%d errors (%s), %d open", errs.n.Load(), errs.latest(), cs.stats.open.Load())
	}
	cancel()
	cs.close()
}
