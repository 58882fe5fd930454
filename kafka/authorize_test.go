package kafka

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log/logtest"
)

// opBits is the bit set of ops, spelled out independently of
// supportedOperations.
func opBits(ops ...kmsg.ACLOperation) int32 {
	var set int32
	for _, op := range ops {
		set |= 1 << op
	}
	return set
}

// grant is an ALLOW binding for the test connections' principal.
func grant(rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name string, op kmsg.ACLOperation) controller.ACLBinding {
	return aclBinding(rt, pattern, name, anonymousPrincipal, op, kmsg.ACLPermissionTypeAllow)
}

func grantTopic(name string, op kmsg.ACLOperation) controller.ACLBinding {
	return grant(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, name, op)
}

func grantGroup(name string, op kmsg.ACLOperation) controller.ACLBinding {
	return grant(kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, name, op)
}

func grantCluster(op kmsg.ACLOperation) controller.ACLBinding {
	return grant(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, controller.ClusterResourceName, op)
}

// TestSupportedOperations: the KIP-430 bit sets are Kafka 4's
// AclEntry.supportedOperations, by the operations' wire codes.
func TestSupportedOperations(t *testing.T) {
	for _, tc := range []struct {
		rt   kmsg.ACLResourceType
		want []kmsg.ACLOperation
	}{
		{kmsg.ACLResourceTypeTopic, []kmsg.ACLOperation{3, 4, 5, 6, 7, 8, 10, 11}},
		{kmsg.ACLResourceTypeGroup, []kmsg.ACLOperation{3, 6, 8, 10, 11}},
		{kmsg.ACLResourceTypeCluster, []kmsg.ACLOperation{5, 7, 8, 9, 10, 11, 12}},
		{kmsg.ACLResourceTypeTransactionalId, []kmsg.ACLOperation{4, 8}},
		{kmsg.ACLResourceTypeDelegationToken, []kmsg.ACLOperation{8}},
		{kmsg.ACLResourceTypeUser, []kmsg.ACLOperation{13, 14}},
		{kmsg.ACLResourceTypeAny, nil},
	} {
		if got, want := supportedOperations(tc.rt), opBits(tc.want...); got != want {
			t.Errorf("%s: %b, want %b", tc.rt, got, want)
		}
	}
}

// TestRequestAuthorizerOperations: the bit set holds what the ACLs allow,
// implied operations included; everything supported with authorization
// off or for a superuser.
func TestRequestAuthorizerOperations(t *testing.T) {
	_, b, _ := startServer(t)
	seedACLs(t, b,
		aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "orders-", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "orders-us", "User:alice", kmsg.ACLOperationAlterConfigs, kmsg.ACLPermissionTypeAllow),
		aclBinding(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "orders-eu", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny),
		aclBinding(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, controller.ClusterResourceName, "User:alice", kmsg.ACLOperationIdempotentWrite, kmsg.ACLPermissionTypeAllow),
	)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	as := func(principal string, enabled bool) requestAuthorizer {
		return requestAuthorizer{security: b, logger: logger, enabled: enabled, principal: principal, host: "127.0.0.1"}
	}
	topic, cluster := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster
	off := as("User:alice", false)
	if got := off.operations(topic, "payments"); got != supportedOperations(topic) {
		t.Errorf("authorization off: %b, want every topic operation %b", got, supportedOperations(topic))
	}
	enableAuthorization(t, b)
	alice := as("User:alice", true)
	for _, tc := range []struct {
		rt   kmsg.ACLResourceType
		name string
		want int32
	}{
		{topic, "orders-jp", opBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe)},
		{topic, "orders-us", opBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationDescribeConfigs)},
		// A DENY of READ takes READ away but not the DESCRIBE the
		// prefixed READ implies.
		{topic, "orders-eu", opBits(kmsg.ACLOperationDescribe)},
		{topic, "payments", 0},
		{cluster, clusterResourceName, opBits(kmsg.ACLOperationIdempotentWrite)},
	} {
		if got := alice.operations(tc.rt, tc.name); got != tc.want {
			t.Errorf("alice on %s %s: %b, want %b", tc.rt, tc.name, got, tc.want)
		}
	}
	if alice.topic(kmsg.ACLOperationRead, "orders-eu") || !alice.topic(kmsg.ACLOperationRead, "orders-jp") || alice.topic(kmsg.ACLOperationWrite, "orders-jp") {
		t.Error("alice's topic checks do not follow her ACLs")
	}
	if alice.mayCreateTopic("orders-jp") {
		t.Error("alice may create topics without CREATE")
	}
	// A refusal is logged with who asked for what; a check that only
	// narrows an answer is not.
	var logged bytes.Buffer
	alice.logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	alice.topicQuietly(kmsg.ACLOperationWrite, "orders-jp")
	if logged.Len() != 0 {
		t.Errorf("a quiet check logged %q", logged.String())
	}
	alice.topic(kmsg.ACLOperationWrite, "orders-jp")
	if line := logged.String(); !strings.Contains(line, "principal=User:alice") || !strings.Contains(line, "operation=WRITE") || !strings.Contains(line, "resource=orders-jp") {
		t.Errorf("the refusal logged %q", line)
	}
	if err := b.SetClusterProperty("superusers", "admin"); err != nil {
		t.Fatal(err)
	}
	admin := as("User:admin", true)
	if got := admin.operations(cluster, clusterResourceName); got != supportedOperations(cluster) {
		t.Errorf("superuser on the cluster: %b, want %b", got, supportedOperations(cluster))
	}
}

