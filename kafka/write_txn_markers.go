package kafka

// WriteTxnMarkers, v1 (coordinators to partition leaders).
//
// Behaviour: each marker is appended to each named partition this broker
// leads, through the partition's Raft group, as a COMMIT or ABORT
// control batch (broker/txn_partition.go); each partition answers its own
// code: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, and the
// fencing codes INVALID_PRODUCER_EPOCH (an older producer epoch) and
// TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch). It needs
// CLUSTER_ACTION, else CLUSTER_AUTHORIZATION_FAILED for every partition.
// weir's own coordinators reach leaders through the brokers' RPC mux;
// this API serves Kafka's tools and tests.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/txn"
)

func (s *Server) handleWriteTxnMarkers(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	auth := c.authorizer()
	allowed := auth.cluster(kmsg.ACLOperationClusterAction)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		var tps []txn.TopicPartition
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		var errs []error
		if allowed {
			errs = s.txns.WriteTxnMarkers(c.ctx, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, tps)
		}
		i := 0
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				switch {
				case !allowed:
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case s.topics.Topic(t.Topic) == nil:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					rp.ErrorCode = errorCode(errs[i])
				}
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}
