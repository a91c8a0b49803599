// Apache Kafka's Java client (3.9) against a broker: tests/integration/test_java_clients.py runs this
// through tests/support/kafka_tools.py, which compiles it against .cache/jars/kafka-broker.
//
//   produce-idempotent <bootstrap> <topic> <n>
//   consume-group <bootstrap> <topic> <group> <assignor> <members> <n>
//   admin <bootstrap>
//   transactions <bootstrap>
//
// Each subcommand prints one JSON line (its results, "ok" and, on failure, "error" or "failed") on
// stdout and exits 1 on any failure; stack traces and the client's logs go to stderr.
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ClientCheck {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long WAIT_S = 30;

    public static void main(String[] args) throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        List<String> failed = new ArrayList<>();
        try {
            switch (args.length == 0 ? "" : args[0]) {
                case "produce-idempotent":
                    produceIdempotent(args[1], args[2], Integer.parseInt(args[3]), result, failed);
                    break;
                case "consume-group":
                    consumeGroup(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]),
                                 Integer.parseInt(args[6]), result, failed);
                    break;
                case "admin":
                    admin(args[1], result, failed);
                    break;
                case "transactions":
                    transactions(args[1], result, failed);
                    break;
                case "password-codec":
                    passwordCodec(args[1], args[2], args[3], result);
                    break;
                default:
                    throw new IllegalArgumentException(
                        "usage: ClientCheck produce-idempotent|consume-group|admin|transactions|password-codec ...");
            }
        } catch (Throwable t) {
            t.printStackTrace();
            result.put("error", describe(t));
            failed.add("error");
        }
        result.put("failed", failed);
        result.put("ok", failed.isEmpty());
        System.out.println(JSON.writeValueAsString(result));
        System.out.flush();
        System.exit(failed.isEmpty() ? 0 : 1);
    }

    // ---------------------------------------------------------------- shared

    static String describe(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
               && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getName() + ": " + t.getMessage();
    }

    static void check(List<String> failed, boolean condition, String what) {
        if (!condition) {
            failed.add(what);
        }
    }

    static Properties clientProps(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    static Admin adminClient(String bootstrap) {
        Properties p = clientProps(bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "client-check-admin");
        return Admin.create(p);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, Map<String, String> extra) {
        Properties p = clientProps(bootstrap);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    static double metric(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().group().equals(group) && e.getKey().name().equals(name)) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return Double.NaN;
    }

    // ---------------------------------------------------------------- produce-idempotent

    static void produceIdempotent(String bootstrap, String topic, int n, Map<String, Object> result,
                                  List<String> failed) throws Exception {
        Properties p = clientProps(bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "3");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "2048"); // many small batches, several in flight at once
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int partitions;
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        List<TopicPartition> tps = new ArrayList<>();
        Map<TopicPartition, Long> start;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            partitions = producer.partitionsFor(topic).size();
            for (int q = 0; q < partitions; q++) {
                tps.add(new TopicPartition(topic, q));
            }
            try (KafkaConsumer<String, String> c = consumer(bootstrap, null, Map.of())) {
                start = c.endOffsets(tps);
            }
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "value-" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata md = f.get(WAIT_S, TimeUnit.SECONDS);
                offsets.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
            }
            Map<MetricName, ? extends Metric> m = producer.metrics();
            result.put("record_error_total", metric(m, "producer-metrics", "record-error-total"));
            result.put("record_retry_total", metric(m, "producer-metrics", "record-retry-total"));
            result.put("requests", metric(m, "producer-metrics", "request-total"));
            result.put("compression_rate_avg", metric(m, "producer-metrics", "compression-rate-avg"));
        }
        Map<Integer, Long> starts = new TreeMap<>();
        start.forEach((tp, o) -> starts.put(tp.partition(), o));
        result.put("partitions", partitions);
        result.put("start_offsets", starts);
        result.put("offsets", offsets);
        check(failed, result.get("record_error_total").equals(0.0), "record errors");

        // Read everything back from the start: each partition holds exactly what was sent, in order.
        Map<Integer, List<String>> expected = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            expected.computeIfAbsent(i % partitions, k -> new ArrayList<>()).add("value-" + i);
        }
        Map<Integer, List<String>> read = new TreeMap<>();
        Map<Integer, List<Long>> readOffsets = new TreeMap<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, null, Map.of())) {
            c.assign(tps);
            start.forEach(c::seek);  // read what this run appended
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            int total = 0;
            while (total < n && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    read.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
                    readOffsets.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
                    total++;
                }
            }
            Map<Integer, Long> ends = new TreeMap<>();
            end.forEach((tp, o) -> ends.put(tp.partition(), o));
            result.put("end_offsets", ends);
            result.put("read_back", total);
        }
        result.put("read_back_in_order", read.equals(expected));
        result.put("read_offsets_match", readOffsets.equals(offsets));
        check(failed, read.equals(expected), "records read back differ from those sent");
        check(failed, readOffsets.equals(offsets), "offsets read back differ from the acknowledged ones");
    }

    // ---------------------------------------------------------------- consume-group

    static final class Member implements Runnable {
        final int index;
        final KafkaConsumer<String, String> consumer;
        final String topic;
        final ConcurrentHashMap<String, AtomicInteger> seen;
        final AtomicInteger total;
        final AtomicBoolean stop;
        final CountDownLatch committed;
        final CountDownLatch close;
        volatile Set<Integer> assignment = Set.of();
        volatile String memberId = "";
        volatile int generation = -1;
        volatile Throwable error;
        volatile Map<Integer, Long> finalCommit = Map.of();
        final AtomicInteger assignedCallbacks = new AtomicInteger();
        final AtomicInteger revokedCallbacks = new AtomicInteger();
        final AtomicInteger consumed = new AtomicInteger();
        final List<List<Integer>> revocations = new java.util.concurrent.CopyOnWriteArrayList<>();

        Member(int index, KafkaConsumer<String, String> consumer, String topic, ConcurrentHashMap<String, AtomicInteger> seen,
               AtomicInteger total, AtomicBoolean stop, CountDownLatch committed, CountDownLatch close) {
            this.index = index;
            this.consumer = consumer;
            this.topic = topic;
            this.seen = seen;
            this.total = total;
            this.stop = stop;
            this.committed = committed;
            this.close = close;
        }

        private void snapshot() {
            Set<Integer> now = new TreeSet<>();
            for (TopicPartition tp : consumer.assignment()) {
                now.add(tp.partition());
            }
            assignment = now;
            memberId = consumer.groupMetadata().memberId();
            generation = consumer.groupMetadata().generationId();
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        revokedCallbacks.incrementAndGet();
                        if (!stop.get()) { // not the revocation of close()
                            List<Integer> ps = new ArrayList<>();
                            for (TopicPartition tp : partitions) {
                                ps.add(tp.partition());
                            }
                            ps.sort(null);
                            revocations.add(ps);
                        }
                        if (!partitions.isEmpty()) {
                            consumer.commitSync(); // the next owner starts where this one stopped
                        }
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        assignedCallbacks.incrementAndGet();
                    }
                });
                while (!stop.get()) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<String, String> r : records) {
                        seen.computeIfAbsent(r.partition() + "@" + r.offset(), k -> new AtomicInteger()).incrementAndGet();
                        consumed.incrementAndGet();
                        total.incrementAndGet();
                    }
                    snapshot();
                    if (!records.isEmpty()) {
                        Thread.sleep(20); // slow enough that the members joining later share the work
                    }
                }
                consumer.commitSync();
                Map<Integer, Long> positions = new TreeMap<>();
                for (TopicPartition tp : consumer.assignment()) {
                    positions.put(tp.partition(), consumer.position(tp));
                }
                finalCommit = positions;
            } catch (Throwable t) {
                t.printStackTrace();
                error = t;
            } finally {
                committed.countDown();
            }
            try {
                close.await(WAIT_S, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
            consumer.close(Duration.ofSeconds(10));
        }
    }

    static boolean stable(Member[] members, int partitions) {
        Set<Integer> union = new HashSet<>();
        int generation = members[0].generation;
        for (Member m : members) {
            Set<Integer> a = m.assignment;
            if (m.generation < 1 || m.generation != generation || (a.isEmpty() && partitions >= members.length)) {
                return false;
            }
            for (int q : a) {
                if (!union.add(q)) {
                    return false;
                }
            }
        }
        return union.size() == partitions;
    }

    static void consumeGroup(String bootstrap, String topic, String group, String assignor, int memberCount, int n,
                             Map<String, Object> result, List<String> failed) throws Exception {
        String strategy;
        switch (assignor) {
            case "range": strategy = RangeAssignor.class.getName(); break;
            case "roundrobin": strategy = RoundRobinAssignor.class.getName(); break;
            case "sticky": strategy = StickyAssignor.class.getName(); break;
            case "cooperative-sticky": strategy = CooperativeStickyAssignor.class.getName(); break;
            default: throw new IllegalArgumentException("unknown assignor " + assignor);
        }
        try (Admin admin = adminClient(bootstrap)) {
            int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get(WAIT_S, TimeUnit.SECONDS)
                                  .get(topic).partitions().size();
            ConcurrentHashMap<String, AtomicInteger> seen = new ConcurrentHashMap<>();
            AtomicInteger total = new AtomicInteger();
            AtomicBoolean stop = new AtomicBoolean();
            CountDownLatch committed = new CountDownLatch(memberCount);
            CountDownLatch close = new CountDownLatch(1);
            Member[] members = new Member[memberCount];
            Thread[] threads = new Thread[memberCount];
            Map<String, String> settings = Map.of(
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategy,
                ConsumerConfig.CLIENT_ID_CONFIG, group + "-member",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50", // small polls: members consume side by side
                ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000",
                ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            for (int i = 0; i < memberCount; i++) {
                members[i] = new Member(i, consumer(bootstrap, group, settings), topic, seen, total, stop, committed, close);
                threads[i] = new Thread(members[i], "member-" + i);
                threads[i].start();
                // The first member reads alone for a while; the others join a group that holds
                // uncommitted progress, so each rebalance hands partitions over mid-stream.
                while (i == 0 && members[0].consumed.get() < n / 4 && members[0].error == null
                       && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
            }
            boolean settled = false;
            while (System.nanoTime() < deadline) {
                boolean anyError = false;
                for (Member m : members) {
                    anyError |= m.error != null;
                }
                settled = total.get() >= n && stable(members, partitions);
                if (settled || anyError) {
                    break;
                }
                Thread.sleep(50);
            }
            stop.set(true);
            committed.await(WAIT_S, TimeUnit.SECONDS);
            check(failed, settled, "the group did not settle with every member assigned and all records read in 60 s");

            // While the members are still in the group: what the coordinator says about it.
            Map<String, Object> described = new LinkedHashMap<>();
            try {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                                                  .get(WAIT_S, TimeUnit.SECONDS);
                described.put("state", d.state().toString());
                described.put("assignor", d.partitionAssignor());
                described.put("simple", d.isSimpleConsumerGroup());
                Map<String, List<Integer>> byMember = new TreeMap<>();
                for (MemberDescription md : d.members()) {
                    List<Integer> ps = new ArrayList<>();
                    for (TopicPartition tp : md.assignment().topicPartitions()) {
                        ps.add(tp.partition());
                    }
                    ps.sort(null);
                    byMember.put(md.consumerId(), ps);
                }
                described.put("members", byMember);
            } catch (Exception e) {
                e.printStackTrace();
                described.put("error", describe(e));
                failed.add("describeConsumerGroups");
            }
            result.put("described", described);
            close.countDown();
            for (Thread t : threads) {
                t.join(TimeUnit.SECONDS.toMillis(WAIT_S));
            }

            List<Map<String, Object>> report = new ArrayList<>();
            for (Member m : members) {
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("member_id", m.memberId);
                r.put("generation", m.generation);
                r.put("partitions", new ArrayList<>(m.assignment));
                r.put("consumed", m.consumed.get());
                r.put("assigned_callbacks", m.assignedCallbacks.get());
                r.put("revoked_callbacks", m.revokedCallbacks.get());
                r.put("revocations", m.revocations);
                r.put("final_positions", m.finalCommit);
                if (m.error != null) {
                    r.put("error", describe(m.error));
                    failed.add("member " + m.index);
                }
                report.add(r);
            }
            result.put("members", report);
            int duplicates = 0;
            for (AtomicInteger c : seen.values()) {
                duplicates += c.get() - 1;
            }
            result.put("partition_count", partitions);
            result.put("total", total.get());
            result.put("distinct", seen.size());
            result.put("duplicates", duplicates);
            check(failed, seen.size() == n, "distinct records read != " + n);
            check(failed, duplicates == 0, "records read more than once");

            // After the members left: the group's committed offsets are the end of every partition.
            List<TopicPartition> tps = new ArrayList<>();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int q = 0; q < partitions; q++) {
                tps.add(new TopicPartition(topic, q));
                latest.put(tps.get(q), OffsetSpec.latest());
            }
            Map<Integer, Long> committedOffsets = new TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(WAIT_S, TimeUnit.SECONDS)
                 .forEach((tp, om) -> committedOffsets.put(tp.partition(), om == null ? null : om.offset()));
            Map<Integer, Long> endOffsets = new TreeMap<>();
            admin.listOffsets(latest).all().get(WAIT_S, TimeUnit.SECONDS)
                 .forEach((tp, info) -> endOffsets.put(tp.partition(), info.offset()));
            result.put("committed", committedOffsets);
            result.put("end_offsets", endOffsets);
            check(failed, committedOffsets.equals(endOffsets), "committed offsets are not the end offsets");
            ConsumerGroupDescription after = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                                                  .get(WAIT_S, TimeUnit.SECONDS);
            result.put("state_after_close", after.state().toString());
            result.put("members_after_close", after.members().size());
        }
    }

    // ---------------------------------------------------------------- admin

    interface Step {
        Object run() throws Exception;
    }

    static Object step(Map<String, Object> results, List<String> failed, String name, Step s) {
        try {
            Object r = s.run();
            results.put(name, r);
            return r;
        } catch (Throwable t) {
            System.err.println("step " + name + " failed:");
            t.printStackTrace();
            results.put(name, Map.of("error", describe(t)));
            failed.add(name);
            return null;
        }
    }

    static Map<String, Object> topicConfigs(Admin admin, String topic, String... keys) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = admin.describeConfigs(List.of(res)).all().get(WAIT_S, TimeUnit.SECONDS).get(res);
        Map<String, Object> out = new TreeMap<>();
        for (String key : keys) {
            ConfigEntry e = config.get(key);
            out.put(key, e == null ? null : Map.of("value", String.valueOf(e.value()), "source", e.source().toString()));
        }
        return out;
    }

    static Map<Integer, Long> groupOffsets(Admin admin, String group) throws Exception {
        Map<Integer, Long> out = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(WAIT_S, TimeUnit.SECONDS)
             .forEach((tp, om) -> out.put(tp.partition(), om == null ? null : om.offset()));
        return out;
    }

    static Map<String, Object> groupListing(Admin admin, String group) throws Exception {
        for (ConsumerGroupListing l : admin.listConsumerGroups().all().get(WAIT_S, TimeUnit.SECONDS)) {
            if (l.groupId().equals(group)) {
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("listed", true);
                out.put("state", l.state().map(Object::toString).orElse(null));
                out.put("simple", l.isSimpleConsumerGroup());
                return out;
            }
        }
        return Map.of("listed", false);
    }

    static Map<String, Object> groupDescription(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                                          .get(WAIT_S, TimeUnit.SECONDS);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", d.state().toString());
        out.put("assignor", d.partitionAssignor());
        out.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
        List<Map<String, Object>> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            List<Integer> ps = new ArrayList<>();
            for (TopicPartition tp : m.assignment().topicPartitions()) {
                ps.add(tp.partition());
            }
            ps.sort(null);
            members.add(Map.of("client_id", m.clientId(), "partitions", ps));
        }
        out.put("members", members);
        return out;
    }

    @SuppressWarnings("deprecation")
    static void admin(String bootstrap, Map<String, Object> results, List<String> failed) throws Exception {
        String suffix = Long.toHexString(System.nanoTime());
        String a = "admin-a-" + suffix;
        String b = "admin-b-" + suffix;
        String group = "admin-g-" + suffix;
        results.put("topics", List.of(a, b));
        results.put("group", group);
        TopicPartition a0 = new TopicPartition(a, 0);
        TopicPartition a1 = new TopicPartition(a, 1);
        try (Admin admin = adminClient(bootstrap)) {
            step(results, failed, "describeCluster", () -> {
                DescribeClusterResult c = admin.describeCluster();
                Map<String, Object> out = new LinkedHashMap<>();
                Collection<Node> nodes = c.nodes().get(WAIT_S, TimeUnit.SECONDS);
                out.put("nodes", nodes.size());
                out.put("cluster_id_set", c.clusterId().get(WAIT_S, TimeUnit.SECONDS) != null);
                out.put("controller", c.controller().get(WAIT_S, TimeUnit.SECONDS).id());
                return out;
            });
            step(results, failed, "createTopics", () -> {
                admin.createTopics(List.of(
                    new NewTopic(a, 2, (short) 1).configs(Map.of("retention.ms", "3600000", "cleanup.policy", "compact")),
                    new NewTopic(b, 1, (short) 1))).all().get(WAIT_S, TimeUnit.SECONDS);
                return "ok";
            });
            step(results, failed, "listTopics", () -> {
                Set<String> names = admin.listTopics().names().get(WAIT_S, TimeUnit.SECONDS);
                return Map.of("a", names.contains(a), "b", names.contains(b),
                              "internal_hidden", !names.contains("__consumer_offsets"));
            });
            step(results, failed, "describeTopics", () -> {
                TopicDescription d = admin.describeTopics(List.of(a)).allTopicNames().get(WAIT_S, TimeUnit.SECONDS).get(a);
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("name", d.name());
                out.put("internal", d.isInternal());
                out.put("topic_id_set", d.topicId() != null && !d.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"));
                List<Map<String, Object>> parts = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    parts.add(Map.of("partition", p.partition(), "leader", p.leader() == null ? -1 : p.leader().id(),
                                     "replicas", p.replicas().size(), "isr", p.isr().size()));
                }
                out.put("partitions", parts);
                return out;
            });
            step(results, failed, "describeConfigs", () ->
                topicConfigs(admin, a, "retention.ms", "cleanup.policy", "segment.ms", "max.message.bytes"));
            step(results, failed, "incrementalAlterConfigs", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, a);
                admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE))))
                     .all().get(WAIT_S, TimeUnit.SECONDS);
                return topicConfigs(admin, a, "retention.ms", "cleanup.policy", "max.message.bytes");
            });
            step(results, failed, "alterConfigs", () -> {
                // The legacy call replaces the topic's whole set of overrides.
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, a);
                admin.alterConfigs(Map.of(res, new Config(List.of(new ConfigEntry("segment.ms", "600000")))))
                     .all().get(WAIT_S, TimeUnit.SECONDS);
                return topicConfigs(admin, a, "retention.ms", "segment.ms", "max.message.bytes");
            });
            step(results, failed, "createPartitions", () -> {
                admin.createPartitions(Map.of(a, NewPartitions.increaseTo(4))).all().get(WAIT_S, TimeUnit.SECONDS);
                return admin.describeTopics(List.of(a)).allTopicNames().get(WAIT_S, TimeUnit.SECONDS).get(a)
                            .partitions().size();
            });
            step(results, failed, "produce", () -> {
                Properties p = clientProps(bootstrap);
                p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                    List<Future<RecordMetadata>> fs = new ArrayList<>();
                    for (int i = 0; i < 10; i++) {
                        fs.add(producer.send(new ProducerRecord<>(a, 0, "k" + i, "a0-" + i)));
                        fs.add(producer.send(new ProducerRecord<>(a, 1, "k" + i, "a1-" + i)));
                    }
                    long last = -1;
                    for (Future<RecordMetadata> f : fs) {
                        last = Math.max(last, f.get(WAIT_S, TimeUnit.SECONDS).offset());
                    }
                    return last;
                }
            });
            step(results, failed, "deleteRecords", () -> {
                DeletedRecords d = admin.deleteRecords(Map.of(a0, RecordsToDelete.beforeOffset(4))).lowWatermarks()
                                        .get(a0).get(WAIT_S, TimeUnit.SECONDS);
                return d.lowWatermark();
            });
            step(results, failed, "listOffsets", () -> {
                Map<String, Object> out = new LinkedHashMap<>();
                for (Map.Entry<String, OffsetSpec> spec : Map.of("earliest", OffsetSpec.earliest(),
                                                                 "latest", OffsetSpec.latest()).entrySet()) {
                    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> r = admin.listOffsets(
                        Map.of(a0, spec.getValue(), a1, spec.getValue())).all().get(WAIT_S, TimeUnit.SECONDS);
                    out.put(spec.getKey(), List.of(r.get(a0).offset(), r.get(a1).offset()));
                }
                return new TreeMap<>(out);
            });

            // A live group: one member subscribed to the topic, its offsets committed.
            KafkaConsumer<String, String> member = consumer(bootstrap, group,
                                                            Map.of(ConsumerConfig.CLIENT_ID_CONFIG, "admin-check-member"));
            try {
                step(results, failed, "consume", () -> {
                    member.subscribe(List.of(a));
                    int got = 0;
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
                    while ((got < 16 || member.assignment().size() < 4) && System.nanoTime() < deadline) {
                        got += member.poll(Duration.ofMillis(200)).count();
                    }
                    member.commitSync();
                    return got;
                });
                step(results, failed, "listConsumerGroups", () -> groupListing(admin, group));
                step(results, failed, "describeConsumerGroups", () -> groupDescription(admin, group));
            } finally {
                member.close(Duration.ofSeconds(10));
            }
            step(results, failed, "describeConsumerGroupsAfterLeave", () -> groupDescription(admin, group));
            step(results, failed, "listConsumerGroupOffsets", () -> groupOffsets(admin, group));
            step(results, failed, "alterConsumerGroupOffsets", () -> {
                admin.alterConsumerGroupOffsets(group, Map.of(a0, new OffsetAndMetadata(5), a1, new OffsetAndMetadata(2)))
                     .all().get(WAIT_S, TimeUnit.SECONDS);
                return groupOffsets(admin, group);
            });
            step(results, failed, "deleteConsumerGroupOffsets", () -> {
                admin.deleteConsumerGroupOffsets(group, Set.of(a1)).all().get(WAIT_S, TimeUnit.SECONDS);
                return groupOffsets(admin, group);
            });
            step(results, failed, "deleteConsumerGroups", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get(WAIT_S, TimeUnit.SECONDS);
                return groupListing(admin, group);
            });
            step(results, failed, "deleteTopics", () -> {
                admin.deleteTopics(List.of(a, b)).all().get(WAIT_S, TimeUnit.SECONDS);
                Set<String> names = admin.listTopics().names().get(WAIT_S, TimeUnit.SECONDS);
                return Map.of("a", names.contains(a), "b", names.contains(b));
            });
        }
    }

    // ---------------------------------------------------------------- transactions

    static KafkaProducer<String, String> txnProducer(String bootstrap, String txnId) {
        Properties p = clientProps(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, txnId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    interface Action {
        void run() throws Exception;
    }

    /** "ok", or the exception's class and its causes' ("KafkaException<InvalidProducerEpochException"). */
    static String outcome(Action s) {
        try {
            s.run();
            return "ok";
        } catch (Throwable t) {
            System.err.println("(expected?) " + t);
            while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
                   && t.getCause() != null) {
                t = t.getCause();
            }
            StringBuilder out = new StringBuilder(t.getClass().getSimpleName());
            for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
                out.append('<').append(c.getClass().getSimpleName());
            }
            return out.toString();
        }
    }

    static List<TopicPartition> partitionsOf(String topic, int n) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int q = 0; q < n; q++) {
            tps.add(new TopicPartition(topic, q));
        }
        return tps;
    }

    static Map<Integer, Long> byPartition(Map<TopicPartition, ?> offsets) {
        Map<Integer, Long> out = new TreeMap<>();
        offsets.forEach((tp, o) -> out.put(tp.partition(), o == null ? null
            : o instanceof OffsetAndMetadata ? ((OffsetAndMetadata) o).offset() : ((Number) o).longValue()));
        return out;
    }

    static Map<Integer, Long> endOffsets(String bootstrap, List<TopicPartition> tps, String isolation) {
        try (KafkaConsumer<String, String> c = consumer(bootstrap, null,
                                                        Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            return byPartition(c.endOffsets(tps));
        }
    }

    /** Every record visible under `isolation`, read to that isolation's end: [partition, offset, value]. */
    static List<List<Object>> readAll(String bootstrap, List<TopicPartition> tps, String isolation) {
        List<List<Object>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, null, Map.of(
                 ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation,
                 ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "50"))) { // (its close waited 500 ms, on Kafka too)
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps); // the last stable offset under read_committed
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (System.nanoTime() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= c.position(tp) >= end.get(tp);
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                    out.add(List.of(r.partition(), r.offset(), r.value()));
                }
            }
            for (TopicPartition tp : tps) {
                if (c.position(tp) < end.get(tp)) {
                    throw new IllegalStateException(isolation + " reader stuck at " + c.position(tp) + " of " + tp
                                                    + " (end " + end.get(tp) + ")");
                }
            }
        }
        out.sort((a, b) -> a.get(0).equals(b.get(0)) ? Long.compare((Long) a.get(1), (Long) b.get(1))
                                                      : Integer.compare((Integer) a.get(0), (Integer) b.get(0)));
        return out;
    }

    static Map<Integer, List<Long>> sendAll(KafkaProducer<String, String> producer, String topic, int partitions,
                                            String prefix, int n) throws Exception {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            fs.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, prefix + i)));
        }
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        for (Future<RecordMetadata> f : fs) {
            RecordMetadata md = f.get(WAIT_S, TimeUnit.SECONDS);
            offsets.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
        }
        return offsets;
    }

    static Map<String, Object> transactionDescription(Admin admin, String txnId) throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(txnId)).description(txnId)
                                        .get(WAIT_S, TimeUnit.SECONDS);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", d.state().toString());
        out.put("producer_id", d.producerId());
        out.put("producer_epoch", d.producerEpoch());
        out.put("timeout_ms", d.transactionTimeoutMs());
        out.put("start_time_set", d.transactionStartTimeMs().isPresent());
        List<String> tps = new ArrayList<>();
        for (TopicPartition tp : d.topicPartitions()) {
            tps.add(String.valueOf(tp.partition()));
        }
        tps.sort(null);
        out.put("partitions", tps);
        return out;
    }

    /** The description once the transaction's markers are written: Kafka's EndTxn answers at PrepareCommit
     *  or PrepareAbort and writes the markers after; a transaction stuck there fails the step. */
    static Map<String, Object> settledTransaction(Admin admin, String txnId) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            Map<String, Object> d = transactionDescription(admin, txnId);
            if (!d.get("state").toString().startsWith("Prepare")) {
                return d;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("transaction " + txnId + " stuck in " + d);
            }
            Thread.sleep(50);
        }
    }

    static void transactions(String bootstrap, Map<String, Object> results, List<String> failed) throws Exception {
        String suffix = Long.toHexString(System.nanoTime());
        String atomic = "txn-atomic-" + suffix;
        String source = "txn-in-" + suffix;
        String sink = "txn-out-" + suffix;
        String fenced = "txn-fenced-" + suffix;
        try (Admin admin = adminClient(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(atomic, 3, (short) 1), new NewTopic(source, 2, (short) 1),
                                       new NewTopic(sink, 2, (short) 1), new NewTopic(fenced, 2, (short) 1)))
                 .all().get(WAIT_S, TimeUnit.SECONDS);
            Map<String, Long> millis = new LinkedHashMap<>();
            long t = System.nanoTime();
            step(results, failed, "commitAbort", () -> commitAbort(bootstrap, admin, atomic, "tx-atomic-" + suffix));
            millis.put("commitAbort", (System.nanoTime() - t) / 1_000_000);
            t = System.nanoTime();
            step(results, failed, "consumeTransformProduce", () ->
                consumeTransformProduce(bootstrap, source, sink, "txn-ctp-" + suffix, "tx-ctp-" + suffix));
            millis.put("consumeTransformProduce", (System.nanoTime() - t) / 1_000_000);
            t = System.nanoTime();
            step(results, failed, "fencing", () -> fencing(bootstrap, admin, fenced, "tx-fence-" + suffix));
            millis.put("fencing", (System.nanoTime() - t) / 1_000_000);
            results.put("millis", millis);
        }
    }

    /** A committed and an aborted transaction across 3 partitions, then one left open for a moment. */
    static Map<String, Object> commitAbort(String bootstrap, Admin admin, String topic, String txnId) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        List<TopicPartition> tps = partitionsOf(topic, 3);
        try (KafkaProducer<String, String> producer = txnProducer(bootstrap, txnId)) {
            producer.beginTransaction();
            out.put("committed_offsets", sendAll(producer, topic, 3, "committed-", 30));
            producer.commitTransaction();
            producer.beginTransaction();
            out.put("aborted_offsets", sendAll(producer, topic, 3, "aborted-", 30));
            producer.abortTransaction();
            out.put("after_abort", settledTransaction(admin, txnId));
            out.put("read_committed", readAll(bootstrap, tps, "read_committed"));
            out.put("read_uncommitted", readAll(bootstrap, tps, "read_uncommitted"));
            out.put("end_offsets", Map.of("read_committed", endOffsets(bootstrap, tps, "read_committed"),
                                          "read_uncommitted", endOffsets(bootstrap, tps, "read_uncommitted")));

            // Open: two records on partition 0 hold its last stable offset back.
            producer.beginTransaction();
            out.put("open_offsets", sendAll(producer, topic, 1, "open-", 2));
            Map<String, Object> open = new LinkedHashMap<>();
            open.put("end_offsets", Map.of("read_committed", endOffsets(bootstrap, tps, "read_committed"),
                                           "read_uncommitted", endOffsets(bootstrap, tps, "read_uncommitted")));
            open.put("read_committed", readAll(bootstrap, tps, "read_committed").size());
            open.put("describeTransactions", transactionDescription(admin, txnId));
            List<String> listed = new ArrayList<>();
            for (TransactionListing l : admin.listTransactions(new ListTransactionsOptions().filterStates(
                     List.of(TransactionState.ONGOING))).all().get(WAIT_S, TimeUnit.SECONDS)) {
                if (l.transactionalId().equals(txnId)) {
                    listed.add(l.state() + "/" + l.producerId());
                }
            }
            open.put("listTransactions", listed);
            List<Map<String, Object>> producers = new ArrayList<>();
            for (ProducerState s : admin.describeProducers(List.of(tps.get(0))).partitionResult(tps.get(0))
                                        .get(WAIT_S, TimeUnit.SECONDS).activeProducers()) {
                Map<String, Object> ps = new LinkedHashMap<>();
                ps.put("producer_id", s.producerId());
                ps.put("producer_epoch", s.producerEpoch());
                ps.put("last_sequence", s.lastSequence());
                ps.put("txn_start_offset", s.currentTransactionStartOffset().isPresent()
                                           ? s.currentTransactionStartOffset().getAsLong() : null);
                producers.add(ps);
            }
            open.put("describeProducers", producers);
            out.put("open", open);
            producer.commitTransaction();
            out.put("after_commit", settledTransaction(admin, txnId));
            out.put("final_end_offsets", endOffsets(bootstrap, tps, "read_committed"));
            List<Object> last = readAll(bootstrap, tps, "read_committed").stream()
                .filter(r -> r.get(2).toString().startsWith("open-")).map(r -> (Object) r.get(1))
                .collect(java.util.stream.Collectors.toList());
            out.put("open_read_after_commit", last);
        }
        return out;
    }

    /**
     * Read, transform, write with the input offsets in the transaction: 8 records committed, 6 aborted (and
     * read again), 12 committed. A round takes exactly its records: what a poll returned beyond them is
     * read again by the next round.
     */
    static Map<String, Object> consumeTransformProduce(String bootstrap, String source, String sink, String group,
                                                       String txnId) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        List<TopicPartition> in = partitionsOf(source, 2);
        Properties pp = clientProps(bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(pp)) {
            sendAll(plain, source, 2, "in-", 20);
        }
        List<Map<String, Object>> rounds = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, group, Map.of(
                 ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                 ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5"));
             KafkaProducer<String, String> producer = txnProducer(bootstrap, txnId)) {
            consumer.subscribe(List.of(source));
            int[][] plan = {{8, 1}, {6, 0}, {12, 1}};
            for (int[] round : plan) {
                int n = round[0];
                boolean commit = round[1] == 1;
                Map<String, Object> r = new LinkedHashMap<>();
                List<String> values = new ArrayList<>();
                Map<TopicPartition, Long> rewind = new HashMap<>();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
                while (values.size() < n && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(100))) {
                        if (values.size() < n) {
                            values.add(rec.value());
                        } else {
                            rewind.putIfAbsent(new TopicPartition(rec.topic(), rec.partition()), rec.offset());
                        }
                    }
                }
                rewind.forEach(consumer::seek);
                r.put("taken", values.size());
                producer.beginTransaction();
                for (String v : values) {
                    producer.send(new ProducerRecord<>(sink, "x-" + v));
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : consumer.assignment()) {
                    offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                r.put("sent_offsets", byPartition(offsets));
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.flush();
                    // The offsets are pending in the open transaction: a read_committed consumer's
                    // committed() (OffsetFetch with require_stable) waits for them to settle.
                    r.put("committed_while_pending", outcome(() ->
                        consumer.committed(new HashSet<>(in), Duration.ofMillis(1000))));
                    producer.abortTransaction();
                    // An application rewinds to the committed offsets after an abort.
                    consumer.committed(new HashSet<>(in))
                            .forEach((tp, om) -> consumer.seek(tp, om == null ? 0 : om.offset()));
                }
                r.put("committed", byPartition(consumer.committed(new HashSet<>(in))));
                rounds.add(r);
            }
            out.put("generation", consumer.groupMetadata().generationId());
            out.put("more_input", consumer.poll(Duration.ofMillis(300)).count());
        }
        out.put("rounds", rounds);
        List<String> output = new ArrayList<>();
        for (List<Object> rec : readAll(bootstrap, partitionsOf(sink, 2), "read_committed")) {
            output.add((String) rec.get(2));
        }
        output.sort(null);
        out.put("output_read_committed", output);
        out.put("output_read_uncommitted", readAll(bootstrap, partitionsOf(sink, 2), "read_uncommitted").size());
        return out;
    }

    /**
     * A zombie and its successor with the same transactional id: the zombie's transaction is open (one
     * record on partition 0) when the successor's initTransactions fences it; then the zombie sends to
     * partition 0 again (Produce at the old epoch), sends to partition 1 (AddPartitionsToTxn) or commits
     * at once (EndTxn). What each of its calls then gives is reported. Each case's successor is the next
     * case's zombie; the last one commits a record.
     */
    static Map<String, Object> fencing(String bootstrap, Admin admin, String topic, String txnId) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        List<TopicPartition> tps = partitionsOf(topic, 2);
        List<Integer> epochs = new ArrayList<>();
        String[] cases = {"produce", "add_partition", "commit"};
        KafkaProducer<String, String> successor = null;
        try {
            for (String c : cases) {
                KafkaProducer<String, String> zombie = successor != null ? successor : txnProducer(bootstrap, txnId);
                Map<String, Object> r = new LinkedHashMap<>();
                try {
                    zombie.beginTransaction();
                    zombie.send(new ProducerRecord<>(topic, 0, null, "zombie-" + c)).get(WAIT_S, TimeUnit.SECONDS);
                    epochs.add((Integer) transactionDescription(admin, txnId).get("producer_epoch"));
                    successor = txnProducer(bootstrap, txnId); // fences the zombie, aborts its transaction
                    r.put("after_fence", transactionDescription(admin, txnId).get("state"));
                    if (c.equals("commit")) {
                        r.put("commit", outcome(zombie::commitTransaction));
                    } else {
                        int partition = c.equals("produce") ? 0 : 1;
                        ProducerRecord<String, String> late = new ProducerRecord<>(topic, partition, null, "late-" + c);
                        r.put("send", outcome(() -> zombie.send(late).get(WAIT_S, TimeUnit.SECONDS)));
                        r.put("commit", outcome(zombie::commitTransaction));
                    }
                    r.put("abort", outcome(zombie::abortTransaction));
                    r.put("begin_again", outcome(zombie::beginTransaction));
                } finally {
                    zombie.close(Duration.ofSeconds(5));
                }
                out.put(c, r);
            }
            // The last successor is a working producer.
            successor.beginTransaction();
            successor.send(new ProducerRecord<>(topic, 1, null, "successor")).get(WAIT_S, TimeUnit.SECONDS);
            successor.commitTransaction();
            epochs.add((Integer) transactionDescription(admin, txnId).get("producer_epoch"));
        } finally {
            if (successor != null) {
                successor.close(Duration.ofSeconds(5));
            }
        }
        out.put("epochs", epochs);
        out.put("final", settledTransaction(admin, txnId).get("state"));
        out.put("end_offsets", endOffsets(bootstrap, tps, "read_uncommitted"));
        List<String> committed = new ArrayList<>();
        for (List<Object> rec : readAll(bootstrap, tps, "read_committed")) {
            committed.add(rec.get(0) + ":" + rec.get(2));
        }
        out.put("read_committed", committed);
        out.put("read_uncommitted", readAll(bootstrap, tps, "read_uncommitted").size());
        return out;
    }

    /** Kafka's PasswordEncoder (password.encoder.secret's defaults): decode another's encoding, encode its own. */
    static void passwordCodec(String secret, String encoded, String password, Map<String, Object> result)
            throws Exception {
        org.apache.kafka.security.PasswordEncoder encoder = org.apache.kafka.security.PasswordEncoder.encrypting(
            new org.apache.kafka.common.config.types.Password(secret), "PBKDF2WithHmacSHA512", "AES/CBC/PKCS5Padding",
            128, 4096);
        result.put("decoded", encoder.decode(encoded).value());
        result.put("encoded", encoder.encode(new org.apache.kafka.common.config.types.Password(password)));
    }
}
