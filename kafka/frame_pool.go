package kafka

import (
	"math/bits"
	"sync"
)

// Request frames are recycled for the APIs whose handlers keep nothing of
// the frame once they return (Produce copies its records into the
// replicated entry, the large ones having been read outside the frame
// already: produce_frame.go; Fetch decodes only numbers and strings, which kmsg
// copies). Producers and tailing consumers send one of these per batch or
// poll, so allocating each frame afresh is most of what a busy
// connection costs the garbage collector. Other APIs' frames may be held
// by what they decode (byte fields are views into the frame), so they are
// left to the collector.

const (
	minFrameShift  = 9
	maxFrameShift  = 23
	minPooledFrame = 1 << minFrameShift // 512 B: a typical fetch request
	maxPooledFrame = 1 << maxFrameShift // 8 MiB: larger frames are rare enough to allocate
)

// framePool hands out frames from power-of-two size classes.
type framePool struct {
	classes [maxFrameShift - minFrameShift + 1]sync.Pool
}

// class is the index of the smallest class holding n bytes, or -1.
func frameClass(n int) int {
	if n > maxPooledFrame {
		return -1
	}
	if n <= minPooledFrame {
		return 0
	}
	return bits.Len(uint(n-1)) - minFrameShift
}

// get returns a frame of length n.
func (p *framePool) get(n int) []byte {
	c := frameClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, minPooledFrame<<c)
}

// put gives back a frame from get; frames of no class are dropped.
func (p *framePool) put(frame []byte) {
	c := frameClass(cap(frame))
	if c < 0 || cap(frame) != minPooledFrame<<c {
		return
	}
	frame = frame[:0]
	p.classes[c].Put(&frame)
}

// recyclableFrame reports whether frame's handler leaves nothing pointing
// into it once it returns.
func recyclableFrame(frame []byte) bool {
	if len(frame) < 2 {
		return false
	}
	switch key := int16(frame[0])<<8 | int16(frame[1]); key {
	case produceKey, fetchKey:
		return true
	}
	return false
}
