package kafka

// DescribeConfigs, v1-v4.
//
// Behaviour:
//   - TOPIC resources: every topic config of Kafka 4.1 (broker/topicconfig.go
//     says what each does here) with its effective value, Kafka's config
//     type (v3+) and source: TOPIC_CONFIG when set on the topic,
//     DYNAMIC_DEFAULT_BROKER_CONFIG when it comes from a cluster property
//     that was set, DEFAULT_CONFIG otherwise (a cluster property's default
//     or, for configs without one, Kafka's). message.downconversion.enable,
//     which Kafka 4 no longer has, is listed only when set. config_names
//     narrows the list. Unknown topics are UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER resources (this node's id, or "" for the cluster default):
//     the cluster properties, as broker_configs.go describes.
//   - Synonyms (v1+) list the topic value and the cluster default it
//     overrides; documentation (v3+) on request.
//   - Authorization, per resource as Kafka's: DESCRIBE_CONFIGS on the
//     topic (else TOPIC_AUTHORIZATION_FAILED, whether it exists or not) or,
//     for BROKER resources, on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

func (s *Server) handleDescribeConfigs(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	auth := c.authorizer()
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []broker.ConfigEntry
		err := authorizeConfigResource(&auth, kmsg.ACLOperationDescribeConfigs, rr.ResourceType, rr.ResourceName)
		if err == nil {
			entries, err = s.describeResource(rr.ResourceType, rr.ResourceName, rr.ConfigNames)
		}
		if err != nil {
			sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		want := map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if len(want) > 0 && !want[e.Name] {
				continue
			}
			sr.Configs = append(sr.Configs, describedConfig(e, req))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func describedConfig(e broker.ConfigEntry, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	value := e.Value
	sc := kmsg.NewDescribeConfigsResponseResourceConfig()
	sc.Name, sc.Value, sc.ReadOnly, sc.IsSensitive = e.Name, &value, e.ReadOnly, e.Sensitive
	sc.Source = kmsg.ConfigSource(e.Source)
	sc.IsDefault = e.Source == broker.SourceDefault
	sc.ConfigType = kmsg.ConfigType(e.Type)
	if req.IncludeSynonyms && len(e.Synonyms) > 0 {
		for _, se := range e.Synonyms {
			v := se.Value
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = se.Name, &v, kmsg.ConfigSource(se.Source)
			sc.ConfigSynonyms = append(sc.ConfigSynonyms, syn)
		}
	} else if req.IncludeSynonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = e.Name, &value, kmsg.ConfigSource(e.Source)
		sc.ConfigSynonyms = append(sc.ConfigSynonyms, syn)
	}
	if req.IncludeDocumentation && e.Doc != "" {
		doc := e.Doc
		sc.Documentation = &doc
	}
	return sc
}

func (s *Server) describeResource(typ kmsg.ConfigResourceType, name string, names []string) ([]broker.ConfigEntry, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t := s.topics.Topic(name)
		if t == nil {
			return nil, fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
		}
		return s.topics.TopicConfig(t), nil
	case kmsg.ConfigResourceTypeBroker:
		if err := s.checkBrokerResource(name); err != nil {
			return nil, err
		}
		return clusterPropertyEntries(s.props.Properties(), names), nil
	default:
		return nil, fmt.Errorf("%w: resource type %d is not supported", kerr.InvalidRequest, typ)
	}
}
