package integration

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"
)

// Compatibility with IBM/sarama: TestSaramaCompat and the sarama Versions
// and codecs it runs at. Its parts live in sarama_produce_consume_test.go,
// sarama_admin_test.go and sarama_groups_test.go; shared helpers in
// sarama_helpers_test.go.

// TestSaramaCompat drives weir with IBM/sarama: sync producers with every
// codec (2,000 records over 3 partitions each) read back record by record
// with partition consumers (sarama has no group-less alternative, and weir
// has no groups yet), the ClusterAdmin calls sarama users rely on, and the
// idempotent producer.
//
// Each client runs at several sarama Versions, which pick the protocol
// versions sarama speaks:
//   - default (sarama.DefaultVersion, 2.8): Produce v9 and Fetch v12
//     (flexible, sessionless, no topic IDs), Metadata v11.
//   - 2.1: Produce v7, Fetch v10 (non-flexible), the oldest versions that
//     may carry zstd.
//   - 0.11: Produce v3, Fetch v5, the oldest record-batch (magic v2)
//     versions; no zstd; InitProducerId v0. Its admin calls run at 1.1
//     (see below).
//
// sarama sends ApiVersions at every Version but only lowers what the
// Version picks to the broker's maximum, never raises it.
//
// The "groups" subtest runs sarama consumer groups (NewConsumerGroup with
// two members, range, roundrobin, sticky and cooperative-sticky, static
// membership), its OffsetManager and ClusterAdmin's group calls at several
// Versions: see saramaGroupCases and saramaGroup.
func TestSaramaCompat(t *testing.T) {
	t.Parallel()
	logs := captureSaramaLog(t)
	// A new group's first member is not kept waiting for others.
	b := StartBroker(t, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- sarama log (last 32 KiB) ---\n%s", logs.tail(32<<10))
		}
	})

	for _, v := range saramaVersions {
		t.Run(v.name, func(t *testing.T) {
			for _, c := range saramaCodecs {
				if c.codec == sarama.CompressionZSTD && !v.version.IsAtLeast(sarama.V2_1_0_0) {
					continue // sarama refuses zstd below 2.1 (Produce v7), as Kafka does
				}
				t.Run(c.name, func(t *testing.T) {
					topic := fmt.Sprintf("sarama-%s-%s", v.name, c.name)
					saramaRoundTrip(t, b, v.version, c.codec, c.attr, topic, false)
				})
			}
			av, aname := v.version, v.name
			if !av.IsAtLeast(sarama.V1_1_0_0) {
				// Below 1.1 sarama's ListTopics and DescribeConfig send
				// DescribeConfigs v0, which Kafka 4 removed (KIP-896) and
				// weir, like Kafka 4, does not serve: its admin runs at
				// 1.1, the oldest version whose admin requests are all
				// inside Kafka 4's ranges.
				av, aname = sarama.V1_1_0_0, "v1.1"
			}
			t.Run("admin-"+aname, func(t *testing.T) { saramaAdmin(t, b, av, "sarama-admin-"+v.name) })
			t.Run("idempotent", func(t *testing.T) {
				codec, attr := sarama.CompressionLZ4, int8(3)
				if v.version.IsAtLeast(sarama.V2_1_0_0) {
					codec, attr = sarama.CompressionZSTD, 4
				}
				saramaRoundTrip(t, b, v.version, codec, attr, "sarama-idem-"+v.name, true)
			})
		})
	}
	t.Run("groups", func(t *testing.T) {
		for _, gc := range saramaGroupCases {
			t.Run(gc.name, func(t *testing.T) { saramaGroup(t, b, gc.version, gc.strategy, gc.static, gc.name) })
		}
	})
}

var saramaVersions = []struct {
	name    string
	version sarama.KafkaVersion
}{
	{"default", sarama.DefaultVersion},
	{"v2.1", sarama.V2_1_0_0},
	{"v0.11", sarama.V0_11_0_0},
}

var saramaCodecs = []struct {
	name  string
	codec sarama.CompressionCodec
	attr  int8 // stored batch attributes & 7
}{
	{"none", sarama.CompressionNone, 0},
	{"gzip", sarama.CompressionGZIP, 1},
	{"snappy", sarama.CompressionSnappy, 2},
	{"lz4", sarama.CompressionLZ4, 3},
	{"zstd", sarama.CompressionZSTD, 4},
}
