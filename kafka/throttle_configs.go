package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker"
)

// Kafka's replication throttles. weir does not throttle the traffic that
// catches a reassigned replica up, so setting any of these is refused
// with that reason; deleting one, which kafka-reassign-partitions
// --verify does on every broker and moved topic once a reassignment
// completed, succeeds and changes nothing (nothing is set), as deleting an
// unset config does in Kafka.

// brokerThrottleConfigs are the per-broker ones.
var brokerThrottleConfigs = map[string]bool{
	"leader.replication.throttled.rate":              true,
	"follower.replication.throttled.rate":            true,
	"replica.alter.log.dirs.io.max.bytes.per.second": true,
}

// topicThrottleConfigs are the per-topic ones.
var topicThrottleConfigs = map[string]bool{
	"leader.replication.throttled.replicas":   true,
	"follower.replication.throttled.replicas": true,
}

// withoutThrottleDeletes drops the deletions of the throttle configs in
// names from ops; setting one of them is INVALID_CONFIG.
func withoutThrottleDeletes(ops []broker.ConfigOp, names map[string]bool) ([]broker.ConfigOp, error) {
	out := ops[:0:0]
	for _, op := range ops {
		if !names[op.Name] {
			out = append(out, op)
			continue
		}
		if op.Op != 1 { // not DELETE
			return nil, fmt.Errorf("%w: %s: weir does not throttle replication (a reassignment's catch-up runs at full speed); the replication throttles cannot be set", kerr.InvalidConfig, op.Name)
		}
	}
	return out, nil
}
