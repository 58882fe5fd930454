package log

import "os"

// DropCache tells the kernel that bytes [off, off+n) of f, already
// durable, will not be read again soon, so that their page-cache pages are
// freed now rather than whenever memory runs short; a later read of them
// goes to the disk. It is advice: it reports nothing, and does nothing for
// a File that is not an *os.File (a test's fault-injecting one) or where
// posix_fadvise(2) is not wired up.
//
// What it is for: a file written once and read back only for a short
// while (a write-ahead log). Writing into pages freed this way costs far
// less than into pages the kernel must first find and map (see the Raft
// log's doc for the figures), and the log no longer pushes other files'
// pages (the partitions' segments, which consumers read) out of the cache.
func DropCache(f File, off, n int64) {
	if osf, ok := f.(*os.File); ok && n > 0 {
		dropCache(osf, off, n)
	}
}
