package raft

import (
	"bytes"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

func flatten(bufs net.Buffers) []byte {
	var b []byte
	for _, p := range bufs {
		b = append(b, p...)
	}
	return b
}

// parseTpFrame splits one whole frame into header and body.
func parseTpFrame(t testing.TB, frame []byte, wantResponse bool) (tpHeader, []byte) {
	t.Helper()
	fh, err := readTpHeader(bytes.NewReader(frame), wantResponse)
	if err != nil {
		t.Fatal(err)
	}
	if fh.n != len(frame)-tpFrameHeader {
		t.Fatalf("body length %d, frame has %d", fh.n, len(frame)-tpFrameHeader)
	}
	return fh, frame[tpFrameHeader:]
}

func testHeader() hraft.RPCHeader {
	return hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("127.0.0.1:9#inc-1")}
}

func TestTransportCodecAppendRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3*tpInlineData)
	req := &hraft.AppendEntriesRequest{
		RPCHeader: testHeader(), Term: 7, Leader: []byte("127.0.0.1:9#inc-1"),
		PrevLogEntry: 41, PrevLogTerm: 6, LeaderCommitIndex: 40,
		Entries: []*hraft.Log{
			{Index: 42, Term: 7, Type: hraft.LogCommand, Data: []byte("small"), AppendedAt: time.Unix(1700000000, 123456789)},
			{Index: 43, Term: 7, Type: hraft.LogCommand, Data: big, Extensions: []byte("ext")},
			{Index: 44, Term: 7, Type: hraft.LogNoop},
			{Index: 45, Term: 7, Type: hraft.LogConfiguration, Data: big[:tpInlineData+1]},
		},
	}
	bufs, n, err := encodeAppendReq("partition-0", req).frame()
	if err != nil {
		t.Fatal(err)
	}
	if len(bufs) < 4 {
		t.Errorf("large data was copied, not spliced: %d buffers", len(bufs))
	}
	frame := flatten(bufs)
	if len(frame) != n {
		t.Fatalf("frame() said %d bytes, buffers hold %d", n, len(frame))
	}
	fh, body := parseTpFrame(t, frame, false)
	if fh.kind != tpAppend {
		t.Fatalf("kind %#x", fh.kind)
	}
	d := tpDec{b: body}
	if g := d.group(); string(g) != "partition-0" {
		t.Fatalf("group %q", g)
	}
	got := decodeAppendReq(&d)
	if err := d.end(); err != nil {
		t.Fatal(err)
	}
	for i, l := range got.Entries {
		w := req.Entries[i]
		if l.Index != w.Index || l.Term != w.Term || l.Type != w.Type || !bytes.Equal(l.Data, w.Data) ||
			!bytes.Equal(l.Extensions, w.Extensions) || !l.AppendedAt.Equal(w.AppendedAt) {
			t.Errorf("entry %d: got %+v, want %+v", i, l, w)
		}
	}
	got.Entries, req.Entries = nil, nil
	if !reflect.DeepEqual(got, req) {
		t.Errorf("got %+v\nwant %+v", got, req)
	}

	for _, resp := range []hraft.AppendEntriesResponse{
		{RPCHeader: testHeader(), Term: 9, LastLog: 100, Success: true},
		{RPCHeader: testHeader(), Term: 9, LastLog: 3, NoRetryBackoff: true},
	} {
		bufs, _ := responseFrame(tpAppend, 77, &resp)
		fh, body := parseTpFrame(t, flatten(bufs), true)
		if fh.id != 77 || fh.kind != tpAppend|tpResponse {
			t.Fatalf("header %+v", fh)
		}
		out := hraft.AppendEntriesResponse{Success: true, NoRetryBackoff: true, Term: 1234} // reused: every field overwritten
		if err := decodeResponse(tpAppend, body, &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(out, resp) {
			t.Errorf("got %+v, want %+v", out, resp)
		}
	}
}

