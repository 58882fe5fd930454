package kafka

// DescribeCluster, v0-v2.
//
// Behaviour:
//   - Lists the live brokers (at their addresses on the listener the
//     request arrived on, as Metadata does), the cluster id and the
//     controller (the controller group's leader). Only the broker endpoint
//     type (1) is served; asking for controllers (2) is
//     UNSUPPORTED_ENDPOINT_TYPE, as on a Kafka broker.
//   - Authorization, as Kafka's: the brokers are no secret (Metadata
//     lists them to anyone), so the request is answered whoever asks;
//     include_cluster_authorized_operations gets the cluster's KIP-430
//     bit set from a client allowed DESCRIBE on the cluster, and 0 from
//     any other.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeCluster(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp, nil
	}
	resp.EndpointType = 1
	resp.ClusterID = s.cluster.ClusterID()
	resp.ControllerID = s.cluster.ControllerID()
	if req.IncludeClusterAuthorizedOperations {
		auth := c.authorizer()
		resp.ClusterAuthorizedOperations = 0
		if auth.cluster(kmsg.ACLOperationDescribe) {
			resp.ClusterAuthorizedOperations = auth.operations(kmsg.ACLResourceTypeCluster, clusterResourceName)
		}
	}
	for _, e := range s.liveBrokers(c) {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = e.NodeID, e.Host, e.Port, e.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
