// Package walstore is the Raft log and stable store of a node, shared by
// every Raft group on it: one append-only write-ahead log, one writer
// goroutine, one fsync per batch of whatever all groups have queued.
//
// # What it owns
//
// A directory of segment files and, in memory, each group's index: its
// first index, a 12-byte location per entry, and its stable keys (term,
// vote). Store.Group returns a GroupStore, which is a hashicorp/raft
// LogStore, StableStore and MonotonicLogStore for one group. The package
// knows nothing of snapshots (they stay per group, in files) nor of what
// groups are; a group is a name of 1..255 bytes of [A-Za-z0-9._-].
//
// An idle group costs its index and nothing else: no goroutine, file,
// buffer or timer (TestIdleGroupMemory: ~550 bytes with 5 entries and 3
// stable keys). Open file descriptors are one per segment, however many
// groups there are.
//
//	store.go     Open, Close, Stats, groups; errors
//	group.go     GroupStore: the hashicorp/raft interfaces, the index
//	writer.go    the queue, the writer goroutine, group commit, fail-stop
//	record.go    the segment header and record formats (drawn there)
//	segments.go  segment files, naming, reference counts
//	spares.go    files kept or written ahead to become new segments
//	recovery.go  replay on Open, torn-tail truncation
//	reclaim.go   segment deletion and relocation
//	direct.go    the active segment written with O_DIRECT from a ring
//	             that keeps its newest 64 MiB for reads
//	dropcache.go pages reads bring into the page cache, dropped behind
//	handoff.go   a follower's stored entries handed to its apply, unread
//	metrics.go   Prometheus collectors
//
// # On-disk layout
//
//	<dir>/
//	  00000000000000000001.wal   segment 1: header, then records
//	  00000000000000000002.wal   ...
//	  00000000000000000007.wal   the active segment (highest sequence)
//	  00000000000000000003.spare a file kept to become a new segment
//
// Segment sequences are contiguous from the oldest to the active one;
// a segment is rolled once it passes Options.SegmentBytes (so it may
// exceed it by one batch). A new segment is made from a spare when there
// is one (spares.go): an emptied old segment, or a file of zeros written
// ahead in the background, so that its writes overwrite blocks already
// allocated instead of growing the file. Each segment starts with a
// 20-byte header (magic "wRWL", version 2, its sequence, CRC-32C).
// Records follow back to back, each framed by a length and a CRC-32C
// over length and contents, XORed with the segment's sequence so that an
// earlier life's records left past the end of a reused file never pass
// for this one's (version 1 segments, from before reuse, are read
// unsalted), and naming its group:
//
//	+---------+---------+------+------+--------+-----------------------+
//	| len u32 | crc u32 | kind | nlen | group  | payload               |
//	+---------+---------+------+------+--------+-----------------------+
//
// Kinds are an entry (one hraft.Log, every field), a delete-range, a
// stable key's new value, and a group drop. record.go draws each payload.
//
// # Write path and group commit
//
// A caller encodes its records into a pooled buffer, sized once, queues
// the request and blocks. An entry's data of 4 KiB or more is not copied:
// the buffer holds its record's header (length and CRC-32C of the whole
// record) and the writer writes the data from the caller's own slice,
// which stays the caller's until StoreLogs returns. The writer takes
// everything queued (up to 8 MiB), checks each request against its
// group's log as the requests before it leave it (StoreLogs must continue
// the log, DeleteRange must cut a head or a tail), writes the batch's
// buffers with one pwritev (no copy into one) and, if more requests are
// already queued, hands its Sync to a second goroutine (syncLoop); only
// once that Sync returns does it publish the new locations under
// Store.mu and wake the callers. While that Sync runs, the next batch
// queues up and is already written (never synced by it: a batch is
// acknowledged only after a Sync that began once its write returned), so
// under load a batch costs the longer of a write and a Sync, not their
// sum. Batches are as big as the disk is slow, with no timer. When
// nothing is queued behind a batch the writer runs its Sync itself: the
// overlap would gain nothing, and the two hand-offs to syncLoop and back
// cost more CPU than the fsync at moderate rates.
//
// The write itself bypasses the page cache (direct.go): the batch is
// copied into a resident ring at its file offset and the blocks it
// touches are written with O_DIRECT, the block it starts in rewritten
// with the earlier bytes unchanged and the block it ends in padded with
// zeros (cut at replay, and by truncating a segment before the next one
// is created). The ring holds the log's newest 64 MiB (the active
// segment's, and the tail of the one before it after a roll), the bytes
// read back soon (entries a leader sends its followers), which GetLog
// copies from it; older entries are read from the file. Pages that
// such reads bring into the page cache are dropped once 64 MiB behind
// the end (posix_fadvise DONTNEED; dropcache.go).
//
// # Durability
//
// Nothing is visible or acknowledged before its fsync: GetLog, LastIndex
// and Get read only the published index, which the writer changes after
// Sync returns, and callers are woken after that. A new segment's
// directory entry is fsynced before anything in it is acknowledged, and a
// deleted one's removal is fsynced before the next deletion.
//
// A failed write or Sync fails every request of that batch and everything
// queued, and the store refuses all later writes (ErrFailed): after a
// failed fsync the kernel may have dropped the dirty pages, and no later
// fsync could prove them durable. Reads of what was acknowledged go on.
// The store must be reopened; Open cuts whatever torn bytes were left.
//
// Because at most one batch is written ahead of the last Sync, and each
// segment is complete and synced before the next one is created (a roll
// waits for the Sync in flight), only the last segment can end in
// unsynced bytes. Open therefore truncates a torn
// or corrupt tail of the last segment (a record that is short, has an
// implausible length or a bad CRC, and everything after it), and refuses
// to open, naming the file and offset, when any earlier segment is
// damaged: that would be acknowledged data.
//
// # Replay, and why deleting segments keeps it correct
//
// Replay reads the segments in order, once. An entry record sets its
// group's index to its location; a delete-range clears the range; a
// stable record sets its key; a drop clears the group. The result is the
// live index as of the last record. Deleting segments must not change it:
//
//   - A segment is deleted only when none of its records is live (no
//     group's current entry or stable value is located there), and only
//     the oldest segment is ever deleted.
//   - The records in a deleted segment that are not live are entries and
//     stable values since overwritten or deleted, and delete-range and
//     drop records. Replaying a dead entry or value changes nothing, since
//     something later supersedes it. A delete-range or drop only affects
//     records written before it, so in its own or older segments, which
//     (oldest first) are already gone.
//   - A later record never revives a dead one: entries are only ever
//     appended at the end, so a dead location is never pointed at again.
//
// Relocation (below) writes verbatim copies of live records at the tail.
// A copy is newer than every delete-range and drop that preceded it and
// older than those that follow, so replay gives the copy exactly the fate
// the original had. Until the old segment is deleted both are replayed;
// the later copy wins with the same contents. After deletions an idle
// group's entries may come back out of order (old entries copied after
// newer ones), so replay builds each group as sorted runs and requires a
// single run at the end.
//
// # Space reclamation, and the bound on disk
//
// Every segment counts its live bytes. Between batches, and while idle,
// the writer deletes the oldest segment if it has none. Once there are
// more than relocateMinSegments (4) segments, it copies the oldest
// segment's live records to the tail (at most one batch-size chunk per
// step, so commits interleave) when that segment is at most half live, or
// whenever the WAL exceeds twice the live bytes plus four segments; the
// emptied segment is then deleted, or kept as a spare while there are
// fewer than two. So an idle group does not pin old segments, and in
// steady state
//
//	disk <= 2 × live bytes + (4 + 2) × SegmentBytes + 2 spares
//
// (the extra two: the active segment and one batch of overshoot), which
// TestRelocationOfIdleGroup checks. Relocation costs at most the live
// bytes of a segment to free its dead bytes.
//
// # Concurrency and lock order
//
// Store.qmu (queue, closing, failure) and Store.mu (index, segment list,
// sizes) are never held together. The writer goroutine is the only code
// that mutates the index, the segment list and the files; it holds mu for
// writing only to publish, never across I/O. Readers hold mu for reading
// only to find a location and take a reference on the segment
// (segment.refs), then ReadAt without locks; a deleted segment's file is
// closed when its last reader releases it.
package walstore
