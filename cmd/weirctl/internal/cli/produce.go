package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProducerOpts is shared by produce and the benchmarks so that both
// measure the same client configuration for the same flags.
func (g *Options) ProducerOpts(codec kgo.CompressionCodec, acks kgo.Acks) []kgo.Opt {
	// franz-go refuses record timeouts under a second; a shorter --timeout
	// still bounds the request itself.
	recordTimeout := max(g.Timeout, time.Second)
	opts := []kgo.Opt{
		kgo.ProducerBatchCompression(codec),
		kgo.RequiredAcks(acks),
		kgo.RecordDeliveryTimeout(recordTimeout),
		kgo.ProduceRequestTimeout(max(g.Timeout, 100*time.Millisecond)),
	}
	// Idempotence requires acks=all; franz-go rejects the combination
	// otherwise, so weaker acks imply plain (non-idempotent) writes.
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts
}

// ParseCompression reads --compression.
func ParseCompression(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("--compression must be one of none, gzip, snappy, lz4, zstd; got %q", s)
}

// ParseAcks reads --acks, in Kafka's numbers or by name.
func ParseAcks(s string) (kgo.Acks, error) {
	switch strings.ToLower(s) {
	case "-1", "all":
		return kgo.AllISRAcks(), nil
	case "1", "leader":
		return kgo.LeaderAck(), nil
	case "0", "none":
		return kgo.NoAck(), nil
	}
	return kgo.AllISRAcks(), fmt.Errorf("--acks must be -1 (all), 1 or 0; got %q", s)
}
