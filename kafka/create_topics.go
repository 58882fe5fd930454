package kafka

// CreateTopics, v2-v7.
//
// Behaviour:
//   - Partitions and replication factor of -1 (v4+) take the cluster
//     defaults (default_topic_partitions, default_topic_replications).
//   - Names follow Kafka's rules (INVALID_TOPIC_EXCEPTION); a replication
//     factor above the live brokers is INVALID_REPLICATION_FACTOR; manual
//     replica assignments are refused (INVALID_REQUEST); unknown or
//     invalid configs are INVALID_CONFIG; an existing topic is
//     TOPIC_ALREADY_EXISTS. The same name twice in one request is
//     INVALID_REQUEST for both.
//   - validate_only checks everything and creates nothing.
//   - v5+ returns the created topic's partitions, replication factor and
//     full config list (the Java AdminClient fails on a null one); v7+ its
//     topic ID.
//   - timeout_ms bounds the wait for the commit, the partitions' opening
//     and their leaders; past it the topic is REQUEST_TIMED_OUT while its
//     creation carries on (a client that leaves does not stop it).
//     timeout_ms <= 0 waits as an internal creation does.
//   - Authorization, as Kafka's: CREATE on the cluster, or on the topic,
//     else TOPIC_AUTHORIZATION_FAILED for that topic (a name given twice is
//     INVALID_REQUEST first). A topic created by a client without
//     DESCRIBE_CONFIGS on it is answered without its configs, with
//     TOPIC_AUTHORIZATION_FAILED in the topic_config_error_code tag.
//   - controller_mutation_rate (KIP-599): a topic's partitions count
//     against the client's quota once created; while the quota is
//     exceeded, v6+ refuses topics with THROTTLING_QUOTA_EXCEEDED, older
//     versions create them; both answer with the throttle time.
//     validate_only requests are not counted.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

func (s *Server) handleCreateTopics(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	auth := c.authorizer()
	mutations := c.mutationQuota(req.Version >= 6)
	mayCreateAll := auth.clusterQuietly(kmsg.ACLOperationCreate)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var t *broker.Topic
		var err error
		if seen[rt.Topic] == 1 && !mayCreateAll && !auth.topic(kmsg.ACLOperationCreate, rt.Topic) {
			err = fmt.Errorf("%w: not allowed to create topic %s", kerr.TopicAuthorizationFailed, rt.Topic)
		} else {
			t, err = s.createTopic(rt, seen[rt.Topic] > 1, req.ValidateOnly, requestTimeout(req.TimeoutMillis), &mutations)
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
			st.NumPartitions, st.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = t.ID()
		st.NumPartitions = int32(len(t.Partitions()))
		st.ReplicationFactor = int16(t.Record().ReplicationFactor())
		if !auth.topicQuietly(kmsg.ACLOperationDescribeConfigs, rt.Topic) {
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		for _, e := range s.topics.TopicConfig(t) {
			value := e.Value
			sc := kmsg.NewCreateTopicsResponseTopicConfig()
			sc.Name, sc.Value, sc.ReadOnly, sc.Source, sc.IsSensitive = e.Name, &value, e.ReadOnly, int8(e.Source), e.Sensitive
			st.Configs = append(st.Configs, sc)
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = mutations.throttleMillis()
	return resp, nil
}

// createTopic checks and creates one topic; its partitions count against
// the controller mutation quota, which may refuse it (validate_only
// requests are not counted, as in Kafka).
func (s *Server) createTopic(rt kmsg.CreateTopicsRequestTopic, duplicate, validateOnly bool, timeout time.Duration, mutations *mutationQuota) (*broker.Topic, error) {
	switch {
	case duplicate:
		return nil, fmt.Errorf("%w: topic %q appears more than once in the request", kerr.InvalidRequest, rt.Topic)
	case len(rt.ReplicaAssignment) > 0 && (rt.NumPartitions != -1 || rt.ReplicationFactor != -1):
		return nil, fmt.Errorf("%w: both num_partitions or replication_factor and a replica assignment were set", kerr.InvalidRequest)
	case rt.NumPartitions == 0 || rt.NumPartitions < -1:
		return nil, fmt.Errorf("%w: %d partitions", kerr.InvalidPartitions, rt.NumPartitions)
	case rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1:
		return nil, fmt.Errorf("%w: replication factor %d", kerr.InvalidReplicationFactor, rt.ReplicationFactor)
	}
	if !validateOnly {
		if err := mutations.check(); err != nil {
			return nil, err
		}
	}
	configs := map[string]string{}
	for _, cfg := range rt.Configs {
		if cfg.Value == nil {
			continue // null means the default
		}
		configs[cfg.Name] = *cfg.Value
	}
	var assignment [][]int32
	if len(rt.ReplicaAssignment) > 0 {
		assignment = make([][]int32, len(rt.ReplicaAssignment))
		for _, ra := range rt.ReplicaAssignment {
			if ra.Partition < 0 || int(ra.Partition) >= len(assignment) || assignment[ra.Partition] != nil {
				return nil, fmt.Errorf("%w: the replica assignment must name partitions 0 to %d once each (got partition %d)",
					kerr.InvalidReplicaAssignment, len(assignment)-1, ra.Partition)
			}
			assignment[ra.Partition] = ra.Replicas
		}
	}
	t, err := s.topicAdmin.CreateTopic(broker.CreateTopicRequest{
		Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor, Assignment: assignment,
		Configs: configs, ValidateOnly: validateOnly, Timeout: timeout,
	})
	if t != nil && !validateOnly {
		mutations.record(len(t.Partitions()))
	}
	return t, err
}

// requestTimeout turns a request's timeout_ms into a duration; zero or
// less means none was given.
func requestTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}
