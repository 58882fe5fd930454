// Package log is weir's partition log: an append-only sequence of Kafka
// RecordBatch v2 batches split into segment files, with sparse indexes,
// crash recovery, retention, DeleteRecords and compaction.
//
// # What it owns
//
// One Log per partition directory. The package assigns offsets, stamps the
// leader epoch and LogAppendTime into batches, stores batches byte for byte
// as consumers will receive them, and serves reads of whole batches. It
// knows nothing about replication protocols, high watermarks (callers pass
// upTo), producer state or transactions beyond exposing batch headers
// (Batches). It offers the primitives a replicated partition needs:
// AppendReplicated stores batches that already carry their offsets (copied
// from another replica) unchanged, TruncateTo drops a tail back to a batch
// boundary, and Reset discards everything and restarts at any offset.
//
// Clean compacts the closed segments below a caller-given bound (Kafka's
// log cleaner; clean.go has the full semantics): for each key only its
// latest record survives, at its original offset; tombstones go after
// DeleteRetention; keyless records, control batches and each producer's
// last batch (emptied if need be) stay; the log start offset never moves.
// Whether to clean (min.cleanable.dirty.ratio) is the caller's decision,
// made from Cleanable. A cleaned log has holes in its offsets: inside
// batches (fewer records than the offset range), between batches and
// between segments. A Read at an offset in a hole starts at the next
// surviving batch.
//
// # On-disk layout
//
//	<partition dir>/
//	  00000000000000000000.log        batches, base offset 0 upwards
//	  00000000000000000000.index      sparse offset -> position (cache)
//	  00000000000000000000.timeindex  sparse max timestamp -> offset (cache)
//	  00000000000000001234.log        next segment, first offset 1234
//	  ...
//	  recovery-point                  "0\n<offset>\n": fsynced up to here
//	  log-start-offset                "0\n<offset>\n": DeleteRecords/retention/Reset
//	  reset-to                        "0\n<offset>\n": only during Reset
//	  cleaner-checkpoint              "0\n<offset>\n": first dirty offset
//	  clean-swap                      only during a clean's swap (clean.go)
//	  *.cleaned                       a clean's new segments before the swap
//	  *.deleted                       segments that left the log, still read
//
// A .log file is a plain concatenation of RecordBatch v2 (see batch.go for
// the 61-byte header drawing); no framing is added, so a read is a single
// byte-range copy. Index formats are drawn in index.go and timeindex.go;
// both carry a magic and a version byte and are rebuilt from the .log when
// missing or insane. Checkpoint formats are described in recovery.go.
//
// # Durability
//
// Append writes with WriteAt and does not fsync; Sync (and Close, and every
// roll for the sealed segment) fsyncs and then advances recovery-point. Open
// validates every batch in segments that may extend past the recovery
// point (framing, CRC, offsets continuing without a gap, except below the
// cleaner checkpoint, where the cleaner left holes) and truncates at
// the first torn or corrupt batch, dropping the later segments that then no
// longer continue the offsets, so a crash never leaves a partial batch
// readable. Segments wholly below the recovery point are trusted, as in
// Kafka: Open reads only their index files, whose entries carry CRCs, and
// the batches after the last offset index entry. An fsync failure is
// sticky (ErrLogFailed): the page cache can no longer be trusted and the
// log must be reopened.
//
// Every multi-step change orders its disk writes around one commit point,
// so that Open after a crash at any moment finds the old or the new log:
//
//   - DeleteRecordsBefore/retention persist log-start-offset first; Open
//     deletes files below it.
//   - TruncateTo commits with the fsynced truncation of the segment holding
//     the new end (or, at a segment base, the durable rename of the segment
//     starting there); Open drops later segments because they no longer
//     continue the log. It fsyncs before returning, so truncated batches
//     never come back.
//   - Reset commits with the reset-to file; Open finishes an interrupted
//     reset. The file goes only after the new segment and the checkpoints
//     are durable.
//   - A clean pass writes its new segments as *.cleaned and fsyncs them,
//     then commits with the clean-swap file (old and new base offsets,
//     new cleaner checkpoint); it then renames the old segments to
//     *.deleted and the new ones into place, writes cleaner-checkpoint
//     and removes clean-swap. Open finishes a swap whose clean-swap it
//     finds and otherwise removes *.cleaned files.
//   - TruncateTo and Reset lower cleaner-checkpoint to their new end or
//     start before their own commit, so that Open never accepts a hole
//     where the log will be written again.
//
// Segments leave the log by being renamed to *.deleted (unlinked when the
// last reader releases them; Open removes leftovers), so a base offset can
// be reused at once and a stale file is never taken for a live segment.
//
// # Concurrency and lock order
//
//	Log.cleanMu  ->  Log.appendMu  ->  Log.mu
//
// cleanMu makes Cleans one at a time; a clean reads and writes segments
// holding only references to them, and takes appendMu just for its swap,
// which gives up (ErrCleanAborted) if TruncateTo, Reset or retention
// changed the segments it cleaned meanwhile. Appends go on during a
// clean: it never touches the active segment.
//
// appendMu serializes all mutations (Append, AppendReplicated, roll,
// retention, DeleteRecordsBefore, TruncateTo, Reset, Sync, Close, a
// clean's swap) and is held across file I/O. mu is an
// RWMutex over the segment list, offsets, sizes and each segment's
// published fields (size, end offset, index entries); it is held only for
// in-memory work, never across I/O, and never while acquiring appendMu.
// An append writes the bytes first and publishes the new size and end
// offset under mu afterwards, so readers never see a half-written batch.
//
// Readers resolve their segment under mu.RLock, take a reference
// (segment.refs) and do their I/O without locks. Deleting a segment removes
// it from the list and drops the log's own reference; the files are closed
// and unlinked when the last reader releases it. A read that still fails on
// a deleted segment reports ErrOffsetOutOfRange. A clean's swap deletes the
// old segments the same way: a reader that pinned one returns its
// uncleaned batches, which hold every record the cleaned ones do.
//
// TruncateTo and Reset are the only operations that change or drop bytes a
// reader may have pinned. They bump the segment's generation under mu
// before touching the file; a reader compares it after its I/O and starts
// over (Read, timestamp lookups) or fails with ErrOffsetOutOfRange
// (Batches, which has already called back), so no reader returns a mix of
// discarded and new bytes.
package log
