package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Frames of the shared transport. After the stream header (mux.go) naming
// transportStream, each direction of a connection is a sequence of frames
// with this header (big-endian):
//
//	 0         1         2                   6                   10
//	+---------+---------+---------+---------+---------+---------+---------
//	| version |  kind   |     request id    |    body length    | body …
//	|   = 1   |         |      uint32       | uint32, ≤ 64 MiB  |
//	+---------+---------+---------+---------+---------+---------+---------
//
//	kind      bits 0–5 the message type, bit 7 (0x80) a response, bit 6
//	          (0x40) an error response, whose body is the error's text.
//	          1 AppendEntries, 2 RequestVote, 3 RequestPreVote,
//	          4 TimeoutNow, 5 InstallSnapshot, 6 heartbeat batch,
//	          7 heartbeat batch with commit notices.
//	request   chosen by the dialer, unique among its requests in flight on
//	id        the connection; the response echoes it. Many requests are in
//	          flight per connection and responses come in any order.
//
// The dialer sends requests and the acceptor responses, never the
// reverse. In bodies, u is an unsigned varint, i a signed (zigzag)
// varint, b a byte string (u length, then the bytes), 1 a single byte,
// and g a group name (1 length byte, then the name). hdr is hashicorp's
// RPCHeader: i protocol version | b id | b addr.
//
//	AppendEntries    req  g | hdr | u term | b leader | u prev index |
//	                      u prev term | u leader commit | u n | n × entry
//	                 entry  u index | u term | 1 type | 1 has time
//	                      [i unix s | u ns] | b extensions | b data
//	                 resp hdr | u term | u last log | 1 flags
//	                      (0x01 success, 0x02 no retry backoff)
//	RequestVote      req  g | hdr | u term | b candidate | u last index |
//	                      u last term | 1 leadership transfer
//	                 resp hdr | u term | b peers | 1 granted
//	RequestPreVote   req  g | hdr | u term | u last index | u last term
//	                 resp hdr | u term | 1 granted
//	TimeoutNow       req  g | hdr            resp hdr
//	InstallSnapshot  req  g | hdr | i snapshot version | u term | b leader |
//	                      u last index | u last term | b peers |
//	                      b configuration | u configuration index | u size,
//	                      then size bytes of snapshot outside the frame
//	                 resp hdr | u term | 1 success
//	heartbeat batch  req  u n | n × (g | hdr | u term | b leader)
//	                 resp u n | n × (1 status | 0: AppendEntries resp,
//	                      1: b error text), in request order |
//	                      [1 features]
//	heartbeat batch  req  u n | n × (g | hdr | u term | b leader |
//	with commit           u commit | [u prev index | u prev term when
//	notices               commit > 0])
//	                 resp as the heartbeat batch's
//
// The features byte ends the answer to a heartbeat batch of a node that
// takes commit notices (transport_commit.go; bit 0x01, the only one):
// nodes from before it neither send it nor read past the answers, and a
// node sends type 7 on a connection only after the byte came back on it.
//
// A frame is checked before anything is allocated for it: the version,
// the kind, the body length against tpMaxFrame, and every count and length
// inside against the bytes left. Any malformed frame closes its
// connection only. A new format is a new version byte, which an old node
// treats as malformed. InstallSnapshot travels alone on its own
// connection, which closes after the response.
const (
	tpFrameVersion = 1
	tpFrameHeader  = 10
	// tpMaxFrame bounds a frame's body: the most entries an append
	// carries (Config.MaxAppendEntries) times their size must stay below.
	tpMaxFrame = 64 << 20
	// tpMaxEntries bounds the entries of one append (hashicorp/raft refuses
	// a MaxAppendEntries over 1024).
	tpMaxEntries = 4096
	// tpMaxBatch bounds the heartbeats of one batch frame; senders flush
	// at tpFlushBatch.
	tpMaxBatch   = 16384
	tpFlushBatch = 4096
	// tpInlineData: entry data up to this size is copied into the frame
	// buffer; larger data is written from the entry itself (its own iovec).
	tpInlineData = 128
)

