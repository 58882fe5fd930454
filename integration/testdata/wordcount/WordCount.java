import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams word count, as Kafka's own WordCountDemo, for weir's
 * integration tests (streams_test.go compiles and runs it against weir).
 *
 * <pre>
 * java WordCount BOOTSTRAP APPLICATION_ID STATE_DIR INPUT_TOPIC OUTPUT_TOPIC [NAME=VALUE ...]
 * </pre>
 *
 * Lines of INPUT_TOPIC are split into lower-case words, regrouped by word
 * (a repartition topic) and counted in a persistent key-value store named
 * "counts" (RocksDB in STATE_DIR, backed by a compacted changelog topic);
 * every new count goes to OUTPUT_TOPIC, the word as the key and the count
 * as an 8-byte big-endian long. processing.guarantee is at_least_once
 * unless a NAME=VALUE argument, a Streams config, says otherwise
 * (processing.guarantee=exactly_once_v2); those override every setting
 * below.
 *
 * The program runs until it is killed, printing lines the test waits for:
 * "STATE RUNNING" when the application runs, "RESTORED store topic
 * partition records" each time a store partition has been restored from
 * its changelog. It exits 1 if Kafka Streams fails.
 */
public final class WordCount {
    public static final String STORE = "counts";

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 5) {
            System.err.println("usage: WordCount BOOTSTRAP APPLICATION_ID STATE_DIR INPUT_TOPIC OUTPUT_TOPIC [NAME=VALUE ...]");
            System.exit(2);
        }
        String bootstrap = args[0], applicationId = args[1], stateDir = args[2], input = args[3], output = args[4];

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        // Internal topics (the repartition and changelog topics) are
        // replicated on three brokers, as in a production deployment.
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // Commit often, so the test does not wait long for offsets.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // A killed instance's member is dropped after the broker's minimum
        // session timeout, not Kafka's default 45 s, when the next one joins.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv.length != 2) {
                System.err.println("WordCount: " + args[i] + ": want NAME=VALUE, a Streams config");
                System.exit(2);
            }
            props.put(kv[0], kv[1]);
            System.out.println("CONFIG " + kv[0] + "=" + kv[1]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE)
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch failed = new CountDownLatch(1);
        streams.setStateListener((next, previous) -> {
            System.out.println("STATE " + next);
            if (next == KafkaStreams.State.ERROR || next == KafkaStreams.State.PENDING_ERROR) {
                failed.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("FAILED " + e);
            e.printStackTrace(System.out);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition partition, String store, long start, long end) {
                System.out.println("RESTORING " + store + " " + partition.topic() + " " + partition.partition()
                        + " offsets " + start + ".." + end);
            }

            @Override
            public void onBatchRestored(TopicPartition partition, String store, long batchEnd, long records) {
            }

            @Override
            public void onRestoreEnd(TopicPartition partition, String store, long total) {
                System.out.println("RESTORED " + store + " " + partition.topic() + " " + partition.partition() + " " + total);
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(10))));
        streams.start();
        failed.await();
        System.out.println("FAILED: Kafka Streams reached state " + streams.state());
        streams.close(Duration.ofSeconds(10));
        System.exit(1);
    }
}
