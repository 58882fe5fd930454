package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker"
)

// Kafka's replication throttles. The rates (leader.replication.throttled.rate,
// follower.replication.throttled.rate) are weir cluster properties
// (broker_configs.go): Kafka sets them per broker, kafka-reassign-partitions
// --throttle on every broker a move involves, and weir applies a rate set
// on any broker cluster-wide. weir throttles every catch-up copy, so the
// per-topic lists of throttled replicas (leader./follower.replication.throttled.replicas)
// are topic configs that are checked, stored and described, and otherwise
// have no effect (broker/topicconfig.go); deleting one, as --verify does
// once a move completed, succeeds. Moving replicas between log
// directories does not exist here: replica.alter.log.dirs.io.max.bytes.per.second
// is refused when set and a no-op when deleted.

// clusterWideThrottles are the per-broker configs applied cluster-wide.
var clusterWideThrottles = map[string]bool{
	"leader.replication.throttled.rate":   true,
	"follower.replication.throttled.rate": true,
}

// logDirThrottle is the one throttle of a feature weir does not have.
var logDirThrottle = "replica.alter.log.dirs.io.max.bytes.per.second"

// brokerThrottleOps drops from a BROKER resource's ops the deletions of
// logDirThrottle (setting it is INVALID_CONFIG) and says whether what is
// left are only cluster-wide throttles.
func brokerThrottleOps(ops []broker.ConfigOp) (rest []broker.ConfigOp, onlyRates bool, err error) {
	onlyRates = true
	for _, op := range ops {
		if op.Name == logDirThrottle {
			if op.Op != 1 {
				return nil, false, fmt.Errorf("%w: %s: weir does not move replicas between log directories", kerr.InvalidConfig, op.Name)
			}
			continue
		}
		onlyRates = onlyRates && clusterWideThrottles[op.Name]
		rest = append(rest, op)
	}
	return rest, onlyRates, nil
}