// Message types and kind bits.
const (
	tpAppend     byte = 1
	tpVote       byte = 2
	tpPreVote    byte = 3
	tpTimeoutNow byte = 4
	tpSnapshot   byte = 5
	tpHeartbeats byte = 6
	// tpHeartbeatsCommit is a heartbeat batch whose entries may carry a
	// commit notice.
	tpHeartbeatsCommit byte = 7

	tpTypeMask byte = 0x3f
	tpResponse byte = 0x80
	tpError    byte = 0x40
)

// errBadTpFrame marks a malformed transport frame.
var errBadTpFrame = errors.New("raft transport: malformed frame")

// errTpFrameTooLarge: a request would not fit in tpMaxFrame; not sent.
var errTpFrameTooLarge = errors.New("raft transport: frame exceeds the 64 MiB limit")

func tpTypeName(t byte) string {
	switch t {
	case tpAppend:
		return "AppendEntries"
	case tpVote:
		return "RequestVote"
	case tpPreVote:
		return "RequestPreVote"
	case tpTimeoutNow:
		return "TimeoutNow"
	case tpSnapshot:
		return "InstallSnapshot"
	case tpHeartbeats:
		return "heartbeats"
	case tpHeartbeatsCommit:
		return "heartbeats with commit notices"
	}
	return fmt.Sprintf("type %d", t)
}

// tpHeader is a decoded frame header.
type tpHeader struct {
	kind byte
	id   uint32
	n    int
}

// readTpHeader reads and checks one frame header; wantResponse says
// which direction the connection carries.
func readTpHeader(r io.Reader, wantResponse bool) (tpHeader, error) {
	var h [tpFrameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return tpHeader{}, err
	}
	return parseTpHeader(h[:], wantResponse)
}

func parseTpHeader(h []byte, wantResponse bool) (tpHeader, error) {
	if h[0] != tpFrameVersion {
		return tpHeader{}, fmt.Errorf("%w: version %d", errBadTpFrame, h[0])
	}
	fh := tpHeader{kind: h[1], id: binary.BigEndian.Uint32(h[2:]), n: int(binary.BigEndian.Uint32(h[6:]))}
	t := fh.kind & tpTypeMask
	resp := fh.kind&tpResponse != 0
	switch {
	case t < tpAppend || t > tpHeartbeatsCommit:
		return tpHeader{}, fmt.Errorf("%w: kind %#x", errBadTpFrame, fh.kind)
	case resp != wantResponse:
		return tpHeader{}, fmt.Errorf("%w: kind %#x in the wrong direction", errBadTpFrame, fh.kind)
	case !resp && fh.kind&tpError != 0:
		return tpHeader{}, fmt.Errorf("%w: request kind %#x with the error bit", errBadTpFrame, fh.kind)
	case fh.n > tpMaxFrame || fh.n < 0:
		return tpHeader{}, fmt.Errorf("%w: body of %d bytes", errBadTpFrame, uint32(fh.n))
	}
	return fh, nil
}

// readTpBody reads a frame body into a fresh buffer: decoded entries
// point into it and Raft keeps them, so it is never reused. A large body
// grows as its bytes arrive, so a peer that announces more than it sends
// costs no more than it sent.
func readTpBody(r io.Reader, n int) ([]byte, error) {
	const step = 1 << 20
	b := make([]byte, min(n, step))
	for got := 0; ; {
		m, err := io.ReadFull(r, b[got:])
		got += m
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if got == n {
			return b, nil
		}
		b = append(b, make([]byte, min(n-got, len(b)))...)
	}
}

// tpEnc builds one frame. Large entry data is spliced in rather than
// copied: frame() returns the buffer cut around each splice.
type tpEnc struct {
	buf     []byte
	splices []tpSplice
	spliced int
}

type tpSplice struct {
	off  int // in buf: data goes before buf[off:]
	data []byte
}

func newTpEnc(kind byte, size int) *tpEnc {
	e := &tpEnc{buf: make([]byte, tpFrameHeader, tpFrameHeader+size)}
	e.buf[0], e.buf[1] = tpFrameVersion, kind
	return e
}