// authorizationFixture is a server with authorization on, topics orders
// and payments (one record each) and groups g1 and g2 with committed
// offsets, made before authorization was turned on; the connection is
// User:ANONYMOUS with no ACLs yet.
type authorizationFixture struct {
	b        *broker.Broker
	c        *rawConn
	orders   *broker.Topic
	payments *broker.Topic
}

func newAuthorizationFixture(t *testing.T) *authorizationFixture {
	t.Helper()
	_, b, addr := startServer(t)
	f := &authorizationFixture{b: b, c: dial(t, addr)}
	var err error
	if f.orders, err = b.CreateTopic(broker.CreateTopicRequest{Name: "orders", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if f.payments, err = b.CreateTopic(broker.CreateTopicRequest{Name: "payments", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"orders", "payments"} {
		resp := f.c.roundTrip(produceRequest(9, -1, topic, logtest.Batch{Records: 1, ValueSize: 10}.Encode())).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("producing to %s: %s", topic, kerr.ErrorForCode(code))
		}
	}
	for _, g := range []string{"g1", "g2"} {
		resp := f.c.roundTrip(offsetCommit(g, "orders", "payments")).(*kmsg.OffsetCommitResponse)
		for _, st := range resp.Topics {
			if code := st.Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("committing %s %s: %s", g, st.Topic, kerr.ErrorForCode(code))
			}
		}
	}
	enableAuthorization(t, b)
	return f
}

func offsetCommit(group string, topics ...string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = group, -1
	for _, topic := range topics {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// codeIs fails the test unless code is want.
func codeIs(t *testing.T, what string, code int16, want *kerr.Error) {
	t.Helper()
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if code != wantCode {
		t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(code), kerr.ErrorForCode(wantCode))
	}
}

// TestAuthorizeProduceFetch: WRITE to produce, READ to fetch, per topic;
// a name checked before existence; CREATE needed to create on produce;
// CLUSTER_ACTION for replica fetches.
func TestAuthorizeProduceFetch(t *testing.T) {
	f := newAuthorizationFixture(t)
	if err := f.b.SetClusterProperty("auto_create_topics_enabled", "true"); err != nil {
		t.Fatal(err)
	}
	seedACLs(t, f.b, grantTopic("orders", kmsg.ACLOperationWrite), grantTopic("payments", kmsg.ACLOperationRead),
		grantTopic("fresh", kmsg.ACLOperationWrite), grantTopic("fresh", kmsg.ACLOperationCreate), grantTopic("nocreate", kmsg.ACLOperationWrite))
	batch := logtest.Batch{Records: 1, ValueSize: 10}.Encode()
	produce := func(topic string) int16 {
		resp := f.c.roundTrip(produceRequest(9, -1, topic, batch)).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	codeIs(t, "produce to orders (WRITE)", produce("orders"), nil)
	codeIs(t, "produce to payments (READ only)", produce("payments"), kerr.TopicAuthorizationFailed)
	codeIs(t, "produce to fresh (WRITE, CREATE)", produce("fresh"), nil)
	codeIs(t, "produce to nocreate (WRITE, no CREATE)", produce("nocreate"), kerr.UnknownTopicOrPartition)
	if f.b.Topic("fresh") == nil || f.b.Topic("nocreate") != nil {
		t.Errorf("created: fresh %v, nocreate %v; want only fresh", f.b.Topic("fresh") != nil, f.b.Topic("nocreate") != nil)
	}

	fetch := func(req *kmsg.FetchRequest) int16 {
		return f.c.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	codeIs(t, "fetch v12 payments (READ)", fetch(fetchRequest(12, "payments", [16]byte{}, 0, 1<<20)), nil)
	codeIs(t, "fetch v13 payments (READ)", fetch(fetchRequest(13, "", f.payments.ID(), 0, 1<<20)), nil)
	codeIs(t, "fetch v12 orders (WRITE only)", fetch(fetchRequest(12, "orders", [16]byte{}, 0, 1<<20)), kerr.TopicAuthorizationFailed)
	codeIs(t, "fetch v13 orders (WRITE only)", fetch(fetchRequest(13, "", f.orders.ID(), 0, 1<<20)), kerr.TopicAuthorizationFailed)
	codeIs(t, "fetch v12 of a topic that does not exist", fetch(fetchRequest(12, "ghost", [16]byte{}, 0, 1<<20)), kerr.TopicAuthorizationFailed)
	codeIs(t, "fetch v13 of an unknown topic id", fetch(fetchRequest(13, "", [16]byte{1}, 0, 1<<20)), kerr.UnknownTopicID)
	replica := fetchRequest(12, "payments", [16]byte{}, 0, 1<<20)
	replica.ReplicaID = 1
	codeIs(t, "replica fetch without CLUSTER_ACTION", fetch(replica), kerr.TopicAuthorizationFailed)
	seedACLs(t, f.b, grantCluster(kmsg.ACLOperationClusterAction))
	replica = fetchRequest(12, "orders", [16]byte{}, 0, 1<<20)
	replica.ReplicaID = 1
	codeIs(t, "replica fetch with CLUSTER_ACTION", fetch(replica), nil)
}

// TestAuthorizeTopicDescribe: Metadata, ListOffsets and
// OffsetForLeaderEpoch need DESCRIBE; a listing of every topic leaves the
// others out; authorized operations on request.
func TestAuthorizeTopicDescribe(t *testing.T) {
	f := newAuthorizationFixture(t)
	seedACLs(t, f.b, grantTopic("orders", kmsg.ACLOperationRead))

	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(10)
	all.IncludeClusterAuthorizedOperations, all.IncludeTopicAuthorizedOperations = true, true
	md := f.c.roundTrip(all).(*kmsg.MetadataResponse)
	if len(md.Topics) != 1 || *md.Topics[0].Topic != "orders" {
		t.Fatalf("all topics: %d listed, want orders alone", len(md.Topics))
	}
	if got, want := md.Topics[0].AuthorizedOperations, opBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe); got != want {
		t.Errorf("orders' authorized operations %b, want %b", got, want)
	}
	if md.AuthorizedOperations != 0 {
		t.Errorf("cluster authorized operations without DESCRIBE on it: %b, want 0", md.AuthorizedOperations)
	}

	named := kmsg.NewPtrMetadataRequest()
	named.SetVersion(12)
	named.IncludeTopicAuthorizedOperations = true
	for _, name := range []string{"orders", "payments", "ghost"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		named.Topics = append(named.Topics, rt)
	}
	byID := kmsg.NewMetadataRequestTopic()
	byID.TopicID = f.payments.ID()
	named.Topics = append(named.Topics, byID)
	md = f.c.roundTrip(named).(*kmsg.MetadataResponse)
	if len(md.Topics) != 4 {
		t.Fatalf("%d topics answered, want 4", len(md.Topics))
	}
	codeIs(t, "metadata orders", md.Topics[0].ErrorCode, nil)
	codeIs(t, "metadata payments", md.Topics[1].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "metadata of a topic that does not exist", md.Topics[2].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "metadata payments by id", md.Topics[3].ErrorCode, kerr.TopicAuthorizationFailed)
	if md.Topics[3].Topic != nil || md.Topics[3].TopicID != f.payments.ID() {
		t.Errorf("refused topic by id: name %v, id %x; want a null name and the id", md.Topics[3].Topic, md.Topics[3].TopicID)
	}
	if md.Topics[1].AuthorizedOperations != operationsNotRequested || len(md.Topics[1].Partitions) != 0 {
		t.Errorf("refused topic shows operations %d and %d partitions", md.Topics[1].AuthorizedOperations, len(md.Topics[1].Partitions))
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	for _, name := range []string{"orders", "payments"} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = name
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
	}
	offsets := f.c.roundTrip(lo).(*kmsg.ListOffsetsResponse)
	codeIs(t, "list offsets orders", offsets.Topics[0].Partitions[0].ErrorCode, nil)
	codeIs(t, "list offsets payments", offsets.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	ep := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ep.SetVersion(4)
	for _, name := range []string{"orders", "payments"} {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = name
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
		rt.Partitions = append(rt.Partitions, rp)
		ep.Topics = append(ep.Topics, rt)
	}
	epochs := f.c.roundTrip(ep).(*kmsg.OffsetForLeaderEpochResponse)
	codeIs(t, "offset for leader epoch orders", epochs.Topics[0].Partitions[0].ErrorCode, nil)
	codeIs(t, "offset for leader epoch payments", epochs.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
}

// TestAuthorizeGroups: READ on the group to take part and commit,
// DESCRIBE to find, describe, list and fetch offsets, DELETE to delete.
func TestAuthorizeGroups(t *testing.T) {
	f := newAuthorizationFixture(t)
	seedACLs(t, f.b, grantGroup("g1", kmsg.ACLOperationRead), grantTopic("orders", kmsg.ACLOperationRead))

	commit := f.c.roundTrip(offsetCommit("g2", "orders")).(*kmsg.OffsetCommitResponse)
	codeIs(t, "commit to g2", commit.Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)
	commit = f.c.roundTrip(offsetCommit("g1", "orders", "payments")).(*kmsg.OffsetCommitResponse)
	if len(commit.Topics) != 2 || commit.Topics[0].Topic != "orders" || commit.Topics[1].Topic != "payments" {
		t.Fatalf("commit to g1 answered %+v", commit.Topics)
	}
	codeIs(t, "commit to g1 orders", commit.Topics[0].Partitions[0].ErrorCode, nil)
	codeIs(t, "commit to g1 payments", commit.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(8)
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g1"}, // every topic
		{Group: "g1", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "payments", Partitions: []int32{0}}, {Topic: "orders", Partitions: []int32{0}}}},
		{Group: "g2"},
	}
	fetched := f.c.roundTrip(fetch).(*kmsg.OffsetFetchResponse)
	if len(fetched.Groups) != 3 {
		t.Fatalf("%d groups answered, want 3", len(fetched.Groups))
	}
	if g := fetched.Groups[0]; g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Topic != "orders" {
		t.Errorf("g1, every topic: %+v; want orders alone", g)
	}
	if g := fetched.Groups[1]; len(g.Topics) != 2 || g.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code ||
		g.Topics[0].Partitions[0].Offset != -1 || g.Topics[1].Partitions[0].ErrorCode != 0 || g.Topics[1].Partitions[0].Offset != 1 {
		t.Errorf("g1, named topics: %+v; want payments refused, orders at 1", g)
	}
	codeIs(t, "offset fetch v8 g2", fetched.Groups[2].ErrorCode, kerr.GroupAuthorizationFailed)
	v1 := kmsg.NewPtrOffsetFetchRequest()
	v1.SetVersion(1)
	v1.Group, v1.Topics = "g2", []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
	old := f.c.roundTrip(v1).(*kmsg.OffsetFetchResponse)
	if len(old.Topics) != 1 {
		t.Fatalf("offset fetch v1 g2: %d topics, want the one asked for", len(old.Topics))
	}
	codeIs(t, "offset fetch v1 g2 (per partition)", old.Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorKeys = []string{"g1", "g2"}
	found := f.c.roundTrip(find).(*kmsg.FindCoordinatorResponse)
	codeIs(t, "find coordinator g1", found.Coordinators[0].ErrorCode, nil)
	codeIs(t, "find coordinator g2", found.Coordinators[1].ErrorCode, kerr.GroupAuthorizationFailed)

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(5)
	describe.Groups, describe.IncludeAuthorizedOperations = []string{"g2", "g1"}, true
	described := f.c.roundTrip(describe).(*kmsg.DescribeGroupsResponse)
	codeIs(t, "describe g2", described.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)
	codeIs(t, "describe g1", described.Groups[1].ErrorCode, nil)
	if described.Groups[0].Group != "g2" || described.Groups[1].Group != "g1" {
		t.Errorf("described %s, %s; want g2, g1", described.Groups[0].Group, described.Groups[1].Group)
	}
	if got, want := described.Groups[1].AuthorizedOperations, opBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe); got != want {
		t.Errorf("g1's authorized operations %b, want %b", got, want)
	}

	listed := f.c.roundTrip(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if len(listed.Groups) != 1 || listed.Groups[0].Group != "g1" {
		t.Errorf("listed %+v; want g1 alone", listed.Groups)
	}
	seedACLs(t, f.b, grantCluster(kmsg.ACLOperationDescribe))
	if listed = f.c.roundTrip(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse); len(listed.Groups) != 2 {
		t.Errorf("with DESCRIBE on the cluster listed %d groups, want 2", len(listed.Groups))
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.ProtocolType = "g2", 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	codeIs(t, "join g2", f.c.roundTrip(join).(*kmsg.JoinGroupResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g2"
	codeIs(t, "heartbeat g2", f.c.roundTrip(hb).(*kmsg.HeartbeatResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group = "g2"
	codeIs(t, "sync g2", f.c.roundTrip(sync).(*kmsg.SyncGroupResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g2"
	codeIs(t, "leave g2", f.c.roundTrip(leave).(*kmsg.LeaveGroupResponse).ErrorCode, kerr.GroupAuthorizationFailed)

	odel := kmsg.NewPtrOffsetDeleteRequest()
	odel.Group = "g1"
	odel.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	codeIs(t, "offset delete g1 without DELETE", f.c.roundTrip(odel).(*kmsg.OffsetDeleteResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	seedACLs(t, f.b, grantGroup("g1", kmsg.ACLOperationDelete))
	odel.Topics = append(odel.Topics, kmsg.OffsetDeleteRequestTopic{Topic: "payments", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
	deletedOffsets := f.c.roundTrip(odel).(*kmsg.OffsetDeleteResponse)
	codeIs(t, "offset delete g1", deletedOffsets.ErrorCode, nil)
	codeIs(t, "offset delete g1 orders", deletedOffsets.Topics[0].Partitions[0].ErrorCode, nil)
	codeIs(t, "offset delete g1 payments", deletedOffsets.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g2", "g1"}
	deleted := f.c.roundTrip(del).(*kmsg.DeleteGroupsResponse)
	codeIs(t, "delete g2", deleted.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)
	codeIs(t, "delete g1", deleted.Groups[1].ErrorCode, nil)
}

// TestAuthorizeAdmin: the topic and cluster admin APIs.
func TestAuthorizeAdmin(t *testing.T) {
	f := newAuthorizationFixture(t)
	seedACLs(t, f.b, grantTopic("orders", kmsg.ACLOperationDescribeConfigs),
		grant(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "new-", kmsg.ACLOperationCreate))

	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	for _, name := range []string{"new-a", "other"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, -1
		create.Topics = append(create.Topics, rt)
	}
	created := f.c.roundTrip(create).(*kmsg.CreateTopicsResponse)
	codeIs(t, "create new-a (prefixed CREATE)", created.Topics[0].ErrorCode, nil)
	codeIs(t, "create other", created.Topics[1].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "new-a's configs without DESCRIBE_CONFIGS", created.Topics[0].ConfigErrorCode, kerr.TopicAuthorizationFailed)
	if len(created.Topics[0].Configs) != 0 || created.Topics[0].NumPartitions != 1 {
		t.Errorf("new-a: %d configs, %d partitions; want none and 1", len(created.Topics[0].Configs), created.Topics[0].NumPartitions)
	}

	parts := kmsg.NewPtrCreatePartitionsRequest()
	parts.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "orders", Count: 2}}
	codeIs(t, "create partitions orders", f.c.roundTrip(parts).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "orders", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	codeIs(t, "delete records orders", f.c.roundTrip(dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("payments")}, {TopicID: f.orders.ID()}}
	dts := f.c.roundTrip(dt).(*kmsg.DeleteTopicsResponse)
	codeIs(t, "delete payments", dts.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "delete orders by id", dts.Topics[1].ErrorCode, kerr.TopicAuthorizationFailed)
	if dts.Topics[0].TopicID != [16]byte{} || dts.Topics[1].Topic != nil {
		t.Errorf("refused deletions reveal an id %x or a name %v", dts.Topics[0].TopicID, dts.Topics[1].Topic)
	}
	if f.b.Topic("payments") == nil || f.b.Topic("orders") == nil {
		t.Fatal("a refused deletion deleted")
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "orders"}, {kmsg.ConfigResourceTypeTopic, "payments"}, {kmsg.ConfigResourceTypeBroker, ""}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		dc.Resources = append(dc.Resources, rr)
	}
	dcs := f.c.roundTrip(dc).(*kmsg.DescribeConfigsResponse)
	codeIs(t, "describe configs orders", dcs.Resources[0].ErrorCode, nil)
	codeIs(t, "describe configs payments", dcs.Resources[1].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "describe configs broker", dcs.Resources[2].ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(dcs.Resources[0].Configs) == 0 || len(dcs.Resources[1].Configs) != 0 {
		t.Errorf("configs shown: orders %d, payments %d", len(dcs.Resources[0].Configs), len(dcs.Resources[1].Configs))
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct {
		typ              kmsg.ConfigResourceType
		name, key, value string
	}{
		{kmsg.ConfigResourceTypeTopic, "orders", "retention.ms", "1000"},
		{kmsg.ConfigResourceTypeBroker, "", "log_retention_ms", "1000"},
	} {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: r.key, Value: kmsg.StringPtr(r.value)}}
		alter.Resources = append(alter.Resources, rr)
	}
	altered := f.c.roundTrip(alter).(*kmsg.IncrementalAlterConfigsResponse)
	codeIs(t, "alter orders' configs", altered.Resources[0].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "alter the cluster's", altered.Resources[1].ErrorCode, kerr.ClusterAuthorizationFailed)
	if _, set := f.b.Properties().Get("log_retention_ms"); set {
		t.Error("a refused alter changed log_retention_ms")
	}
	legacy := kmsg.NewPtrAlterConfigsRequest()
	legacy.Resources = []kmsg.AlterConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders", Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}},
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "", Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "log_retention_ms", Value: kmsg.StringPtr("1000")}}},
	}
	legacyAltered := f.c.roundTrip(legacy).(*kmsg.AlterConfigsResponse)
	codeIs(t, "legacy alter of orders' configs", legacyAltered.Resources[0].ErrorCode, kerr.TopicAuthorizationFailed)
	codeIs(t, "legacy alter of the cluster's", legacyAltered.Resources[1].ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(f.orders.Configs()) != 0 {
		t.Errorf("a refused alter changed orders' configs: %v", f.orders.Configs())
	}
	seedACLs(t, f.b, grantCluster(kmsg.ACLOperationAlterConfigs))
	altered = f.c.roundTrip(alter).(*kmsg.IncrementalAlterConfigsResponse)
	codeIs(t, "alter the cluster's with ALTER_CONFIGS", altered.Resources[1].ErrorCode, nil)

	cluster := kmsg.NewPtrDescribeClusterRequest()
	cluster.IncludeClusterAuthorizedOperations = true
	dcl := f.c.roundTrip(cluster).(*kmsg.DescribeClusterResponse)
	if dcl.ErrorCode != 0 || len(dcl.Brokers) == 0 || dcl.ClusterAuthorizedOperations != 0 {
		t.Errorf("describe cluster without DESCRIBE: error %d, %d brokers, operations %b; want brokers and 0", dcl.ErrorCode, len(dcl.Brokers), dcl.ClusterAuthorizedOperations)
	}
	seedACLs(t, f.b, grantCluster(kmsg.ACLOperationDescribe))
	dcl = f.c.roundTrip(cluster).(*kmsg.DescribeClusterResponse)
	if want := opBits(kmsg.ACLOperationDescribe, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationDescribeConfigs); dcl.ClusterAuthorizedOperations != want {
		t.Errorf("cluster authorized operations %b, want %b", dcl.ClusterAuthorizedOperations, want)
	}
}

// TestAuthorizeEnterpriseProperty: turning an enterprise property on
// needs ALTER_CONFIGS on the cluster, and still the licence (here the
// built-in trial is over and there is none).
func TestAuthorizeEnterpriseProperty(t *testing.T) {
	var ahead atomic.Int64 // how far the broker's clock is ahead
	node := config.Node{NodeID: 0, DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", AdvertisedKafkaAddr: "127.0.0.1:9092",
		AdminAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0", LogLevel: "info", MaxRequestBytes: 1 << 20}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(broker.Options{Node: node, Logger: logger,
		Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	_, addr := serveKafka(t, b, Options{MaxRequestBytes: node.MaxRequestBytes, AdvertisedAddr: node.AdvertisedKafkaAddr, Logger: logger})
	c := dial(t, addr)
	ahead.Store(int64(config.BuiltinTrialPeriod + 24*time.Hour))
	enableAuthorization(t, b)

	set := func(value string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker,
			Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "kafka_fetch_read_coalescing_enabled", Value: kmsg.StringPtr(value)}}}}
		return c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	codeIs(t, "turning it on without ALTER_CONFIGS", set("true"), kerr.ClusterAuthorizationFailed)
	codeIs(t, "turning it off without ALTER_CONFIGS", set("false"), kerr.ClusterAuthorizationFailed)
	seedACLs(t, b, grantCluster(kmsg.ACLOperationAlterConfigs))
	codeIs(t, "turning it on with ALTER_CONFIGS, without a licence", set("true"), kerr.PolicyViolation)
	codeIs(t, "turning it off with ALTER_CONFIGS", set("false"), nil)
}

// TestAuthorizeProducerIDAndCredentials: an idempotent producer needs
// IDEMPOTENT_WRITE or WRITE on a topic (KIP-679); the SCRAM credential
// APIs need DESCRIBE / ALTER on the cluster.
func TestAuthorizeProducerIDAndCredentials(t *testing.T) {
	f := newAuthorizationFixture(t)
	initPID := func() int16 {
		return f.c.roundTrip(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	codeIs(t, "init producer id with no grant", initPID(), kerr.ClusterAuthorizationFailed)
	// Kafka's authorizeByResourceType: WRITE on a prefix no topic has
	// yet counts, unless a DENY on a shorter prefix covers it.
	seedACLs(t, f.b, grant(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "logs-eu-", kmsg.ACLOperationWrite))
	codeIs(t, "init producer id with WRITE on a prefix no topic has", initPID(), nil)
	denyLogs := grant(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "logs-", kmsg.ACLOperationWrite)
	denyLogs.Permission = kmsg.ACLPermissionTypeDeny
	seedACLs(t, f.b, denyLogs)
	codeIs(t, "init producer id with WRITE on a prefix a DENY covers", initPID(), kerr.ClusterAuthorizationFailed)
	seedACLs(t, f.b, grantTopic("payments", kmsg.ACLOperationWrite))
	codeIs(t, "init producer id with WRITE on a topic", initPID(), nil)

	describe := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	describe.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "alice"}}
	described := f.c.roundTrip(describe).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	codeIs(t, "describe credentials", described.ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(described.Results) != 1 || described.Results[0].User != "alice" || described.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("describe credentials results %+v", described.Results)
	}
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "alice", Mechanism: 1, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)},
		{Name: "bob", Mechanism: 1, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)},
		{Name: "alice", Mechanism: 2, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 64)},
	}
	altered := f.c.roundTrip(alter).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(altered.Results) != 2 || altered.Results[0].User != "alice" || altered.Results[1].User != "bob" {
		t.Fatalf("alter credentials results %+v; want alice, bob", altered.Results)
	}
	for _, r := range altered.Results {
		codeIs(t, "alter credentials of "+r.User, r.ErrorCode, kerr.ClusterAuthorizationFailed)
	}
	if _, ok := f.b.ScramCredential("alice", config.MechanismSCRAMSHA256); ok {
		t.Error("a refused alter stored a credential")
	}
}

// TestAuthorizeSuperuser: a superuser needs no ACL.
func TestAuthorizeSuperuser(t *testing.T) {
	f := newAuthorizationFixture(t)
	if err := f.b.SetClusterProperty("superusers", "ANONYMOUS"); err != nil {
		t.Fatal(err)
	}
	resp := f.c.roundTrip(produceRequest(9, -1, "payments", logtest.Batch{Records: 1, ValueSize: 10}.Encode())).(*kmsg.ProduceResponse)
	codeIs(t, "superuser produce", resp.Topics[0].Partitions[0].ErrorCode, nil)
	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(12)
	md := f.c.roundTrip(all).(*kmsg.MetadataResponse)
	if len(md.Topics) < 2 {
		t.Errorf("superuser sees %d topics", len(md.Topics))
	}
	commit := f.c.roundTrip(offsetCommit("g2", "payments")).(*kmsg.OffsetCommitResponse)
	codeIs(t, "superuser commit", commit.Topics[0].Partitions[0].ErrorCode, nil)
}

// TestEveryAPIAuthorized keeps the list of APIs whose authorization is
// tested (here and in the ACL APIs' own tests) in step with the APIs
// served: a new API needs its checks and a test of them.
func TestEveryAPIAuthorized(t *testing.T) {
	unchecked := map[string]bool{"ApiVersions": true, "SaslHandshake": true, "SaslAuthenticate": true}
	tested := map[string]string{
		"Produce":                      "TestAuthorizeProduceFetch",
		"Fetch":                        "TestAuthorizeProduceFetch",
		"ListOffsets":                  "TestAuthorizeTopicDescribe",
		"Metadata":                     "TestAuthorizeTopicDescribe",
		"OffsetForLeaderEpoch":         "TestAuthorizeTopicDescribe",
		"OffsetCommit":                 "TestAuthorizeGroups",
		"OffsetFetch":                  "TestAuthorizeGroups",
		"OffsetDelete":                 "TestAuthorizeGroups",
		"FindCoordinator":              "TestAuthorizeGroups",
		"JoinGroup":                    "TestAuthorizeGroups",
		"Heartbeat":                    "TestAuthorizeGroups",
		"LeaveGroup":                   "TestAuthorizeGroups",
		"SyncGroup":                    "TestAuthorizeGroups",
		"DescribeGroups":               "TestAuthorizeGroups",
		"ListGroups":                   "TestAuthorizeGroups",
		"DeleteGroups":                 "TestAuthorizeGroups",
		"ConsumerGroupHeartbeat":       "TestAuthorizeConsumerGroups",
		"ConsumerGroupDescribe":        "TestAuthorizeConsumerGroups",
		"CreateTopics":                 "TestAuthorizeAdmin",
		"DeleteTopics":                 "TestAuthorizeAdmin",
		"DeleteRecords":                "TestAuthorizeAdmin",
		"CreatePartitions":             "TestAuthorizeAdmin",
		"DescribeConfigs":              "TestAuthorizeAdmin",
		"AlterConfigs":                 "TestAuthorizeAdmin",
		"IncrementalAlterConfigs":      "TestAuthorizeAdmin",
		"DescribeCluster":              "TestAuthorizeAdmin",
		"InitProducerId":               "TestAuthorizeProducerIDAndCredentials",
		"DescribeUserScramCredentials": "TestAuthorizeProducerIDAndCredentials",
		"AlterUserScramCredentials":    "TestAuthorizeProducerIDAndCredentials",
		"DescribeAcls":                 "TestDescribeAclsNeedsClusterDescribe",
		"CreateAcls":                   "TestCreateAclsNeedsClusterAlter",
		"DeleteAcls":                   "TestDeleteAclsNeedsClusterAlter",
		"ElectLeaders":                 "TestElectLeadersAgainstFakes",
		"DescribeLogDirs":              "TestDescribeLogDirsAgainstFakes",
		"DescribeQuorum":               "TestDescribeQuorumAgainstFakes",
		"DescribeProducers":            "TestDescribeProducersAuthorization",
		"AlterPartitionReassignments":  "TestReassignmentsAuthorization",
		"ListPartitionReassignments":   "TestReassignmentsAuthorization",
		"DescribeClientQuotas":         "TestAuthorizeClientQuotas",
		"AlterClientQuotas":            "TestAuthorizeClientQuotas",
		"AddPartitionsToTxn":           "TestAuthorizeTransactions",
		"AddOffsetsToTxn":              "TestAuthorizeTransactions",
		"EndTxn":                       "TestAuthorizeTransactions",
		"WriteTxnMarkers":              "TestAuthorizeTransactions",
		"DescribeTransactions":         "TestAuthorizeTransactions",
		"ListTransactions":             "TestAuthorizeTransactions",
		"TxnOffsetCommit":              "TestAuthorizeTransactions",
	}
	for _, a := range new(Server).newAPITable() {
		if a.name == "" || unchecked[a.name] {
			continue
		}
		if tested[a.name] == "" {
			t.Errorf("%s (key %d) is served but no test covers its authorization", a.name, a.key)
		}
	}
}

// TestAuthorizeConsumerGroups: KIP-848's heartbeat needs READ on the
// group and DESCRIBE on every subscribed topic; its describe needs
// DESCRIBE on each group.
func TestAuthorizeConsumerGroups(t *testing.T) {
	f := newAuthorizationFixture(t)
	seedACLs(t, f.b, grantGroup("g1", kmsg.ACLOperationRead), grantTopic("orders", kmsg.ACLOperationRead))
	heartbeat := func(group string, topics ...string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1)
		req.Group, req.MemberID, req.RebalanceTimeoutMillis = group, "member-1", 30000
		req.SubscribedTopicNames, req.Topics = topics, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return f.c.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	codeIs(t, "heartbeat to g2", heartbeat("g2", "orders").ErrorCode, kerr.GroupAuthorizationFailed)
	codeIs(t, "heartbeat to g1 subscribing payments", heartbeat("g1", "orders", "payments").ErrorCode, kerr.TopicAuthorizationFailed)
	joined := heartbeat("g1", "orders")
	codeIs(t, "heartbeat to g1 subscribing orders", joined.ErrorCode, nil)
	if joined.MemberEpoch != 1 || joined.Assignment == nil || len(joined.Assignment.Topics) != 1 {
		t.Errorf("joined at epoch %d with %+v", joined.MemberEpoch, joined.Assignment)
	}

	describe := kmsg.NewPtrConsumerGroupDescribeRequest()
	describe.SetVersion(1)
	describe.Groups, describe.IncludeAuthorizedOperations = []string{"g2", "g1"}, true
	described := f.c.roundTrip(describe).(*kmsg.ConsumerGroupDescribeResponse)
	codeIs(t, "describe g2", described.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)
	codeIs(t, "describe g1", described.Groups[1].ErrorCode, nil)
	if g := described.Groups[1]; g.Group != "g1" || len(g.Members) != 1 || g.Members[0].MemberID != "member-1" {
		t.Errorf("described g1: %+v", g)
	}
	if got, want := described.Groups[1].AuthorizedOperations, opBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe); got != want {
		t.Errorf("g1's authorized operations %b, want %b", got, want)
	}
}