func TestTransportCodecOtherRoundTrips(t *testing.T) {
	check := func(name string, e *tpEnc, decode func(*tpDec) any, want any) {
		t.Helper()
		bufs, _, err := e.frame()
		if err != nil {
			t.Fatal(err)
		}
		_, body := parseTpFrame(t, flatten(bufs), false)
		d := tpDec{b: body}
		if g := d.group(); string(g) != "g" {
			t.Fatalf("%s: group %q", name, g)
		}
		got := decode(&d)
		if err := d.end(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	vote := &hraft.RequestVoteRequest{RPCHeader: testHeader(), Term: 3, Candidate: []byte("c"), LastLogIndex: 9, LastLogTerm: 2, LeadershipTransfer: true}
	check("vote", encodeVoteReq("g", vote), func(d *tpDec) any { return decodeVoteReq(d) }, vote)
	pre := &hraft.RequestPreVoteRequest{RPCHeader: testHeader(), Term: 4, LastLogIndex: 10, LastLogTerm: 3}
	check("prevote", encodePreVoteReq("g", pre), func(d *tpDec) any { return decodePreVoteReq(d) }, pre)
	tn := &hraft.TimeoutNowRequest{RPCHeader: testHeader()}
	check("timeoutnow", encodeTimeoutNowReq("g", tn), func(d *tpDec) any { return &hraft.TimeoutNowRequest{RPCHeader: d.rpcHeader()} }, tn)
	snap := &hraft.InstallSnapshotRequest{RPCHeader: testHeader(), SnapshotVersion: 1, Term: 5, Leader: []byte("l"),
		LastLogIndex: 100, LastLogTerm: 5, Peers: []byte("p"), Configuration: []byte("conf"), ConfigurationIndex: 90, Size: 1 << 40}
	check("snapshot", encodeSnapshotReq("g", snap), func(d *tpDec) any { return decodeSnapshotReq(d) }, snap)

	resps := []struct {
		typ       byte
		in, empty any
	}{
		{tpVote, &hraft.RequestVoteResponse{RPCHeader: testHeader(), Term: 3, Peers: []byte("p"), Granted: true}, &hraft.RequestVoteResponse{}},
		{tpPreVote, &hraft.RequestPreVoteResponse{RPCHeader: testHeader(), Term: 4, Granted: true}, &hraft.RequestPreVoteResponse{}},
		{tpTimeoutNow, &hraft.TimeoutNowResponse{RPCHeader: testHeader()}, &hraft.TimeoutNowResponse{}},
		{tpSnapshot, &hraft.InstallSnapshotResponse{RPCHeader: testHeader(), Term: 5, Success: true}, &hraft.InstallSnapshotResponse{}},
	}
	for _, r := range resps {
		bufs, _ := responseFrame(r.typ, 5, r.in)
		fh, body := parseTpFrame(t, flatten(bufs), true)
		if fh.kind&tpError != 0 {
			t.Fatalf("%s: error response %q", tpTypeName(r.typ), body)
		}
		if err := decodeResponse(r.typ, body, r.empty); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.empty, r.in) {
			t.Errorf("%s: got %+v, want %+v", tpTypeName(r.typ), r.empty, r.in)
		}
	}
	// A response of the wrong type for the request becomes an error
	// response, never a bogus success.
	bufs, _ := responseFrame(tpVote, 1, &hraft.AppendEntriesResponse{})
	if fh, _ := parseTpFrame(t, flatten(bufs), true); fh.kind&tpError == 0 {
		t.Error("mismatched response type not turned into an error")
	}
}

func TestTransportCodecHeartbeats(t *testing.T) {
	gts := []*groupTransport{{name: "a"}, {name: "b"}, {name: "partition-77"}}
	var calls []*hbCall
	for i, gt := range gts {
		calls = append(calls, &hbCall{gt: gt, req: hraft.AppendEntriesRequest{
			RPCHeader: testHeader(), Term: uint64(10 + i), Leader: []byte("127.0.0.1:9")}})
	}
	bufs, _, err := encodeHeartbeats(calls, false).frame()
	if err != nil {
		t.Fatal(err)
	}
	_, body := parseTpFrame(t, flatten(bufs), false)
	d := tpDec{b: body}
	entries := decodeHeartbeats(&d, false)
	if err := d.end(); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("%d entries", len(entries))
	}
	for i, e := range entries {
		if string(e.group) != gts[i].name || !reflect.DeepEqual(*e.req, calls[i].req) || !isHeartbeat(e.req) {
			t.Errorf("entry %d: %s %+v", i, e.group, e.req)
		}
	}

	// Answers: two successes and an error; each caller gets its own.
	rs := []hbResult{
		{resp: &hraft.AppendEntriesResponse{RPCHeader: testHeader(), Term: 10, Success: true}},
		{err: "raft transport: group b is not running"},
		{resp: &hraft.AppendEntriesResponse{RPCHeader: testHeader(), Term: 99, LastLog: 5}},
	}
	rb, _ := encodeHeartbeatResults(tpHeartbeats, 9, rs)
	fh, rbody := parseTpFrame(t, flatten(rb), true)
	for _, c := range calls {
		c.done = make(chan struct{})
		c.resp = new(hraft.AppendEntriesResponse)
	}
	cc := &clientConn{p: &peer{key: "127.0.0.1:9#inc"}}
	(&hbFlight{cc: cc, calls: calls, kind: tpHeartbeats}).complete(fh.kind, rbody, nil)
	// A successful answer in the request's term tells the leader the
	// follower is up (catchup.go); one of another term does not.
	if fm, ok := gts[0].commits.progressOf(cc.p.key, 10); !ok || fm.heard.IsZero() {
		t.Errorf("group a's follower not heard from after a successful answer: %+v", fm)
	}
	if fm, ok := gts[2].commits.progressOf(cc.p.key, 12); ok && !fm.heard.IsZero() {
		t.Errorf("group partition-77's follower heard from after an answer of another term: %+v", fm)
	}
	if !cc.notices.Load() {
		t.Error("the answer's features byte did not mark the connection as taking commit notices")
	}
	if calls[0].err != nil || !calls[0].resp.Success || calls[0].resp.Term != 10 {
		t.Errorf("call 0: %v %+v", calls[0].err, calls[0].resp)
	}
	var re *remoteError
	if !errors.As(calls[1].err, &re) {
		t.Errorf("call 1: %v", calls[1].err)
	}
	if calls[2].err != nil || calls[2].resp.Success || calls[2].resp.Term != 99 {
		t.Errorf("call 2: %v %+v", calls[2].err, calls[2].resp)
	}
}

