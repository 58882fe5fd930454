package kafka

// AlterConfigs, v0-v2, and IncrementalAlterConfigs, v0-v1.
//
// Behaviour:
//   - TOPIC resources: IncrementalAlterConfigs SETs or DELETEs single
//     configs, and APPENDs to or SUBTRACTs from the list configs
//     (cleanup.policy, the throttled replica lists; INVALID_CONFIG for the
//     others); AlterConfigs replaces the topic's whole explicit set, as
//     Kafka does. Values are validated (INVALID_CONFIG) and the
//     change reaches the partitions' logs at once. validate_only changes
//     nothing.
//   - BROKER resources: the cluster default ("") changes the cluster
//     properties through the controller; a specific broker id is
//     INVALID_REQUEST. broker_configs.go has the details.
//   - Authorization, per resource as Kafka's: ALTER_CONFIGS on the topic
//     (else TOPIC_AUTHORIZATION_FAILED, whether it exists or not) or, for
//     BROKER resources, on the cluster (else CLUSTER_AUTHORIZATION_FAILED;
//     enterprise properties also need the licence, as before).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

func (s *Server) handleIncrementalAlterConfigs(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	auth := c.authorizer()
	for _, rr := range req.Resources {
		ops := make([]broker.ConfigOp, 0, len(rr.Configs))
		for _, rc := range rr.Configs {
			op := broker.ConfigOp{Name: rc.Name, Op: int8(rc.Op)}
			if rc.Value != nil {
				op.Value = *rc.Value
			}
			ops = append(ops, op)
		}
		err := authorizeConfigResource(&auth, kmsg.ACLOperationAlterConfigs, rr.ResourceType, rr.ResourceName)
		if err == nil {
			err = s.alterResource(rr.ResourceType, rr.ResourceName, ops, false, req.ValidateOnly)
		}
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) handleAlterConfigs(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	auth := c.authorizer()
	for _, rr := range req.Resources {
		ops := make([]broker.ConfigOp, 0, len(rr.Configs))
		for _, rc := range rr.Configs {
			op := broker.ConfigOp{Name: rc.Name, Op: 1}
			if rc.Value != nil {
				op.Op, op.Value = 0, *rc.Value
			}
			ops = append(ops, op)
		}
		err := authorizeConfigResource(&auth, kmsg.ACLOperationAlterConfigs, rr.ResourceType, rr.ResourceName)
		if err == nil {
			err = s.alterResource(rr.ResourceType, rr.ResourceName, ops, true, req.ValidateOnly)
		}
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// alterResource applies ops; replace first resets every explicit config
// not named in ops (AlterConfigs' whole-set semantics).
func (s *Server) alterResource(typ kmsg.ConfigResourceType, name string, ops []broker.ConfigOp, replace, validateOnly bool) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t := s.topics.Topic(name)
		if t == nil {
			return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
		}
		if len(ops) == 0 && !replace {
			return nil
		}
		if replace {
			named := map[string]bool{}
			for _, op := range ops {
				named[op.Name] = true
			}
			for k := range t.Configs() {
				if !named[k] {
					ops = append(ops, broker.ConfigOp{Name: k, Op: 1})
				}
			}
		}
		return s.topicAdmin.AlterTopicConfig(name, ops, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		if err := s.checkBrokerResource(name); err != nil {
			return err
		}
		ops, onlyRates, err := brokerThrottleOps(ops)
		if err != nil {
			return err
		}
		if len(ops) == 0 && !replace {
			return nil
		}
		if onlyRates && !replace {
			name = "" // a throttle rate set on a broker applies cluster-wide
		}
		return s.alterClusterProperties(name, ops, replace, validateOnly)
	default:
		return fmt.Errorf("%w: resource type %d is not supported", kerr.InvalidRequest, typ)
	}
}
