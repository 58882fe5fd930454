package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/broker/txn"
	"github.com/weir-broker/weir/config"
)

// What the protocol layer needs of the broker, one interface per family of
// handlers, declared here where they are used: each handler says what of
// the domain it reaches, and its tests can hand it a fake. *broker.Broker
// implements them all (domain is built from it in NewServer).

// clusterView is the cluster as Metadata, DescribeCluster and
// FindCoordinator describe it, and the leaders produce and fetch point
// clients to.
type clusterView interface {
	NodeID() int32
	Node() config.Node
	ClusterID() string
	ControllerID() int32
	LiveBrokers() []broker.BrokerInfo
	Broker(id int32) (broker.BrokerInfo, bool)
	LeaderHint(t *broker.Topic, partition int32) (leader broker.BrokerInfo, epoch int32, ok bool)
	GroupCoordinator(group string) (broker.BrokerInfo, error)
	PartitionInfos(t *broker.Topic) []broker.PartitionInfo
}

// topicCatalog looks topics up, for every handler that names one.
type topicCatalog interface {
	Topic(name string) *broker.Topic
	TopicByID(id controller.TopicID) *broker.Topic
	Topics() []*broker.Topic
	TopicConfig(t *broker.Topic) []broker.ConfigEntry
	AutoCreate(name string) (*broker.Topic, error)
}

// topicAdmin changes topics: CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs and IncrementalAlterConfigs of topics,
// DeleteRecords.
type topicAdmin interface {
	CreateTopic(req broker.CreateTopicRequest) (*broker.Topic, error)
	DeleteTopic(name string) error
	DeleteTopicByID(id controller.TopicID) (string, error)
	CreatePartitions(name string, total int32, validateOnly bool) error
	AlterTopicConfig(name string, ops []broker.ConfigOp, validateOnly bool) error
	DeleteRecords(ctx context.Context, p *broker.Partition, offset int64) (int64, error)
}

// records writes and reads partitions: Produce, InitProducerId, Fetch,
// ListOffsets, DescribeProducers.
type records interface {
	StartProduce(ctx context.Context, topic string, partition int32, records []byte, opts broker.ProduceOptions) (broker.PendingAppend, error)
	produceBuffers
	InitProducerID() (id int64, epoch int16, err error)
	Fetch(ctx context.Context, req *broker.FetchRequest, out []broker.FetchResult)
	ListOffset(p *broker.Partition, timestamp int64, isolation int8) (offset, ts int64, epoch int32, err error)
	Producers(p *broker.Partition) ([]broker.ProducerInfo, error)
}

// groupCoordination is the classic group protocol's coordinator.
type groupCoordination interface {
	Groups() *group.Coordinator
}

// transactions are the transaction coordinator and the partitions'
// side of markers.
type transactions interface {
	Transactions() (*txn.Coordinator, error)
	ExistingTransactions() (*txn.Coordinator, bool)
	TransactionCoordinator(id string) (broker.BrokerInfo, error)
	WriteTxnMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, tps []txn.TopicPartition) []error
}

// clusterProperties are the cluster's properties, which DescribeConfigs
// and AlterConfigs of brokers read and change.
type clusterProperties interface {
	Properties() *config.Values
	AlterClusterProperties(changes []broker.PropertyChange, validateOnly bool) error
}

// security is authorization and the users: ACLs, SCRAM credentials,
// SASL PLAIN's password check.
type security interface {
	AuthorizationEnabled() bool
	Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
	AuthorizeByResourceType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool
	CreateACLs(bindings []controller.ACLBinding) []error
	DeleteACLs(filters []controller.ACLFilter) []broker.ACLDeletion
	DescribeACLs(filter controller.ACLFilter) ([]controller.ACLBinding, error)
	ScramCredential(user, mechanism string) (controller.ScramCredential, bool)
	ScramCredentials() []controller.ScramCredential
	AlterScramCredentials(deletions []controller.ScramCredentialKey, upsertions []controller.ScramCredential) error
	VerifyPassword(user, password string) bool
}

// operations are what the operator tools ask of the cluster:
// ElectLeaders, DescribeLogDirs, DescribeQuorum.
type operations interface {
	ElectPreferredLeaders(ctx context.Context, refs []broker.PartitionRef) []broker.ElectionResult
	LogDirs(wanted func(topic string, partition int32) bool) []broker.LogDir
	ControllerQuorum(ctx context.Context) (broker.QuorumInfo, error)
}

// reassignments are partition reassignments: AlterPartitionReassignments,
// ListPartitionReassignments.
type reassignments interface {
	ReassignPartition(topic string, partition int32, target []int32) error
	Reassignments(wanted func(topic string, partition int32) bool) []broker.Reassignment
}

// clientQuotas are the client quotas: DescribeClientQuotas and
// AlterClientQuotas change and read them, the quota manager enforces
// them (rebuilding what it derives from them when the index moves).
type clientQuotas interface {
	DescribeClientQuotas(f controller.ClientQuotaFilter) ([]controller.ClientQuota, error)
	AlterClientQuotas(alts []controller.ClientQuotaAlteration, validateOnly bool) []error
	ClientQuotas() []controller.ClientQuota
	ClientQuotasIndex() uint64
}

// domain is the broker as the handlers reach it, a family at a time.
type domain struct {
	cluster    clusterView
	topics     topicCatalog
	topicAdmin topicAdmin
	records    records
	groups     groupCoordination
	txns       transactions
	props      clusterProperties
	security   security
	operations operations
	reassign   reassignments
	quotas     clientQuotas
}

func domainOf(b *broker.Broker) domain {
	return domain{cluster: b, topics: b, topicAdmin: b, records: b, groups: b, txns: b, props: b, security: b, operations: b, reassign: b, quotas: b}
}