func (e *tpEnc) u(v uint64)     { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *tpEnc) i(v int64)      { e.buf = binary.AppendVarint(e.buf, v) }
func (e *tpEnc) byte1(v byte)   { e.buf = append(e.buf, v) }
func (e *tpEnc) bytes(p []byte) { e.u(uint64(len(p))); e.buf = append(e.buf, p...) }
func (e *tpEnc) str(s string)   { e.u(uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *tpEnc) group(g string) { e.buf = append(e.buf, byte(len(g))); e.buf = append(e.buf, g...) }
func (e *tpEnc) bool1(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}

// data writes a byte string whose bytes may be spliced (not copied).
func (e *tpEnc) data(p []byte) {
	e.u(uint64(len(p)))
	if len(p) <= tpInlineData {
		e.buf = append(e.buf, p...)
		return
	}
	e.splices = append(e.splices, tpSplice{off: len(e.buf), data: p})
	e.spliced += len(p)
}

func (e *tpEnc) rpcHeader(h hraft.RPCHeader) {
	e.i(int64(h.ProtocolVersion))
	e.bytes(h.ID)
	e.bytes(h.Addr)
}

// frame sets the body length and returns the frame's buffers and size.
func (e *tpEnc) frame() (net.Buffers, int, error) {
	n := len(e.buf) - tpFrameHeader + e.spliced
	if n > tpMaxFrame {
		return nil, 0, fmt.Errorf("%w (%d bytes)", errTpFrameTooLarge, n)
	}
	binary.BigEndian.PutUint32(e.buf[6:], uint32(n))
	if len(e.splices) == 0 {
		return net.Buffers{e.buf}, len(e.buf), nil
	}
	bufs := make(net.Buffers, 0, 2*len(e.splices)+1)
	prev := 0
	for _, s := range e.splices {
		bufs = append(bufs, e.buf[prev:s.off], s.data)
		prev = s.off
	}
	if prev < len(e.buf) {
		bufs = append(bufs, e.buf[prev:])
	}
	return bufs, n + tpFrameHeader, nil
}

// setID writes the request id into a frame built by tpEnc.
func setTpID(bufs net.Buffers, id uint32) { binary.BigEndian.PutUint32(bufs[0][2:], id) }

// errorFrame is an error response.
func errorFrame(typ byte, id uint32, msg string) (net.Buffers, int) {
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	e := newTpEnc(typ|tpResponse|tpError, len(msg))
	binary.BigEndian.PutUint32(e.buf[2:], id)
	e.buf = append(e.buf, msg...)
	bufs, n, _ := e.frame()
	return bufs, n
}

// tpDec reads a body; the first error sticks and later reads return
// zeros, so callers check err once at the end.
type tpDec struct {
	b   []byte
	err error
}

func (d *tpDec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errBadTpFrame, what)
	}
	d.b = nil
}

func (d *tpDec) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *tpDec) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *tpDec) byte1() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *tpDec) bool1() bool {
	switch d.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad bool")
	return false
}

