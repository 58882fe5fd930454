package walstore

import (
	"os"

	"github.com/weir-broker/weir/log"
)

// cacheWindow is how many of the WAL's newest bytes may stay cached: the
// ring (direct.go) holds as many, which is what is read back soon
// (entries a leader sends its followers). The WAL's writes never enter
// the page cache; its reads do (a follower far behind, relocation, the
// head of a block before the first write to a segment), and everything
// they brought in more than cacheWindow behind the end is dropped after
// each fsync (log.DropCache), so that a WAL which every produced byte
// goes through never pushes the partitions' segments, which consumers
// read, out of the cache.
const cacheWindow = 64 << 20

// dropChunk is the least worth an fadvise call.
const dropChunk = 1 << 20

// cachedRange is the part of a segment, from `from` to `end` (where its
// last synced write ended), whose pages may still be cached.
type cachedRange struct {
	sg        *segment
	from, end int64
}

// track runs in the writer once a write ending at end in sg was synced,
// before anything in it is published: it takes its own reference to each
// segment it tracks while the segment is certainly still open (only the
// writer retires segments), so a segment deleted later keeps its file
// (and its descriptor its number) until dropBehind is done with it.
func (s *Store) track(sg *segment, end int64) {
	if n := len(s.cached); n == 0 || s.cached[n-1].sg != sg {
		sg.acquire()
		s.cached = append(s.cached, cachedRange{sg: sg})
	}
	s.cached[len(s.cached)-1].end = end
}

// dropBehind runs in the writer once a batch's callers were answered: every synced
// byte more than cacheWindow behind the last tracked end, in that segment
// or in the ones before it, leaves the page cache.
func (s *Store) dropBehind() {
	keep := int64(cacheWindow)
	for i := len(s.cached) - 1; i >= 0; i-- {
		c := &s.cached[i]
		to := max(c.end-keep, 0)
		keep = max(keep-c.end, 0)
		whole := i < len(s.cached)-1 && to == c.end
		if to-c.from >= dropChunk || (whole && to > c.from) {
			// The kernel keeps a page the range covers only in part, so
			// each range starts on the page where the last one ended.
			from := c.from &^ (int64(os.Getpagesize()) - 1)
			log.DropCache(c.sg.f, from, to-from)
			c.from = to
		}
	}
	n := 0
	for n < len(s.cached)-1 && s.cached[n].from >= s.cached[n].end {
		s.cached[n].sg.release()
		n++
	}
	if n > 0 {
		rest := copy(s.cached, s.cached[n:])
		clear(s.cached[rest:])
		s.cached = s.cached[:rest]
	}
}

// forgetCached releases the tracked segments' references when the writer
// exits.
func (s *Store) forgetCached() {
	for _, c := range s.cached {
		c.sg.release()
	}
	s.cached = nil
}
