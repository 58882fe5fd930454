package weir.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.nio.ByteBuffer;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Java kafka-clients compatibility checks against a running weir broker.
 *
 * <p>Usage: {@code java -jar weir-java-compat.jar <bootstrap> <scenario>} with scenario one
 * of {@code admin}, {@code produce-consume}, {@code timestamps}, {@code group} (consumer groups,
 * see {@link GroupScenario}), {@code rack-consume}, {@code transactions} (transactional producers
 * on a three-broker cluster, see {@link TxnScenario}). Prints every check as
 * "ok: ..."; exits 0 when all pass, 1 on the first failed check (message on stderr
 * prefixed "FAIL:"), 2 on bad usage, 3 when the whole scenario overruns its time limit.
 *
 * <p>Topic names used here are relied on by integration/java_compat_test.go.
 */
public final class Main {
    /** Bound on any single client call (admin futures, flushes). */
    static final long CALL_TIMEOUT_MS = 30_000;
    /** Bound on a whole scenario; the watchdog exits the JVM after it. */
    static final long SCENARIO_TIMEOUT_MS = 240_000;
    /** Bound on a consume loop. */
    static final long CONSUME_TIMEOUT_MS = 90_000;

    static String bootstrap;
    static int checks;

    static final class CheckFailed extends RuntimeException {
        CheckFailed(String msg) {
            super(msg);
        }

        CheckFailed(String msg, Throwable cause) {
            super(msg, cause);
        }
    }

