package log

import "os"

// writebackChunk is how many bytes of a segment may be written and not
// yet sent to the disk before their writeback is started.
//
// Without it, a segment's bytes stay dirty in the page cache until the
// kernel's flusher takes them (after vm.dirty_expire_centisecs, 30 s by
// default) or a Sync does, and then tens of megabytes go to the disk at
// once. The Raft log's fsyncs, which every produce waits for, queue
// behind that burst: on this project's benchmark machine a 60 MB segment
// fsync held them for 180 ms. Started a megabyte at a time, the same
// bytes reach the disk as a steady stream beside the Raft log's writes,
// and the fsync that makes them durable finds little left to do.
const writebackChunk = 1 << 20

// startWriteback asks the kernel to start writing the segment's whole
// pages written since the last start to the disk, once there are
// writebackChunk of them, without waiting (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE). It is advice: it makes nothing durable (only
// Sync does), and does nothing for a File that is not an *os.File (a
// test's fault-injecting one) or where the call is not wired up.
// The page being appended to is left alone: writing into a page under
// writeback may have to wait for it. A truncation may have cut the file
// below the last start; it then resumes from the cut. The caller holds
// Log.appendMu. pc, when set, is told of the range so that it can drop
// it from the page cache later.
func (s *segment) startWriteback(end int64, pc *PageCache) {
	end &^= int64(os.Getpagesize()) - 1
	from := min(s.writtenBack, end)
	s.writtenBack = from
	if end-from < writebackChunk {
		return
	}
	if f, ok := s.log.(*os.File); ok {
		startWriteback(f, from, end-from)
		if pc != nil {
			pc.written(f, from, end-from)
		}
	}
	s.writtenBack = end
}
