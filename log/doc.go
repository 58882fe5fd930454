// Package log is weir's partition log: an append-only sequence of Kafka
// RecordBatch v2 batches split into segment files, with sparse indexes,
// crash recovery, retention and DeleteRecords.
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
// point (framing, CRC, offsets continuing without a gap) and truncates at
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
//
// Segments leave the log by being renamed to *.deleted (unlinked when the
// last reader releases them; Open removes leftovers), so a base offset can
// be reused at once and a stale file is never taken for a live segment.
//
// # Concurrency and lock order
//
//	Log.appendMu  ->  Log.mu
//
// appendMu serializes all mutations (Append, AppendReplicated, roll,
// retention, DeleteRecordsBefore, TruncateTo, Reset, Sync, Close) and is
// held across file I/O. mu is an
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
// a deleted segment reports ErrOffsetOutOfRange.
//
// TruncateTo and Reset are the only operations that change or drop bytes a
// reader may have pinned. They bump the segment's generation under mu
// before touching the file; a reader compares it after its I/O and starts
// over (Read, timestamp lookups) or fails with ErrOffsetOutOfRange
// (Batches, which has already called back), so no reader returns a mix of
// discarded and new bytes.
package log