func TestTransportCodecLimits(t *testing.T) {
	// Too large to send: refused before anything is written.
	huge := make([]byte, tpMaxFrame)
	_, _, err := encodeAppendReq("g", &hraft.AppendEntriesRequest{Term: 1, Entries: []*hraft.Log{{Data: huge}}}).frame()
	if !errors.Is(err, errTpFrameTooLarge) {
		t.Fatalf("oversized append: %v", err)
	}
	// Headers: bad version, unknown type, wrong direction, too long.
	for _, h := range [][]byte{
		{2, tpAppend, 0, 0, 0, 1, 0, 0, 0, 0},
		{1, 9, 0, 0, 0, 1, 0, 0, 0, 0},
		{1, tpAppend | tpResponse, 0, 0, 0, 1, 0, 0, 0, 0},
		{1, tpAppend | tpError, 0, 0, 0, 1, 0, 0, 0, 0},
		{1, tpAppend, 0, 0, 0, 1, 0x04, 0, 0, 1},
		{1, tpAppend, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := parseTpHeader(h, false); !errors.Is(err, errBadTpFrame) {
			t.Errorf("header %x accepted: %v", h, err)
		}
	}
	// A count larger than the bytes behind it is refused before
	// allocating for it.
	d := tpDec{b: []byte{0xff, 0xff, 0x03}}
	if decodeHeartbeats(&d, false); d.err == nil {
		t.Error("heartbeat count beyond the frame accepted")
	}
	// A body announced but not sent costs what was sent, not what was
	// announced.
	if _, err := readTpBody(bytes.NewReader(make([]byte, 10)), tpMaxFrame); err == nil {
		t.Error("short body accepted")
	}
}

// decodeAnyTpFrame decodes one frame the way the connection readers do.
func decodeAnyTpFrame(data []byte, response bool) error {
	fh, err := readTpHeader(bytes.NewReader(data), response)
	if err != nil {
		return err
	}
	body, err := readTpBody(bytes.NewReader(data[tpFrameHeader:]), fh.n)
	if err != nil {
		return err
	}
	typ := fh.kind & tpTypeMask
	if response {
		if fh.kind&tpError != 0 {
			return nil
		}
		var resp any
		switch typ {
		case tpAppend:
			resp = new(hraft.AppendEntriesResponse)
		case tpVote:
			resp = new(hraft.RequestVoteResponse)
		case tpPreVote:
			resp = new(hraft.RequestPreVoteResponse)
		case tpTimeoutNow:
			resp = new(hraft.TimeoutNowResponse)
		case tpSnapshot:
			resp = new(hraft.InstallSnapshotResponse)
		case tpHeartbeats, tpHeartbeatsCommit:
			var calls []*hbCall
			for range 4 {
				calls = append(calls, &hbCall{callState: callState{done: make(chan struct{})}, resp: new(hraft.AppendEntriesResponse)})
			}
			(&hbFlight{cc: &clientConn{}, calls: calls, kind: typ}).complete(fh.kind, body, nil)
			return nil
		}
		return decodeResponse(typ, body, resp)
	}
	d := tpDec{b: body}
	if typ == tpHeartbeats || typ == tpHeartbeatsCommit {
		decodeHeartbeats(&d, typ == tpHeartbeatsCommit)
		return d.end()
	}
	d.group()
	switch typ {
	case tpAppend:
		decodeAppendReq(&d)
	case tpVote:
		decodeVoteReq(&d)
	case tpPreVote:
		decodePreVoteReq(&d)
	case tpTimeoutNow:
		d.rpcHeader()
	case tpSnapshot:
		decodeSnapshotReq(&d)
	}
	return d.end()
}

// FuzzTransportFrame: no input panics the decoders, and what they
// allocate is bounded by the input (testing.AllocsPerRun would be too
// coarse; the readers' limits are checked in TestTransportCodecLimits).
func FuzzTransportFrame(f *testing.F) {
	seed := func(bufs net.Buffers, _ int, _ error) { f.Add(flatten(bufs), false) }
	seed(encodeAppendReq("g", &hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 1,
		Entries: []*hraft.Log{{Index: 1, Term: 1, Data: []byte("d"), AppendedAt: time.Unix(1, 2)}}}).frame())
	seed(encodeVoteReq("g", &hraft.RequestVoteRequest{RPCHeader: testHeader(), Term: 1}).frame())
	seed(encodePreVoteReq("g", &hraft.RequestPreVoteRequest{RPCHeader: testHeader(), Term: 1}).frame())
	seed(encodeTimeoutNowReq("g", &hraft.TimeoutNowRequest{RPCHeader: testHeader()}).frame())
	seed(encodeSnapshotReq("g", &hraft.InstallSnapshotRequest{RPCHeader: testHeader(), Size: 5}).frame())
	seed(encodeHeartbeats([]*hbCall{{gt: &groupTransport{name: "g"}, req: hraft.AppendEntriesRequest{Term: 1, Leader: []byte("l")}}}, false).frame())
	seed(encodeHeartbeats([]*hbCall{
		{gt: &groupTransport{name: "g"}, req: hraft.AppendEntriesRequest{Term: 1, Leader: []byte("l")}},
		{gt: &groupTransport{name: "h"}, req: hraft.AppendEntriesRequest{Term: 2, Leader: []byte("l")},
			notice: commitNotice{commit: 5, prevIndex: 7, prevTerm: 2}},
	}, true).frame())
	rb, _ := encodeHeartbeatResults(tpHeartbeats, 1, []hbResult{{resp: &hraft.AppendEntriesResponse{Success: true}}, {err: "x"}})
	f.Add(flatten(rb), true)
	ab, _ := responseFrame(tpAppend, 1, &hraft.AppendEntriesResponse{Term: 2})
	f.Add(flatten(ab), true)
	eb, _ := errorFrame(tpVote, 1, "no")
	f.Add(flatten(eb), true)
	f.Fuzz(func(t *testing.T, data []byte, response bool) {
		_ = decodeAnyTpFrame(data, response)
	})
}

