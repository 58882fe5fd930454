package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOperatorTools: on a 3-broker cluster with the leader balancer off,
// a partition whose preferred replica was away stays led elsewhere until
// an election is asked for. ElectLeaders (kadm, then Kafka's
// kafka-leader-election) hands it back and answers ELECTION_NOT_NEEDED
// for the others; unclean elections are refused with the reason.
// DescribeLogDirs (kadm, then kafka-log-dirs) shows every replica of each
// broker with its size.
func TestOperatorTools(t *testing.T) {
	t.Parallel()
	bs := startReplCluster(t, 3)
	waitClusterView(t, bs, 30*time.Second)
	if code, raw := adminDo(t, bs[0], "PUT", "/v1/cluster_config", `{"upsert":{"enable_leader_balancer":false}}`, nil); code != http.StatusOK {
		t.Fatalf("turning the leader balancer off: %d %s", code, raw)
	}
	const topic, partitions = "ops", 3
	createReplicatedTopic(t, bs[0], topic, partitions, 3, nil)
	waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, 30*time.Second, nil)
	var recs []*kgo.Record
	for p := range int32(partitions) {
		for i := range 50 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	producer, err := kgo.NewClient(append(replClientOpts(bs), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	produceAll(t, producer, recs, 30*time.Second)
	producer.Close()

	// The preferred leader of partition 0 goes away and comes back.
	preferred := preferredReplicas(t, bs[0], topic)
	pref := preferred[0]
	away := brokerByID(t, bs, pref)
	away.Stop(t)
	live := without(bs, pref)
	waitReplicatedLeaders(t, live, live, topic, partitions, 3, 40*time.Second, func(m map[int32]replPartition) error {
		if m[0].Leader == pref || m[0].Leader < 0 {
			return fmt.Errorf("partition 0 still led by %d", m[0].Leader)
		}
		return nil
	})
	away.Start(t)
	waitISR(t, bs, topic, partitions, 3, 60*time.Second)
	before := waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, 30*time.Second, nil)
	if before[0].Leader == pref {
		t.Fatalf("partition 0 led by its preferred replica %d again with the balancer off", pref)
	}

	adm := kadmClient(t, bs)
	set := kadm.TopicsSet{}
	for p := range int32(partitions) {
		set.Add(topic, p)
	}
	var res kadm.ElectLeadersResults
	pollUntil(t, 30*time.Second, "a preferred election of every partition", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		if res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set); err != nil {
			return err
		}
		if r := res[topic][0]; errors.Is(r.Err, kerr.PreferredLeaderNotAvailable) {
			return r.Err // the returning replica's progress has not reached its leader yet
		}
		return nil
	})
	for p := range int32(partitions) {
		r := res[topic][p]
		switch {
		case before[p].Leader != preferred[p]:
			if r.Err != nil {
				t.Errorf("partition %d (led by %d, preferred %d): %v %s", p, before[p].Leader, preferred[p], r.Err, r.ErrMessage)
			}
		case !errors.Is(r.Err, kerr.ElectionNotNeeded):
			t.Errorf("partition %d already led by its preferred replica: %v, want ELECTION_NOT_NEEDED", p, r.Err)
		}
	}
	after := waitReplicatedLeaders(t, bs, bs, topic, partitions, 3, 30*time.Second, nil)
	for p, rp := range after {
		if rp.Leader != preferred[p] {
			t.Errorf("partition %d led by %d after the election, preferred %d", p, rp.Leader, preferred[p])
		}
	}

	// Every partition at once: nothing left to do, so nothing answered.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if all, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil || len(all[topic]) != 0 {
		t.Errorf("electing every partition when all are led by their preferred replicas: %v %v", all, err)
	}

	// Unclean: refused, saying why.
	ureq := kmsg.NewPtrElectLeadersRequest()
	ureq.ElectionType = 1
	ureq.TimeoutMillis = 5000
	ut := kmsg.NewElectLeadersRequestTopic()
	ut.Topic, ut.Partitions = topic, []int32{0}
	ureq.Topics = append(ureq.Topics, ut)
	resp, err := ask(t, bs[1], ureq)
	if err != nil {
		t.Fatal(err)
	}
	ur := resp.(*kmsg.ElectLeadersResponse)
	if len(ur.Topics) != 1 || len(ur.Topics[0].Partitions) != 1 || ur.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code ||
		!strings.Contains(derefStr(ur.Topics[0].Partitions[0].ErrorMessage), "Raft") {
		t.Errorf("unclean election: %+v", ur.Topics)
	}

	// Log directories: every broker holds every replica, sizes on disk.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		d, ok := dirs[int32(b.NodeID)]
		if !ok || len(d) != 1 {
			t.Errorf("broker %d: log dirs %+v", b.NodeID, d)
			continue
		}
		for path, ld := range d {
			if ld.Err != nil || filepath.Base(path) != "topics" {
				t.Errorf("broker %d: dir %s: %v", b.NodeID, path, ld.Err)
			}
			if ld.TotalBytes <= 0 || ld.UsableBytes <= 0 || ld.UsableBytes > ld.TotalBytes {
				t.Errorf("broker %d: total %d usable %d", b.NodeID, ld.TotalBytes, ld.UsableBytes)
			}
			for p := range int32(partitions) {
				if pd, ok := ld.Topics[topic][p]; !ok || pd.Size <= 0 {
					t.Errorf("broker %d: %s/%d: %+v (present %v)", b.NodeID, topic, p, pd, ok)
				}
			}
		}
	}

	// The idempotent producer that wrote the records, as each leader
	// remembers it.
	prods, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		pp, ok := prods[topic].Partitions[p]
		if !ok || pp.Err != nil || len(pp.ActiveProducers) != 1 {
			t.Errorf("DescribeProducers %s/%d: %+v", topic, p, pp)
			continue
		}
		for _, ap := range pp.ActiveProducers {
			if ap.ProducerID < 0 || ap.LastSequence != 49 || ap.LastTimestamp <= 0 || ap.CurrentTxnStartOffset != -1 {
				t.Errorf("DescribeProducers %s/%d: %+v", topic, p, ap)
			}
		}
	}

	// The controller quorum, asked of a broker that may not lead it.
	qreq := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	qreq.Topics = append(qreq.Topics, qt)
	controllerID := waitClusterView(t, bs, 10*time.Second)
	for _, b := range bs {
		resp, err := ask(t, b, qreq)
		if err != nil {
			t.Fatal(err)
		}
		qr := resp.(*kmsg.DescribeQuorumResponse)
		if qr.ErrorCode != 0 || len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 {
			t.Fatalf("DescribeQuorum to node %d: %+v", b.NodeID, qr)
		}
		qp := qr.Topics[0].Partitions[0]
		if qp.ErrorCode != 0 || qp.LeaderID != controllerID || qp.HighWatermark <= 0 || len(qp.CurrentVoters)+len(qp.Observers) != len(bs) || len(qr.Nodes) != len(bs) {
			t.Errorf("DescribeQuorum to node %d: %+v nodes %+v (controller %d)", b.NodeID, qp, qr.Nodes, controllerID)
		}
		for _, v := range qp.CurrentVoters {
			if v.LogEndOffset <= 0 || v.LastFetchTimestamp <= 0 {
				t.Errorf("DescribeQuorum to node %d: voter %+v", b.NodeID, v)
			}
		}
	}

	// Kafka's own tools, unchanged.
	t.Run("kafka-tools", func(t *testing.T) {
		if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil {
			t.Fatal(err)
		}
		out, err := kafkaTool(t, "org.apache.kafka.tools.LeaderElectionCommand",
			"--bootstrap-server", strings.Join(kafkaAddrs(bs), ","), "--election-type", "preferred",
			"--topic", topic, "--partition", "1")
		if err != nil || !strings.Contains(out, "Valid replica already elected for partitions "+topic+"-1") {
			t.Errorf("kafka-leader-election: %v\n%s", err, out)
		}
		out, err = kafkaTool(t, "org.apache.kafka.tools.LeaderElectionCommand",
			"--bootstrap-server", kafkaAddrs(bs)[0], "--election-type", "unclean", "--topic", topic, "--partition", "1")
		if err == nil || !strings.Contains(out, "Raft") {
			t.Errorf("kafka-leader-election --election-type unclean: %v\n%s", err, out)
		}
		out, err = kafkaTool(t, "org.apache.kafka.tools.LogDirsCommand",
			"--bootstrap-server", strings.Join(kafkaAddrs(bs), ","), "--describe", "--topic-list", topic)
		if err != nil || !strings.Contains(out, `"partition":"`+topic+`-2"`) || !strings.Contains(out, `/topics"}`) {
			t.Errorf("kafka-log-dirs: %v\n%s", err, out)
		}
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, `{"brokers":[`) }) {
			t.Errorf("kafka-log-dirs printed no JSON description:\n%s", out)
		}
		out, err = kafkaTool(t, "org.apache.kafka.tools.MetadataQuorumCommand",
			"--bootstrap-server", kafkaAddrs(bs)[1], "describe", "--status")
		if err != nil || !strings.Contains(out, fmt.Sprintf("LeaderId:               %d", controllerID)) || !strings.Contains(out, "CurrentVoters:") {
			t.Errorf("kafka-metadata-quorum describe --status: %v\n%s", err, out)
		}
		t.Logf("kafka-metadata-quorum describe --status:\n%s", out)
		out, err = kafkaTool(t, "org.apache.kafka.tools.TransactionsCommand",
			"--bootstrap-server", kafkaAddrs(bs)[0], "describe-producers", "--topic", topic, "--partition", "0")
		if err != nil || !strings.Contains(out, "ProducerId") || !strings.Contains(out, "49") {
			t.Errorf("kafka-transactions describe-producers: %v\n%s", err, out)
		}
		out, err = kafkaTool(t, "org.apache.kafka.tools.MetadataQuorumCommand",
			"--bootstrap-server", kafkaAddrs(bs)[2], "describe", "--replication", "--human-readable")
		if err != nil || !strings.Contains(out, "Leader") || !strings.Contains(out, "ms ago") {
			t.Errorf("kafka-metadata-quorum describe --replication: %v\n%s", err, out)
		}
	})
}

// preferredReplicas is each partition's first replica in b's Metadata.
func preferredReplicas(t *testing.T, b *Broker, topic string) map[int32]int32 {
	t.Helper()
	md, err := askMetadata(t, b, topic)
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("metadata of %s: %v %+v", topic, err, md)
	}
	out := map[int32]int32{}
	for _, p := range md.Topics[0].Partitions {
		out[p.Partition] = p.Replicas[0]
	}
	return out
}

// waitISR waits until every partition of topic has rf in-sync replicas in
// the Metadata of every broker in bs.
func waitISR(t *testing.T, bs []*Broker, topic string, partitions int32, rf int, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, fmt.Sprintf("%d in-sync replicas for every partition of %s", rf, topic), func() error {
		for _, b := range bs {
			md, err := askMetadata(t, b, topic)
			if err != nil {
				return err
			}
			if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != int(partitions) {
				return fmt.Errorf("node %d: metadata %+v", b.NodeID, md.Topics)
			}
			for _, p := range md.Topics[0].Partitions {
				if len(p.ISR) != rf {
					return fmt.Errorf("node %d: %s/%d ISR %v", b.NodeID, topic, p.Partition, p.ISR)
				}
			}
		}
		return nil
	})
}
