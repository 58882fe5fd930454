package weir.compat;

import static weir.compat.Main.CALL_TIMEOUT_MS;
import static weir.compat.Main.CheckFailed;
import static weir.compat.Main.bootstrap;
import static weir.compat.Main.check;
import static weir.compat.Main.checkEq;
import static weir.compat.Main.createTopic;
import static weir.compat.Main.expectFailure;
import static weir.compat.Main.get;
import static weir.compat.Main.newAdmin;
import static weir.compat.Main.newProducer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Scenario {@code group}: the classic consumer group protocol with KafkaConsumer
 * ({@code group.protocol=classic}) and the AdminClient's group calls.
 *
 * <ul>
 *   <li>{@code java-group-range} (RangeAssignor): one consumer reads everything and commits;
 *       a second joins and the two split the 4 partitions 2/2 (new generation) and read new
 *       records exactly once; the admin lists and describes the group (members, assignment,
 *       state, assignor), lists its offsets, and is refused deleting the group
 *       (GroupNotEmptyException), deleting offsets of a subscribed topic
 *       (GroupSubscribedToTopicException) and altering offsets (UnknownMemberIdException)
 *       while it has members; one consumer closes and the other takes all 4; once empty,
 *       alterConsumerGroupOffsets rewinds partition 0 (a new member starts there),
 *       deleteConsumerGroupOffsets drops partition 1, deleteConsumerGroups deletes it.</li>
 *   <li>{@code java-group-coop} (CooperativeStickyAssignor): the same join/split/leave
 *       sequence with incremental rebalances.</li>
 *   <li>{@code java-group-static} (group.instance.id): a closed static member stays in the
 *       group, a new consumer with the same instance id takes its place without waiting for
 *       the session timeout, removeMembersFromConsumerGroup removes it.</li>
 * </ul>
 */
final class GroupScenario {
    static final String TOPIC = "java-group";
    static final int PARTITIONS = 4;
    /** Bound on waiting for an assignment to settle. */
    static final long ASSIGN_TIMEOUT_MS = 45_000;
    /** Bound on a consume loop. */
    static final long CONSUME_TIMEOUT_MS = 60_000;
    /** Session timeout of the consumers. */
    static final int SESSION_TIMEOUT_MS = 10_000;
    /** Session timeout of the static members: well above how long a replacement may take. */
    static final int STATIC_SESSION_TIMEOUT_MS = 45_000;

    private GroupScenario() {
    }

    /** Next offset per partition (the log end offsets), kept up to date by produce. */
    static final long[] ends = new long[PARTITIONS];
    static int batch;
    static Node node;
    /** Leader epoch of the last record consumed from each partition (what commitSync commits with it). */
    static final Map<Integer, Optional<Integer>> lastEpoch = new HashMap<>();

    static void run() {
        try (Admin admin = newAdmin()) {
            Collection<Node> nodes = get(admin.describeCluster().nodes(), "describeCluster");
            checkEq(1, nodes.size(), "describeCluster: node count");
            node = nodes.iterator().next();
            createTopic(admin, TOPIC, PARTITIONS, Map.of());
            produce(100);
            rangeGroup(admin);
            cooperativeGroup(admin);
            staticGroup(admin);
        }
    }