func TestTransportCodecHeartbeatsWithNotices(t *testing.T) {
	gts := []*groupTransport{{name: "a"}, {name: "b"}}
	calls := []*hbCall{
		{gt: gts[0], req: hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 4, Leader: []byte("l")}},
		{gt: gts[1], req: hraft.AppendEntriesRequest{RPCHeader: testHeader(), Term: 6, Leader: []byte("l")},
			notice: commitNotice{commit: 300, prevIndex: 301, prevTerm: 5}},
	}
	bufs, _, err := encodeHeartbeats(calls, true).frame()
	if err != nil {
		t.Fatal(err)
	}
	fh, body := parseTpFrame(t, flatten(bufs), false)
	if fh.kind != tpHeartbeatsCommit {
		t.Fatalf("kind %d", fh.kind)
	}
	d := tpDec{b: body}
	entries := decodeHeartbeats(&d, true)
	if err := d.end(); err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		// The heartbeat itself stays one hashicorp's fast path answers;
		// the notice travels beside it.
		if !reflect.DeepEqual(*e.req, calls[i].req) || !isHeartbeat(e.req) || e.notice != calls[i].notice {
			t.Errorf("entry %d: %+v %+v", i, e.req, e.notice)
		}
	}

	// The answer to a node from before notices has no features byte: the
	// connection is not marked, and nothing of type 7 is ever sent on it.
	rs := []hbResult{{resp: &hraft.AppendEntriesResponse{Term: 4, Success: true}}, {resp: &hraft.AppendEntriesResponse{Term: 6, Success: true}}}
	rb, _ := encodeHeartbeatResults(tpHeartbeats, 3, rs)
	rfh, rbody := parseTpFrame(t, flatten(rb), true)
	for _, c := range calls {
		c.done = make(chan struct{})
		c.resp = new(hraft.AppendEntriesResponse)
	}
	cc := &clientConn{p: &peer{key: "127.0.0.1:2#b"}}
	(&hbFlight{cc: cc, calls: calls, kind: tpHeartbeats}).complete(rfh.kind, rbody[:len(rbody)-1], nil)
	if cc.notices.Load() || calls[0].err != nil || calls[1].err != nil || !calls[1].resp.Success {
		t.Errorf("answer without features: notices %v, errors %v %v", cc.notices.Load(), calls[0].err, calls[1].err)
	}
}