// bytes returns a slice of the body (capacity capped, so an append by
// whoever keeps it cannot overwrite what follows); nil when empty.
func (d *tpDec) bytes() []byte {
	n := d.u()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("byte string longer than the frame")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// group returns the group name as a slice of the body (no copy: lookups
// by string(b) do not allocate).
func (d *tpDec) group() []byte {
	n := int(d.byte1())
	if d.err != nil {
		return nil
	}
	if n == 0 || n > len(d.b) {
		d.fail("bad group name")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *tpDec) rpcHeader() hraft.RPCHeader {
	return hraft.RPCHeader{
		ProtocolVersion: hraft.ProtocolVersion(d.i()),
		ID:              d.bytes(),
		Addr:            d.bytes(),
	}
}

// count reads an element count, each element at least minSize bytes, so
// what is allocated for them is bounded by the frame.
func (d *tpDec) count(limit, minSize int) int {
	n := d.u()
	if d.err != nil {
		return 0
	}
	if n > uint64(limit) || n*uint64(minSize) > uint64(len(d.b)) {
		d.fail("count larger than the frame")
		return 0
	}
	return int(n)
}

func (d *tpDec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return d.err
}

// AppendEntries.

func encodeAppendReq(group string, a *hraft.AppendEntriesRequest) *tpEnc {
	size := len(group) + 64 + len(a.ID) + len(a.Addr) + len(a.Leader)
	for _, l := range a.Entries {
		size += 40 + len(l.Extensions)
		if len(l.Data) <= tpInlineData {
			size += len(l.Data)
		}
	}
	e := newTpEnc(tpAppend, size)
	e.group(group)
	e.rpcHeader(a.RPCHeader)
	e.u(a.Term)
	e.bytes(a.Leader)
	e.u(a.PrevLogEntry)
	e.u(a.PrevLogTerm)
	e.u(a.LeaderCommitIndex)
	e.u(uint64(len(a.Entries)))
	for _, l := range a.Entries {
		e.u(l.Index)
		e.u(l.Term)
		e.byte1(byte(l.Type))
		if l.AppendedAt.IsZero() {
			e.byte1(0)
		} else {
			e.byte1(1)
			e.i(l.AppendedAt.Unix())
			e.u(uint64(l.AppendedAt.Nanosecond()))
		}
		e.bytes(l.Extensions)
		e.data(l.Data)
	}
	return e
}

// minEntry is the smallest encoded entry: index, term, type, time flag,
// extensions length, data length.
const minEntry = 6

func decodeAppendReq(d *tpDec) *hraft.AppendEntriesRequest {
	a := &hraft.AppendEntriesRequest{
		RPCHeader:         d.rpcHeader(),
		Term:              d.u(),
		Leader:            d.bytes(),
		PrevLogEntry:      d.u(),
		PrevLogTerm:       d.u(),
		LeaderCommitIndex: d.u(),
	}
	n := d.count(tpMaxEntries, minEntry)
	if n == 0 {
		return a
	}
	logs := make([]hraft.Log, n)
	a.Entries = make([]*hraft.Log, n)
	for i := range logs {
		l := &logs[i]
		l.Index = d.u()
		l.Term = d.u()
		l.Type = hraft.LogType(d.byte1())
		if d.bool1() {
			sec, ns := d.i(), d.u()
			if ns >= 1e9 {
				d.fail("bad nanoseconds")
			}
			l.AppendedAt = time.Unix(sec, int64(ns))
		}
		l.Extensions = d.bytes()
		l.Data = d.bytes()
		a.Entries[i] = l
	}
	return a
}

func encodeAppendResp(e *tpEnc, r *hraft.AppendEntriesResponse) {
	e.rpcHeader(r.RPCHeader)
	e.u(r.Term)
	e.u(r.LastLog)
	var f byte
	if r.Success {
		f |= 1
	}
	if r.NoRetryBackoff {
		f |= 2
	}
	e.byte1(f)
}

// decodeAppendResp fills every field of r: hashicorp reuses responses.
func decodeAppendResp(d *tpDec, r *hraft.AppendEntriesResponse) {
	r.RPCHeader = d.rpcHeader()
	r.Term = d.u()
	r.LastLog = d.u()
	f := d.byte1()
	if f&^3 != 0 {
		d.fail("bad flags")
	}
	r.Success, r.NoRetryBackoff = f&1 != 0, f&2 != 0
}

// RequestVote, RequestPreVote, TimeoutNow.

func encodeVoteReq(group string, a *hraft.RequestVoteRequest) *tpEnc {
	e := newTpEnc(tpVote, len(group)+48+len(a.ID)+len(a.Addr)+len(a.Candidate))
	e.group(group)
	e.rpcHeader(a.RPCHeader)
	e.u(a.Term)
	e.bytes(a.Candidate)
	e.u(a.LastLogIndex)
	e.u(a.LastLogTerm)
	e.bool1(a.LeadershipTransfer)
	return e
}

func decodeVoteReq(d *tpDec) *hraft.RequestVoteRequest {
	return &hraft.RequestVoteRequest{
		RPCHeader:          d.rpcHeader(),
		Term:               d.u(),
		Candidate:          d.bytes(),
		LastLogIndex:       d.u(),
		LastLogTerm:        d.u(),
		LeadershipTransfer: d.bool1(),
	}
}

func encodeVoteResp(e *tpEnc, r *hraft.RequestVoteResponse) {
	e.rpcHeader(r.RPCHeader)
	e.u(r.Term)
	e.bytes(r.Peers)
	e.bool1(r.Granted)
}

func decodeVoteResp(d *tpDec, r *hraft.RequestVoteResponse) {
	r.RPCHeader = d.rpcHeader()
	r.Term = d.u()
	r.Peers = d.bytes()
	r.Granted = d.bool1()
}

func encodePreVoteReq(group string, a *hraft.RequestPreVoteRequest) *tpEnc {
	e := newTpEnc(tpPreVote, len(group)+40+len(a.ID)+len(a.Addr))
	e.group(group)
	e.rpcHeader(a.RPCHeader)
	e.u(a.Term)
	e.u(a.LastLogIndex)
	e.u(a.LastLogTerm)
	return e
}

func decodePreVoteReq(d *tpDec) *hraft.RequestPreVoteRequest {
	return &hraft.RequestPreVoteRequest{
		RPCHeader:    d.rpcHeader(),
		Term:         d.u(),
		LastLogIndex: d.u(),
		LastLogTerm:  d.u(),
	}
}

func encodePreVoteResp(e *tpEnc, r *hraft.RequestPreVoteResponse) {
	e.rpcHeader(r.RPCHeader)
	e.u(r.Term)
	e.bool1(r.Granted)
}

func decodePreVoteResp(d *tpDec, r *hraft.RequestPreVoteResponse) {
	r.RPCHeader = d.rpcHeader()
	r.Term = d.u()
	r.Granted = d.bool1()
}

func encodeTimeoutNowReq(group string, a *hraft.TimeoutNowRequest) *tpEnc {
	e := newTpEnc(tpTimeoutNow, len(group)+16+len(a.ID)+len(a.Addr))
	e.group(group)
	e.rpcHeader(a.RPCHeader)
	return e
}

// InstallSnapshot.

func encodeSnapshotReq(group string, a *hraft.InstallSnapshotRequest) *tpEnc {
	e := newTpEnc(tpSnapshot, len(group)+80+len(a.ID)+len(a.Addr)+len(a.Leader)+len(a.Peers)+len(a.Configuration))
	e.group(group)
	e.rpcHeader(a.RPCHeader)
	e.i(int64(a.SnapshotVersion))
	e.u(a.Term)
	e.bytes(a.Leader)
	e.u(a.LastLogIndex)
	e.u(a.LastLogTerm)
	e.bytes(a.Peers)
	e.bytes(a.Configuration)
	e.u(a.ConfigurationIndex)
	e.u(uint64(a.Size))
	return e
}

func decodeSnapshotReq(d *tpDec) *hraft.InstallSnapshotRequest {
	a := &hraft.InstallSnapshotRequest{
		RPCHeader:          d.rpcHeader(),
		SnapshotVersion:    hraft.SnapshotVersion(d.i()),
		Term:               d.u(),
		Leader:             d.bytes(),
		LastLogIndex:       d.u(),
		LastLogTerm:        d.u(),
		Peers:              d.bytes(),
		Configuration:      d.bytes(),
		ConfigurationIndex: d.u(),
	}
	size := d.u()
	if size > 1<<62 {
		d.fail("bad snapshot size")
	}
	a.Size = int64(size)
	return a
}

func encodeSnapshotResp(e *tpEnc, r *hraft.InstallSnapshotResponse) {
	e.rpcHeader(r.RPCHeader)
	e.u(r.Term)
	e.bool1(r.Success)
}

func decodeSnapshotResp(d *tpDec, r *hraft.InstallSnapshotResponse) {
	r.RPCHeader = d.rpcHeader()
	r.Term = d.u()
	r.Success = d.bool1()
}

// Heartbeat batches.

// hbEntry is one heartbeat of a batch as decoded.
type hbEntry struct {
	group  []byte
	req    *hraft.AppendEntriesRequest
	notice commitNotice
}

// encodeHeartbeats encodes a batch; with notices, as type 7 with each
// call's notice.
func encodeHeartbeats(calls []*hbCall, notices bool) *tpEnc {
	size := 8
	kind := tpHeartbeats
	if notices {
		kind = tpHeartbeatsCommit
		size += len(calls) * 24
	}
	for _, c := range calls {
		size += len(c.gt.name) + 24 + len(c.req.ID) + len(c.req.Addr) + len(c.req.Leader)
	}
	e := newTpEnc(kind, size)
	e.u(uint64(len(calls)))
	for _, c := range calls {
		e.group(c.gt.name)
		e.rpcHeader(c.req.RPCHeader)
		e.u(c.req.Term)
		e.bytes(c.req.Leader)
		if notices {
			e.u(c.notice.commit)
			if c.notice.commit > 0 {
				e.u(c.notice.prevIndex)
				e.u(c.notice.prevTerm)
			}
		}
	}
	return e
}

// minHeartbeat: group (2), header (3), term, leader length.
const minHeartbeat = 7

func decodeHeartbeats(d *tpDec, notices bool) []hbEntry {
	n := d.count(tpMaxBatch, minHeartbeat)
	if d.err != nil {
		return nil
	}
	out := make([]hbEntry, n)
	reqs := make([]hraft.AppendEntriesRequest, n)
	for i := range out {
		out[i].group = d.group()
		r := &reqs[i]
		r.RPCHeader = d.rpcHeader()
		r.Term = d.u()
		r.Leader = d.bytes()
		out[i].req = r
		if notices {
			nt := &out[i].notice
			if nt.commit = d.u(); nt.commit > 0 {
				nt.prevIndex, nt.prevTerm = d.u(), d.u()
			}
		}
	}
	return out
}

// hbResult is one group's answer in a batch response.
type hbResult struct {
	resp *hraft.AppendEntriesResponse
	err  string
}

func encodeHeartbeatResults(kind byte, id uint32, rs []hbResult) (net.Buffers, int) {
	e := newTpEnc(kind|tpResponse, 9+len(rs)*24)
	binary.BigEndian.PutUint32(e.buf[2:], id)
	e.u(uint64(len(rs)))
	for _, r := range rs {
		if r.resp == nil {
			e.byte1(1)
			msg := r.err
			if len(msg) > 1024 {
				msg = msg[:1024]
			}
			e.str(msg)
			continue
		}
		e.byte1(0)
		encodeAppendResp(e, r.resp)
	}
	e.byte1(tpFeatures)
	bufs, n, err := e.frame()
	if err != nil { // 16384 results of bounded size cannot reach 64 MiB
		return errorFrame(kind, id, err.Error())
	}
	return bufs, n
}

// isHeartbeat is NetworkTransport's test for the fast path, unchanged: a
// request that passes it is answered by processHeartbeat, which only
// checks the term and refreshes contact with the leader.
func isHeartbeat(a *hraft.AppendEntriesRequest) bool {
	leader := a.Addr
	if len(leader) == 0 {
		leader = a.Leader
	}
	return a.Term != 0 && leader != nil && a.PrevLogEntry == 0 && a.PrevLogTerm == 0 &&
		len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}

// responseFrame encodes the response to a request of type typ.
func responseFrame(typ byte, id uint32, resp any) (net.Buffers, int) {
	e := newTpEnc(typ|tpResponse, 48)
	binary.BigEndian.PutUint32(e.buf[2:], id)
	ok := true
	switch r := resp.(type) {
	case *hraft.AppendEntriesResponse:
		ok = typ == tpAppend
		if ok {
			encodeAppendResp(e, r)
		}
	case *hraft.RequestVoteResponse:
		ok = typ == tpVote
		if ok {
			encodeVoteResp(e, r)
		}
	case *hraft.RequestPreVoteResponse:
		ok = typ == tpPreVote
		if ok {
			encodePreVoteResp(e, r)
		}
	case *hraft.TimeoutNowResponse:
		ok = typ == tpTimeoutNow
		if ok {
			e.rpcHeader(r.RPCHeader)
		}
	case *hraft.InstallSnapshotResponse:
		ok = typ == tpSnapshot
		if ok {
			encodeSnapshotResp(e, r)
		}
	default:
		ok = false
	}
	if !ok {
		return errorFrame(typ, id, fmt.Sprintf("raft transport: no %s response from the group", tpTypeName(typ)))
	}
	bufs, n, _ := e.frame()
	return bufs, n
}

// decodeResponse decodes a response body of type typ into resp, which
// must be the matching response type.
func decodeResponse(typ byte, body []byte, resp any) error {
	d := tpDec{b: body}
	switch r := resp.(type) {
	case *hraft.AppendEntriesResponse:
		decodeAppendResp(&d, r)
	case *hraft.RequestVoteResponse:
		decodeVoteResp(&d, r)
	case *hraft.RequestPreVoteResponse:
		decodePreVoteResp(&d, r)
	case *hraft.TimeoutNowResponse:
		r.RPCHeader = d.rpcHeader()
	case *hraft.InstallSnapshotResponse:
		decodeSnapshotResp(&d, r)
	default:
		return fmt.Errorf("raft transport: no decoder for %T", resp)
	}
	return d.end()
}
