import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A scripted tour of the AdminClient: {@code AdminScenario <bootstrap> <broker id>}. Every step
 * prints one JSON line {@code {"step": name, ...}} with what the call returned, or
 * {@code "error": <exception class>} when it failed; the pytest module holds the expected values.
 * Works on topic "admin-t" and group "admin-g"; partition 0 gets ten records in one batch with
 * out-of-order timestamps (TS below), so that the timestamp lookups have one right answer.
 */
public final class AdminScenario {
    static final String TOPIC = "admin-t", GROUP = "admin-g";
    static final long BASE = 1_700_000_000_000L;
    static final long[] TS = {5000, 1000, 9000, 3000, 7000, 2000, 8000, 4000, 6000, 1500};
    static final List<String> TOPIC_KEYS = List.of("retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes");

    private static Admin admin;

    interface Call {
        Object run() throws Exception;
    }

    /** Run one step and print its result (or the exception it failed with). */
    static void step(String name, Call call) {
        Object result;
        try {
            result = Json.obj("step", name, "ok", call.run());
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            result = Json.obj("step", name, "error", t.getClass().getSimpleName(), "message", t.getMessage());
        }
        Json.print(result);
    }

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], brokerId = args[1];
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        TopicPartition p0 = new TopicPartition(TOPIC, 0), p1 = new TopicPartition(TOPIC, 1), p2 = new TopicPartition(TOPIC, 2);
        ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
        ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, brokerId);
        try (Admin a = Admin.create(p)) {
            admin = a;
            step("describeCluster", () -> {
                DescribeClusterResult r = a.describeCluster();
                List<Object> nodes = new ArrayList<>();
                for (Node n : get(r.nodes())) nodes.add(Json.obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
                return Json.obj("clusterId", get(r.clusterId()), "controller", get(r.controller()).id(), "nodes", nodes);
            });
            step("createTopics.validateOnly", () -> {
                NewTopic t = new NewTopic("admin-validate", 3, (short) 1).configs(Map.of("cleanup.policy", "compact"));
                CreateTopicsResult r = a.createTopics(List.of(t), new CreateTopicsOptions().validateOnly(true));
                get(r.all());
                return Json.obj("partitions", get(r.numPartitions("admin-validate")),
                        "rf", get(r.replicationFactor("admin-validate")),
                        "cleanup.policy", entry(get(r.config("admin-validate")).get("cleanup.policy")),
                        "listed", get(a.listTopics().names()).contains("admin-validate"));
            });
            step("createTopics", () -> {
                NewTopic t = new NewTopic(TOPIC, 3, (short) 1).configs(Map.of(
                        "retention.ms", "3600000", "max.message.bytes", "200000", "cleanup.policy", "delete"));
                CreateTopicsResult r = a.createTopics(List.of(t));
                get(r.all());
                return Json.obj("partitions", get(r.numPartitions(TOPIC)), "rf", get(r.replicationFactor(TOPIC)),
                        "topicId", get(r.topicId(TOPIC)).toString(), "configs", entries(get(r.config(TOPIC)), TOPIC_KEYS));
            });
            step("createTopics.exists", () -> get(a.createTopics(List.of(new NewTopic(TOPIC, 3, (short) 1))).all()));
            step("createTopics.zeroPartitions", () -> get(a.createTopics(List.of(new NewTopic("admin-bad", 0, (short) 1))).all()));
            step("createTopics.badConfig", () -> get(a.createTopics(List.of(
                    new NewTopic("admin-bad", 1, (short) 1).configs(Map.of("retention.ms", "soon")))).all()));
            step("createTopics.replicationFactor", () -> get(a.createTopics(List.of(new NewTopic("admin-bad", 1, (short) 3))).all()));
            step("listTopics", () -> new java.util.TreeSet<>(get(a.listTopics().names())));
            step("describeTopics", () -> describeTopic(a));
            step("createPartitions", () -> {
                get(a.createPartitions(Map.of(TOPIC, NewPartitions.increaseTo(5))).all());
                return describeTopic(a);
            });
            step("createPartitions.decrease", () -> get(a.createPartitions(Map.of(TOPIC, NewPartitions.increaseTo(4))).all()));
            step("createPartitions.validateOnly", () -> {
                get(a.createPartitions(Map.of(TOPIC, NewPartitions.increaseTo(8)),
                        new org.apache.kafka.clients.admin.CreatePartitionsOptions().validateOnly(true)).all());
                return get(a.describeTopics(List.of(TOPIC)).allTopicNames()).get(TOPIC).partitions().size();
            });
            step("describeConfigs.topic", () -> entries(get(a.describeConfigs(List.of(topicRes)).all()).get(topicRes), TOPIC_KEYS));
            step("incrementalAlterConfigs.topic", () -> {
                get(a.incrementalAlterConfigs(Map.of(topicRes, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)))).all());
                return entries(get(a.describeConfigs(List.of(topicRes)).all()).get(topicRes), TOPIC_KEYS);
            });
            step("incrementalAlterConfigs.topic.subtract", () -> {
                get(a.incrementalAlterConfigs(Map.of(topicRes, List.of(
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SUBTRACT)))).all());
                return entries(get(a.describeConfigs(List.of(topicRes)).all()).get(topicRes), TOPIC_KEYS);
            });
            step("incrementalAlterConfigs.topic.badValue", () -> get(a.incrementalAlterConfigs(Map.of(topicRes, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all()));
            step("incrementalAlterConfigs.topic.unknownTopic", () -> get(a.incrementalAlterConfigs(Map.of(
                    new ConfigResource(ConfigResource.Type.TOPIC, "admin-missing"), List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET)))).all()));
            List<String> brokerKeys = List.of("num.partitions", "log.retention.ms", "log.retention.hours", "message.max.bytes");
            step("describeConfigs.broker", () -> entries(get(a.describeConfigs(List.of(brokerRes)).all()).get(brokerRes), brokerKeys));
            step("incrementalAlterConfigs.broker", () -> {
                get(a.incrementalAlterConfigs(Map.of(brokerRes, List.of(
                        new AlterConfigOp(new ConfigEntry("log.retention.ms", "86400000"), AlterConfigOp.OpType.SET)))).all());
                return entries(get(a.describeConfigs(List.of(brokerRes)).all()).get(brokerRes), brokerKeys);
            });
            step("incrementalAlterConfigs.broker.delete", () -> {
                get(a.incrementalAlterConfigs(Map.of(brokerRes, List.of(
                        new AlterConfigOp(new ConfigEntry("log.retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all());
                return entries(get(a.describeConfigs(List.of(brokerRes)).all()).get(brokerRes), brokerKeys);
            });

            step("produce", () -> produce(bootstrap));
            step("listOffsets", () -> Json.obj(
                    "earliest", offsets(Map.of(p0, OffsetSpec.earliest(), p1, OffsetSpec.earliest())),
                    "latest", offsets(Map.of(p0, OffsetSpec.latest(), p1, OffsetSpec.latest())),
                    "ts6500", offsets(Map.of(p0, OffsetSpec.forTimestamp(BASE + 6500))),
                    "ts1000", offsets(Map.of(p0, OffsetSpec.forTimestamp(BASE + 1000))),
                    "ts9500", offsets(Map.of(p0, OffsetSpec.forTimestamp(BASE + 9500))),
                    "max", offsets(Map.of(p0, OffsetSpec.maxTimestamp(), p1, OffsetSpec.maxTimestamp()))));
            step("deleteRecords", () -> {
                long low = get(a.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(p0)).lowWatermark();
                return Json.obj("lowWatermark", low, "earliest", offsets(Map.of(p0, OffsetSpec.earliest())),
                        "latest", offsets(Map.of(p0, OffsetSpec.latest())));
            });
            step("deleteRecords.beyondEnd", () -> get(a.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(100))).all()));
            step("describeLogDirs", () -> {
                int id = Integer.parseInt(brokerId);
                Map<String, LogDirDescription> dirs = get(a.describeLogDirs(List.of(id)).allDescriptions()).get(id);
                Map<String, Object> out = new TreeMap<>();
                dirs.forEach((path, d) -> {
                    Map<String, Object> replicas = new TreeMap<>();
                    d.replicaInfos().forEach((tp, ri) -> {
                        if (tp.topic().equals(TOPIC)) replicas.put(tp.toString(), replica(ri));
                    });
                    out.put(path, Json.obj("error", d.error() == null ? null : d.error().getClass().getSimpleName(),
                            "total", d.totalBytes(), "usable", d.usableBytes(), "replicas", replicas));
                });
                return out;
            });

            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP);
            cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "admin-c1");
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of(TOPIC));
                long deadline = System.currentTimeMillis() + 30_000;
                while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(100));
                step("consumer.assignment", () -> partitions(c.assignment()));
                step("commitSync", () -> {
                    c.commitSync(Map.of(p0, new OffsetAndMetadata(7, "meta-0"), p1, new OffsetAndMetadata(0)));
                    return "done";
                });
                step("listConsumerGroups.active", () -> groupListings(a));
                step("describeConsumerGroups.active", () -> describeGroup(a));
                step("alterConsumerGroupOffsets.active", () -> get(a.alterConsumerGroupOffsets(GROUP,
                        Map.of(p0, new OffsetAndMetadata(1))).all()));
                step("deleteConsumerGroupOffsets.active", () -> get(a.deleteConsumerGroupOffsets(GROUP, Set.of(p0)).all()));
                step("deleteConsumerGroups.active", () -> get(a.deleteConsumerGroups(List.of(GROUP)).all()));
            }
            step("describeConsumerGroups.empty", () -> describeGroup(a));
            step("listConsumerGroupOffsets", () -> groupOffsets(a));
            step("alterConsumerGroupOffsets", () -> {
                get(a.alterConsumerGroupOffsets(GROUP, Map.of(p0, new OffsetAndMetadata(9), p2, new OffsetAndMetadata(3, "m2"))).all());
                return groupOffsets(a);
            });
            step("deleteConsumerGroupOffsets", () -> {
                get(a.deleteConsumerGroupOffsets(GROUP, Set.of(p1)).all());
                return groupOffsets(a);
            });
            step("deleteConsumerGroups", () -> {
                get(a.deleteConsumerGroups(List.of(GROUP)).all());
                return Json.obj("listings", groupListings(a), "describe", describeGroup(a), "offsets", groupOffsets(a));
            });
            step("deleteConsumerGroups.again", () -> get(a.deleteConsumerGroups(List.of(GROUP)).all()));
            step("deleteTopics", () -> {
                get(a.deleteTopics(List.of(TOPIC)).all());
                return get(a.listTopics().names()).contains(TOPIC);
            });
            step("describeTopics.deleted", () -> describeTopic(a));
            step("deleteTopics.missing", () -> get(a.deleteTopics(List.of("admin-missing")).all()));
        }
        Json.print(Json.obj("step", "end"));
    }

    static Object entry(ConfigEntry e) {
        return e == null ? null : List.of(e.value() == null ? "<null>" : e.value(), e.source().toString());
    }

    static Map<String, Object> entries(Config config, List<String> keys) {
        Map<String, Object> out = new TreeMap<>();
        for (String k : keys) out.put(k, entry(config.get(k)));
        return out;
    }

    static Object describeTopic(Admin a) throws Exception {
        TopicDescription d = get(a.describeTopics(List.of(TOPIC)).allTopicNames()).get(TOPIC);
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo pi : d.partitions()) {
            parts.add(Json.obj("partition", pi.partition(), "leader", pi.leader().id(),
                    "replicas", pi.replicas().stream().map(Node::id).toList(), "isr", pi.isr().stream().map(Node::id).toList()));
        }
        return Json.obj("name", d.name(), "internal", d.isInternal(), "topicId", d.topicId().toString(), "partitions", parts);
    }

    static Object produce(String bootstrap) throws Exception {
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "1000");  // all ten in one batch
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<Long> offsets = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < TS.length; i++) fs.add(producer.send(new ProducerRecord<>(TOPIC, 0, BASE + TS[i], null, "r" + i)));
            producer.flush();
            for (var f : fs) offsets.add(f.get(30, TimeUnit.SECONDS).offset());
        }
        return offsets;
    }

    static Map<String, Object> offsets(Map<TopicPartition, OffsetSpec> specs) throws Exception {
        Map<TopicPartition, ListOffsetsResultInfo> r = get(admin.listOffsets(specs).all());
        Map<String, Object> out = new TreeMap<>();
        r.forEach((tp, info) -> out.put(Integer.toString(tp.partition()), List.of(info.offset(), info.timestamp())));
        return out;
    }

    static Object replica(ReplicaInfo ri) {
        return Json.obj("size", ri.size(), "offsetLag", ri.offsetLag(), "isFuture", ri.isFuture());
    }

    static List<Integer> partitions(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).sorted().toList();
    }

    static Object groupListings(Admin a) throws Exception {
        List<Object> out = new ArrayList<>();
        for (ConsumerGroupListing l : get(a.listConsumerGroups().all())) {
            out.add(Json.obj("groupId", l.groupId(), "simple", l.isSimpleConsumerGroup(),
                    "state", l.state().map(Object::toString).orElse(null)));
        }
        return out;
    }

    static Object describeGroup(Admin a) throws Exception {
        ConsumerGroupDescription d = get(a.describeConsumerGroups(List.of(GROUP)).all()).get(GROUP);
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            members.add(Json.obj("memberId", m.consumerId(), "instanceId", m.groupInstanceId(), "clientId", m.clientId(),
                    "host", m.host(), "assignment", partitions(m.assignment().topicPartitions())));
        }
        return Json.obj("groupId", d.groupId(), "simple", d.isSimpleConsumerGroup(), "state", d.state().toString(),
                "assignor", d.partitionAssignor(), "coordinator", d.coordinator() == null ? null : d.coordinator().id(),
                "members", members);
    }

    static Object groupOffsets(Admin a) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> r = get(a.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata());
        Map<String, Object> out = new TreeMap<>();
        r.forEach((tp, om) -> out.put(tp.toString(), om == null ? null : List.of(om.offset(), om.metadata())));
        return out;
    }
}
