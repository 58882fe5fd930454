package raft

import "time"

// Pipelines only for followers that entries stream to. hashicorp/raft
// replicates to a follower with one goroutine sending an AppendEntries and
// waiting for its answer, and, once one succeeds, switches to a pipeline:
// the same goroutine sends and a second one (pipelineDecode) waits for the
// answers, for as long as nothing fails. A pipeline is worth its goroutine
// while entries flow; an idle group's pipelines only park, two goroutines
// and a pipeline per follower where one would do, which at a thousand
// partitions is about a sixth of a broker's goroutines and their stacks.
//
// So the transport offers a pipeline (AppendEntriesPipeline) only to a
// follower that has acknowledged at least streamRun appends with entries
// in a row, each within streamGap of the one before and the last within
// streamGap of now; otherwise it answers ErrPipelineReplicationNotSupported,
// which hashicorp takes without complaint and replicates one append at a
// time, asking again after its next success. A new group's first entries
// therefore do not open pipelines that then sit idle; a partition under
// produce load gets its pipeline after its second append.
//
// And an open pipeline ends once its follower's entries stop: the first
// append without entries it carries (hashicorp's keep-alive, every
// CommitTimeout) that is answered while the follower is no longer
// streaming is handed to Raft as unsuccessful. hashicorp then closes the
// pipeline and goes back to single appends, resending from the last entry
// the follower acknowledged, which it holds already. Nothing else reads
// that answer: an append without entries moves no match index, and the
// follower did process it (it is the leader's view alone that changes), so
// its contact time, which hashicorp records before looking at Success, is
// still true.

const (
	// streamGap is the longest pause between acknowledged appends with
	// entries that still counts as a stream.
	streamGap = time.Second
	// streamRun is how many such appends make a stream.
	streamRun = 2
)

// countEntries records an acknowledged append with entries at now; the
// tracker's mu is held.
func (fm *followerMatch) countEntries(now time.Time) {
	if now.Sub(fm.entriesAck) > streamGap {
		fm.entryRun = 0
	}
	fm.entryRun = min(fm.entryRun+1, streamRun)
	fm.entriesAck = now
}

// streaming says whether entries stream to target: whether a pipeline to
// it is worth its goroutine.
func (ct *commitTracker) streaming(target string, now time.Time) bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	fm := ct.byPeer[target]
	return fm != nil && fm.entryRun >= streamRun && now.Sub(fm.entriesAck) <= streamGap
}
