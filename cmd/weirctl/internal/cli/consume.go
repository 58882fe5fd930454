package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ParseOffset reads --offset: start and end in any of the spellings
// Kafka tools use, or an exact offset.
func ParseOffset(s string) (kgo.Offset, error) {
	switch strings.ToLower(s) {
	case "start", "oldest", "beginning", "earliest":
		return kgo.NewOffset().AtStart(), nil
	case "end", "newest", "latest":
		return kgo.NewOffset().AtEnd(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return kgo.NewOffset(), fmt.Errorf("--offset must be start, end, or a non-negative offset; got %q", s)
	}
	return kgo.NewOffset().At(n), nil
}

// TopicPartitions returns the partition numbers of topic, or the Kafka error
// that prevented loading it.
func TopicPartitions(ctx context.Context, g *Options, cl *kgo.Client, topic string) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return nil, g.DescribeCallErr("loading metadata for "+topic, err)
	}
	d, ok := details[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s: broker returned no metadata for it", topic)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("topic %s: %s", topic, StatusCell(d.Err, ""))
	}
	return d.Partitions.Numbers(), nil
}

// FirstFetchError ignores context errors, which only mean we are shutting
// down, and names the partition for real ones since fetch errors are
// per-partition.
func FirstFetchError(fetches kgo.Fetches) error {
	var first error
	fetches.EachError(func(topic string, partition int32, err error) {
		if first != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if topic == "" {
			// franz-go reports group-level failures without a partition.
			first = fmt.Errorf("consumer group: %s", StatusCell(err, ""))
			return
		}
		first = fmt.Errorf("fetching %s/%d: %s", topic, partition, StatusCell(err, ""))
	})
	return first
}
