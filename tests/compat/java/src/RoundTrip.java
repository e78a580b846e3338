import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produce N keyed records with headers, then consume the topic back from the beginning.
 *
 * <p>Usage: {@code RoundTrip <bootstrap> <topic> <partitions> <records> <compression.type|default>};
 * the topic is created first (see CreateTopic). The producer keeps kafka-clients' defaults (idempotent, acks=all) and sets only compression.type
 * unless it is "default". Prints one JSON line per record the producer had acknowledged
 * ({@code "sent"}: partition, offset, key, value, headers, timestamp from RecordMetadata), then one
 * per record consumed ({@code "got"}), in the consumer's order, and a final {@code "done"}.
 * Record i: key "key-(i % 1000)", a value with non-ASCII text (null every 1000th: a tombstone),
 * headers i, codec, two "dup" entries and a null-valued one, and timestamp 1700000000000 + i except
 * every 10th record, which leaves it to the producer (CreateTime = now).
 */
public final class RoundTrip {
    static final long BASE_TS = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], codec = args[4];
        int n = Integer.parseInt(args[3]);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            CreateTopic.create(admin, topic, Integer.parseInt(args[2]));
        }

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (!codec.equals("default")) pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);

        RecordMetadata[] metas = new RecordMetadata[n];
        AtomicReference<Exception> failure = new AtomicReference<>();
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>(n);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < n; i++) {
                ProducerRecord<byte[], byte[]> r = record(topic, codec, i);
                records.add(r);
                final int idx = i;
                producer.send(r, (md, e) -> {
                    if (e != null) failure.compareAndSet(null, e);
                    else metas[idx] = md;
                });
            }
            producer.flush();
        }
        if (failure.get() != null) throw failure.get();
        for (int i = 0; i < n; i++) {
            ProducerRecord<byte[], byte[]> r = records.get(i);
            RecordMetadata md = metas[i];
            Json.print(Json.obj("sent", i, "p", md.partition(), "o", md.offset(), "k", r.key(),
                    "v", r.value(), "h", headers(r.headers()), "ts", md.timestamp()));
        }

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 120_000;
            int got = 0;
            while (got < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    got++;
                    Json.print(Json.obj("got", got, "p", r.partition(), "o", r.offset(), "k", r.key(),
                            "v", r.value(), "h", headers(r.headers()), "ts", r.timestamp(),
                            "tt", r.timestampType().toString()));
                }
            }
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            List<Object> ends = new ArrayList<>();
            for (TopicPartition tp : tps) ends.add(List.of(tp.partition(), end.get(tp)));
            Json.print(Json.obj("done", got, "end", ends));
        }
    }

    static ProducerRecord<byte[], byte[]> record(String topic, String codec, int i) {
        byte[] key = ("key-" + (i % 1000)).getBytes(StandardCharsets.UTF_8);
        byte[] value = i % 1000 == 999 ? null
                : ("value-" + i + " Grüße, κόσμε € " + "abcdefghij".repeat(i % 7)).getBytes(StandardCharsets.UTF_8);
        Long ts = i % 10 == 0 ? null : BASE_TS + i;
        RecordHeaders h = new RecordHeaders();
        h.add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
        h.add("codec", codec.getBytes(StandardCharsets.UTF_8));
        h.add("dup", "a".getBytes(StandardCharsets.UTF_8));
        h.add("dup", "b".getBytes(StandardCharsets.UTF_8));
        h.add("none", null);
        return new ProducerRecord<>(topic, null, ts, key, value, h);
    }

    static List<Object> headers(Iterable<Header> hs) {
        List<Object> out = new ArrayList<>();
        for (Header h : hs) out.add(Arrays.asList(h.key(), h.value()));
        return out;
    }
}
