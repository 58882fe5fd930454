package raft

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	hraft "github.com/hashicorp/raft"
)

// The receiving side: a serverConn reads requests and hands each to its
// group without ever waiting on one: heartbeats go to the groups'
// heartbeat handlers on a goroutine per batch (transport_heartbeat.go),
// everything else to a per-group queue drained into the group's Consumer.
//
// hashicorp/raft reads Consumer() from its main loop, which may be busy
// (disk, FSM). A group's queue is bounded by tpInboundQueue (more are
// answered with an error, which Raft treats as any failed RPC), and the
// goroutine draining it exists only while it is non-empty: an idle group
// has neither goroutine nor buffer. The drain goroutine also waits for
// each answer (Raft answers synchronously in its main loop) and queues it
// on the connection it came from, so no goroutine waits per RPC.

type serverConn struct {
	*tconn
}

func newServerConn(h *transportHub, c net.Conn) *serverConn {
	t, ok := h.newTconn(c, true)
	if !ok {
		return nil
	}
	sc := &serverConn{t}
	go sc.readLoop()
	return sc
}

func (sc *serverConn) readLoop() {
	defer sc.h.wg.Done()
	br := bufio.NewReaderSize(sc.c, 64<<10)
	for {
		fh, err := readTpHeader(br, false)
		var body []byte
		if err == nil {
			body, err = readTpBody(br, fh.n)
		}
		if err == nil {
			sc.h.st.framesRecv.Add(1)
			sc.h.st.bytesRecv.Add(uint64(tpFrameHeader + fh.n))
			if fh.kind == tpSnapshot {
				err = sc.receiveSnapshot(fh.id, body, br)
			} else {
				err = sc.dispatch(fh.kind, fh.id, body)
			}
		}
		if err != nil {
			if errors.Is(err, errBadTpFrame) {
				sc.h.st.badFrames.Add(1)
				sc.h.countError(tpErrBadFrame)
				sc.h.log.Warn("raft transport closing connection", "remote", sc.c.RemoteAddr().String(), "err", err)
			}
			sc.close(err)
			return
		}
	}
}

func (sc *serverConn) respondError(typ byte, id uint32, msg string) {
	sc.enqueue(errorFrame(typ, id, msg))
}

func (sc *serverConn) notRunning(group []byte) string {
	return fmt.Sprintf("raft transport: group %s is not running on %s", group, sc.h.m.Addr())
}

// dispatch decodes one request; an error means the frame was malformed.
func (sc *serverConn) dispatch(typ byte, id uint32, body []byte) error {
	d := tpDec{b: body}
	if typ == tpHeartbeats || typ == tpHeartbeatsCommit {
		entries := decodeHeartbeats(&d, typ == tpHeartbeatsCommit)
		if err := d.end(); err != nil {
			return err
		}
		sc.h.serveHeartbeats(sc, id, typ, entries)
		return nil
	}
	group := d.group()
	var cmd any
	switch typ {
	case tpAppend:
		cmd = decodeAppendReq(&d)
	case tpVote:
		cmd = decodeVoteReq(&d)
	case tpPreVote:
		cmd = decodePreVoteReq(&d)
	case tpTimeoutNow:
		cmd = &hraft.TimeoutNowRequest{RPCHeader: d.rpcHeader()}
	default:
		d.fail("unknown request type")
	}
	if err := d.end(); err != nil {
		return err
	}
	gt := sc.h.lookup(group)
	if gt == nil {
		if !sc.h.holdEarly(string(group), inbound{cmd: cmd, sc: sc, id: id, typ: typ}) {
			sc.respondError(typ, id, sc.notRunning(group))
		}
		return nil
	}
	if a, ok := cmd.(*hraft.AppendEntriesRequest); ok && isHeartbeat(a) {
		// Not sent this way by this transport (heartbeats are batched),
		// but answered the same way if it is.
		if fn := gt.heartbeatHandler(); fn != nil {
			b := newHeartbeatBatch(sc, id, typ, 1)
			b.single = true
			sc.h.wg.Add(1)
			go gt.runHeartbeat(fn, a, b, 0)
			return nil
		}
	}
	in := inbound{cmd: cmd, sc: sc, id: id, typ: typ}
	if a, ok := cmd.(*hraft.AppendEntriesRequest); ok {
		// The sender let it wait for company; its answer can wait too.
		in.wait = gt.appendWait(a)
	}
	gt.enqueue(in)
	return nil
}

