package walstore

import (
	"golang.org/x/sys/unix"
)

// oDirect is the open flag for writes that bypass the page cache.
const oDirect = unix.O_DIRECT

// allocRing maps n bytes outside the Go heap: page-aligned, as O_DIRECT
// needs, faulted in only as they are first written, and never zeroed
// again by a later allocation that reuses them.
func allocRing(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return alignedSlice(n)
	}
	return b
}

// freeRing unmaps what allocRing mapped; a heap slice from alignedSlice
// is not a mapping (Munmap refuses it) and is left to the GC.
func freeRing(b []byte) { _ = unix.Munmap(b) }
