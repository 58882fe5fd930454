package raft

import (
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Commit notices. A follower learns the commit index only from an
// AppendEntries that carries it. While entries flow, every append does;
// once they stop, the last entries are committed after the append that
// carried them, and hashicorp/raft tells followers so only with its
// keep-alive, an empty append each follower's replication goroutine sends
// every CommitTimeout. That keep-alive loop, one timer per follower per
// group, was a third of an idle broker's CPU with a thousand partitions,
// while the heartbeats, which the transport batches, cost little.
//
// So the heartbeat batch carries the commit index instead: when a
// heartbeat goes out to a follower whose known commit index is behind the
// leader's applied index, its batch entry gets a notice: the commit index
// and the entry (index, term) up to which the follower's log is known to
// match the leader's. The receiving transport hands the follower's Raft an
// ordinary AppendEntries without entries built from it (through the
// group's Consumer, like any append: hashicorp's heartbeat fast path must
// not move the commit index), and drops the answer. CommitTimeout can then
// be long: its keep-alive's other role, retrying a follower whose append
// failed, the leader takes over (catchup.go).
//
// Why a notice is safe, whatever order it arrives in with the appends:
// its match point comes from an append the follower acknowledged in the
// current leader's term, and during a term the leader's log only grows,
// so a follower holding that entry holds the leader's log up to it (the
// log matching property); the commit index sent is never above the match
// point, so the follower commits only entries the leader committed. A
// follower that does not hold the entry refuses the append and changes
// nothing; one that already knows more ignores it. The progress is
// forgotten when the term changes.
//
// Peers learn that a node takes notices from the answers to its heartbeat
// batches (a trailing features byte that older nodes neither send nor
// read), per connection, so a node never sends a notice to one that would
// take the new frame for a malformed one.

// commitNotice is what a heartbeat batch entry carries besides the
// heartbeat; commit 0 means none.
type commitNotice struct {
	commit, prevIndex, prevTerm uint64
}

// followerMatch is what the leading group knows of one follower.
type followerMatch struct {
	term       uint64 // the leader's term the fields below were learned in
	index      uint64 // the follower's log matches the leader's up to here
	indexTerm  uint64 // the term of the entry at index
	commitSent uint64 // the highest commit index the follower was told
	// lastAck is when the follower last acknowledged an append;
	// caughtUp when such an append reached the leader's applied index;
	// heard when it last answered a heartbeat (catchup.go).
	lastAck, caughtUp, heard time.Time
	// entriesAck is when it last acknowledged an append with entries, and
	// entryRun how many in a row did so each within streamGap of the one
	// before (capped; transport_stream.go).
	entriesAck time.Time
	entryRun   int
}

// commitTracker is a group transport's commit-notice state: the Raft's
// applied index (set once the group's Raft exists) and, while leading,
// each follower's match point.
type commitTracker struct {
	applied atomic.Pointer[func() uint64]
	mu      sync.Mutex
	byPeer  map[string]*followerMatch // by mu
}

// setAppliedSource gives the transport its group's applied index, which
// on a leader is committed and on a follower tells whether a notice would
// teach it anything.
func (gt *groupTransport) setAppliedSource(f func() uint64) { gt.commits.applied.Store(&f) }

func (ct *commitTracker) appliedIndex() (uint64, bool) {
	f := ct.applied.Load()
	if f == nil {
		return 0, false
	}
	return (*f)(), true
}

func (ct *commitTracker) follower(target string, term uint64) *followerMatch {
	if ct.byPeer == nil {
		ct.byPeer = make(map[string]*followerMatch)
	}
	fm := ct.byPeer[target]
	if fm == nil {
		fm = &followerMatch{}
		ct.byPeer[target] = fm
	}
	if fm.term != term {
		*fm = followerMatch{term: term}
	}
	return fm
}

// replicated records an append target acknowledged as a success: its
// log matches up to the append's last entry (or its previous entry, when
// it carried none), and it was told the append's commit index.
func (ct *commitTracker) replicated(target string, a *hraft.AppendEntriesRequest) {
	index, term := a.PrevLogEntry, a.PrevLogTerm
	if n := len(a.Entries); n > 0 {
		index, term = a.Entries[n-1].Index, a.Entries[n-1].Term
	}
	applied, _ := ct.appliedIndex()
	now := time.Now()
	ct.mu.Lock()
	fm := ct.follower(target, a.Term)
	if index > fm.index {
		fm.index, fm.indexTerm = index, term
	}
	fm.commitSent = max(fm.commitSent, a.LeaderCommitIndex)
	fm.lastAck = now
	if len(a.Entries) > 0 {
		fm.countEntries(now)
	}
	if index >= applied {
		fm.caughtUp = now
	}
	ct.mu.Unlock()
}

// progressOf is what was learned of target in term.
func (ct *commitTracker) progressOf(target string, term uint64) (followerMatch, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	fm := ct.byPeer[target]
	if fm == nil || fm.term != term {
		return followerMatch{}, false
	}
	return *fm, true
}

// notice is what a heartbeat of term to target should carry, if anything.
func (ct *commitTracker) notice(target string, term uint64) commitNotice {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	fm := ct.byPeer[target]
	if fm == nil || fm.term != term || fm.index <= fm.commitSent {
		return commitNotice{}
	}
	applied, ok := ct.appliedIndex()
	if !ok {
		return commitNotice{}
	}
	commit := min(applied, fm.index)
	if commit <= fm.commitSent {
		return commitNotice{}
	}
	return commitNotice{commit: commit, prevIndex: fm.index, prevTerm: fm.indexTerm}
}

// told records that target answered the heartbeat that carried n.
func (ct *commitTracker) told(target string, term uint64, n commitNotice) {
	ct.mu.Lock()
	if fm := ct.byPeer[target]; fm != nil && fm.term == term {
		fm.commitSent = max(fm.commitSent, n.commit)
	}
	ct.mu.Unlock()
}

// deliverNotice hands a received notice to the group's Raft as an append
// without entries, unless the group has applied that far already. The
// answer is dropped: the leader learns nothing from it that its own
// appends will not tell it.
func (gt *groupTransport) deliverNotice(hb *hraft.AppendEntriesRequest, n commitNotice) {
	st := &gt.hub.st
	if applied, ok := gt.commits.appliedIndex(); !ok || applied >= n.commit {
		st.noticesIdle.Add(1)
		return
	}
	st.noticesDelivered.Add(1)
	gt.enqueue(inbound{cmd: &hraft.AppendEntriesRequest{
		RPCHeader: hb.RPCHeader, Term: hb.Term, Leader: hb.Leader,
		PrevLogEntry: n.prevIndex, PrevLogTerm: n.prevTerm, LeaderCommitIndex: n.commit,
	}, discard: true})
}

// Features a node announces in the answers to heartbeat batches.
const (
	tpFeatureCommitNotices byte = 0x01
	tpFeatures                  = tpFeatureCommitNotices
)
