package integration

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// plaintextAndSSL is a PLAINTEXT listener advertised at its loopback
// address and an SSL one advertised as localhost (a name the certificate
// holds), so the two listeners' answers differ in host and port.
func plaintextAndSSL(t testing.TB, ca *TestCA, clientAuth string) []TestListener {
	return []TestListener{
		{Name: "PLAINTEXT"},
		{Name: "SSL", AdvertisedHost: "localhost", TLS: ca.ListenerTLS(t, clientAuth)},
	}
}

// metadataBrokerAddrs asks cl's seed broker for the broker list and
// returns each broker's "node=host:port".
func metadataBrokerAddrs(t testing.TB, cl *kgo.Client) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		t.Fatalf("%d seed brokers, want 1", len(seeds))
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	var out []string
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		out = append(out, fmt.Sprintf("%d=%s", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))))
	}
	slices.Sort(out)
	return out
}

// TestListenersAdvertiseTheirOwnAddresses: one broker, a PLAINTEXT and an
// SSL listener with different advertised addresses. Metadata through
// each names the broker at that listener's address; records produced
// over TLS are consumed over PLAINTEXT; /v1/brokers lists both.
func TestListenersAdvertiseTheirOwnAddresses(t *testing.T) {
	ca := NewTestCA(t, "weir test CA")
	lb := StartBrokerWithListeners(t, plaintextAndSSL(t, ca, "none"))
	id := lb.NodeID

	plain := lb.Client(t)
	if got, want := metadataBrokerAddrs(t, plain), []string{fmt.Sprintf("%d=%s", id, lb.Advertised["PLAINTEXT"])}; !slices.Equal(got, want) {
		t.Errorf("Metadata on PLAINTEXT: %v, want %v", got, want)
	}
	secure := lb.Client(t, append(TLSClientOpts(lb.Addrs["SSL"], ca.ClientConfig()), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if got, want := metadataBrokerAddrs(t, secure), []string{fmt.Sprintf("%d=%s", id, lb.Advertised["SSL"])}; !slices.Equal(got, want) {
		t.Errorf("Metadata on SSL: %v, want %v", got, want)
	}

	const topic = "across-listeners"
	CreateTopic(t, lb.Broker, topic, 3, nil)
	produceAll(t, secure, seqRecords(topic, 3, 20), 30*time.Second)
	verifySeq(t, consumeN(t, lb.Broker, 60, 30*time.Second, []string{topic}), 3, 20, true)

	var brokers []struct {
		NodeID    int    `json:"node_id"`
		KafkaAddr string `json:"kafka_addr"`
		Listeners []struct {
			Name    string `json:"name"`
			Address string `json:"address"`
		} `json:"listeners"`
	}
	if code, raw := adminDo(t, lb.Broker, "GET", "/v1/brokers", "", &brokers); code != 200 || len(brokers) != 1 {
		t.Fatalf("GET /v1/brokers: %d %s", code, raw)
	}
	got := brokers[0]
	if got.KafkaAddr != lb.Advertised["PLAINTEXT"] || len(got.Listeners) != 2 ||
		got.Listeners[0].Name != "PLAINTEXT" || got.Listeners[0].Address != lb.Advertised["PLAINTEXT"] ||
		got.Listeners[1].Name != "SSL" || got.Listeners[1].Address != lb.Advertised["SSL"] {
		t.Errorf("GET /v1/brokers: %+v", brokers)
	}
}

// TestListenersClusterFollowsLeadersOverTLS: three brokers with a
// PLAINTEXT and an SSL listener each. Metadata through any SSL listener
// lists every broker at its SSL address, and a client that only speaks
// TLS produces to and consumes from partitions led by every broker, so it
// was sent to each leader's SSL listener and never to a PLAINTEXT one.
func TestListenersClusterFollowsLeadersOverTLS(t *testing.T) {
	ca := NewTestCA(t, "weir test CA")
	// Each broker serves its own certificate files.
	tlsFiles := make([]*TestListenerTLS, 3)
	for i := range tlsFiles {
		dir := t.TempDir()
		tlsFiles[i] = &TestListenerTLS{CertFile: dir + "/server.pem", KeyFile: dir + "/server.key", CAFile: ca.CAFile, ClientAuth: "none"}
		ca.ServerFiles(t, fmt.Sprintf("weir broker %d", i), tlsFiles[i].CertFile, tlsFiles[i].KeyFile)
	}
	lbs := StartClusterWithListeners(t, 3, func(i int) []TestListener {
		return []TestListener{{Name: "PLAINTEXT"}, {Name: "SSL", AdvertisedHost: "localhost", TLS: tlsFiles[i]}}
	})
	var wantSSL, wantPlain []string
	for _, lb := range lbs {
		wantSSL = append(wantSSL, fmt.Sprintf("%d=%s", lb.NodeID, lb.Advertised["SSL"]))
		wantPlain = append(wantPlain, fmt.Sprintf("%d=%s", lb.NodeID, lb.Advertised["PLAINTEXT"]))
	}
	for _, lb := range lbs {
		if got := metadataBrokerAddrs(t, lb.Client(t, TLSClientOpts(lb.Addrs["SSL"], ca.ClientConfig())...)); !slices.Equal(got, wantSSL) {
			t.Errorf("Metadata on node %d's SSL listener: %v, want %v", lb.NodeID, got, wantSSL)
		}
		if got := metadataBrokerAddrs(t, lb.Client(t)); !slices.Equal(got, wantPlain) {
			t.Errorf("Metadata on node %d's PLAINTEXT listener: %v, want %v", lb.NodeID, got, wantPlain)
		}
	}

	const topic = "tls-everywhere"
	const partitions = 6
	createTopicVia(t, lbs[0].Broker, topic, partitions)
	waitTopicReady(t, lbs[0].Broker, topic, partitions)
	leaders := map[int32]bool{}
	meta, err := askMetadata(t, lbs[0].Broker, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range meta.Topics[0].Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("the %d partitions are led by %d broker(s); the test needs leaders on several", partitions, len(leaders))
	}

	seed := TLSClientOpts(lbs[2].Addrs["SSL"], ca.ClientConfig())
	producer := lbs[2].Client(t, append(seed, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	produceAll(t, producer, seqRecords(topic, partitions, 10), 30*time.Second)
	verifySeq(t, consumeN(t, lbs[2].Broker, partitions*10, 30*time.Second, []string{topic}, seed...), partitions, 10, true)
	t.Logf("partitions led by nodes %v, all reached over TLS", slices.Sorted(maps.Keys(leaders)))
}

// TestListenersLeaderWithoutTheListener: node 0 has a second listener,
// EXTERNAL, that node 1 lacks. Metadata through EXTERNAL lists only node 0
// and answers the partitions node 1 leads with no leader and
// LISTENER_NOT_FOUND, as Kafka does, instead of a leader id clients could
// not reach; through PLAINTEXT every partition has its leader.
func TestListenersLeaderWithoutTheListener(t *testing.T) {
	lbs := StartClusterWithListeners(t, 2, func(i int) []TestListener {
		if i == 0 {
			return []TestListener{{Name: "PLAINTEXT"}, {Name: "EXTERNAL", Protocol: "PLAINTEXT"}}
		}
		return []TestListener{{Name: "PLAINTEXT"}}
	})
	const topic = "half-reachable"
	const partitions = 6
	createTopicVia(t, lbs[0].Broker, topic, partitions)
	waitTopicReady(t, lbs[0].Broker, topic, partitions)

	ask := func(addr string) *kmsg.MetadataResponse {
		t.Helper()
		cl := lbs[0].Client(t, kgo.SeedBrokers(addr))
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatalf("Metadata through %s: %v", addr, err)
		}
		return resp.(*kmsg.MetadataResponse)
	}
	plain := ask(lbs[0].Addrs["PLAINTEXT"])
	leaders := map[int32]int32{}
	for _, p := range plain.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			t.Fatalf("through PLAINTEXT, partition %d: leader %d, error %d", p.Partition, p.Leader, p.ErrorCode)
		}
		leaders[p.Partition] = p.Leader
	}
	if !slices.Contains(slices.Collect(maps.Values(leaders)), 1) || !slices.Contains(slices.Collect(maps.Values(leaders)), 0) {
		t.Fatalf("leaders %v: the test needs partitions led by each node", leaders)
	}

	external := ask(lbs[0].Addrs["EXTERNAL"])
	if len(external.Brokers) != 1 || external.Brokers[0].NodeID != 0 {
		t.Fatalf("through EXTERNAL, brokers %+v; want node 0 only", external.Brokers)
	}
	for _, p := range external.Topics[0].Partitions {
		switch leaders[p.Partition] {
		case 0:
			if p.ErrorCode != 0 || p.Leader != 0 {
				t.Errorf("through EXTERNAL, partition %d led by node 0: leader %d, error %d", p.Partition, p.Leader, p.ErrorCode)
			}
		case 1:
			if p.ErrorCode != kerr.ListenerNotFound.Code || p.Leader != -1 {
				t.Errorf("through EXTERNAL, partition %d led by node 1: leader %d, error %d; want -1 and LISTENER_NOT_FOUND", p.Partition, p.Leader, p.ErrorCode)
			}
		}
	}
}
