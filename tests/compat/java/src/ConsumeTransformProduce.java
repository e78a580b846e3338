import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An exactly-once consume-transform-produce application, as Kafka's documentation writes one.
 * Every step prints a JSON line.
 *
 * <ul>
 *   <li>{@code ConsumeTransformProduce seed <bootstrap> <input> <output> <partitions> <rf> <per-partition>}:
 *       creates both topics (min.insync.replicas 2 when rf is 3) and writes "in-p-i" (key "k-p-i") to
 *       every partition p of the input with the idempotent producer; prints the input's end offsets.
 *   <li>{@code ConsumeTransformProduce copy <bootstrap> <transactional.id> <group> <input> <output>
 *       <records-per-txn> <abort-every> <halt-after>}: a read_committed consumer of the group
 *       (subscribed, auto commit off) and a transactional producer: each poll's records are
 *       transformed ("in-" becomes "out-") to the same partition of the output, the consumer's positions
 *       are sent with {@code sendOffsetsToTransaction(offsets, consumer.groupMetadata())}, and the
 *       transaction committed; every abort-every'th transaction is aborted instead and the consumer
 *       seeks back to its group's committed offsets. It ends when the group's positions reached the
 *       input's end offsets ({@code {"copied": n, "committed": c, "aborted": a}}). With halt-after
 *       > 0 it stops dead (Runtime.halt, exit 3, no close) after that many commits, in the middle of
 *       the next transaction: its records sent and its offsets added, not committed.
 *   <li>{@code ConsumeTransformProduce verify <bootstrap> <group> <input> <output>}: a read_committed
 *       consumer reads every output partition to its end offset (the last stable offset);
 *       prints {@code {"output": {p: [values in offset order]}, "committed": {p: offset},
 *       "input_end": {p: offset}}} with the group's committed offsets of the input.
 * </ul>
 */
public final class ConsumeTransformProduce {
    static final Duration WAIT = Duration.ofSeconds(60);

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return p;
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, int maxPoll) {
        Properties p = common(bootstrap);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPoll));
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        // a copier that died leaves the group within the broker's smallest session timeout
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, String topic) {
        return c.partitionsFor(topic, WAIT).stream().map(i -> new TopicPartition(topic, i.partition()))
                .sorted((a, b) -> Integer.compare(a.partition(), b.partition())).collect(Collectors.toList());
    }

    static Map<Integer, Long> byPartition(Map<TopicPartition, Long> offsets) {
        Map<Integer, Long> out = new TreeMap<>();
        offsets.forEach((tp, o) -> out.put(tp.partition(), o));
        return out;
    }

    static void seed(String bootstrap, String input, String output, int partitions, short rf, int perPartition)
            throws Exception {
        try (Admin admin = Admin.create(common(bootstrap))) {
            Map<String, String> configs = rf >= 3 ? Map.of("min.insync.replicas", "2") : Map.of();
            admin.createTopics(List.of(new NewTopic(input, partitions, rf).configs(configs),
                    new NewTopic(output, partitions, rf).configs(configs))).all().get(60, TimeUnit.SECONDS);
        }
        Properties p = common(bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < perPartition; i++) {
                for (int part = 0; part < partitions; part++) {
                    producer.send(new ProducerRecord<>(input, part, "k-" + part + "-" + i, "in-" + part + "-" + i));
                }
            }
            producer.flush();
        }
        try (KafkaConsumer<String, String> c = consumer(bootstrap, null, 500)) {
            Json.print(Json.obj("input_end", byPartition(c.endOffsets(partitions(c, input), WAIT))));
        }
    }

    static Map<TopicPartition, OffsetAndMetadata> positions(KafkaConsumer<String, String> c) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (TopicPartition tp : c.assignment()) out.put(tp, new OffsetAndMetadata(c.position(tp)));
        return out;
    }

    /** As an EOS application after an abort: back to what the group committed (the beginning if nothing). */
    static void seekToCommitted(KafkaConsumer<String, String> c) {
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment(), WAIT);
        for (TopicPartition tp : c.assignment()) {
            OffsetAndMetadata o = committed.get(tp);
            if (o == null) c.seekToBeginning(List.of(tp));
            else c.seek(tp, o.offset());
        }
    }

    static void copy(String bootstrap, String tid, String group, String input, String output, int perTxn,
                     int abortEvery, int haltAfter) throws Exception {
        Properties pp = common(bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int committed = 0;
        int aborted = 0;
        long copied = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
             KafkaConsumer<String, String> consumer = consumer(bootstrap, group, perTxn)) {
            producer.initTransactions();
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions(consumer, input), WAIT);
            consumer.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + 150_000;
            while (!(consumer.assignment().containsAll(end.keySet())
                     && end.entrySet().stream().allMatch(e -> consumer.position(e.getKey()) >= e.getValue()))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not at " + end + " after " + copied + " records");
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                int sent = records.count();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(),
                            r.value().replaceFirst("^in-", "out-")));
                }
                producer.sendOffsetsToTransaction(positions(consumer), consumer.groupMetadata());
                if (haltAfter > 0 && committed == haltAfter) {
                    producer.flush();
                    Json.print(Json.obj("halted", sent, "committed", committed));
                    Runtime.getRuntime().halt(3);
                }
                if (abortEvery > 0 && (committed + aborted + 1) % abortEvery == 0) {
                    producer.abortTransaction();
                    aborted++;
                    seekToCommitted(consumer);
                } else {
                    producer.commitTransaction();
                    committed++;
                    copied += sent;
                }
            }
        }
        Json.print(Json.obj("copied", copied, "committed", committed, "aborted", aborted));
    }

    static void verify(String bootstrap, String group, String input, String output) throws Exception {
        Map<Integer, List<String>> values = new TreeMap<>();
        Map<Integer, Long> inputEnd;
        try (KafkaConsumer<String, String> c = consumer(bootstrap, null, 500)) {
            List<TopicPartition> tps = partitions(c, output);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, WAIT);
            for (TopicPartition tp : tps) values.put(tp.partition(), new ArrayList<>());
            long deadline = System.currentTimeMillis() + 60_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("not at " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    values.get(r.partition()).add(r.value());
                }
            }
            inputEnd = byPartition(c.endOffsets(partitions(c, input), WAIT));
        }
        Map<Integer, Long> committed = new TreeMap<>();
        try (Admin admin = Admin.create(common(bootstrap))) {
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(60, TimeUnit.SECONDS)
                    .forEach((tp, o) -> committed.put(tp.partition(), o.offset()));
        }
        Json.print(Json.obj("output", values, "committed", committed, "input_end", inputEnd));
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "seed" -> seed(args[1], args[2], args[3], Integer.parseInt(args[4]), Short.parseShort(args[5]),
                    Integer.parseInt(args[6]));
            case "copy" -> copy(args[1], args[2], args[3], args[4], args[5], Integer.parseInt(args[6]),
                    Integer.parseInt(args[7]), Integer.parseInt(args[8]));
            case "verify" -> verify(args[1], args[2], args[3], args[4]);
            default -> throw new IllegalArgumentException(args[0]);
        }
    }
}
