package kafka

// Metadata, v0-v13.
//
// Behaviour:
//   - Brokers: this node, with its advertised address and rack (v1+).
//   - No topics requested (null list, or an empty one in v0) lists every
//     topic.
//   - A requested topic that does not exist is created when the request
//     allows it (always before v4, AllowAutoTopicCreation from v4) and the
//     cluster property auto_create_topics_enabled is on; otherwise it is
//     UNKNOWN_TOPIC_OR_PARTITION. v10+ topics named by a non-zero ID are
//     looked up by it whatever the name says (Java sends ""), and unknown
//     ones get UNKNOWN_TOPIC_ID with a null name.
//   - Every topic carries its UUID (v10+), so clients fetch by ID.
//   - Leader epoch (v7+) is 0: a single node never changes leader.

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
	resp.Brokers = []kmsg.MetadataResponseBroker{s.brokerEntry()}
	clusterID := b.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = b.NodeID()

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
	self := s.broker.NodeID()
	for _, p := range t.Partitions() {
		if p == nil {
			continue // hosted by another broker: not yet served in cluster mode
		}
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Index, self, 0
		mp.Replicas, mp.ISR = []int32{self}, []int32{self}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
