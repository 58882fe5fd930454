package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log/logtest"
)

// TestAuthorizeTransactions: the transaction APIs ask Kafka's questions:
// WRITE (DESCRIBE for FindCoordinator, DescribeTransactions,
// ListTransactions) on the transactional id, WRITE on the topics added,
// READ on the group of AddOffsetsToTxn, CLUSTER_ACTION for the
// broker-to-broker forms (AddPartitionsToTxn v4+, WriteTxnMarkers).
func TestAuthorizeTransactions(t *testing.T) {
	f := newAuthorizationFixture(t)
	seedACLs(t, f.b,
		grant(kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourcePatternTypeLiteral, "app", kmsg.ACLOperationWrite),
		grant(kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourcePatternTypeLiteral, "seen", kmsg.ACLOperationDescribe),
		grantTopic("orders", kmsg.ACLOperationWrite))

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorType, find.CoordinatorKeys = 1, []string{"other"}
	codeIs(t, "find coordinator of other", f.c.roundTrip(find).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	other := "other"
	init.TransactionalID, init.TransactionTimeoutMillis = &other, 60000
	codeIs(t, "init other", f.c.roundTrip(init).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.SetVersion(3)
	add.TransactionalID, add.ProducerID = "app", 1
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "orders", Partitions: []int32{0}}, {Topic: "payments", Partitions: []int32{0}}}
	added := f.c.roundTrip(add).(*kmsg.AddPartitionsToTxnResponse)
	codeIs(t, "add payments", added.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "add orders beside a refused topic", added.Topics[0].Partitions[0].ErrorCode, kerr.OperationNotAttempted)
	add.TransactionalID = "other"
	add.Topics = add.Topics[:1]
	codeIs(t, "add to other", f.c.roundTrip(add).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	batch := kmsg.NewPtrAddPartitionsToTxnRequest()
	batch.SetVersion(4)
	batch.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "app", VerifyOnly: true}}
	codeIs(t, "add v4 without CLUSTER_ACTION", f.c.roundTrip(batch).(*kmsg.AddPartitionsToTxnResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

	offsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	offsets.SetVersion(3)
	offsets.TransactionalID, offsets.Group = "app", "g1"
	codeIs(t, "add offsets of g1", f.c.roundTrip(offsets).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	offsets.TransactionalID = "other"
	codeIs(t, "add offsets to other", f.c.roundTrip(offsets).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(3)
	end.TransactionalID = "other"
	codeIs(t, "end other", f.c.roundTrip(end).(*kmsg.EndTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	markers := kmsg.NewPtrWriteTxnMarkersRequest()
	markers.SetVersion(1)
	markers.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "orders", Partitions: []int32{0}}}}}
	codeIs(t, "markers without CLUSTER_ACTION", f.c.roundTrip(markers).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode, kerr.ClusterAuthorizationFailed)

	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{"other", "seen"}
	states := f.c.roundTrip(describe).(*kmsg.DescribeTransactionsResponse).TransactionStates
	codeIs(t, "describe other", states[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	if states[1].ErrorCode == kerr.TransactionalIDAuthorizationFailed.Code {
		t.Error("describe seen: refused although DESCRIBE is granted")
	}

	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.SetVersion(3)
	commit.TransactionalID, commit.Group, commit.Generation = "app", "g1", -1
	commit.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	codeIs(t, "txn offset commit to g1", f.c.roundTrip(commit).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)
	commit.TransactionalID = "other"
	codeIs(t, "txn offset commit as other", f.c.roundTrip(commit).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	produce := produceRequest(9, -1, "orders", logtest.Batch{Records: 1}.Encode())
	produce.TransactionID = &other
	codeIs(t, "transactional produce as other", f.c.roundTrip(produce).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)
}
