package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Multi-broker clusters: formation, topics spread over brokers, controller
// failover and a 5-broker cluster with 3 controller voters. Partitions are
// not replicated yet, so topics use replication factor 1 and a partition's
// leader is its one replica.

const (
	failoverTimeout = 20 * time.Second // a new controller, a dead broker leaving Metadata
	topicTimeout    = 15 * time.Second // a created topic in every broker's Metadata
	rejoinTimeout   = 20 * time.Second // a restarted broker back in everyone's view
)

// TestClusterForms: three brokers started with each other's RPC addresses as
// seeds form one cluster; Metadata and DescribeCluster from each list all
// three at their Kafka addresses and name the same controller.
func TestClusterForms(t *testing.T) {
	bs := StartCluster(t, 3)
	// StartCluster waited for agreement; check it once more, now, from
	// every broker, as the assertion of this test.
	controller, err := clusterView(t, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controller: node %d", controller)
	for _, b := range bs {
		md, err := askMetadata(t, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 3 || md.ControllerID != controller {
			t.Errorf("Metadata from node %d: %d brokers, controller %d; want 3 brokers, controller %d", b.NodeID, len(md.Brokers), md.ControllerID, controller)
		}
		dc, err := askDescribeCluster(t, b)
		if err != nil {
			t.Fatal(err)
		}
		if dc.ErrorCode != 0 || len(dc.Brokers) != 3 || dc.ControllerID != controller || dc.ClusterID != derefStr(md.ClusterID) {
			t.Errorf("DescribeCluster from node %d: error %d, %d brokers, controller %d, cluster %q; want 0, 3, %d, %q",
				b.NodeID, dc.ErrorCode, len(dc.Brokers), dc.ControllerID, dc.ClusterID, controller, derefStr(md.ClusterID))
		}
	}
}

// TestClusterTopicAcrossBrokers: a topic created through broker 2 shows up,
// with the same live leaders, in every broker's Metadata; records produced to
// every partition by a client seeded with all three brokers are consumed back
// exactly once, in order. A second topic is created through a broker that is
// not the controller, so forwarding to the controller is exercised whichever
// node leads the controller group.
func TestClusterTopicAcrossBrokers(t *testing.T) {
	bs := StartCluster(t, 3)
	const (
		topic        = "spread"
		partitions   = 6
		perPartition = 50
	)
	createTopicVia(t, bs[2], topic, partitions)
	leaders := waitTopicEverywhere(t, bs, topic, partitions, topicTimeout)
	perBroker := map[int32]int{}
	for _, id := range leaders {
		perBroker[id]++
	}
	t.Logf("partition leaders of %s: %v (partitions per broker %v)", topic, leaders, perBroker)

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(kafkaAddrs(bs)...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	produceAll(t, cl, seqRecords(topic, partitions, perPartition), 30*time.Second)
	recs := consumeN(t, bs[0], partitions*perPartition, 30*time.Second, []string{topic}, kgo.SeedBrokers(kafkaAddrs(bs)...))
	verifySeq(t, recs, partitions, perPartition, true)

	controller, err := clusterView(t, bs)
	if err != nil {
		t.Fatal(err)
	}
	via := bs[(controller+1)%3]
	createTopicVia(t, via, "forwarded", 2)
	waitTopicEverywhere(t, bs, "forwarded", 2, topicTimeout)
}

// TestClusterControllerFailover: killing (SIGKILL) the controller leaves the
// other two to elect a new one; a topic can be created through a survivor and
// used; the killed broker, started again on its data, rejoins and sees the
// topics created while it was down.
func TestClusterControllerFailover(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3)
	createTopicVia(t, bs[0], "before", 3)
	waitTopicEverywhere(t, bs, "before", 3, topicTimeout)

	old, err := clusterView(t, bs)
	if err != nil {
		t.Fatal(err)
	}
	victim := bs[old]
	survivors := without(bs, old)
	t.Logf("killing controller node %d", old)
	victim.Kill(t)
	killed := time.Now()

	// The survivors elect a new controller among themselves and drop the
	// dead broker from Metadata and DescribeCluster.
	controller := waitClusterView(t, survivors, failoverTimeout)
	if controller == old {
		t.Fatalf("controller still %d after it was killed", old)
	}
	t.Logf("new controller: node %d, agreed by both survivors %v after the kill", controller, time.Since(killed).Round(10*time.Millisecond))

	// Create through a survivor; if the new controller is one of them, use
	// the other so the request is forwarded.
	via := without(survivors, controller)[0]
	const during = "during"
	createTopicVia(t, via, during, 4)
	waitTopicEverywhere(t, survivors, during, 4, topicTimeout)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(kafkaAddrs(survivors)...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	produceAll(t, cl, seqRecords(during, 4, 10), 30*time.Second)
	recs := consumeN(t, survivors[0], 40, 30*time.Second, []string{during}, kgo.SeedBrokers(kafkaAddrs(survivors)...))
	verifySeq(t, recs, 4, 10, true)

	// The killed broker comes back on its data directory and rejoins.
	restarted := time.Now()
	victim.Start(t)
	pollUntil(t, rejoinTimeout, fmt.Sprintf("restarted node %d rejoining", old), func() error {
		_, err := clusterView(t, bs)
		return err
	})
	t.Logf("node %d ready and agreed on by all three %v after its restart", old, time.Since(restarted).Round(10*time.Millisecond))
	waitTopicOn(t, []*Broker{victim}, bs, during, 4, topicTimeout)
	waitTopicEverywhere(t, bs, "before", 3, topicTimeout)
}

// TestClusterFiveBrokers: five brokers form one cluster in which the three
// lowest node ids are the controller voters (so one of them is the
// controller); with a voter that is not the controller killed, the other two
// voters keep a quorum and topics can still be created.
func TestClusterFiveBrokers(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 5)
	controller, err := clusterView(t, bs)
	if err != nil {
		t.Fatal(err)
	}
	if controller > 2 {
		t.Fatalf("controller is node %d; want one of the voters 0, 1, 2 (the three lowest node ids)", controller)
	}

	// Kill the lowest-id voter that is not the controller.
	victim := without(bs[:3], controller)[0]
	t.Logf("controller node %d; killing voter node %d", controller, victim.NodeID)
	victim.Kill(t)
	survivors := without(bs, int32(victim.NodeID))
	if c := waitClusterView(t, survivors, failoverTimeout); c != controller {
		t.Logf("controller moved from %d to %d after killing node %d", controller, c, victim.NodeID)
		controller = c
	}

	// Create through a survivor that is not the controller (forwarded).
	others := without(survivors, controller)
	via := others[len(others)-1]
	createTopicVia(t, via, "five", 5)
	leaders := waitTopicEverywhere(t, survivors, "five", 5, topicTimeout)
	t.Logf("partition leaders of five: %v", leaders)
}

// TestStopWhileJoining: a broker restarted while the rest of its cluster
// is down waits for a controller leader (up to a minute) before it
// serves; SIGTERM then stops it at once, exit 0, as it does a running
// broker without a controller quorum.
func TestStopWhileJoining(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3)
	bs[1].Stop(t)
	bs[2].Stop(t)
	bs[0].Stop(t) // alone, without a quorum

	campaigns := func() int {
		data, err := os.ReadFile(bs[0].LogPath())
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), `msg="entering candidate state" raft_group=controller`)
	}
	before := campaigns()
	if err := bs[0].launch(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "node 0 campaigning for the controller group alone", func() error {
		if n := campaigns(); n <= before {
			return fmt.Errorf("%d campaigns logged, %d before the restart", n, before)
		}
		return nil
	})
	start := time.Now()
	bs[0].Stop(t) // exit 0 within 15 s
	t.Logf("stopped %v after SIGTERM while waiting for a controller", time.Since(start).Round(time.Millisecond))
	if log := bs[0].Log(); !strings.Contains(log, "shutting down before the broker finished starting") {
		t.Fatalf("no log of a stop during start:\n%s", bs[0].logTail(8<<10))
	}
}
