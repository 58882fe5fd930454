package kafka

// Metadata, v0-v13.
//
// Behaviour:
//   - Brokers: every live broker of the cluster, with its advertised
//     address and rack (v1+); the controller is the controller group's
//     leader.
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

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

func (s *Server) handleMetadata(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := s.broker
	resp.Brokers = s.liveBrokers()
	clusterID := b.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = b.ControllerID()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.Topics() {
			resp.Topics = append(resp.Topics, s.topicMetadata(t))
		}
		return resp, nil
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		var t *broker.Topic
		var err error
		switch {
		// A non-zero ID wins over the name, as in Kafka: the Java
		// AdminClient describes topics by ID with an empty (not null)
		// name.
		case rt.TopicID != [16]byte{}:
			if t = b.TopicByID(broker.TopicID(rt.TopicID)); t == nil {
				err = kerr.UnknownTopicID
				rt.Topic = nil
			}
		case rt.Topic != nil:
			if t = b.Topic(*rt.Topic); t == nil {
				err = kerr.UnknownTopicOrPartition
				if autoCreate {
					t, err = b.AutoCreate(*rt.Topic)
				}
			}
		default:
			err = kerr.InvalidTopicException
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, errorCode(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.topicMetadata(t))
	}
	return resp, nil
}

// liveBrokers lists every live broker of the cluster.
func (s *Server) liveBrokers() []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, bi := range s.broker.LiveBrokers() {
		out = append(out, metadataBroker(bi))
	}
	if len(out) == 0 { // not registered yet: at least this broker
		out = append(out, s.brokerEntry())
	}
	return out
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

// brokerEntry is this broker, as its own node config describes it.
func (s *Server) brokerEntry() kmsg.MetadataResponseBroker {
	host, portStr, _ := net.SplitHostPort(s.opts.AdvertisedAddr)
	port, _ := strconv.Atoi(portStr)
	e := kmsg.NewMetadataResponseBroker()
	e.NodeID, e.Host, e.Port = s.broker.NodeID(), host, int32(port)
	if rack := s.broker.Node().Rack; rack != "" {
		e.Rack = &rack
	}
	return e
}

func (s *Server) topicMetadata(t *broker.Topic) kmsg.MetadataResponseTopic {
	name := t.Name
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, t.Internal()
	for _, p := range s.broker.PartitionInfos(t) {
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
