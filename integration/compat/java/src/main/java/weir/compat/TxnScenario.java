package weir.compat;

import static weir.compat.Main.CALL_TIMEOUT_MS;
import static weir.compat.Main.CheckFailed;
import static weir.compat.Main.bootstrap;
import static weir.compat.Main.check;
import static weir.compat.Main.checkEq;
import static weir.compat.Main.eventually;
import static weir.compat.Main.get;
import static weir.compat.Main.newAdmin;
import static weir.compat.Main.newConsumer;
import static weir.compat.Main.newProducer;
import static weir.compat.Main.withClientOverrides;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Scenario {@code transactions}: transactional KafkaProducers (transactional.id, transaction
 * version 1) against a cluster of three brokers. Every topic has 3 partitions, replication
 * factor 3.
 *
 * <ul>
 *   <li>{@code java-txn} writes to {@code java-txn-out}: a transaction committed (90 records),
 *       one aborted (45), one committed (30). A second producer with the same transactional id
 *       fences the first (its next transaction fails with ProducerFencedException, nothing of it
 *       is visible) and commits 15 records.</li>
 *   <li>{@code java-txn-open} writes 12 records to {@code java-txn-out} in a transaction that
 *       stays open: the program exits without ending it or closing the producer, so the test
 *       finds it Ongoing and sees the coordinator abort it when its timeout (the system property
 *       {@code weir.open.timeout.ms}) passes. While it is open, a read_committed consumer's end
 *       offsets (the last stable offsets) are where it starts.</li>
 *   <li>A read_committed consumer of {@code java-txn-out} reads exactly the committed records,
 *       in order, and stops at the open transaction; a read_uncommitted one reads every record.
 *       Each commit or abort marker takes an offset, which both skip.</li>
 *   <li>{@code java-eos} reads {@code java-eos-in} in group {@code java-eos-group}
 *       (read_committed) and writes each record transformed to {@code java-eos-out}, committing
 *       the consumed offsets in its transactions ({@code sendOffsetsToTransaction} with the
 *       consumer's group metadata). Its first transaction is aborted and the consumer rewound to
 *       the group's committed offsets. Then: each input record is in the committed output exactly
 *       once, and the group's committed offsets are the input's end offsets.</li>
 * </ul>
 *
 * <p>Topic names, transactional ids and record counts are relied on by
 * integration/java_transactions_test.go.
 */
final class TxnScenario {
    static final int PARTITIONS = 3;
    static final short REPLICATION = 3;
    static final String OUT = "java-txn-out";
    static final String TXN_ID = "java-txn";
    static final String OPEN_ID = "java-txn-open";
    static final String EOS_IN = "java-eos-in";
    static final String EOS_OUT = "java-eos-out";
    static final String EOS_ID = "java-eos";
    static final String EOS_GROUP = "java-eos-group";
    static final int EOS_RECORDS = 300;
    static final long CONSUME_TIMEOUT_MS = 60_000;

    private TxnScenario() {
    }

    /** One record as written (metadata) or read. */
    record Rec(int partition, long offset, String key, String value) {
    }

    static void run() {
        long openTimeoutMs = Long.parseLong(System.getProperty("weir.open.timeout.ms", "20000"));
        try (Admin admin = newAdmin()) {
            for (String topic : List.of(OUT, EOS_IN, EOS_OUT)) {
                createTopic(admin, topic);
            }
        }
        List<Rec> committed = new ArrayList<>();
        List<Rec> all = new ArrayList<>();
        commitAbortFence(committed, all);
        consumeTransformProduce();
        // Last: the open transaction must still be open when the test
        // looks at it after the program exits.
        openTransaction(openTimeoutMs, committed, all);
    }

    static void createTopic(Admin admin, String topic) {
        get(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, REPLICATION))).all(), "createTopics " + topic);
        eventually(30_000, "topic " + topic + " has " + PARTITIONS + " partitions, each with a leader and " + REPLICATION + " in sync replicas", () -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
                return d.partitions().size() == PARTITIONS && d.partitions().stream()
                        .allMatch(p -> p.leader() != null && p.isr().size() == REPLICATION);
            } catch (Exception e) {
                return false;
            }
        });
    }

    static KafkaProducer<String, String> newTxnProducer(String transactionalId, long timeoutMs) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "weir-java-compat-" + transactionalId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(timeoutMs));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        return new KafkaProducer<>(withClientOverrides(p));
    }

    /**
     * Sends n records in the producer's current transaction, round-robin over the partitions
     * of topic, waits for their acknowledgements and returns them with their offsets.
     */
    static List<Rec> send(KafkaProducer<String, String> producer, String topic, String prefix, int n) {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            fs.add(producer.send(new ProducerRecord<>(topic, i % PARTITIONS, prefix + "-k" + i, prefix + "-" + i)));
        }
        producer.flush();
        List<Rec> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            RecordMetadata md = get(fs.get(i), "send " + prefix + "-" + i);
            out.add(new Rec(md.partition(), md.offset(), prefix + "-k" + i, prefix + "-" + i));
        }
        return out;
    }

    /** The records of rs by partition, in offset order. */
    static Map<Integer, List<Rec>> byPartition(List<Rec> rs) {
        Map<Integer, List<Rec>> m = new TreeMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            m.put(p, new ArrayList<>());
        }
        for (Rec r : rs) {
            m.get(r.partition()).add(r);
        }
        m.values().forEach(l -> l.sort((a, b) -> Long.compare(a.offset(), b.offset())));
        return m;
    }

    static boolean causedBy(Throwable t, Class<? extends Throwable> want) {
        for (; t != null; t = t.getCause()) {
            if (want.isInstance(t)) {
                return true;
            }
        }
        return false;
    }

    // ------------------------------------------------------------------

    static void commitAbortFence(List<Rec> committed, List<Rec> all) {
        try (KafkaProducer<String, String> producer = newTxnProducer(TXN_ID, 60_000)) {
            producer.initTransactions();
            check(true, "%s: initTransactions", TXN_ID);

            producer.beginTransaction();
            List<Rec> first = send(producer, OUT, "first", 90);
            producer.commitTransaction();
            check(true, "%s: committed 90 records", TXN_ID);

            producer.beginTransaction();
            List<Rec> aborted = send(producer, OUT, "aborted", 45);
            producer.abortTransaction();
            check(true, "%s: aborted 45 acknowledged records", TXN_ID);

            producer.beginTransaction();
            List<Rec> second = send(producer, OUT, "second", 30);
            producer.commitTransaction();
            check(true, "%s: committed 30 records", TXN_ID);

            // Each transaction's marker takes the offset after its last
            // record in every partition it wrote to.
            Map<Integer, List<Rec>> f = byPartition(first), a = byPartition(aborted), s = byPartition(second);
            for (int p = 0; p < PARTITIONS; p++) {
                List<Rec> fp = f.get(p), ap = a.get(p), sp = s.get(p);
                checkEq(fp.get(fp.size() - 1).offset() + 2, ap.get(0).offset(),
                        "%s-%d: first offset of the aborted transaction (a commit marker between)", OUT, p);
                checkEq(ap.get(ap.size() - 1).offset() + 2, sp.get(0).offset(),
                        "%s-%d: first offset of the second commit (an abort marker between)", OUT, p);
            }
            committed.addAll(first);
            committed.addAll(second);
            all.addAll(first);
            all.addAll(aborted);
            all.addAll(second);

            // A new producer with the same transactional id fences this one.
            try (KafkaProducer<String, String> successor = newTxnProducer(TXN_ID, 60_000)) {
                successor.initTransactions();
                check(true, "%s: a second producer's initTransactions", TXN_ID);

                producer.beginTransaction();
                Future<RecordMetadata> zf = producer.send(new ProducerRecord<>(OUT, 0, "zombie-k", "zombie"));
                Throwable err = null;
                try {
                    producer.commitTransaction();
                } catch (KafkaException e) {
                    err = e;
                }
                check(causedBy(err, ProducerFencedException.class),
                        "%s: the fenced producer's commitTransaction fails with ProducerFencedException (%s)", TXN_ID, err);
                try {
                    RecordMetadata md = zf.get(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    throw new CheckFailed("the fenced producer's send succeeded: " + md);
                } catch (ExecutionException e) {
                    check(true, "%s: the fenced producer's send fails (%s)", TXN_ID, e.getCause());
                } catch (TimeoutException e) {
                    throw new CheckFailed("the fenced producer's send did not complete within " + CALL_TIMEOUT_MS + " ms");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new CheckFailed("interrupted");
                }

                successor.beginTransaction();
                List<Rec> third = send(successor, OUT, "third", 15);
                successor.commitTransaction();
                check(true, "%s: the second producer committed 15 records", TXN_ID);
                committed.addAll(third);
                all.addAll(third);
            }
            producer.close(Duration.ofSeconds(5));
        }
    }

    // ------------------------------------------------------------------

    static void openTransaction(long timeoutMs, List<Rec> committed, List<Rec> all) {
        // Not closed: close() would abort the transaction.
        KafkaProducer<String, String> producer = newTxnProducer(OPEN_ID, timeoutMs);
        producer.initTransactions();
        producer.beginTransaction();
        List<Rec> open = send(producer, OUT, "open", 12);
        check(true, "%s: 12 records acknowledged in a transaction left open (timeout %d ms)", OPEN_ID, timeoutMs);
        all.addAll(open);
        Map<Integer, List<Rec>> op = byPartition(open);
        Map<Integer, Long> lso = new TreeMap<>(), hw = new TreeMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            List<Rec> l = op.get(p);
            lso.put(p, l.get(0).offset());
            hw.put(p, l.get(l.size() - 1).offset() + 1);
        }
        readAndVerify(OUT, "read_committed", committed, lso);
        readAndVerify(OUT, "read_uncommitted", all, hw);
        for (int p = 0; p < PARTITIONS; p++) {
            System.out.printf("OPEN %s %d %d%n", OUT, p, lso.get(p));
        }
    }

    /**
     * Reads every partition of topic from the start at isolation iso until the consumer's
     * position reaches the end offsets it is given, which must be ends, and checks it read
     * exactly want, in order per partition.
     */
    static void readAndVerify(String topic, String iso, List<Rec> want, Map<Integer, Long> ends) {
        long start = System.nanoTime();
        try (KafkaConsumer<String, String> c = newConsumer(iso)) {
            List<TopicPartition> tps = Main.assignAll(c, topic, PARTITIONS);
            Map<TopicPartition, Long> got = c.endOffsets(tps, Duration.ofMillis(CALL_TIMEOUT_MS));
            for (TopicPartition tp : tps) {
                checkEq(ends.get(tp.partition()), got.get(tp), "%s endOffsets %s", iso, tp);
            }
            List<Rec> read = readUntil(c, tps, got);
            Map<Integer, List<Rec>> w = byPartition(want), r = byPartition(read);
            for (int p = 0; p < PARTITIONS; p++) {
                List<Rec> wp = w.get(p), rp = r.get(p);
                for (int i = 0; i < Math.max(wp.size(), rp.size()); i++) {
                    Rec wr = i < wp.size() ? wp.get(i) : null, rr = i < rp.size() ? rp.get(i) : null;
                    if (wr == null || !wr.equals(rr)) {
                        throw new CheckFailed(String.format("%s %s-%d: record #%d read is %s, want %s (%d read, %d wanted)",
                                iso, topic, p, i, rr, wr, rp.size(), wp.size()));
                    }
                }
            }
            check(true, "%s: read exactly the %d expected records of %s (%d ms)", iso, want.size(), topic,
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
        }
    }

    /** Polls c until its position in every partition reaches ends, then once more to see that nothing follows. */
    static List<Rec> readUntil(KafkaConsumer<String, String> c, List<TopicPartition> tps, Map<TopicPartition, Long> ends) {
        List<Rec> read = new ArrayList<>();
        long deadline = System.currentTimeMillis() + CONSUME_TIMEOUT_MS;
        while (true) {
            boolean done = true;
            for (TopicPartition tp : tps) {
                if (c.position(tp, Duration.ofMillis(CALL_TIMEOUT_MS)) < ends.get(tp)) {
                    done = false;
                }
            }
            if (done) {
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                Map<TopicPartition, Long> pos = new HashMap<>();
                tps.forEach(tp -> pos.put(tp, c.position(tp)));
                throw new CheckFailed(String.format("positions %s did not reach %s within %d ms (%d records read)",
                        pos, ends, CONSUME_TIMEOUT_MS, read.size()));
            }
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                read.add(new Rec(r.partition(), r.offset(), r.key(), r.value()));
            }
        }
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(700))) {
            read.add(new Rec(r.partition(), r.offset(), r.key(), r.value()));
        }
        for (TopicPartition tp : tps) {
            checkEq(ends.get(tp), c.position(tp, Duration.ofMillis(CALL_TIMEOUT_MS)), "position in %s after reading", tp);
        }
        return read;
    }

    // ------------------------------------------------------------------

    static KafkaConsumer<String, String> newGroupConsumer() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "weir-java-compat-eos-consumer");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, EOS_GROUP);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "60");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        return new KafkaConsumer<>(withClientOverrides(p));
    }

    static void consumeTransformProduce() {
        // The input, written without a transaction.
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        try (KafkaProducer<String, String> producer = newProducer("none")) {
            for (int i = 0; i < EOS_RECORDS; i++) {
                fs.add(producer.send(new ProducerRecord<>(EOS_IN, "in-k" + i, "in-" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : fs) {
                get(f, "send input");
            }
        }
        check(true, "%d input records in %s", EOS_RECORDS, EOS_IN);

        int done = 0, rounds = 0, abortedRecords = 0;
        long deadline = System.currentTimeMillis() + CONSUME_TIMEOUT_MS;
        try (KafkaConsumer<String, String> consumer = newGroupConsumer();
             KafkaProducer<String, String> producer = newTxnProducer(EOS_ID, 60_000)) {
            producer.initTransactions();
            consumer.subscribe(List.of(EOS_IN));
            while (done < EOS_RECORDS) {
                if (System.currentTimeMillis() > deadline) {
                    throw new CheckFailed(String.format("%d of %d input records transformed and committed within %d ms",
                            done, EOS_RECORDS, CONSUME_TIMEOUT_MS));
                }
                ConsumerRecords<String, String> rs = consumer.poll(Duration.ofMillis(500));
                if (rs.isEmpty()) {
                    continue;
                }
                rounds++;
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : rs) {
                    sent.add(producer.send(new ProducerRecord<>(EOS_OUT, r.key(), "out-" + r.value())));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (abortedRecords == 0) {
                    // The first transaction is aborted: its output is
                    // never visible to read_committed, its offsets never
                    // committed, and its input is read again.
                    producer.flush();
                    for (Future<RecordMetadata> f : sent) {
                        get(f, "send output");
                    }
                    producer.abortTransaction();
                    abortedRecords = rs.count();
                    Map<TopicPartition, OffsetAndMetadata> at = consumer.committed(consumer.assignment(), Duration.ofMillis(CALL_TIMEOUT_MS));
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata om = at.get(tp);
                        check(om == null, "%s: no offset committed for %s after the aborted transaction (%s)", EOS_GROUP, tp, om);
                    }
                    consumer.seekToBeginning(consumer.assignment());
                    check(true, "%s: aborted a transaction of %d records with their offsets; rewound", EOS_ID, abortedRecords);
                    continue;
                }
                producer.commitTransaction();
                done += rs.count();
            }
            check(true, "%s: %d input records transformed in %d transactions (the first aborted)", EOS_ID, done, rounds);

            Map<TopicPartition, OffsetAndMetadata> at = consumer.committed(consumer.assignment(), Duration.ofMillis(CALL_TIMEOUT_MS));
            Map<TopicPartition, Long> ends = consumer.endOffsets(consumer.assignment(), Duration.ofMillis(CALL_TIMEOUT_MS));
            for (TopicPartition tp : consumer.assignment()) {
                OffsetAndMetadata om = at.get(tp);
                checkEq(ends.get(tp), om == null ? null : om.offset(), "%s: committed offset of %s (the end offset)", EOS_GROUP, tp);
            }
        }

        try (Admin admin = newAdmin()) {
            Map<TopicPartition, OffsetAndMetadata> offs = get(admin.listConsumerGroupOffsets(EOS_GROUP).partitionsToOffsetAndMetadata(),
                    "listConsumerGroupOffsets " + EOS_GROUP);
            long sum = 0;
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offs.entrySet()) {
                checkEq(EOS_IN, e.getKey().topic(), "%s: offsets' topic", EOS_GROUP);
                sum += e.getValue().offset();
            }
            checkEq((long) EOS_RECORDS, sum, "%s: admin's committed offsets add up to the input's records", EOS_GROUP);
        }

        // The committed output: every input once. All of it: the aborted
        // transaction's records as well.
        Map<String, Integer> seen = new HashMap<>();
        int uncommitted = 0;
        for (String iso : List.of("read_committed", "read_uncommitted")) {
            try (KafkaConsumer<String, String> c = newConsumer(iso)) {
                List<TopicPartition> tps = Main.assignAll(c, EOS_OUT, PARTITIONS);
                List<Rec> read = readUntil(c, tps, c.endOffsets(tps, Duration.ofMillis(CALL_TIMEOUT_MS)));
                if (iso.equals("read_committed")) {
                    read.forEach(r -> seen.merge(r.value(), 1, Integer::sum));
                } else {
                    uncommitted = read.size();
                }
            }
        }
        for (int i = 0; i < EOS_RECORDS; i++) {
            int n = seen.getOrDefault("out-in-" + i, 0);
            if (n != 1) {
                throw new CheckFailed(String.format("read_committed %s: input in-%d is there %d times", EOS_OUT, i, n));
            }
        }
        checkEq(EOS_RECORDS, seen.size(), "read_committed %s: distinct records", EOS_OUT);
        checkEq(EOS_RECORDS + abortedRecords, uncommitted, "read_uncommitted %s: records (the aborted transaction's %d too)", EOS_OUT, abortedRecords);
    }
}
