package main

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// --buffer-memory is Kafka's consumer buffer.memory idea (KIP-81) built
// from franz-go's own bound: kgo holds at most MaxConcurrentFetches fetch
// responses (in flight, or buffered until polled), each of at most
// FetchMaxBytes, so their product bounds what a consumer buffers. kgo's
// MaxBufferedBytes does not apply to consuming.
const (
	// bufferMemoryFetches is the fixed number of concurrent fetches: two
	// keep one response buffered for printing while the next is fetched;
	// one would stall every fetch on the terminal.
	bufferMemoryFetches = 2

	// minBufferMemory is the smallest bound accepted: a 32 KiB fetch still
	// holds a few typical record batches; below that nearly every batch
	// would exceed its share and be fetched whole regardless.
	minBufferMemory = 64 << 10

	// maxBufferMemory keeps FetchMaxBytes (buffer/2) and the response
	// read limit sized from it well inside kgo's 1 GiB read ceiling.
	maxBufferMemory = 1 << 30

	// kgoPartitionMaxBytes and kgoBrokerMaxReadBytes are kgo's defaults
	// for FetchMaxPartitionBytes and BrokerMaxReadBytes.
	kgoPartitionMaxBytes  = 1 << 20
	kgoBrokerMaxReadBytes = 100 << 20

	// fetchReadHeadroom is how much larger than FetchMaxBytes a response
	// may be: a broker still returns a batch larger than the limit.
	fetchReadHeadroom = 16 << 20
)

// bufferMemoryHelp is the flag's help: what the bound is made of, and
// what it does not cover.
const bufferMemoryHelp = "bound on fetched data held at once, in `BYTES` (plain, or with KiB, MiB, GiB):\n" +
	"2 concurrent fetches (kgo MaxConcurrentFetches: requests in flight or buffered\n" +
	"until printed) of at most BYTES/2 each (FetchMaxBytes), and at most\n" +
	"min(1MiB, BYTES/2) per partition per fetch (FetchMaxPartitionBytes). A record\n" +
	"batch larger than these is still fetched whole, and the bound is on fetched\n" +
	"(possibly compressed) bytes, not decompressed records. 64KiB to 1GiB;\n" +
	"0 or unset: franz-go's default, one fetch of up to 50MiB per broker"

// fetchMemoryLimits are the kgo settings --buffer-memory maps to.
type fetchMemoryLimits struct {
	ConcurrentFetches int   // kgo.MaxConcurrentFetches
	FetchMaxBytes     int32 // kgo.FetchMaxBytes
	PartitionMaxBytes int32 // kgo.FetchMaxPartitionBytes
	// BrokerMaxReadBytes only grows past kgo's default when a fetch
	// response may exceed it, which kgo refuses at client creation.
	BrokerMaxReadBytes int32
}

// limitsForBufferMemory splits a bound of buffer bytes over the fixed
// number of fetches, so ConcurrentFetches × FetchMaxBytes <= buffer.
func limitsForBufferMemory(buffer int64) (fetchMemoryLimits, error) {
	if buffer < minBufferMemory || buffer > maxBufferMemory {
		return fetchMemoryLimits{}, fmt.Errorf("--buffer-memory must be 0 (franz-go's default) or from %s to %s (it is split over %d concurrent fetches), got %d bytes",
			formatByteSize(minBufferMemory), formatByteSize(maxBufferMemory), bufferMemoryFetches, buffer)
	}
	perFetch := int32(buffer / bufferMemoryFetches)
	return fetchMemoryLimits{
		ConcurrentFetches:  bufferMemoryFetches,
		FetchMaxBytes:      perFetch,
		PartitionMaxBytes:  min(perFetch, kgoPartitionMaxBytes),
		BrokerMaxReadBytes: max(kgoBrokerMaxReadBytes, perFetch+fetchReadHeadroom),
	}, nil
}

func (l fetchMemoryLimits) opts() []kgo.Opt {
	return []kgo.Opt{
		kgo.MaxConcurrentFetches(l.ConcurrentFetches),
		kgo.FetchMaxBytes(l.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(l.PartitionMaxBytes),
		kgo.BrokerMaxReadBytes(l.BrokerMaxReadBytes),
	}
}

// bufferMemoryOpts turns the --buffer-memory value into client options:
// none for "" or 0, so consume without the flag is what it always was.
func bufferMemoryOpts(flag string) ([]kgo.Opt, error) {
	if flag == "" {
		return nil, nil
	}
	n, err := parseByteSize(flag)
	if err != nil {
		return nil, fmt.Errorf("--buffer-memory: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	l, err := limitsForBufferMemory(n)
	if err != nil {
		return nil, err
	}
	return l.opts(), nil
}