    public static void main(String[] args) {
        if (args.length != 2) {
            System.err.println("usage: weir-java-compat <bootstrap> <admin|produce-consume|timestamps|group|rack-consume|transactions>");
            System.exit(2);
        }
        bootstrap = args[0];
        String scenario = args[1];
        Runnable run;
        switch (scenario) {
            case "admin":
                run = Main::admin;
                break;
            case "produce-consume":
                run = Main::produceConsume;
                break;
            case "timestamps":
                run = Main::timestamps;
                break;
            case "group":
                run = GroupScenario::run;
                break;
            case "rack-consume":
                run = Main::rackConsume;
                break;
            case "transactions":
                run = TxnScenario::run;
                break;
            default:
                System.err.println("unknown scenario " + scenario + "; want admin, produce-consume, timestamps, group, rack-consume or transactions");
                System.exit(2);
                return;
        }
        startWatchdog(scenario);
        System.out.printf("scenario %s against %s with kafka-clients %s%n", scenario, bootstrap, AppInfoParser.getVersion());
        long start = System.nanoTime();
        try {
            run.run();
        } catch (CheckFailed e) {
            System.out.flush();
            System.err.println("FAIL: " + scenario + ": " + e.getMessage());
            if (e.getCause() != null) {
                e.getCause().printStackTrace();
            }
            System.exit(1);
        } catch (Throwable t) {
            System.out.flush();
            System.err.println("FAIL: " + scenario + ": unexpected " + t);
            t.printStackTrace();
            System.exit(1);
        }
        System.out.printf("PASS: scenario %s: %d checks in %d ms%n", scenario, checks,
                TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
        System.out.flush();
        System.exit(0);
    }

    static void startWatchdog(String scenario) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(SCENARIO_TIMEOUT_MS);
            } catch (InterruptedException e) {
                return;
            }
            System.out.flush();
            System.err.printf("FAIL: %s: scenario did not finish within %d ms; thread dump follows%n", scenario, SCENARIO_TIMEOUT_MS);
            Thread.getAllStackTraces().forEach((th, st) -> {
                System.err.println("thread " + th.getName());
                for (StackTraceElement e : st) {
                    System.err.println("    at " + e);
                }
            });
            Runtime.getRuntime().halt(3);
        }, "watchdog");
        t.setDaemon(true);
        t.start();
    }

    // ------------------------------------------------------------------
    // Assertion helpers.

    static void check(boolean cond, String fmt, Object... args) {
        String msg = String.format(fmt, args);
        if (!cond) {
            throw new CheckFailed(msg);
        }
        checks++;
        System.out.println("ok: " + msg);
    }

    static void checkEq(Object want, Object got, String fmt, Object... args) {
        String what = String.format(fmt, args);
        if (want == null ? got != null : !want.equals(got)) {
            throw new CheckFailed(what + ": want " + want + ", got " + got);
        }
        checks++;
        System.out.println("ok: " + what + " = " + got);
    }

    /** Waits (bounded) for a client future; failures become CheckFailed. */
    static <T> T get(Future<T> f, String what) {
        try {
            return f.get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw new CheckFailed(what + " failed: " + e.getCause(), e.getCause());
        } catch (TimeoutException e) {
            throw new CheckFailed(what + " did not complete within " + CALL_TIMEOUT_MS + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CheckFailed(what + " interrupted");
        }
    }

    /** Expects f to fail with an exception of type want (possibly wrapped). */
    static void expectFailure(KafkaFuture<?> f, Class<? extends Throwable> want, String what) {
        try {
            Object v = f.get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            throw new CheckFailed(what + ": succeeded with " + v + ", want " + want.getSimpleName());
        } catch (ExecutionException e) {
            if (!want.isInstance(e.getCause())) {
                throw new CheckFailed(what + ": failed with " + e.getCause() + ", want " + want.getSimpleName(), e.getCause());
            }
            checks++;
            System.out.println("ok: " + what + " fails with " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
        } catch (TimeoutException e) {
            throw new CheckFailed(what + " did not complete within " + CALL_TIMEOUT_MS + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CheckFailed(what + " interrupted");
        }
    }

    /** Polls cond every 100 ms until it holds or timeoutMs passes. */
    static void eventually(long timeoutMs, String what, Supplier<Boolean> cond) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            if (cond.get()) {
                checks++;
                System.out.println("ok: " + what);
                return;
            }
            if (System.currentTimeMillis() >= deadline) {
                throw new CheckFailed(what + ": not true within " + timeoutMs + " ms");
            }
            sleep(100);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CheckFailed("interrupted");
        }
    }

    // ------------------------------------------------------------------
    // Clients.

    static Admin newAdmin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "weir-java-compat-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(withClientOverrides(p));
    }

    /**
     * Every -Dweir.client.NAME=VALUE system property becomes client config
     * NAME=VALUE, so that one scenario runs with security settings
     * (security.protocol, sasl.mechanism, sasl.jaas.config, ...) as users
     * write them.
     */
    static Properties withClientOverrides(Properties p) {
        String prefix = "weir.client.";
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith(prefix)) {
                p.put(name.substring(prefix.length()), System.getProperty(name));
            }
        }
        return p;
    }

    /** A producer with the client's defaults (idempotent, acks=all) except compression and bounds. */
    static KafkaProducer<String, String> newProducer(String compression) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "weir-java-compat-producer-" + compression);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        return new KafkaProducer<>(withClientOverrides(p));
    }

    /** A consumer without a group: no group.id, no auto commit. */
    static KafkaConsumer<String, String> newConsumer(String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "weir-java-compat-consumer-" + isolation);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        return new KafkaConsumer<>(withClientOverrides(p));
    }

    /**
     * rack-consume: a consumer with client.rack (KIP-392) reads partition 0
     * of -Dweir.topic from the start and checks it gets -Dweir.records
     * records, offsets 0.. in order, each value starting with its offset
     * as a big-endian long. The test checks which broker served it.
     */
    static void rackConsume() {
        String topic = System.getProperty("weir.topic");
        String rack = System.getProperty("weir.rack");
        int want = Integer.parseInt(System.getProperty("weir.records"));
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "weir-java-compat-rack-consumer");
        p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        TopicPartition tp = new TopicPartition(topic, 0);
        long start = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long next = 0;
            long deadline = System.currentTimeMillis() + CONSUME_TIMEOUT_MS;
            while (next < want && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    checkEq(next, r.offset(), "offset of record #%d", next);
                    checkEq(next, ByteBuffer.wrap(r.value()).getLong(), "sequence number at offset %d", r.offset());
                    next++;
                }
            }
            if (next < want) {
                throw new CheckFailed(String.format("%s: consumed %d of %d records within %d ms", topic, next, want, CONSUME_TIMEOUT_MS));
            }
            check(true, "client.rack=%s: consumed all %d records of %s in order (%d ms)", rack, want, topic,
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
        }
    }

    static void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs) {
        NewTopic nt = new NewTopic(topic, partitions, (short) 1).configs(configs);
        get(admin.createTopics(List.of(nt)).all(), "createTopics " + topic);
        // Wait until the topic is in metadata with a leader for every partition.
        eventually(15_000, "topic " + topic + " has " + partitions + " partitions with leaders", () -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
                return d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null);
            } catch (Exception e) {
                return false;
            }
        });
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    // ------------------------------------------------------------------
    // Scenario: admin.

    static void admin() {
        final String topic = "java-admin";
        try (Admin admin = newAdmin()) {
            // describeCluster first: the node id is checked against leaders below.
            DescribeClusterResult dc = admin.describeCluster();
            Collection<Node> nodes = get(dc.nodes(), "describeCluster nodes");
            checkEq(1, nodes.size(), "describeCluster: node count");
            Node node = nodes.iterator().next();
            String[] hp = bootstrap.split(":");
            checkEq(hp[0], node.host(), "describeCluster: node host");
            checkEq(Integer.parseInt(hp[1]), node.port(), "describeCluster: node port");
            Node controller = get(dc.controller(), "describeCluster controller");
            check(controller != null && !controller.isEmpty(), "describeCluster: controller is %s", controller);
            checkEq(node.id(), controller.id(), "describeCluster: controller id");
            String clusterId = get(dc.clusterId(), "describeCluster clusterId");
            check(clusterId != null && !clusterId.isEmpty(), "describeCluster: cluster id %s", clusterId);

            // createTopics with a config: the result carries the configs and the topic ID.
            CreateTopicsResult cr = admin.createTopics(List.of(
                    new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000"))));
            get(cr.all(), "createTopics " + topic);
            Uuid id = get(cr.topicId(topic), "createTopics topicId");
            check(id != null && !id.equals(Uuid.ZERO_UUID) && !id.equals(Uuid.METADATA_TOPIC_ID),
                    "createTopics: topic id %s", id);
            checkEq(3, get(cr.numPartitions(topic), "createTopics numPartitions"), "createTopics: numPartitions");
            checkEq(1, get(cr.replicationFactor(topic), "createTopics replicationFactor"), "createTopics: replicationFactor");
            Config created = get(cr.config(topic), "createTopics config");
            check(created.entries().size() > 1, "createTopics: config list has %d entries", created.entries().size());
            ConfigEntry cret = created.get("retention.ms");
            check(cret != null, "createTopics: config list has retention.ms");
            checkEq("3600000", cret.value(), "createTopics: retention.ms");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, cret.source(), "createTopics: retention.ms source");

            // listTopics.
            Map<String, TopicListing> listings = get(admin.listTopics().namesToListings(), "listTopics");
            check(listings.containsKey(topic), "listTopics: has %s (all: %s)", topic, listings.keySet());
            checkEq(id, listings.get(topic).topicId(), "listTopics: topic id");
            check(!listings.get(topic).isInternal(), "listTopics: %s is not internal", topic);

            // describeTopics by name and by ID.
            TopicDescription td = get(admin.describeTopics(TopicCollection.ofTopicNames(List.of(topic))).allTopicNames(),
                    "describeTopics by name").get(topic);
            checkDescription(td, topic, id, 3, node.id());
            TopicDescription tdById = get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(id))).allTopicIds(),
                    "describeTopics by id").get(id);
            checkDescription(tdById, topic, id, 3, node.id());

            // describeConfigs.
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = describeTopicConfig(admin, res);
            ConfigEntry ret = cfg.get("retention.ms");
            check(ret != null, "describeConfigs: has retention.ms");
            checkEq("3600000", ret.value(), "describeConfigs: retention.ms");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, ret.source(), "describeConfigs: retention.ms source");
            check(!ret.isDefault(), "describeConfigs: retention.ms is not default");
            check(ret.documentation() != null && !ret.documentation().isEmpty(),
                    "describeConfigs: retention.ms documentation %s", ret.documentation());
            ConfigEntry segBytes = cfg.get("segment.bytes");
            check(segBytes != null && segBytes.value() != null, "describeConfigs: segment.bytes present (%s)", segBytes);
            check(segBytes.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "describeConfigs: unset segment.bytes has a non-topic source (%s)", segBytes.source());

            // incrementalAlterConfigs SET then DELETE.
            get(admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("segment.ms", "600000"), AlterConfigOp.OpType.SET)))).all(),
                    "incrementalAlterConfigs SET segment.ms");
            cfg = describeTopicConfig(admin, res);
            checkEq("600000", cfg.get("segment.ms").value(), "after SET: segment.ms");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, cfg.get("segment.ms").source(), "after SET: segment.ms source");
            checkEq("3600000", cfg.get("retention.ms").value(), "after SET: retention.ms kept");
            get(admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all(),
                    "incrementalAlterConfigs DELETE retention.ms");
            cfg = describeTopicConfig(admin, res);
            check(cfg.get("retention.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "after DELETE: retention.ms source is %s (%s)", cfg.get("retention.ms").source(), cfg.get("retention.ms").value());
            checkEq("600000", cfg.get("segment.ms").value(), "after DELETE: segment.ms kept");

            // createPartitions 3 -> 4.
            get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all(), "createPartitions to 4");
            eventually(15_000, "describeTopics shows 4 partitions with leaders", () -> {
                try {
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                            .get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
                    return d.partitions().size() == 4 && d.partitions().stream().allMatch(p -> p.leader() != null);
                } catch (Exception e) {
                    return false;
                }
            });

            // Produce 100 records to partition 0 with known timestamps; record 70
            // has the largest timestamp.
            TopicPartition tp0 = new TopicPartition(topic, 0);
            TopicPartition tp3 = new TopicPartition(topic, 3);
            long base = System.currentTimeMillis() - 600_000;
            try (KafkaProducer<String, String> producer = newProducer("none")) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < 100; i++) {
                    long ts = i == 70 ? base + 100_000 : base + i;
                    fs.add(producer.send(new ProducerRecord<>(topic, 0, ts, "k" + i, "v" + i)));
                }
                producer.flush();
                for (int i = 0; i < fs.size(); i++) {
                    RecordMetadata md = get(fs.get(i), "send record " + i);
                    if (md.offset() != i) {
                        throw new CheckFailed("record " + i + " got offset " + md.offset());
                    }
                }
                check(true, "produced 100 records to %s at offsets 0..99", tp0);
            }

            checkOffset(admin, tp0, OffsetSpec.latest(), 100, "latest");
            checkOffset(admin, tp0, OffsetSpec.earliest(), 0, "earliest");
            ListOffsetsResultInfo mx = checkOffset(admin, tp0, OffsetSpec.maxTimestamp(), 70, "maxTimestamp");
            checkEq(base + 100_000, mx.timestamp(), "listOffsets maxTimestamp %s: timestamp", tp0);
            ListOffsetsResultInfo at = checkOffset(admin, tp0, OffsetSpec.forTimestamp(base + 50), 50, "forTimestamp(base+50)");
            checkEq(base + 50, at.timestamp(), "listOffsets forTimestamp %s: timestamp", tp0);
            checkOffset(admin, tp3, OffsetSpec.latest(), 0, "latest (new partition)");
            checkOffset(admin, tp3, OffsetSpec.earliest(), 0, "earliest (new partition)");

            // deleteRecords then listOffsets earliest.
            DeletedRecords dr = get(admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(40)))
                    .lowWatermarks().get(tp0), "deleteRecords before 40");
            checkEq(40L, dr.lowWatermark(), "deleteRecords %s: low watermark", tp0);
            checkOffset(admin, tp0, OffsetSpec.earliest(), 40, "earliest after deleteRecords");
            checkOffset(admin, tp0, OffsetSpec.latest(), 100, "latest after deleteRecords");
            mx = checkOffset(admin, tp0, OffsetSpec.maxTimestamp(), 70, "maxTimestamp after deleteRecords");

            // createTopics on an existing name.
            expectFailure(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all(),
                    TopicExistsException.class, "createTopics existing " + topic);

            // deleteTopics.
            get(admin.deleteTopics(TopicCollection.ofTopicNames(List.of(topic))).all(), "deleteTopics " + topic);
            eventually(15_000, "listTopics no longer has " + topic, () -> {
                try {
                    return !admin.listTopics().names().get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS).contains(topic);
                } catch (Exception e) {
                    return false;
                }
            });
            expectFailure(admin.describeTopics(List.of(topic)).allTopicNames(),
                    UnknownTopicOrPartitionException.class, "describeTopics deleted " + topic);
        }
    }

    static void checkDescription(TopicDescription td, String topic, Uuid id, int partitions, int nodeId) {
        check(td != null, "describeTopics: got %s", topic);
        checkEq(topic, td.name(), "describeTopics: name");
        checkEq(id, td.topicId(), "describeTopics %s: topic id", topic);
        check(!td.isInternal(), "describeTopics %s: not internal", topic);
        checkEq(partitions, td.partitions().size(), "describeTopics %s: partitions", topic);
        for (int i = 0; i < partitions; i++) {
            TopicPartitionInfo p = td.partitions().get(i);
            checkEq(i, p.partition(), "describeTopics %s: partition #%d id", topic, i);
            check(p.leader() != null, "describeTopics %s/%d: has a leader", topic, i);
            checkEq(nodeId, p.leader().id(), "describeTopics %s/%d: leader", topic, i);
            checkEq(List.of(p.leader()), p.replicas(), "describeTopics %s/%d: replicas", topic, i);
            checkEq(List.of(p.leader()), p.isr(), "describeTopics %s/%d: isr", topic, i);
        }
    }

    static Config describeTopicConfig(Admin admin, ConfigResource res) {
        Map<ConfigResource, Config> m = get(admin.describeConfigs(List.of(res),
                new DescribeConfigsOptions().includeDocumentation(true)).all(), "describeConfigs " + res);
        Config c = m.get(res);
        if (c == null) {
            throw new CheckFailed("describeConfigs " + res + ": no result in " + m);
        }
        return c;
    }

    static ListOffsetsResultInfo checkOffset(Admin admin, TopicPartition tp, OffsetSpec spec, long want, String what) {
        ListOffsetsResultInfo info = get(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp),
                "listOffsets " + what + " " + tp);
        checkEq(want, info.offset(), "listOffsets %s %s: offset", what, tp);
        return info;
    }

    // ------------------------------------------------------------------
    // Scenario: produce-consume.

    static final int RECORDS = 10_000;

    record Rec(long offset, String key, String value) {
    }

    static void produceConsume() {
        List<String> codecs = List.of("none", "gzip", "snappy", "lz4", "zstd");
        try (Admin admin = newAdmin()) {
            for (String codec : codecs) {
                String topic = "java-pc-" + codec;
                createTopic(admin, topic, 3, Map.of());
                Map<Integer, List<Rec>> want = produceKeyed(topic, codec);
                for (String iso : List.of("read_uncommitted", "read_committed")) {
                    consumeAndVerify(topic, 3, want, iso);
                }
            }
            headersAndNullKey(admin);
        }
    }

    static String valueFor(String codec, int i) {
        // Compressible, variable-length values.
        return "value-" + codec + "-" + i + "-" + "abcdefgh".repeat(i % 17);
    }

    /** Sends RECORDS keyed records, returns partition -> expected records in offset order. */
    static Map<Integer, List<Rec>> produceKeyed(String topic, String codec) {
        long start = System.nanoTime();
        List<Future<RecordMetadata>> fs = new ArrayList<>(RECORDS);
        try (KafkaProducer<String, String> producer = newProducer(codec)) {
            for (int i = 0; i < RECORDS; i++) {
                fs.add(producer.send(new ProducerRecord<>(topic, "key-" + i, valueFor(codec, i))));
            }
            producer.flush();
            Map<Integer, List<Rec>> want = new TreeMap<>();
            for (int i = 0; i < RECORDS; i++) {
                RecordMetadata md = get(fs.get(i), "send " + topic + " record " + i);
                List<Rec> l = want.computeIfAbsent(md.partition(), k -> new ArrayList<>());
                // Idempotent producer: per partition, offsets follow send order without gaps.
                if (md.offset() != l.size()) {
                    throw new CheckFailed(String.format("%s record %d: partition %d offset %d, want %d (send order)",
                            topic, i, md.partition(), md.offset(), l.size()));
                }
                l.add(new Rec(md.offset(), "key-" + i, valueFor(codec, i)));
            }
            check(true, "produced %d records with %s to %s in %d ms; per partition: %s", RECORDS, codec, topic,
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), counts(want));
            checkEq(3, want.size(), "%s: partitions that got records", topic);
            return want;
        }
    }

    static Map<Integer, Integer> counts(Map<Integer, List<Rec>> m) {
        Map<Integer, Integer> out = new TreeMap<>();
        m.forEach((p, l) -> out.put(p, l.size()));
        return out;
    }

    static List<TopicPartition> assignAll(KafkaConsumer<?, ?> c, String topic, int partitions) {
        List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofMillis(CALL_TIMEOUT_MS));
        checkEq(partitions, infos == null ? 0 : infos.size(), "consumer partitionsFor %s", topic);
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : infos) {
            tps.add(new TopicPartition(topic, pi.partition()));
        }
        c.assign(tps);
        c.seekToBeginning(tps);
        return tps;
    }

    static void consumeAndVerify(String topic, int partitions, Map<Integer, List<Rec>> want, String iso) {
        int total = want.values().stream().mapToInt(List::size).sum();
        long start = System.nanoTime();
        try (KafkaConsumer<String, String> c = newConsumer(iso)) {
            List<TopicPartition> tps = assignAll(c, topic, partitions);
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofMillis(CALL_TIMEOUT_MS));
            Map<TopicPartition, Long> begins = c.beginningOffsets(tps, Duration.ofMillis(CALL_TIMEOUT_MS));
            for (TopicPartition tp : tps) {
                int n = want.getOrDefault(tp.partition(), List.of()).size();
                checkEq((long) n, ends.get(tp), "%s endOffsets %s", iso, tp);
                checkEq(0L, begins.get(tp), "%s beginningOffsets %s", iso, tp);
            }
            Map<Integer, List<Rec>> got = new TreeMap<>();
            int n = 0;
            long deadline = System.currentTimeMillis() + CONSUME_TIMEOUT_MS;
            while (n < total && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : rs) {
                    got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(new Rec(r.offset(), r.key(), r.value()));
                    n++;
                }
            }
            if (n < total) {
                throw new CheckFailed(String.format("%s %s: consumed %d of %d records within %d ms; per partition %s",
                        iso, topic, n, total, CONSUME_TIMEOUT_MS, counts(got)));
            }
            // Anything more is a duplicate.
            ConsumerRecords<String, String> extra = c.poll(Duration.ofMillis(700));
            checkEq(0, extra.count(), "%s %s: records after the expected %d", iso, topic, total);
            for (Map.Entry<Integer, List<Rec>> e : want.entrySet()) {
                List<Rec> g = got.getOrDefault(e.getKey(), List.of());
                List<Rec> w = e.getValue();
                if (g.size() != w.size()) {
                    throw new CheckFailed(String.format("%s %s/%d: consumed %d records, want %d", iso, topic, e.getKey(), g.size(), w.size()));
                }
                for (int i = 0; i < w.size(); i++) {
                    if (!w.get(i).equals(g.get(i))) {
                        throw new CheckFailed(String.format("%s %s/%d: record #%d is %s, want %s", iso, topic, e.getKey(), i, g.get(i), w.get(i)));
                    }
                }
                TopicPartition tp = new TopicPartition(topic, e.getKey());
                checkEq((long) w.size(), c.position(tp, Duration.ofMillis(CALL_TIMEOUT_MS)), "%s %s position", iso, tp);
            }
            check(true, "%s: consumed all %d records of %s in order with matching keys and values (%d ms)", iso, total, topic,
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
        }
    }

    static void headersAndNullKey(Admin admin) {
        String topic = "java-pc-headers";
        createTopic(admin, topic, 1, Map.of());
        List<Header> hs = List.of(
                new RecordHeader("trace-id", bytes("abc-123")),
                new RecordHeader("empty", new byte[0]),
                new RecordHeader("null-value", null),
                new RecordHeader("trace-id", bytes("second")),
                new RecordHeader("utf8-\u00e9", bytes("\u2603")));
        try (KafkaProducer<String, String> producer = newProducer("lz4")) {
            RecordMetadata m0 = get(producer.send(new ProducerRecord<>(topic, 0, null, null, "value-with-headers", hs)),
                    "send null-key record with headers");
            checkEq(0L, m0.offset(), "null-key record offset");
            RecordMetadata m1 = get(producer.send(new ProducerRecord<>(topic, 0, "tombstone-key", null)), "send null-value record");
            checkEq(1L, m1.offset(), "null-value record offset");
            RecordMetadata m2 = get(producer.send(new ProducerRecord<>(topic, 0, "", "")), "send empty key/value record");
            checkEq(2L, m2.offset(), "empty key/value record offset");
        }
        try (KafkaConsumer<String, String> c = newConsumer("read_uncommitted")) {
            assignAll(c, topic, 1);
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < 3 && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(500)).forEach(got::add);
            }
            checkEq(3, got.size(), "%s: records consumed", topic);
            ConsumerRecord<String, String> r = got.get(0);
            checkEq(null, r.key(), "record 0 key (null)");
            checkEq("value-with-headers", r.value(), "record 0 value");
            Header[] gh = r.headers().toArray();
            checkEq(hs.size(), gh.length, "record 0 header count");
            for (int i = 0; i < hs.size(); i++) {
                checkEq(hs.get(i).key(), gh[i].key(), "record 0 header #%d key", i);
                check(Arrays.equals(hs.get(i).value(), gh[i].value()), "record 0 header #%d (%s) value %s", i, gh[i].key(),
                        gh[i].value() == null ? "null" : "\"" + str(gh[i].value()) + "\"");
            }
            checkEq("tombstone-key", got.get(1).key(), "record 1 key");
            checkEq(null, got.get(1).value(), "record 1 value (null)");
            checkEq(0, got.get(1).headers().toArray().length, "record 1 header count");
            checkEq("", got.get(2).key(), "record 2 key (empty, not null)");
            checkEq("", got.get(2).value(), "record 2 value (empty, not null)");
        }
    }

    // ------------------------------------------------------------------
    // Scenario: timestamps.

    static void timestamps() {
        try (Admin admin = newAdmin()) {
            createTimeTopic(admin);
            logAppendTimeTopic(admin);
        }
    }

    static void createTimeTopic(Admin admin) {
        String topic = "java-ts-create";
        createTopic(admin, topic, 1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = (System.currentTimeMillis() / 1000 - 7200) * 1000; // two hours ago, whole second
        // Records 0..29 at base + i s, in three batches (flush between); record 30
        // goes back in time to base + 5.5 s.
        Map<Integer, Long> tsOf = new HashMap<>();
        try (KafkaProducer<String, String> producer = newProducer("none")) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i <= 30; i++) {
                long ts = i == 30 ? base + 5_500 : base + i * 1000L;
                tsOf.put(i, ts);
                fs.add(producer.send(new ProducerRecord<>(topic, 0, ts, "k" + i, "v" + i)));
                if (i == 9 || i == 19) {
                    producer.flush();
                }
            }
            producer.flush();
            for (int i = 0; i <= 30; i++) {
                RecordMetadata md = get(fs.get(i), "send record " + i);
                if (md.offset() != i || md.timestamp() != tsOf.get(i)) {
                    throw new CheckFailed(String.format("record %d: metadata offset %d timestamp %d, want %d and %d",
                            i, md.offset(), md.timestamp(), i, tsOf.get(i)));
                }
            }
            check(true, "produced 31 records with explicit CreateTime timestamps; metadata has offsets and timestamps");
        }
        try (KafkaConsumer<String, String> c = newConsumer("read_uncommitted")) {
            assignAll(c, topic, 1);
            // target -> expected offset (null: no record at or after target).
            Map<Long, Long> cases = new TreeMap<>();
            cases.put(base - 10_000, 0L);
            cases.put(base, 0L);
            cases.put(base + 1, 1L);
            cases.put(base + 5_500, 6L);  // first record at or after it, not record 30
            cases.put(base + 9_500, 10L); // between batches
            cases.put(base + 10_000, 10L);
            cases.put(base + 15_000, 15L); // mid batch
            cases.put(base + 29_000, 29L);
            cases.put(base + 29_001, null);
            for (Map.Entry<Long, Long> e : cases.entrySet()) {
                long target = e.getKey();
                Map<TopicPartition, OffsetAndTimestamp> m = c.offsetsForTimes(Map.of(tp, target), Duration.ofMillis(CALL_TIMEOUT_MS));
                OffsetAndTimestamp ot = m.get(tp);
                String what = String.format("offsetsForTimes(base%+d ms)", target - base);
                if (e.getValue() == null) {
                    checkEq(null, ot, what);
                } else {
                    check(ot != null, "%s: has a result", what);
                    checkEq(e.getValue(), ot.offset(), "%s: offset", what);
                    checkEq(tsOf.get(e.getValue().intValue()), ot.timestamp(), "%s: timestamp", what);
                }
            }
            // Seek to an offsetsForTimes answer and read the record there.
            OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(tp, base + 15_000), Duration.ofMillis(CALL_TIMEOUT_MS)).get(tp);
            c.seek(tp, ot.offset());
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < 16 && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(500)).forEach(got::add);
            }
            checkEq(16, got.size(), "records from offset 15");
            for (ConsumerRecord<String, String> r : got) {
                int i = (int) r.offset();
                if (r.timestamp() != tsOf.get(i) || r.timestampType() != TimestampType.CREATE_TIME || !("k" + i).equals(r.key())) {
                    throw new CheckFailed(String.format("record at offset %d: key %s timestamp %d (%s), want k%d %d CreateTime",
                            r.offset(), r.key(), r.timestamp(), r.timestampType(), i, tsOf.get(i)));
                }
            }
            check(true, "consumed offsets 15..30 with their CreateTime timestamps");
        }
        ListOffsetsResultInfo mx = get(admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp),
                "listOffsets maxTimestamp");
        checkEq(29L, mx.offset(), "admin listOffsets maxTimestamp: offset");
        checkEq(base + 29_000, mx.timestamp(), "admin listOffsets maxTimestamp: timestamp");
        ListOffsetsResultInfo ft = get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 5_500))).partitionResult(tp),
                "listOffsets forTimestamp");
        checkEq(6L, ft.offset(), "admin listOffsets forTimestamp(base+5500): offset");
    }

    static void logAppendTimeTopic(Admin admin) {
        String topic = "java-ts-logappend";
        createTopic(admin, topic, 1, Map.of("message.timestamp.type", "LogAppendTime"));
        TopicPartition tp = new TopicPartition(topic, 0);
        long old = System.currentTimeMillis() - 86_400_000L;
        long before = System.currentTimeMillis();
        List<RecordMetadata> mds = new ArrayList<>();
        try (KafkaProducer<String, String> producer = newProducer("none")) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                fs.add(producer.send(new ProducerRecord<>(topic, 0, old, "k" + i, "v" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : fs) {
                mds.add(get(f, "send LogAppendTime record"));
            }
        }
        long after = System.currentTimeMillis();
        for (RecordMetadata md : mds) {
            check(md.timestamp() >= before - 1000 && md.timestamp() <= after + 1000,
                    "LogAppendTime: metadata timestamp of offset %d is the broker's time %d (sent %d, window %d..%d)",
                    md.offset(), md.timestamp(), old, before, after);
        }
        try (KafkaConsumer<String, String> c = newConsumer("read_uncommitted")) {
            assignAll(c, topic, 1);
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < 5 && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(500)).forEach(got::add);
            }
            checkEq(5, got.size(), "LogAppendTime records consumed");
            for (ConsumerRecord<String, String> r : got) {
                checkEq(TimestampType.LOG_APPEND_TIME, r.timestampType(), "LogAppendTime offset %d: timestamp type", r.offset());
                checkEq(mds.get((int) r.offset()).timestamp(), r.timestamp(), "LogAppendTime offset %d: timestamp", r.offset());
            }
            OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(tp, before - 1000), Duration.ofMillis(CALL_TIMEOUT_MS)).get(tp);
            check(ot != null && ot.offset() == 0, "LogAppendTime: offsetsForTimes(before send) = %s, want offset 0", ot);
            OffsetAndTimestamp none = c.offsetsForTimes(Map.of(tp, old), Duration.ofMillis(CALL_TIMEOUT_MS)).get(tp);
            check(none != null && none.offset() == 0, "LogAppendTime: offsetsForTimes(old create time) = %s (offset 0)", none);
        }
    }
}
