package kafka

// ElectLeaders, v0-v2 (kafka-leader-election).
//
// Behaviour:
//   - Preferred elections (election type 0; v0 has no type and means it):
//     each partition's leader hands leadership to the partition's first
//     replica when that replica is live, in sync and caught up
//     (broker/elect.go); the answer waits, up to timeout_ms, until
//     Metadata shows it. Per partition: NONE, ELECTION_NOT_NEEDED when
//     the preferred replica already leads, PREFERRED_LEADER_NOT_AVAILABLE
//     with the reason, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT. A
//     null topic list elects every partition and answers only those that
//     needed it, as Kafka does.
//   - Unclean elections (type 1) are refused per partition with
//     INVALID_REQUEST: a partition's leader is chosen by its Raft group
//     among the replicas holding every committed record, so there is no
//     out-of-sync replica weir could make leader without losing
//     acknowledged data. Unknown types are INVALID_REQUEST too.
//   - Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//     (top level from v1, per partition in v0).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

// uncleanElectionRefusal is the message of a refused unclean election.
const uncleanElectionRefusal = "unclean leader election is not available: a partition's Raft group elects its leader among the replicas that hold every committed record"

// defaultElectionTimeout bounds an election whose request names no timeout.
const defaultElectionTimeout = 30 * time.Second

func (s *Server) handleElectLeaders(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	auth := c.authorizer()
	refuse := func(code int16, msg string) {
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, code
				if msg != "" {
					sp.ErrorMessage = &msg
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
	if !auth.cluster(kmsg.ACLOperationAlter) {
		if req.Version >= 1 {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		} else {
			refuse(kerr.ClusterAuthorizationFailed.Code, "")
		}
		return resp, nil
	}
	switch req.ElectionType {
	case 0:
	case 1:
		refuse(kerr.InvalidRequest.Code, uncleanElectionRefusal)
		return resp, nil
	default:
		refuse(kerr.InvalidRequest.Code, "unknown election type")
		return resp, nil
	}
	var refs []broker.PartitionRef
	if req.Topics != nil {
		refs = make([]broker.PartitionRef, 0, len(req.Topics))
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				refs = append(refs, broker.PartitionRef{Topic: rt.Topic, Partition: p})
			}
		}
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultElectionTimeout
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	byTopic := map[string]int{}
	for _, r := range s.operations.ElectPreferredLeaders(ctx, refs) {
		i, ok := byTopic[r.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[r.Topic] = i
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = r.Topic
			resp.Topics = append(resp.Topics, st)
		}
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition, sp.ErrorCode, sp.ErrorMessage = r.Partition, errorCode(r.Err), errorMessage(r.Err)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
	return resp, nil
}