// inbound is one request waiting for its group's Consumer, and where its
// answer goes: a connection (sc, id, typ), a heartbeat batch slot, or
// nowhere (a commit notice).
type inbound struct {
	cmd     any
	sc      *serverConn
	id      uint32
	typ     byte
	batch   *hbBatchIn
	idx     int
	wait    time.Duration // how long the answer may wait for company (tconn.queue)
	discard bool          // nobody waits for the answer
}

func (in *inbound) reply(r hraft.RPCResponse) {
	if in.discard {
		return
	}
	if in.batch != nil {
		in.batch.set(in.idx, r)
		return
	}
	var frame net.Buffers
	var n int
	if r.Error != nil {
		frame, n = errorFrame(in.typ, in.id, r.Error.Error())
	} else {
		frame, n = responseFrame(in.typ, in.id, r.Response)
	}
	in.sc.queue(frame, n, in.wait)
}

func (gt *groupTransport) enqueue(in inbound) {
	gt.inMu.Lock()
	if gt.isClosed {
		gt.inMu.Unlock()
		in.reply(hraft.RPCResponse{Error: fmt.Errorf("%w: %s", errTpGroupClosed, gt.name)})
		return
	}
	if len(gt.inQ) >= tpInboundQueue {
		gt.inMu.Unlock()
		gt.hub.countError(tpErrQueueFull)
		in.reply(hraft.RPCResponse{Error: fmt.Errorf("raft transport: group %s has %d requests queued", gt.name, tpInboundQueue)})
		return
	}
	gt.inQ = append(gt.inQ, in)
	start := !gt.draining
	gt.draining = true
	gt.inMu.Unlock()
	if start {
		// Started from a connection's reader, which the hub's wait
		// group counts, so Add cannot race the hub's Wait.
		gt.hub.wg.Add(1)
		go gt.drain()
	}
}

// drain hands queued requests to Raft one at a time, waits for each
// answer, and exits when the queue is empty.
func (gt *groupTransport) drain() {
	h := gt.hub
	defer h.wg.Done()
	respCh := make(chan hraft.RPCResponse, 1)
	for {
		gt.inMu.Lock()
		if len(gt.inQ) == 0 {
			gt.inQ = nil
			gt.draining = false
			gt.inMu.Unlock()
			return
		}
		in := gt.inQ[0]
		gt.inQ[0] = inbound{}
		gt.inQ = gt.inQ[1:]
		gt.inMu.Unlock()

		closedErr := hraft.RPCResponse{Error: fmt.Errorf("%w: %s", errTpGroupClosed, gt.name)}
		select {
		case gt.consumeCh <- hraft.RPC{Command: in.cmd, RespChan: respCh}:
		case <-gt.closed:
			in.reply(closedErr)
			continue
		case <-h.done:
			in.reply(closedErr)
			continue
		}
		select {
		case r := <-respCh:
			in.reply(r)
		case <-gt.closed:
			in.reply(closedErr)
			respCh = make(chan hraft.RPCResponse, 1) // Raft may still answer into the old one
		case <-h.done:
			in.reply(closedErr)
			respCh = make(chan hraft.RPCResponse, 1)
		}
	}
}

// receiveSnapshot serves an InstallSnapshot: the snapshot follows the
// frame on the connection, which carries nothing else, so this reader
// may wait for Raft.
func (sc *serverConn) receiveSnapshot(id uint32, body []byte, br *bufio.Reader) error {
	d := tpDec{b: body}
	group := d.group()
	req := decodeSnapshotReq(&d)
	if err := d.end(); err != nil {
		return err
	}
	data := &io.LimitedReader{R: br, N: req.Size}
	defer func() { sc.h.st.bytesRecv.Add(uint64(req.Size - data.N)) }()
	gt := sc.h.lookup(group)
	if gt == nil {
		if _, err := io.Copy(io.Discard, data); err != nil {
			return err
		}
		sc.respondError(tpSnapshot, id, sc.notRunning(group))
		return nil
	}
	respCh := make(chan hraft.RPCResponse, 1)
	select {
	case gt.consumeCh <- hraft.RPC{Command: req, Reader: data, RespChan: respCh}:
	case <-gt.closed:
		return errTpGroupClosed
	case <-sc.closed:
		return errTpConnClosed
	}
	var r hraft.RPCResponse
	select {
	case r = <-respCh:
	case <-gt.closed:
		return errTpGroupClosed
	case <-sc.closed:
		return errTpConnClosed
	}
	// Raft reads the whole snapshot even when it refuses it; if not, the
	// rest must still go before the answer can.
	if data.N > 0 {
		if _, err := io.Copy(io.Discard, data); err != nil {
			return err
		}
	}
	(&inbound{sc: sc, id: id, typ: tpSnapshot}).reply(r)
	return nil
}
