package kafka

// AlterPartitionReassignments v0-v1 and ListPartitionReassignments v0
// (kafka-reassign-partitions, KIP-455).
//
// Behaviour:
//   - A partition with replicas starts (or replaces) its reassignment to
//     them; null replicas cancel it (NO_REASSIGNMENT_IN_PROGRESS when none
//     runs). The controller records it and the partition's leader moves its
//     Raft group there one member at a time (broker/reassign.go); the
//     answer comes once recorded, as Kafka's. An empty list, a broker
//     listed twice or one that is not a live registered broker is
//     INVALID_REPLICA_ASSIGNMENT; with allow_replication_factor_change
//     false (v1) a different replica count is INVALID_REPLICATION_FACTOR.
//     Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION. Internal topics move
//     like any other.
//   - The list shows each partition being reassigned with Kafka's
//     replicas (target first, then the replicas being removed), adding
//     and removing replicas; null topics list them all, and named
//     partitions with no reassignment are left out.
//   - Authorization: ALTER on the cluster (alter) or DESCRIBE (list), else
//     CLUSTER_AUTHORIZATION_FAILED at the top level.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleAlterPartitionReassignments(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allowRFChange := req.Version < 1 || req.AllowReplicationFactorChange
	resp.AllowReplicationFactorChange = allowRFChange
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t := s.topics.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch {
			case rp.Replicas != nil && len(rp.Replicas) == 0:
				err = fmt.Errorf("%w: the replica list of %s/%d cannot be empty", kerr.InvalidReplicaAssignment, rt.Topic, rp.Partition)
			case rp.Replicas != nil && !allowRFChange && t != nil && len(rp.Replicas) != currentReplicaCount(s, rt.Topic, rp.Partition):
				err = fmt.Errorf("%w: %s/%d has %d replicas and allow_replication_factor_change is false", kerr.InvalidReplicationFactor,
					rt.Topic, rp.Partition, currentReplicaCount(s, rt.Topic, rp.Partition))
			default:
				err = s.reassign.ReassignPartition(rt.Topic, rp.Partition, rp.Replicas)
			}
			sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// currentReplicaCount is the replica count of a partition (the original
// one while a reassignment runs), 0 when unknown.
func currentReplicaCount(s *Server, topic string, partition int32) int {
	for _, r := range s.reassign.Reassignments(func(t string, p int32) bool { return t == topic && p == partition }) {
		return len(r.Replicas) - len(r.Adding)
	}
	t := s.topics.Topic(topic)
	if t == nil {
		return 0
	}
	for _, pi := range s.cluster.PartitionInfos(t) {
		if pi.Partition == partition {
			return len(pi.Replicas)
		}
	}
	return 0
}

func (s *Server) handleListPartitionReassignments(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	var wanted func(string, int32) bool
	if req.Topics != nil {
		named := map[string][]int32{}
		for _, rt := range req.Topics {
			if s.topics.Topic(rt.Topic) == nil {
				resp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg := fmt.Sprintf("no topic %q", rt.Topic)
				resp.ErrorMessage = &msg
				return resp, nil
			}
			named[rt.Topic] = append(named[rt.Topic], rt.Partitions...)
		}
		wanted = func(topic string, partition int32) bool { return slices.Contains(named[topic], partition) }
	}
	for _, r := range s.reassign.Reassignments(wanted) {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != r.Topic {
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = r.Topic
			resp.Topics = append(resp.Topics, st)
		}
		sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		sp.Partition, sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas = r.Partition, r.Replicas, r.Adding, r.Removing
		if sp.AddingReplicas == nil {
			sp.AddingReplicas = []int32{}
		}
		if sp.RemovingReplicas == nil {
			sp.RemovingReplicas = []int32{}
		}
		st := &resp.Topics[len(resp.Topics)-1]
		st.Partitions = append(st.Partitions, sp)
	}
	return resp, nil
}
