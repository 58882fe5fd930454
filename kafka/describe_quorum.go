package kafka

// DescribeQuorum, v0-v2 (kafka-metadata-quorum describe).
//
// Behaviour:
//   - weir's cluster metadata lives in the controller Raft group, which
//     plays the part of Kafka's __cluster_metadata log: partition 0 of
//     that topic is described as the group's leader sees it (any broker
//     asks the leader): leader id, epoch (the group's Raft term), high
//     watermark (its commit index), and for each voter and observer the
//     index up to which its log matches the leader's, when it last
//     acknowledged an append and when it last had all the leader had
//     applied (-1 while unknown in this term). v2 adds each member's
//     endpoint: its RPC address, named CONTROLLER. Directory ids are not
//     used (zero).
//   - Any other topic or partition: UNKNOWN_TOPIC_OR_PARTITION for it.
//     The controller group without a leader: NOT_LEADER_OR_FOLLOWER.
//   - Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//     at the top level.

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

// metadataTopic is the name Kafka gives its metadata log.
const metadataTopic = "__cluster_metadata"

// quorumTimeout bounds asking the controller leader.
const quorumTimeout = 10 * time.Second

func (s *Server) handleDescribeQuorum(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	var q broker.QuorumInfo
	var qerr error
	asked := false
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case rt.Topic != metadataTopic || rp.Partition != 0:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if !asked {
					ctx, cancel := context.WithTimeout(c.ctx, quorumTimeout)
					q, qerr = s.operations.ControllerQuorum(ctx)
					cancel()
					asked = true
				}
				if qerr != nil {
					sp.ErrorCode, sp.ErrorMessage = errorCode(qerr), errorMessage(qerr)
					break
				}
				sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = q.LeaderID, q.LeaderEpoch, q.HighWatermark
				sp.CurrentVoters = quorumReplicas(q.Voters)
				sp.Observers = quorumReplicas(q.Observers)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if asked && qerr == nil && req.Version >= 2 {
		for _, r := range append(append([]broker.QuorumReplica(nil), q.Voters...), q.Observers...) {
			host, port, err := net.SplitHostPort(r.Addr)
			if err != nil {
				continue
			}
			p, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				continue
			}
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = r.NodeID
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(p)
			n.Listeners = append(n.Listeners, l)
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return resp, nil
}

func quorumReplicas(rs []broker.QuorumReplica) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(rs))
	for _, r := range rs {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.LogEndOffset = r.NodeID, r.LogEndOffset
		s.LastFetchTimestamp, s.LastCaughtUpTimestamp = r.LastFetchMs, r.LastCaughtUpMs
		out = append(out, s)
	}
	return out
}
