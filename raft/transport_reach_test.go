package raft

import (
	"testing"
	"time"
)

// A member whose process is gone (its listener closed) is reported as
// refusing connections once the group's traffic tried to reach it; one
// that is up, or that this node never talked to, is not.
func TestPeerRefusedWhenProcessGone(t *testing.T) {
	nodes := newTpNodes(t, 2)
	ms := startTpGroup(t, nodes, "reach", nil)
	waitTpLeader(t, ms, 10*time.Second)
	up, gone := nodes[0], nodes[1]
	if up.mux.PeerRefused(gone.member()) || up.mux.PeerRefused(gone.mux.Addr()) {
		t.Fatal("a live member is reported refusing connections")
	}
	if up.mux.PeerRefused("127.0.0.1:1#nobody") {
		t.Fatal("a member never contacted is reported refusing connections")
	}
	ms[1].shutdown()
	if err := gone.mux.Close(); err != nil {
		t.Fatal(err)
	}
	// The surviving member's heartbeats or elections dial the gone one.
	// Group.Leader gives the mux address, the transport's peers are
	// member addresses: either finds it.
	waitFor(t, 15*time.Second, "the gone member refusing connections", func() bool {
		return up.mux.PeerRefused(gone.member()) && up.mux.PeerRefused(gone.mux.Addr())
	})
}
