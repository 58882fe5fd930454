package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// EnsureTopic creates the topic only when asked to, because silently
// benchmarking against an auto-created one-partition topic measures the
// wrong thing. An existing topic is used as it is; a shape other than the
// one asked for is pointed out, since it changes what is measured.
func EnsureTopic(ctx context.Context, g *cli.Options, cl *kgo.Client, errOut io.Writer, topic string, partitions int32, replicas int16) error {
	if partitions == 0 {
		_, err := cli.TopicPartitions(ctx, g, cl, topic)
		return err
	}
	actx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(g.Timeout.Milliseconds()))
	resp, err := adm.CreateTopic(actx, partitions, replicas, nil, topic)
	switch {
	case err == nil:
		// The factor asked for, not resp.ReplicationFactor, which weir's
		// CreateTopics answer set to 1 for every topic when this was
		// written.
		rf := "broker default"
		if replicas > 0 {
			rf = fmt.Sprint(replicas)
		}
		fmt.Fprintf(errOut, "created topic %s with %d partitions, replication factor %s\n", topic, resp.NumPartitions, rf)
		return nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		have, rf, derr := topicShape(ctx, g, cl, topic)
		if derr != nil {
			return derr
		}
		if have != int(partitions) {
			fmt.Fprintf(errOut, "note: topic %s already exists with %d partitions, not %d\n", topic, have, partitions)
		}
		if replicas > 0 && rf != int(replicas) {
			fmt.Fprintf(errOut, "note: topic %s already exists with replication factor %d, not %d\n", topic, rf, replicas)
		}
		return nil
	default:
		return fmt.Errorf("creating topic %s: %s", topic, cli.StatusCell(err, resp.ErrMessage))
	}
}

// topicShape returns an existing topic's partition count and
// replication factor (the replica count of its partitions).
func topicShape(ctx context.Context, g *cli.Options, cl *kgo.Client, topic string) (partitions, replicas int, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return 0, 0, g.DescribeCallErr("loading metadata for "+topic, err)
	}
	d, ok := details[topic]
	if !ok {
		return 0, 0, fmt.Errorf("topic %s: broker returned no metadata for it", topic)
	}
	if d.Err != nil {
		return 0, 0, fmt.Errorf("topic %s: %s", topic, cli.StatusCell(d.Err, ""))
	}
	return len(d.Partitions), d.Partitions.NumReplicas(), nil
}

// OffsetRange is the records a run delivers to each consumer: offsets
// Start up to, not including, End.
type OffsetRange struct{ Start, End int64 }

// Records is how many offsets the range holds.
func (r OffsetRange) Records() int64 { return r.End - r.Start }

// Layout is where a topic's partitions are led.
type Layout struct {
	Partitions []int32
	Leader     map[int32]int32  // partition -> leader node ID
	Addr       map[int32]string // node ID -> Kafka address
}

// Leaders lists the leaders in node ID order.
func (l *Layout) Leaders() []int32 {
	ids := slices.Collect(maps.Values(l.Leader))
	slices.Sort(ids)
	return slices.Compact(ids)
}

// ReadLayout checks that every partition of topic has a leader
// whose address the metadata gives.
func ReadLayout(md kadm.Metadata, topic string) (*Layout, error) {
	td, ok := md.Topics[topic]
	switch {
	case !ok:
		return nil, fmt.Errorf("topic %s: broker returned no metadata for it", topic)
	case td.Err != nil:
		return nil, fmt.Errorf("topic %s: %s", topic, cli.StatusCell(td.Err, ""))
	case len(td.Partitions) == 0:
		return nil, fmt.Errorf("topic %s has no partitions", topic)
	}
	l := &Layout{Leader: map[int32]int32{}, Addr: map[int32]string{}}
	for _, b := range md.Brokers {
		l.Addr[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, p := range td.Partitions.Sorted() {
		switch {
		case p.Err != nil:
			return nil, fmt.Errorf("%s/%d: %s", topic, p.Partition, cli.StatusCell(p.Err, ""))
		case p.Leader < 0:
			return nil, fmt.Errorf("%s/%d has no leader", topic, p.Partition)
		case l.Addr[p.Leader] == "":
			return nil, fmt.Errorf("%s/%d: its leader %d is not among the brokers in the metadata", topic, p.Partition, p.Leader)
		}
		l.Partitions = append(l.Partitions, p.Partition)
		l.Leader[p.Partition] = p.Leader
	}
	return l, nil
}
