package kafka

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	produceKey     = 0
	fetchKey       = 1
	apiVersionsKey = 18
)

// api is one supported Kafka API and the versions weir serves.
type api struct {
	key      int16
	name     string
	min, max int16
	handle   func(c *clientConn, req kmsg.Request) (kmsg.Response, error)

	// Bound once so the request path does no label lookups.
	requests prometheus.Counter
	latency  prometheus.Observer
}

// apiTable is indexed by API key; name "" marks an unsupported key.
type apiTable []api

func (t apiTable) lookup(key int16) (api, bool) {
	if key < 0 || int(key) >= len(t) || t[key].name == "" {
		return api{}, false
	}
	return t[key], true
}

// newAPITable lists every API weir serves: the single place where version
// ranges are decided. Minimums are Kafka 4's (KIP-896) except Produce,
// which is advertised from v0 as Kafka 4 does because older librdkafka
// stops compressing otherwise; v0-v2 are refused per partition.
// Maximums are the newest kmsg encodes. The oldest non-flexible versions
// stay in so that kafkajs (Metadata <= 6, Fetch <= 11, Produce <= 7)
// works.
func (s *Server) newAPITable() apiTable {
	list := []api{
		{key: 0, name: "Produce", min: 0, max: 13, handle: s.handleProduce},
		{key: 1, name: "Fetch", min: 4, max: 18, handle: s.handleFetch},
		{key: 2, name: "ListOffsets", min: 1, max: 11, handle: s.handleListOffsets},
		{key: 3, name: "Metadata", min: 0, max: 13, handle: s.handleMetadata},
		{key: 8, name: "OffsetCommit", min: 2, max: 9, handle: s.handleOffsetCommit},
		{key: 9, name: "OffsetFetch", min: 1, max: 9, handle: s.handleOffsetFetch},
		{key: 10, name: "FindCoordinator", min: 0, max: 6, handle: s.handleFindCoordinator},
		{key: 11, name: "JoinGroup", min: 0, max: 9, handle: s.handleJoinGroup},
		{key: 12, name: "Heartbeat", min: 0, max: 4, handle: s.handleHeartbeat},
		{key: 13, name: "LeaveGroup", min: 0, max: 5, handle: s.handleLeaveGroup},
		{key: 14, name: "SyncGroup", min: 0, max: 5, handle: s.handleSyncGroup},
		{key: 15, name: "DescribeGroups", min: 0, max: 6, handle: s.handleDescribeGroups},
		{key: 16, name: "ListGroups", min: 0, max: 5, handle: s.handleListGroups},
		{key: 17, name: "SaslHandshake", min: 0, max: 1, handle: s.handleSaslHandshake},
		{key: 18, name: "ApiVersions", min: 0, max: 4, handle: s.handleApiVersions},
		{key: 19, name: "CreateTopics", min: 2, max: 7, handle: s.handleCreateTopics},
		{key: 20, name: "DeleteTopics", min: 1, max: 6, handle: s.handleDeleteTopics},
		{key: 21, name: "DeleteRecords", min: 0, max: 2, handle: s.handleDeleteRecords},
		{key: 22, name: "InitProducerId", min: 0, max: 5, handle: s.handleInitProducerID},
		{key: 23, name: "OffsetForLeaderEpoch", min: 2, max: 4, handle: s.handleOffsetForLeaderEpoch},
		{key: 24, name: "AddPartitionsToTxn", min: 0, max: 5, handle: s.handleAddPartitionsToTxn},
		{key: 25, name: "AddOffsetsToTxn", min: 0, max: 4, handle: s.handleAddOffsetsToTxn},
		{key: 26, name: "EndTxn", min: 0, max: 5, handle: s.handleEndTxn},
		{key: 27, name: "WriteTxnMarkers", min: 1, max: 1, handle: s.handleWriteTxnMarkers},
		{key: 28, name: "TxnOffsetCommit", min: 0, max: 4, handle: s.handleTxnOffsetCommit},
		{key: 32, name: "DescribeConfigs", min: 1, max: 4, handle: s.handleDescribeConfigs},
		{key: 33, name: "AlterConfigs", min: 0, max: 2, handle: s.handleAlterConfigs},
		{key: 35, name: "DescribeLogDirs", min: 1, max: 5, handle: s.handleDescribeLogDirs},
		{key: 36, name: "SaslAuthenticate", min: 0, max: 2, handle: s.handleSaslAuthenticate},
		{key: 29, name: "DescribeAcls", min: 0, max: 3, handle: s.handleDescribeAcls},
		{key: 30, name: "CreateAcls", min: 0, max: 3, handle: s.handleCreateAcls},
		{key: 31, name: "DeleteAcls", min: 0, max: 3, handle: s.handleDeleteAcls},
		{key: 37, name: "CreatePartitions", min: 0, max: 3, handle: s.handleCreatePartitions},
		{key: 42, name: "DeleteGroups", min: 0, max: 2, handle: s.handleDeleteGroups},
		{key: 43, name: "ElectLeaders", min: 0, max: 2, handle: s.handleElectLeaders},
		{key: 45, name: "AlterPartitionReassignments", min: 0, max: 1, handle: s.handleAlterPartitionReassignments},
		{key: 46, name: "ListPartitionReassignments", min: 0, max: 0, handle: s.handleListPartitionReassignments},
		{key: 55, name: "DescribeQuorum", min: 0, max: 2, handle: s.handleDescribeQuorum},
		{key: 44, name: "IncrementalAlterConfigs", min: 0, max: 1, handle: s.handleIncrementalAlterConfigs},
		{key: 47, name: "OffsetDelete", min: 0, max: 0, handle: s.handleOffsetDelete},
		{key: 48, name: "DescribeClientQuotas", min: 0, max: 1, handle: s.handleDescribeClientQuotas},
		{key: 49, name: "AlterClientQuotas", min: 0, max: 1, handle: s.handleAlterClientQuotas},
		{key: 50, name: "DescribeUserScramCredentials", min: 0, max: 0, handle: s.handleDescribeUserScramCredentials},
		{key: 51, name: "AlterUserScramCredentials", min: 0, max: 0, handle: s.handleAlterUserScramCredentials},
		{key: 60, name: "DescribeCluster", min: 0, max: 2, handle: s.handleDescribeCluster},
		{key: 61, name: "DescribeProducers", min: 0, max: 0, handle: s.handleDescribeProducers},
		{key: 65, name: "DescribeTransactions", min: 0, max: 0, handle: s.handleDescribeTransactions},
		{key: 66, name: "ListTransactions", min: 0, max: 2, handle: s.handleListTransactions},
		{key: 68, name: "ConsumerGroupHeartbeat", min: 0, max: 1, handle: s.handleConsumerGroupHeartbeat},
		{key: 69, name: "ConsumerGroupDescribe", min: 0, max: 1, handle: s.handleConsumerGroupDescribe},
	}
	var maxKey int16
	for _, a := range list {
		maxKey = max(maxKey, a.key)
	}
	t := make(apiTable, maxKey+1)
	for _, a := range list {
		t[a.key] = a
	}
	return t
}
