// GenConsumerRecords writes consumer_records.golden: the key and value
// bytes of KIP-848 group records in __consumer_offsets as Apache Kafka's
// group coordinator serializes them (GroupCoordinatorRecordSerde over the
// generated ConsumerGroup*Key/Value messages), for records_consumer_test.go
// to compare weir's encoding with and decode. Each record is also read
// back with the same serde and must come back equal.
//
// The cases here and goldenCases in records_consumer_test.go describe the
// same records by name; change both together. Cases marked decode-only in
// the Go test carry what a later Kafka writes (tagged fields 4.1 does not
// know) or what 4.1 no longer writes (partition metadata values).
//
// Regenerate, from the repository root, with the jars of .ci/kafka.sh
// fetch (Kafka 4.1.2) and Java 17:
//
//   libs="$(.ci/kafka.sh libs)"   # ~/.cache/weir/kafka-4.1.2/libs
//   out=$(mktemp -d)
//   javac -d "$out" -cp "$libs/*" broker/group/testdata/GenConsumerRecords.java
//   java -cp "$out:$libs/*" GenConsumerRecords broker/group/testdata/consumer_records.golden
//   go test -run Golden ./broker/group/

import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMemberMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMemberMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupPartitionMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupPartitionMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupRegularExpressionKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupRegularExpressionValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMemberKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMemberValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMetadataValue;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class GenConsumerRecords {
    static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();

    static final Uuid TOPIC_A = new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L);
    static final Uuid TOPIC_B = new Uuid(1L, 2L);
    static final Uuid TOPIC_C = new Uuid(-1L, 0x7fffffffffffffffL);

    static final List<String> lines = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: GenConsumerRecords OUTPUT");
            System.exit(2);
        }

        // Group metadata (type 3).
        record("metadata", metadataKey("group-1"),
            new ConsumerGroupMetadataValue().setEpoch(5));
        record("metadata-hash", metadataKey("group-1"),
            new ConsumerGroupMetadataValue().setEpoch(42).setMetadataHash(0x1122334455667788L));
        record("metadata-hash-negative", metadataKey("group-1"),
            new ConsumerGroupMetadataValue().setEpoch(Integer.MAX_VALUE).setMetadataHash(-2L));
        ConsumerGroupMetadataValue future = new ConsumerGroupMetadataValue().setEpoch(9).setMetadataHash(77L);
        // A later Kafka's creation time (tag 1), unknown to 4.1.
        future.unknownTaggedFields().add(new RawTaggedField(1, longBytes(1700000000000L)));
        record("metadata-future-tag", metadataKey("group-1"), future);
        tombstone("metadata-tombstone", metadataKey("group-1"));

        // Partition metadata (type 4): 4.1 only deletes it.
        tombstone("partition-metadata-tombstone", new ConsumerGroupPartitionMetadataKey().setGroupId("group-1"));
        record("partition-metadata", new ConsumerGroupPartitionMetadataKey().setGroupId("group-1"),
            new ConsumerGroupPartitionMetadataValue().setTopics(List.of(
                new ConsumerGroupPartitionMetadataValue.TopicMetadata()
                    .setTopicId(TOPIC_A).setTopicName("orders").setNumPartitions(3)
                    .setPartitionMetadata(List.of(
                        new ConsumerGroupPartitionMetadataValue.PartitionMetadata()
                            .setPartition(0).setRacks(List.of("r1", "r2")),
                        new ConsumerGroupPartitionMetadataValue.PartitionMetadata()
                            .setPartition(1).setRacks(List.of()))),
                new ConsumerGroupPartitionMetadataValue.TopicMetadata()
                    .setTopicId(TOPIC_B).setTopicName("payments").setNumPartitions(1))));

        // Member metadata (type 5).
        record("member-consumer", memberKey("group-1", "member-A"),
            new ConsumerGroupMemberMetadataValue()
                .setInstanceId(null).setRackId(null)
                .setClientId("consumer-1").setClientHost("/127.0.0.1")
                .setSubscribedTopicNames(List.of("orders", "payments"))
                .setSubscribedTopicRegex(null)
                .setRebalanceTimeoutMs(300000)
                .setServerAssignor("uniform")
                .setClassicMemberMetadata(null));
        record("member-static", memberKey("gr\u00fcppe", "m-2"),
            new ConsumerGroupMemberMetadataValue()
                .setInstanceId("instance-1").setRackId("rack-a")
                .setClientId("").setClientHost("/10.0.0.2")
                .setSubscribedTopicNames(List.of())
                .setSubscribedTopicRegex("^orders-.*$")
                .setRebalanceTimeoutMs(-1)
                .setServerAssignor(null)
                .setClassicMemberMetadata(null));
        record("member-classic", memberKey("group-1", "member-C"),
            new ConsumerGroupMemberMetadataValue()
                .setInstanceId(null).setRackId("rack-b")
                .setClientId("classic").setClientHost("/10.0.0.3")
                .setSubscribedTopicNames(List.of("orders"))
                .setSubscribedTopicRegex(null)
                .setRebalanceTimeoutMs(60000)
                .setServerAssignor(null)
                .setClassicMemberMetadata(new ConsumerGroupMemberMetadataValue.ClassicMemberMetadata()
                    .setSessionTimeoutMs(45000)
                    .setSupportedProtocols(List.of(
                        new ConsumerGroupMemberMetadataValue.ClassicProtocol()
                            .setName("range").setMetadata(new byte[] {0, 1, 2, 3}),
                        new ConsumerGroupMemberMetadataValue.ClassicProtocol()
                            .setName("cooperative-sticky").setMetadata(new byte[0])))));
        // The field's default, which Kafka leaves out.
        record("member-classic-default", memberKey("group-1", "member-D"),
            new ConsumerGroupMemberMetadataValue()
                .setInstanceId(null).setRackId(null)
                .setClientId("c").setClientHost("h")
                .setSubscribedTopicNames(List.of("orders"))
                .setSubscribedTopicRegex(null)
                .setRebalanceTimeoutMs(1000)
                .setServerAssignor(null)
                .setClassicMemberMetadata(new ConsumerGroupMemberMetadataValue.ClassicMemberMetadata()));
        tombstone("member-tombstone", memberKey("group-1", "member-A"));

        // Target assignment metadata (type 6).
        record("target-metadata", targetMetadataKey("group-1"),
            new ConsumerGroupTargetAssignmentMetadataValue().setAssignmentEpoch(12));
        ConsumerGroupTargetAssignmentMetadataValue futureTarget =
            new ConsumerGroupTargetAssignmentMetadataValue().setAssignmentEpoch(13);
        // A later Kafka's assignment timestamp (tag 0), unknown to 4.1.
        futureTarget.unknownTaggedFields().add(new RawTaggedField(0, longBytes(1700000000123L)));
        record("target-metadata-future-tag", targetMetadataKey("group-1"), futureTarget);
        tombstone("target-metadata-tombstone", targetMetadataKey("group-1"));

        // Target assignment of a member (type 7).
        record("target-member", targetMemberKey("group-1", "member-A"),
            new ConsumerGroupTargetAssignmentMemberValue().setTopicPartitions(List.of(
                targetPartitions(TOPIC_A, 0, 2, 4),
                targetPartitions(TOPIC_B, 1),
                targetPartitions(TOPIC_C))));
        record("target-member-empty", targetMemberKey("group-1", "member-B"),
            new ConsumerGroupTargetAssignmentMemberValue().setTopicPartitions(List.of()));
        tombstone("target-member-tombstone", targetMemberKey("group-1", "member-A"));

        // Current assignment of a member (type 8).
        record("current", currentKey("group-1", "member-A"),
            new ConsumerGroupCurrentMemberAssignmentValue()
                .setMemberEpoch(10).setPreviousMemberEpoch(9).setState((byte) 0)
                .setAssignedPartitions(List.of(currentPartitions(TOPIC_A, 0, 1), currentPartitions(TOPIC_B, 7)))
                .setPartitionsPendingRevocation(List.of()));
        record("current-revoking", currentKey("group-1", "member-B"),
            new ConsumerGroupCurrentMemberAssignmentValue()
                .setMemberEpoch(11).setPreviousMemberEpoch(10).setState((byte) 1)
                .setAssignedPartitions(List.of(currentPartitions(TOPIC_A, 0)))
                .setPartitionsPendingRevocation(List.of(currentPartitions(TOPIC_A, 1), currentPartitions(TOPIC_B, 7))));
        record("current-empty", currentKey("group-1", "member-C"),
            new ConsumerGroupCurrentMemberAssignmentValue()
                .setMemberEpoch(1).setPreviousMemberEpoch(-1).setState((byte) 2)
                .setAssignedPartitions(List.of())
                .setPartitionsPendingRevocation(List.of()));
        ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions withEpochs = currentPartitions(TOPIC_A, 0, 1);
        // A later Kafka's assignment epochs (tag 0 of the struct), unknown to 4.1.
        withEpochs.unknownTaggedFields().add(new RawTaggedField(0, new byte[] {3, 0, 0, 0, 10, 0, 0, 0, 10}));
        ConsumerGroupCurrentMemberAssignmentValue futureCurrent = new ConsumerGroupCurrentMemberAssignmentValue()
            .setMemberEpoch(10).setPreviousMemberEpoch(9).setState((byte) 0)
            .setAssignedPartitions(List.of(withEpochs))
            .setPartitionsPendingRevocation(List.of());
        futureCurrent.unknownTaggedFields().add(new RawTaggedField(5, new byte[] {1, 2, 3}));
        record("current-future-tag", currentKey("group-1", "member-A"), futureCurrent);
        tombstone("current-tombstone", currentKey("group-1", "member-A"));

        // Resolved regular expression (type 16).
        record("regex", regexKey("group-1", "^orders-.*$"),
            new ConsumerGroupRegularExpressionValue()
                .setTopics(List.of("orders-eu", "orders-us"))
                .setVersion(12L).setTimestamp(1700000000000L));
        record("regex-empty", regexKey("group-1", "nothing"),
            new ConsumerGroupRegularExpressionValue()
                .setTopics(List.of()).setVersion(0L).setTimestamp(-1L));
        tombstone("regex-tombstone", regexKey("group-1", "^orders-.*$"));

        try (PrintWriter out = new PrintWriter(args[0], StandardCharsets.UTF_8)) {
            out.println("# KIP-848 group records of __consumer_offsets as Apache Kafka "
                + org.apache.kafka.common.utils.AppInfoParser.getVersion()
                + " serializes them; written by GenConsumerRecords.java, do not edit.");
            out.println("# name key-hex value-hex (- for a tombstone)");
            for (String l : lines) {
                out.println(l);
            }
        }
    }

    static void record(String name, ApiMessage key, ApiMessage value) {
        emit(name, CoordinatorRecord.record(key, new ApiMessageAndVersion(value, (short) 0)));
    }

    static void tombstone(String name, ApiMessage key) {
        emit(name, CoordinatorRecord.tombstone(key));
    }

    static void emit(String name, CoordinatorRecord rec) {
        byte[] key = SERDE.serializeKey(rec);
        byte[] value = SERDE.serializeValue(rec);
        CoordinatorRecord back = SERDE.deserialize(ByteBuffer.wrap(key), value == null ? null : ByteBuffer.wrap(value));
        if (!back.equals(rec)) {
            throw new IllegalStateException(name + ": read back as " + back + ", wrote " + rec);
        }
        lines.add(name + " " + hex(key) + " " + (value == null ? "-" : hex(value)));
    }

    static ConsumerGroupMetadataKey metadataKey(String group) {
        return new ConsumerGroupMetadataKey().setGroupId(group);
    }

    static ConsumerGroupMemberMetadataKey memberKey(String group, String member) {
        return new ConsumerGroupMemberMetadataKey().setGroupId(group).setMemberId(member);
    }

    static ConsumerGroupTargetAssignmentMetadataKey targetMetadataKey(String group) {
        return new ConsumerGroupTargetAssignmentMetadataKey().setGroupId(group);
    }

    static ConsumerGroupTargetAssignmentMemberKey targetMemberKey(String group, String member) {
        return new ConsumerGroupTargetAssignmentMemberKey().setGroupId(group).setMemberId(member);
    }

    static ConsumerGroupCurrentMemberAssignmentKey currentKey(String group, String member) {
        return new ConsumerGroupCurrentMemberAssignmentKey().setGroupId(group).setMemberId(member);
    }

    static ConsumerGroupRegularExpressionKey regexKey(String group, String regex) {
        return new ConsumerGroupRegularExpressionKey().setGroupId(group).setRegularExpression(regex);
    }

    static ConsumerGroupTargetAssignmentMemberValue.TopicPartition targetPartitions(Uuid topic, Integer... partitions) {
        return new ConsumerGroupTargetAssignmentMemberValue.TopicPartition()
            .setTopicId(topic).setPartitions(Arrays.asList(partitions));
    }

    static ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions currentPartitions(Uuid topic, Integer... partitions) {
        return new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions()
            .setTopicId(topic).setPartitions(Arrays.asList(partitions));
    }

    static byte[] longBytes(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(2 * b.length);
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }
}
