//go:build !linux

package walstore

// oDirect is 0 where the platform has no O_DIRECT: the ring's aligned
// writes go through the page cache.
const oDirect = 0

func allocRing(n int) []byte { return alignedSlice(n) }

func freeRing([]byte) {}
