package raft

import (
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"
)

// A request may reach a node before the group it is for has started
// there: a new topic's replicas open on every broker at about the same
// time, and a new group's preferred leader campaigns as soon as it has
// bootstrapped (Group.Campaign). Answering "not running" at once would
// lose that election and cost the group an election timeout, seconds. So
// a request for a group this node does not run waits up to tpEarlyWait
// for the group to start, then is answered as before. Heartbeats are not
// held: a batch is answered for all its groups together and leaders'
// leases hang on it. A deleted group's requests are answered late, which
// only slows the retries of a leader that is itself being deleted.
const (
	tpEarlyWait = 2 * time.Second
	// tpEarlyMax bounds the requests held for groups not started yet,
	// over all groups; beyond it they are answered at once.
	tpEarlyMax = 4096
)

type earlyRPC struct {
	in       inbound
	group    string
	deadline time.Time
}

// holdEarly keeps in for group until the group starts or tpEarlyWait
// passes; false means it was not held (too many are) and the caller
// answers it.
func (h *transportHub) holdEarly(group string, in inbound) bool {
	h.emu.Lock()
	if gt := h.lookup([]byte(group)); gt != nil {
		// Started since the caller looked: registration releases held
		// requests under emu, so anything not queued by now would wait.
		h.emu.Unlock()
		gt.enqueue(in)
		return true
	}
	if h.earlyN >= tpEarlyMax || h.isClosed() {
		h.emu.Unlock()
		return false
	}
	if h.early == nil {
		h.early = make(map[string][]earlyRPC)
	}
	h.early[group] = append(h.early[group], earlyRPC{in: in, group: group, deadline: time.Now().Add(tpEarlyWait)})
	h.earlyN++
	if h.earlyTimer == nil {
		h.earlyTimer = time.AfterFunc(tpEarlyWait, h.expireEarly)
	}
	h.emu.Unlock()
	return true
}

// releaseEarly hands gt the requests that arrived before it started, in
// the order they came.
func (h *transportHub) releaseEarly(gt *groupTransport) {
	h.emu.Lock()
	held := h.early[gt.name]
	delete(h.early, gt.name)
	h.earlyN -= len(held)
	h.emu.Unlock()
	for _, e := range held {
		gt.enqueue(e.in)
	}
}

// expireEarly answers the held requests whose wait is over, and runs
// again for the next one to expire while any are left.
func (h *transportHub) expireEarly() {
	now := time.Now()
	closed := h.isClosed()
	var expired []earlyRPC
	h.emu.Lock()
	next := time.Duration(0)
	for group, held := range h.early {
		keep := held[:0]
		for _, e := range held {
			if closed || !now.Before(e.deadline) {
				expired = append(expired, e)
				continue
			}
			keep = append(keep, e)
			if d := e.deadline.Sub(now); next == 0 || d < next {
				next = d
			}
		}
		if len(keep) == 0 {
			delete(h.early, group)
		} else {
			h.early[group] = keep
		}
	}
	h.earlyN -= len(expired)
	if next > 0 {
		h.earlyTimer.Reset(next)
	} else {
		h.earlyTimer = nil
	}
	h.emu.Unlock()
	for _, e := range expired {
		e.in.reply(hraft.RPCResponse{Error: fmt.Errorf("raft transport: group %s is not running on %s", e.group, h.m.Addr())})
	}
}
