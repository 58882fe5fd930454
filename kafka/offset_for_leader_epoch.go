package kafka

// OffsetForLeaderEpoch, v2-v4 (v0 and v1 are gone in Kafka 4, KIP-896).
//
// A consumer sends it after a leader change with the epoch of the last
// batch it consumed (that batch's partitionLeaderEpoch) to learn where
// that epoch ends in the new leader's log: an end offset below the
// consumer's position means the log was truncated under it (KIP-101,
// KIP-320). A partition's leader epoch is its Raft term.
//
// Behaviour:
//   - Only the partition's leader answers: NOT_LEADER_OR_FOLLOWER on any
//     other broker, UNKNOWN_TOPIC_OR_PARTITION for a topic or partition
//     that does not exist. current_leader_epoch -1 skips the epoch check;
//     an older one is FENCED_LEADER_EPOCH, a newer one
//     UNKNOWN_LEADER_EPOCH. Error rows carry leader_epoch and end_offset
//     -1, Kafka's defaults.
//   - leader_epoch and end_offset are Kafka's
//     LeaderEpochFileCache.endOffsetFor: the largest epoch in the log at
//     or below the requested one, ending where the next epoch starts, or
//     at the log end offset for the current epoch; an epoch older than
//     every epoch in the log ends where the log's first epoch starts; -1
//     (undefined), an epoch newer than any in the log, or a log without
//     epochs give -1 and -1 with no error.
//   - replica_id (v3+) is ignored: -1 (consumer), -2 (debugging tool) and
//     a broker id are all answered as from a consumer. Kafka does the
//     same: ReplicaManager.lastOffsetForLeaderEpoch is not given the
//     replica id and always serves from the leader only
//     (fetchOnlyFromLeader = true), followers included. Weir's replicas
//     follow through Raft and never send this request, so a broker id can
//     only come from a tool, and the consumer answer is what Kafka would
//     give it; an error code would be an invention.
//   - Authorization, as in Kafka since KIP-320 made this a consumer API:
//     CLUSTER_ACTION on the cluster (what replicas have) or DESCRIBE on
//     the topic, per topic, else TOPIC_AUTHORIZATION_FAILED for its
//     partitions, before the topic's existence is looked at.
//   - throttle_time_ms is 0: weir has no quotas.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetForLeaderEpoch(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	auth := c.authorizer()
	anyTopic := auth.clusterQuietly(kmsg.ACLOperationClusterAction)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t := s.topics.Topic(rt.Topic)
		topicErr := kerr.UnknownTopicOrPartition.Code
		if !anyTopic && !auth.topic(kmsg.ACLOperationDescribe, rt.Topic) {
			t, topicErr = nil, kerr.TopicAuthorizationFailed.Code
		}
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetForLeaderEpochResponseTopicPartition() // epoch and offset -1
			sp.Partition = rp.Partition
			if t == nil {
				sp.ErrorCode = topicErr
				continue
			}
			p, err := t.LeaderPartition(rp.Partition, rp.CurrentLeaderEpoch)
			if err != nil {
				sp.ErrorCode = errorCode(err)
				continue
			}
			sp.LeaderEpoch, sp.EndOffset = p.EndOffsetForEpoch(rp.LeaderEpoch)
		}
	}
	return resp, nil
}
