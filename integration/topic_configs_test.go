package integration

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafka41TopicConfigs are the names of Kafka 4.1's
// LogConfig.configNames(), less the internal internal.segment.bytes.
var kafka41TopicConfigs = []string{
	"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
	"delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
	"index.interval.bytes", "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
	"max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
	"message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
	"remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
	"segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
}

// TestTopicConfigsKafkaConfigsTool: Kafka's kafka-configs lists every
// topic config of Kafka 4.1 with its source (--describe --all), alters the
// new ones, shows them set on the topic, deletes them, and reports why a
// value weir cannot honour is refused.
func TestTopicConfigsKafkaConfigsTool(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 1)
	boot := strings.Join(kafkaAddrs(bs), ",")
	const topic = "tool-configs"
	CreateTopic(t, bs[0], topic, 1, nil)
	tool := func(args ...string) (string, error) {
		t.Helper()
		return kafkaTool(t, "kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", boot, "--entity-type", "topics", "--entity-name", topic}, args...)...)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := tool(args...)
		if err != nil {
			t.Fatalf("kafka-configs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// "  name=value sensitive=false synonyms={SOURCE:name=value, ...}"
	line := regexp.MustCompile(`(?m)^\s+([a-z0-9.]+)=(.*) sensitive=(?:true|false) synonyms=\{([A-Z_]+):`)
	described := func(out string) map[string][2]string {
		got := map[string][2]string{}
		for _, m := range line.FindAllStringSubmatch(out, -1) {
			got[m[1]] = [2]string{m[2], m[3]}
		}
		return got
	}

	all := described(run("--describe", "--all"))
	for _, name := range kafka41TopicConfigs {
		if v, ok := all[name]; !ok || v[1] != "DEFAULT_CONFIG" {
			t.Errorf("--describe --all: %s is %v (listed %v), want it from DEFAULT_CONFIG", name, v, ok)
		}
	}
	if len(all) != len(kafka41TopicConfigs) {
		t.Errorf("--describe --all lists %d configs, want %d", len(all), len(kafka41TopicConfigs))
	}
	if all["message.timestamp.after.max.ms"][0] != "3600000" || all["min.insync.replicas"][0] != "1" || all["compression.type"][0] != "producer" {
		t.Errorf("Kafka 4.1's defaults: %v", all)
	}

	set := map[string]string{
		"compression.type": "zstd", "compression.zstd.level": "9", "min.insync.replicas": "1", "message.timestamp.after.max.ms": "60000",
		"message.timestamp.before.max.ms": "86400000", "segment.jitter.ms": "1000", "index.interval.bytes": "8192",
		"segment.index.bytes": "1048576", "flush.messages": "1", "file.delete.delay.ms": "0", "preallocate": "false",
		"unclean.leader.election.enable": "false", "local.retention.ms": "-2", "remote.storage.enable": "false",
	}
	var pairs []string
	for k, v := range set {
		pairs = append(pairs, k+"="+v)
	}
	// kafka-configs splits --add-config on commas; a list value goes in
	// brackets.
	pairs = append(pairs, "leader.replication.throttled.replicas=[0:0,1:0]")
	set["leader.replication.throttled.replicas"] = "0:0,1:0"
	run("--alter", "--add-config", strings.Join(pairs, ","))
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeTopic, topic, "compression.type", "zstd", kmsg.ConfigSourceDynamicTopicConfig)
	got := described(run("--describe"))
	for k, v := range set {
		if g := got[k]; g != [2]string{v, "DYNAMIC_TOPIC_CONFIG"} {
			t.Errorf("--describe after --alter: %s is %v, want %q set on the topic", k, g, v)
		}
	}

	for cfg, why := range map[string]string{
		"unclean.leader.election.enable=true":      "weir never elects an out-of-date replica",
		"remote.storage.enable=true":               "no tiered storage",
		"preallocate=true":                         "does not preallocate",
		"min.insync.replicas=2":                    "above the replication factor 1",
		"message.timestamp.difference.max.ms=1000": "Kafka 4.0 removed it",
	} {
		out, err := tool("--alter", "--add-config", cfg)
		if err == nil || !strings.Contains(out, "InvalidConfigurationException") || !strings.Contains(out, why) {
			t.Errorf("--add-config %s: %v, want InvalidConfigurationException saying %q:\n%s", cfg, err, why, out)
		}
	}

	run("--alter", "--delete-config", "compression.type,leader.replication.throttled.replicas,min.insync.replicas")
	waitConfigEverywhere(t, bs, kmsg.ConfigResourceTypeTopic, topic, "compression.type", "producer", kmsg.ConfigSourceDefaultConfig)
	got = described(run("--describe", "--all"))
	for _, k := range []string{"compression.type", "leader.replication.throttled.replicas", "min.insync.replicas"} {
		if got[k][1] != "DEFAULT_CONFIG" {
			t.Errorf("after --delete-config: %s is %v", k, got[k])
		}
	}
}

