package kafka

// Metadata, v0-v13.
//
// Behaviour:
//   - Brokers: every live broker of the cluster, with its advertised
//     address on the listener the request arrived on and its rack (v1+);
//     a broker without that listener is left out, as in Kafka, and a
//     partition it leads is answered LISTENER_NOT_FOUND (v6+; before,
//     LEADER_NOT_AVAILABLE) with no leader. The controller is the
//     controller group's leader.
//   - Partitions: leader (the first replica while partitions are not
//     replicated; LEADER_NOT_AVAILABLE when it is not live), replicas,
//     the live replicas as ISR, the others as offline.
//   - No topics requested (null list, or an empty one in v0) lists every
//     topic.
//   - A requested topic that does not exist is created when the request
//     allows it (always before v4, AllowAutoTopicCreation from v4) and the
//     cluster property auto_create_topics_enabled is on; otherwise it is
//     UNKNOWN_TOPIC_OR_PARTITION. v10+ topics named by a non-zero ID are
//     looked up by it whatever the name says (Java sends ""), and unknown
//     ones get UNKNOWN_TOPIC_ID with a null name.
//   - Every topic carries its UUID (v10+), so clients fetch by ID.
//   - Authorization, as Kafka's: DESCRIBE on a topic to see it. A listing
//     of every topic leaves out those not allowed; a named topic not
//     allowed is TOPIC_AUTHORIZATION_FAILED whether it exists or not (by
//     ID: with the ID and a null name). Creating a topic on the way needs
//     CREATE on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED.
//     v8+ include_topic_authorized_operations and (v8-v10)
//     include_cluster_authorized_operations fill the KIP-430 bit sets;
//     the cluster's is 0 without DESCRIBE on it.

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleMetadata(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = s.liveBrokers(c)
	clusterID := s.cluster.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = s.cluster.ControllerID()

	auth := c.authorizer()
	// The cluster's authorized operations moved to DescribeCluster in v11.
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if auth.cluster(kmsg.ACLOperationDescribe) {
			resp.AuthorizedOperations = auth.operations(kmsg.ACLResourceTypeCluster, clusterResourceName)
		}
	}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.topics.Topics() {
			// Left out, as if they did not exist.
			if auth.topicQuietly(kmsg.ACLOperationDescribe, t.Name()) {
				resp.Topics = append(resp.Topics, s.topicMetadata(t))
			}
		}
	} else {
		autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
		for _, rt := range req.Topics {
			resp.Topics = append(resp.Topics, s.requestedTopicMetadata(&auth, rt, autoCreate))
		}
	}
	s.markLeadersWithoutListener(c, resp)
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			mt := &resp.Topics[i]
			if mt.Topic != nil && mt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
				mt.AuthorizedOperations = auth.operations(kmsg.ACLResourceTypeTopic, *mt.Topic)
			}
		}
	}
	return resp, nil
}

// requestedTopicMetadata answers one topic the request names.
func (s *Server) requestedTopicMetadata(auth *requestAuthorizer, rt kmsg.MetadataRequestTopic, autoCreate bool) kmsg.MetadataResponseTopic {
	b := s.topics
	var t *broker.Topic
	var err error
	switch {
	// A non-zero ID wins over the name, as in Kafka: the Java
	// AdminClient describes topics by ID with an empty (not null)
	// name.
	case rt.TopicID != [16]byte{}:
		if t = b.TopicByID(controller.TopicID(rt.TopicID)); t == nil {
			err = kerr.UnknownTopicID
			rt.Topic = nil
		} else if !auth.topic(kmsg.ACLOperationDescribe, t.Name()) {
			// Kafka does not count topic IDs as secret: the refusal
			// carries the ID, but not the name.
			t, err, rt.Topic = nil, kerr.TopicAuthorizationFailed, nil
		}
	case rt.Topic != nil:
		// Checked before the topic's existence, so that its absence is
		// not revealed either.
		if !auth.topic(kmsg.ACLOperationDescribe, *rt.Topic) {
			err = kerr.TopicAuthorizationFailed
			break
		}
		if t = b.Topic(*rt.Topic); t == nil {
			err = kerr.UnknownTopicOrPartition
			switch {
			case !autoCreate:
			case s.props.Properties().Bool("auto_create_topics_enabled") && !auth.mayCreateTopic(*rt.Topic):
				err = kerr.TopicAuthorizationFailed
			default:
				t, err = b.AutoCreate(*rt.Topic)
			}
		}
	default:
		err = kerr.InvalidTopicException
	}
	if err != nil {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, errorCode(err)
		return mt
	}
	return s.topicMetadata(t)
}

// liveBrokers lists every live broker of the cluster that has c's
// listener, at its address on that listener.
func (s *Server) liveBrokers(c *clientConn) []kmsg.MetadataResponseBroker {
	live := s.cluster.LiveBrokers()
	if len(live) == 0 { // not registered yet: at least this broker
		return []kmsg.MetadataResponseBroker{s.brokerEntry(c)}
	}
	var out []kmsg.MetadataResponseBroker
	for _, bi := range live {
		if bi, ok := c.reachable(bi); ok {
			out = append(out, metadataBroker(bi))
		}
	}
	return out
}

// markLeadersWithoutListener answers, as Kafka does, a partition whose
// leader is live but has no listener of the name the request came in on
// with no leader and LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE before v6),
// rather than a leader id the response's broker list does not hold.
func (s *Server) markLeadersWithoutListener(c *clientConn, resp *kmsg.MetadataResponse) {
	var missing map[int32]bool
	for _, bi := range s.cluster.LiveBrokers() {
		if _, ok := c.reachable(bi); !ok {
			if missing == nil {
				missing = map[int32]bool{}
			}
			missing[bi.NodeID] = true
		}
	}
	if missing == nil {
		return
	}
	code := kerr.ListenerNotFound.Code
	if resp.Version < 6 {
		code = kerr.LeaderNotAvailable.Code
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			mp := &resp.Topics[i].Partitions[j]
			if mp.ErrorCode == 0 && missing[mp.Leader] {
				mp.Leader, mp.ErrorCode = -1, code
			}
		}
	}
}

func metadataBroker(bi broker.BrokerInfo) kmsg.MetadataResponseBroker {
	e := kmsg.NewMetadataResponseBroker()
	e.NodeID, e.Host, e.Port = bi.NodeID, bi.Host, bi.Port
	if bi.Rack != "" {
		rack := bi.Rack
		e.Rack = &rack
	}
	return e
}

// brokerEntry is this broker as its own node config describes it to
// clients of c's listener.
func (s *Server) brokerEntry(c *clientConn) kmsg.MetadataResponseBroker {
	host, portStr, _ := net.SplitHostPort(c.listener.AdvertisedAddr)
	port, _ := strconv.Atoi(portStr)
	e := kmsg.NewMetadataResponseBroker()
	e.NodeID, e.Host, e.Port = s.cluster.NodeID(), host, int32(port)
	if rack := s.cluster.Node().Rack; rack != "" {
		e.Rack = &rack
	}
	return e
}

func (s *Server) topicMetadata(t *broker.Topic) kmsg.MetadataResponseTopic {
	name := t.Name()
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID(), t.Internal()
	for _, p := range s.cluster.PartitionInfos(t) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
		mp.Replicas, mp.ISR, mp.OfflineReplicas = p.Replicas, p.ISR, p.Offline
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		if mp.OfflineReplicas == nil {
			mp.OfflineReplicas = []int32{}
		}
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