    static List<TopicPartition> allPartitions() {
        List<TopicPartition> l = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            l.add(new TopicPartition(TOPIC, p));
        }
        return l;
    }

    static Map<TopicPartition, Long> endsMap() {
        Map<TopicPartition, Long> m = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        for (int p = 0; p < PARTITIONS; p++) {
            m.put(new TopicPartition(TOPIC, p), ends[p]);
        }
        return m;
    }

    static String value(int b, int p, long off) {
        return "batch" + b + "-p" + p + "-o" + off;
    }

    /** Produces perPartition records to every partition and advances ends. */
    static void produce(int perPartition) {
        batch++;
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        List<long[]> want = new ArrayList<>();
        try (KafkaProducer<String, String> producer = newProducer("none")) {
            for (int i = 0; i < perPartition; i++) {
                for (int p = 0; p < PARTITIONS; p++) {
                    long off = ends[p] + i;
                    fs.add(producer.send(new ProducerRecord<>(TOPIC, p, "k" + p, value(batch, p, off))));
                    want.add(new long[] {p, off});
                }
            }
            producer.flush();
            for (int i = 0; i < fs.size(); i++) {
                RecordMetadata md = get(fs.get(i), "send group record");
                if (md.partition() != want.get(i)[0] || md.offset() != want.get(i)[1]) {
                    throw new CheckFailed(String.format("record %d of batch %d: %d/%d, want %d/%d", i, batch,
                            md.partition(), md.offset(), want.get(i)[0], want.get(i)[1]));
                }
            }
        }
        for (int p = 0; p < PARTITIONS; p++) {
            ends[p] += perPartition;
        }
        check(true, "batch %d: produced %d records to each of %d partitions; log end offsets now %s", batch,
                perPartition, PARTITIONS, java.util.Arrays.toString(ends));
    }

    static KafkaConsumer<String, String> newGroupConsumer(String group, String clientId, String assignor,
            String instanceId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG,
                String.valueOf(instanceId == null ? SESSION_TIMEOUT_MS : STATIC_SESSION_TIMEOUT_MS));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        if (instanceId != null) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        c.subscribe(List.of(TOPIC));
        return c;
    }

    static final class Member {
        final String name;
        final KafkaConsumer<String, String> consumer;
        boolean closed;

        Member(String name, KafkaConsumer<String, String> consumer) {
            this.name = name;
            this.consumer = consumer;
        }

        Set<Integer> parts() {
            return consumer.assignment().stream().map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
        }

        ConsumerGroupMetadata meta() {
            return consumer.groupMetadata();
        }

        void close() {
            if (!closed) {
                closed = true;
                consumer.close(Duration.ofMillis(CALL_TIMEOUT_MS));
            }
        }
    }

    static String describe(List<Member> ms) {
        StringBuilder sb = new StringBuilder();
        for (Member m : ms) {
            sb.append(m.name).append('=').append(m.parts()).append(' ');
        }
        return sb.toString().trim();
    }

    /**
     * Polls the members in turn until each has the wanted number of partitions and together
     * they own all partitions exactly once. Any record delivered meanwhile is a failure: every
     * record was already consumed and committed.
     */
    static void awaitAssignment(List<Member> ms, int[] sizes, String what) {
        long start = System.currentTimeMillis();
        long deadline = start + ASSIGN_TIMEOUT_MS;
        while (true) {
            for (Member m : ms) {
                for (ConsumerRecord<String, String> r : m.consumer.poll(Duration.ofMillis(100))) {
                    throw new CheckFailed(String.format("%s: %s got record %s/%d@%d (%s) while the group rebalanced; "
                            + "everything up to the log end was committed", what, m.name, r.topic(), r.partition(), r.offset(), r.value()));
                }
            }
            boolean done = true;
            Set<Integer> union = new HashSet<>();
            int total = 0;
            for (int i = 0; i < ms.size(); i++) {
                Set<Integer> ps = ms.get(i).parts();
                if (ps.size() != sizes[i]) {
                    done = false;
                }
                union.addAll(ps);
                total += ps.size();
            }
            if (done && union.size() == PARTITIONS && total == PARTITIONS) {
                check(true, "%s: assignment settled in %d ms: %s", what, System.currentTimeMillis() - start, describe(ms));
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new CheckFailed(String.format("%s: assignment did not settle within %d ms: %s (want sizes %s)", what,
                        ASSIGN_TIMEOUT_MS, describe(ms), java.util.Arrays.toString(sizes)));
            }
        }
    }

    /**
     * Polls the members in turn until every offset in [from[p], ends[p]) of every partition
     * was delivered exactly once, each by the member that owns the partition, then polls a
     * little longer to catch duplicates, and commits (commitSync) on every member.
     */
    static void consumeExactlyOnce(List<Member> ms, long[] from, String what) {
        long start = System.currentTimeMillis();
        long want = 0;
        for (int p = 0; p < PARTITIONS; p++) {
            want += ends[p] - from[p];
        }
        Map<Integer, Set<Long>> seen = new HashMap<>();
        Map<String, Integer> perMember = new TreeMap<>();
        long got = 0;
        long deadline = start + CONSUME_TIMEOUT_MS;
        long quietUntil = -1;
        while (true) {
            for (Member m : ms) {
                for (ConsumerRecord<String, String> r : m.consumer.poll(Duration.ofMillis(100))) {
                    int p = r.partition();
                    long o = r.offset();
                    if (!r.topic().equals(TOPIC) || p < 0 || p >= PARTITIONS) {
                        throw new CheckFailed(what + ": record from " + r.topic() + "/" + p);
                    }
                    if (o < from[p] || o >= ends[p]) {
                        throw new CheckFailed(String.format("%s: %s got %s/%d@%d (%s), outside the expected [%d, %d)", what,
                                m.name, TOPIC, p, o, r.value(), from[p], ends[p]));
                    }
                    if (!seen.computeIfAbsent(p, k -> new HashSet<>()).add(o)) {
                        throw new CheckFailed(String.format("%s: %s got %s/%d@%d a second time", what, m.name, TOPIC, p, o));
                    }
                    if (!m.consumer.assignment().contains(new TopicPartition(TOPIC, p))) {
                        throw new CheckFailed(String.format("%s: %s got %s/%d@%d but is assigned %s", what, m.name, TOPIC, p, o, m.parts()));
                    }
                    if (!r.value().endsWith("-p" + p + "-o" + o)) {
                        throw new CheckFailed(String.format("%s: %s/%d@%d has value %s", what, TOPIC, p, o, r.value()));
                    }
                    perMember.merge(m.name, 1, Integer::sum);
                    lastEpoch.put(p, r.leaderEpoch());
                    got++;
                }
            }
            long now = System.currentTimeMillis();
            if (got == want && quietUntil < 0) {
                quietUntil = now + 1000; // keep polling a second for duplicates
            }
            if (quietUntil > 0 && now >= quietUntil) {
                break;
            }
            if (now > deadline) {
                throw new CheckFailed(String.format("%s: consumed %d of %d records within %d ms (per member %s; assignment %s)",
                        what, got, want, CONSUME_TIMEOUT_MS, perMember, describe(ms)));
            }
        }
        for (Member m : ms) {
            m.consumer.commitSync(Duration.ofMillis(CALL_TIMEOUT_MS));
        }
        check(true, "%s: %d records consumed exactly once in %d ms (per member %s), committed", what, want,
                System.currentTimeMillis() - start, perMember);
    }

    static void checkCommitted(KafkaConsumer<String, String> c, String what) {
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(new HashSet<>(allPartitions()), Duration.ofMillis(CALL_TIMEOUT_MS));
        for (TopicPartition tp : allPartitions()) {
            OffsetAndMetadata om = committed.get(tp);
            check(om != null, "%s: committed(%s) present", what, tp);
            checkEq(ends[tp.partition()], om.offset(), "%s: committed(%s) offset", what, tp);
            // commitSync sends the leader epoch of the last consumed record
            // (OffsetCommit v9 CommittedLeaderEpoch); OffsetFetch returns it.
            checkEq(lastEpoch.getOrDefault(tp.partition(), Optional.empty()), om.leaderEpoch(),
                    "%s: committed(%s) leader epoch (that of the last record consumed)", what, tp);
        }
    }

    static Map<TopicPartition, Long> listOffsets(Admin admin, String group) {
        Map<TopicPartition, OffsetAndMetadata> m = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(),
                "listConsumerGroupOffsets " + group);
        Map<TopicPartition, Long> out = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        m.forEach((tp, om) -> out.put(tp, om == null ? null : om.offset()));
        return out;
    }

    static ConsumerGroupDescription describeGroup(Admin admin, String group) {
        Map<String, ConsumerGroupDescription> m = get(admin.describeConsumerGroups(List.of(group)).all(),
                "describeConsumerGroups " + group);
        ConsumerGroupDescription d = m.get(group);
        if (d == null) {
            throw new CheckFailed("describeConsumerGroups " + group + ": no description in " + m);
        }
        return d;
    }

    /** Checks the description of a stable group whose members are ms. */
    static void checkStableDescription(Admin admin, String group, List<Member> ms, String assignor) {
        ConsumerGroupDescription d = describeGroup(admin, group);
        checkEq(group, d.groupId(), "describeConsumerGroups %s: groupId", group);
        checkEq(GroupState.STABLE, d.groupState(), "describeConsumerGroups %s: state", group);
        checkEq(GroupType.CLASSIC, d.type(), "describeConsumerGroups %s: type", group);
        check(!d.isSimpleConsumerGroup(), "describeConsumerGroups %s: not a simple consumer group", group);
        checkEq(assignor, d.partitionAssignor(), "describeConsumerGroups %s: partitionAssignor", group);
        check(d.coordinator() != null && d.coordinator().id() == node.id(),
                "describeConsumerGroups %s: coordinator is node %d (%s)", group, node.id(), d.coordinator());
        checkEq(ms.size(), d.members().size(), "describeConsumerGroups %s: member count", group);
        Map<String, MemberDescription> byId = new HashMap<>();
        for (MemberDescription md : d.members()) {
            byId.put(md.consumerId(), md);
        }
        for (Member m : ms) {
            ConsumerGroupMetadata gm = m.meta();
            MemberDescription md = byId.get(gm.memberId());
            check(md != null, "describeConsumerGroups %s: has %s's member id %s (members %s)", group, m.name, gm.memberId(), byId.keySet());
            checkEq(m.name, md.clientId(), "describeConsumerGroups %s: member %s client id", group, gm.memberId());
            check(md.host() != null && !md.host().isEmpty(), "describeConsumerGroups %s: member %s host %s", group, m.name, md.host());
            checkEq(gm.groupInstanceId(), md.groupInstanceId(), "describeConsumerGroups %s: member %s group instance id", group, m.name);
            checkEq(m.consumer.assignment(), md.assignment().topicPartitions(),
                    "describeConsumerGroups %s: member %s assignment", group, m.name);
        }
    }

    static void checkEmptyDescription(Admin admin, String group) {
        ConsumerGroupDescription d = describeGroup(admin, group);
        checkEq(GroupState.EMPTY, d.groupState(), "describeConsumerGroups %s (no members): state", group);
        checkEq(0, d.members().size(), "describeConsumerGroups %s (no members): member count", group);
    }

    static GroupListing listed(Admin admin, ListGroupsOptions opts, String group, String what) {
        Collection<GroupListing> all = get(admin.listGroups(opts).all(), what);
        for (GroupListing g : all) {
            if (g.groupId().equals(group)) {
                return g;
            }
        }
        return null;
    }

    static void checkListed(Admin admin, String group, GroupState state) {
        GroupListing g = listed(admin, ListGroupsOptions.forConsumerGroups(), group, "listGroups(forConsumerGroups)");
        check(g != null, "listGroups(forConsumerGroups): lists %s", group);
        checkEq(Optional.of(GroupType.CLASSIC), g.type(), "listGroups(forConsumerGroups) %s: type", group);
        checkEq("consumer", g.protocol(), "listGroups(forConsumerGroups) %s: protocol type", group);
        checkEq(Optional.of(state), g.groupState(), "listGroups(forConsumerGroups) %s: state", group);
        check(!g.isSimpleConsumerGroup(), "listGroups %s: not simple", group);
        GroupListing all = listed(admin, new ListGroupsOptions(), group, "listGroups()");
        check(all != null, "listGroups(): lists %s", group);
        GroupListing st = listed(admin, new ListGroupsOptions().inGroupStates(Set.of(state)), group, "listGroups(inGroupStates)");
        check(st != null, "listGroups(inGroupStates(%s)): lists %s", state, group);
        GroupState other = state == GroupState.STABLE ? GroupState.EMPTY : GroupState.STABLE;
        GroupListing no = listed(admin, new ListGroupsOptions().inGroupStates(Set.of(other)), group, "listGroups(inGroupStates)");
        check(no == null, "listGroups(inGroupStates(%s)): does not list %s (it is %s)", other, group, state);
    }

    static void checkOffsets(Admin admin, String group, Map<TopicPartition, Long> want, String what) {
        checkEq(want, listOffsets(admin, group), "%s: listConsumerGroupOffsets %s", what, group);
    }

    static void deleteGroup(Admin admin, String group) {
        get(admin.deleteConsumerGroups(List.of(group)).all(), "deleteConsumerGroups " + group + " (empty)");
        check(true, "deleteConsumerGroups %s: deleted", group);
        check(listed(admin, new ListGroupsOptions(), group, "listGroups()") == null, "listGroups(): %s is gone", group);
        checkEq(Map.of(), listOffsets(admin, group), "listConsumerGroupOffsets %s after delete", group);
        expectFailure(admin.deleteConsumerGroups(List.of(group)).all(), GroupIdNotFoundException.class,
                "deleteConsumerGroups " + group + " again");
        // DescribeGroups v6 (Kafka 4): an unknown group is GROUP_ID_NOT_FOUND.
        expectFailure(admin.describeConsumerGroups(List.of(group)).all(), GroupIdNotFoundException.class,
                "describeConsumerGroups " + group + " after delete");
    }

    // ------------------------------------------------------------------

    static void rangeGroup(Admin admin) {
        final String group = "java-group-range";
        final String assignor = RangeAssignor.class.getName();
        List<Member> all = new ArrayList<>();
        try {
            Member a = new Member("java-range-a", newGroupConsumer(group, "java-range-a", assignor, null));
            all.add(a);
            consumeExactlyOnce(List.of(a), new long[PARTITIONS], group + ": one member reads everything");
            checkEq(Set.of(0, 1, 2, 3), a.parts(), "%s: the only member's partitions", group);
            checkCommitted(a.consumer, group + " after commitSync");
            int gen1 = a.meta().generationId();
            check(gen1 > 0 && !a.meta().memberId().isEmpty(), "%s: member id %s, generation %d", group, a.meta().memberId(), gen1);
            checkListed(admin, group, GroupState.STABLE);
            checkStableDescription(admin, group, List.of(a), "range");
            checkOffsets(admin, group, endsMap(), "one member");

            Member b = new Member("java-range-b", newGroupConsumer(group, "java-range-b", assignor, null));
            all.add(b);
            awaitAssignment(List.of(a, b), new int[] {2, 2}, group + ": second member joins");
            check(a.meta().generationId() > gen1, "%s: generation %d after the join > %d", group, a.meta().generationId(), gen1);
            checkEq(a.meta().generationId(), b.meta().generationId(), "%s: both members' generation", group);
            // RangeAssignor with one topic: the members, sorted by member id, get [0,1] and [2,3].
            Set<Set<Integer>> split = Set.of(a.parts(), b.parts());
            checkEq(Set.of(Set.of(0, 1), Set.of(2, 3)), split, "%s: range split", group);
            long[] from = ends.clone();
            produce(50);
            consumeExactlyOnce(List.of(a, b), from, group + ": two members read a new batch");
            checkCommitted(b.consumer, group + " after both committed");
            checkStableDescription(admin, group, List.of(a, b), "range");
            checkListed(admin, group, GroupState.STABLE);
            checkOffsets(admin, group, endsMap(), "two members");

            // Refused while the group has members.
            expectFailure(admin.deleteConsumerGroups(List.of(group)).all(), GroupNotEmptyException.class,
                    "deleteConsumerGroups " + group + " with 2 members");
            TopicPartition tp0 = new TopicPartition(TOPIC, 0);
            TopicPartition tp1 = new TopicPartition(TOPIC, 1);
            expectFailure(admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).partitionResult(tp0),
                    GroupSubscribedToTopicException.class, "deleteConsumerGroupOffsets " + group + " " + tp0 + " while subscribed");
            expectFailure(admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(1))).all(),
                    UnknownMemberIdException.class, "alterConsumerGroupOffsets " + group + " with 2 members");
            checkOffsets(admin, group, endsMap(), "after the refused admin calls");

            // b leaves: a gets everything back, from b's commits.
            int gen2 = a.meta().generationId();
            b.close();
            awaitAssignment(List.of(a), new int[] {4}, group + ": second member left");
            check(a.meta().generationId() > gen2, "%s: generation %d after the leave > %d", group, a.meta().generationId(), gen2);
            from = ends.clone();
            produce(10);
            consumeExactlyOnce(List.of(a), from, group + ": remaining member reads a new batch");
            checkStableDescription(admin, group, List.of(a), "range");
            a.close();

            // Empty group: admin offset operations.
            checkEmptyDescription(admin, group);
            checkListed(admin, group, GroupState.EMPTY);
            checkOffsets(admin, group, endsMap(), "empty group");
            get(admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(5, "weir-meta"))).all(),
                    "alterConsumerGroupOffsets " + group);
            Map<TopicPartition, OffsetAndMetadata> om = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(),
                    "listConsumerGroupOffsets " + group);
            checkEq(5L, om.get(tp0).offset(), "after alterConsumerGroupOffsets: %s offset", tp0);
            checkEq("weir-meta", om.get(tp0).metadata(), "after alterConsumerGroupOffsets: %s metadata", tp0);
            checkEq(ends[1], om.get(tp1).offset(), "after alterConsumerGroupOffsets: %s offset kept", tp1);

            // A new member starts at the altered offset of partition 0, at the end elsewhere.
            Member c = new Member("java-range-c", newGroupConsumer(group, "java-range-c", assignor, null));
            all.add(c);
            from = ends.clone();
            from[0] = 5;
            consumeExactlyOnce(List.of(c), from, group + ": new member after alterConsumerGroupOffsets");
            c.close();
            checkOffsets(admin, group, endsMap(), "after the re-read");

            get(admin.deleteConsumerGroupOffsets(group, Set.of(tp1)).all(), "deleteConsumerGroupOffsets " + group + " " + tp1);
            Map<TopicPartition, Long> want = endsMap();
            want.remove(tp1);
            checkOffsets(admin, group, want, "after deleteConsumerGroupOffsets " + tp1);

            deleteGroup(admin, group);
        } finally {
            all.forEach(Member::close);
        }
    }

    static void cooperativeGroup(Admin admin) {
        final String group = "java-group-coop";
        final String assignor = CooperativeStickyAssignor.class.getName();
        List<Member> all = new ArrayList<>();
        try {
            Member a = new Member("java-coop-a", newGroupConsumer(group, "java-coop-a", assignor, null));
            all.add(a);
            consumeExactlyOnce(List.of(a), new long[PARTITIONS], group + ": one member reads everything");
            checkCommitted(a.consumer, group + " after commitSync");
            checkStableDescription(admin, group, List.of(a), "cooperative-sticky");
            Set<Integer> before = a.parts();

            Member b = new Member("java-coop-b", newGroupConsumer(group, "java-coop-b", assignor, null));
            all.add(b);
            awaitAssignment(List.of(a, b), new int[] {2, 2}, group + ": second member joins (incremental)");
            check(before.containsAll(a.parts()), "%s: sticky: the first member kept %s of %s", group, a.parts(), before);
            long[] from = ends.clone();
            produce(50);
            consumeExactlyOnce(List.of(a, b), from, group + ": two members read a new batch");
            checkStableDescription(admin, group, List.of(a, b), "cooperative-sticky");
            checkOffsets(admin, group, endsMap(), "two members");
            expectFailure(admin.deleteConsumerGroups(List.of(group)).all(), GroupNotEmptyException.class,
                    "deleteConsumerGroups " + group + " with 2 members");

            // This time the first member (the leader) leaves.
            Set<Integer> bHad = b.parts();
            a.close();
            awaitAssignment(List.of(b), new int[] {4}, group + ": first member left");
            check(b.parts().containsAll(bHad), "%s: sticky: the remaining member kept %s", group, bHad);
            from = ends.clone();
            produce(10);
            consumeExactlyOnce(List.of(b), from, group + ": remaining member reads a new batch");
            checkStableDescription(admin, group, List.of(b), "cooperative-sticky");
            b.close();
            checkEmptyDescription(admin, group);
            checkOffsets(admin, group, endsMap(), "empty group");
            deleteGroup(admin, group);
        } finally {
            all.forEach(Member::close);
        }
    }

    static void staticGroup(Admin admin) {
        final String group = "java-group-static";
        final String assignor = RangeAssignor.class.getName();
        final String instance = "java-static-1";
        List<Member> all = new ArrayList<>();
        try {
            Member s1 = new Member("java-static-a", newGroupConsumer(group, "java-static-a", assignor, instance));
            all.add(s1);
            consumeExactlyOnce(List.of(s1), new long[PARTITIONS], group + ": static member reads everything");
            checkStableDescription(admin, group, List.of(s1), "range");
            String oldId = s1.meta().memberId();
            checkEq(Optional.of(instance), s1.meta().groupInstanceId(), "%s: group instance id", group);
            s1.close(); // a static member does not leave the group on close

            ConsumerGroupDescription d = describeGroup(admin, group);
            checkEq(1, d.members().size(), "%s after the static member closed: member count (it stays until its session times out)", group);
            checkEq(Optional.of(instance), d.members().iterator().next().groupInstanceId(), "%s: remaining member's instance id", group);
            checkEq(oldId, d.members().iterator().next().consumerId(), "%s: remaining member's id", group);

            long[] from = ends.clone();
            produce(10);
            long start = System.currentTimeMillis();
            Member s2 = new Member("java-static-b", newGroupConsumer(group, "java-static-b", assignor, instance));
            all.add(s2);
            consumeExactlyOnce(List.of(s2), from, group + ": a new consumer with the same instance id takes over");
            long took = System.currentTimeMillis() - start;
            check(took < STATIC_SESSION_TIMEOUT_MS - 5_000,
                    "%s: the replacement took %d ms, well within the %d ms session timeout", group, took, STATIC_SESSION_TIMEOUT_MS);
            check(!s2.meta().memberId().equals(oldId), "%s: the replacement has a new member id %s (was %s)", group,
                    s2.meta().memberId(), oldId);
            checkStableDescription(admin, group, List.of(s2), "range");
            expectFailure(admin.deleteConsumerGroups(List.of(group)).all(), GroupNotEmptyException.class,
                    "deleteConsumerGroups " + group + " with a static member");
            s2.close();

            // LeaveGroup v3+ by group instance id.
            get(admin.removeMembersFromConsumerGroup(group,
                    new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove(instance)))).all(),
                    "removeMembersFromConsumerGroup " + group + " " + instance);
            check(true, "removeMembersFromConsumerGroup %s: removed %s", group, instance);
            checkEmptyDescription(admin, group);
            checkOffsets(admin, group, endsMap(), "static group");
            deleteGroup(admin, group);
        } finally {
            all.forEach(Member::close);
        }
    }
}