// TestTopicConfigsEnforced: with a real broker and franz-go, a compacted
// topic refuses keyless records, a topic's compression.type re-encodes
// what producers send (consumers read it back unchanged), and a record
// too far in the future is refused.
func TestTopicConfigsEnforced(t *testing.T) {
	b := StartBroker(t)
	CreateTopic(t, b, "compacted", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	CreateTopic(t, b, "zstd", 1, map[string]*string{"compression.type": kadm.StringPtr("zstd")})
	CreateTopic(t, b, "clock", 1, map[string]*string{"message.timestamp.after.max.ms": kadm.StringPtr("60000")})
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression()} {
		cl := b.Client(t, kgo.ProducerBatchCompression(codec), kgo.RecordRetries(0))
		ctx := ctxTimeout(t, requestTimeout)

		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Value: []byte("no key")}).FirstErr()
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("keyless record to a compacted topic: %v, want INVALID_RECORD", err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("keyed record to a compacted topic: %v", err)
		}

		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "clock", Value: []byte("late"), Timestamp: time.Now().Add(2 * time.Minute)}).FirstErr()
		if !errors.Is(err, kerr.InvalidTimestamp) {
			t.Fatalf("a record two minutes ahead with message.timestamp.after.max.ms=60000: %v, want INVALID_TIMESTAMP", err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "clock", Value: []byte("now")}).FirstErr(); err != nil {
			t.Fatalf("a record of now: %v", err)
		}

		var recs []*kgo.Record
		for i := range 20 {
			recs = append(recs, &kgo.Record{Topic: "zstd", Value: []byte(fmt.Sprintf("value %d %s", i, strings.Repeat("x", 100)))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to a zstd topic: %v", err)
		}
	}

	// Every stored batch of the zstd topic is zstd, whatever was sent.
	md, _, err := topicMetadata(t, b, "zstd")
	if err != nil {
		t.Fatal(err)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxBytes, fetch.MaxWaitMillis = 1<<20, 100
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "zstd", md.Topics[0].TopicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp := b.RawRequest(t, fetch).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch of the zstd topic: %+v", resp.Topics)
	}
	raw := resp.Topics[0].Partitions[0].RecordBatches
	batches := 0
	for len(raw) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if codec := rb.Attributes & 7; codec != 4 {
			t.Fatalf("a batch of the zstd topic is stored with codec %d", codec)
		}
		batches++
		raw = raw[12+rb.Length:]
	}
	if batches == 0 {
		t.Fatal("no batch fetched")
	}

	consumer := b.Client(t, kgo.ConsumeTopics("zstd"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var values []string
	for len(values) < 40 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming the zstd topic after %d records: %v", len(values), err)
		}
		fs.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	for i, v := range values {
		if want := fmt.Sprintf("value %d %s", i%20, strings.Repeat("x", 100)); v != want {
			t.Fatalf("record %d: %q, want %q", i, v, want)
		}
	}
}

// TestMinInsyncReplicasCluster: on three brokers, min.insync.replicas is
// at most the replication factor; with a broker down an acks=all produce
// to a topic of min.insync.replicas=3 is refused with NOT_ENOUGH_REPLICAS
// once the leader no longer counts it, while acks=1 is still answered (the
// Raft majority commits it), and accepted again at
// min.insync.replicas=2.
func TestMinInsyncReplicasCluster(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3)
	adm := kadm.NewClient(directClient(t, bs[0]))
	const topic = "min-isr"
	ctx := ctxTimeout(t, 2*requestTimeout)
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("4")}, topic)
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, "above the replication factor 3") {
		t.Fatalf("min.insync.replicas=4 with 3 replicas: %v %q, want INVALID_CONFIG", err, resp.ErrMessage)
	}
	resp, err = adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create with min.insync.replicas=3: %v %v %s", err, resp.Err, resp.ErrMessage)
	}
	produce := func(acks int16) (int16, string, error) {
		md, _, err := topicMetadata(t, bs[0], topic)
		if err != nil {
			return 0, "", err
		}
		leader := md.Topics[0].Partitions[0].Leader
		var to *Broker
		for _, b := range bs {
			if int32(b.NodeID) == leader && b.Running() {
				to = b
			}
		}
		if to == nil {
			return 0, "", fmt.Errorf("leader %d is not running", leader)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = acks, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, md.Topics[0].TopicID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = buildBatch(batchOpts{}, []rec{{Value: []byte("v")}})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		// kgo sends a raw produce with its own acks setting, so each
		// acks has its client, seeded with the leader alone.
		opts := []kgo.Opt{kgo.SeedBrokers(to.KafkaAddr), kgo.RetryTimeout(time.Second)}
		if acks == 1 {
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		reqCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := cl.SeedBrokers()[0].Request(reqCtx, req)
		if err != nil {
			return 0, "", err
		}
		sp := r.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		return sp.ErrorCode, derefStr(sp.ErrorMessage), nil
	}
	pollUntil(t, clusterTimeout, "acks=all with every replica in sync", func() error {
		code, msg, err := produce(-1)
		if err == nil && code != 0 {
			err = fmt.Errorf("%s: %s", errName(code), msg)
		}
		return err
	})

	bs[2].Stop(t)
	pollUntil(t, clusterTimeout, "NOT_ENOUGH_REPLICAS with a broker down", func() error {
		code, msg, err := produce(-1)
		if err == nil && code != kerr.NotEnoughReplicas.Code {
			err = fmt.Errorf("acks=all answered %s (%s)", errName(code), msg)
		}
		return err
	})
	if code, msg, err := produce(1); err != nil || code != 0 {
		t.Fatalf("acks=1 with two of three replicas: %v %s %s", err, errName(code), msg)
	}
	if r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}, topic); err != nil || r[0].Err != nil {
		t.Fatalf("min.insync.replicas=2: %v %+v", err, r)
	}
	pollUntil(t, clusterTimeout, "acks=all with two of three replicas and min.insync.replicas=2", func() error {
		code, msg, err := produce(-1)
		if err == nil && code != 0 {
			err = fmt.Errorf("%s: %s", errName(code), msg)
		}
		return err
	})
}
