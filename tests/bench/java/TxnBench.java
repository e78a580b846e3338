import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactional produce, measured with the Java client (the same program for every broker):
 *
 * <pre>
 * TxnBench BOOTSTRAP TOPIC throughput N SIZE ms|records EVERY
 *     N records of SIZE bytes, sent as fast as the producer takes them, in transactions committed
 *     every EVERY milliseconds or every EVERY records; prints
 *     "throughput records N seconds S commits C commit-us p50 A p99 B"
 *     (commit-us: how long each commitTransaction call took).
 * TxnBench BOOTSTRAP TOPIC e2e N
 *     N transactions of one 100-byte record, one at a time: begin, send, commit, then poll a
 *     read_committed consumer (fetch.max.wait.ms 0) until it has the record; prints
 *     "e2e-us p10 . p50 . p90 . p99 . p99.9 ." for send-to-consumed, then
 *     "commit-us p50 . p99 ." for commitTransaction alone and "visible-us p50 . p99 ." for
 *     commitTransaction's return until the consumer had the record (the markers' write: Kafka's
 *     EndTxn answers once PrepareCommit is in the log, before the markers).
 * </pre>
 */
public class TxnBench {
    static Properties producerProps(String brokers, String txnId) {
        Properties pp = new Properties();
        pp.put("bootstrap.servers", brokers);
        pp.put("transactional.id", txnId);
        pp.put("max.block.ms", "120000");
        pp.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        pp.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        return pp;
    }

    static String pct(long[] xs, String label) {
        long[] s = Arrays.copyOf(xs, xs.length);
        Arrays.sort(s);
        int n = s.length;
        return String.format("%s p10 %d p50 %d p90 %d p99 %d p99.9 %d", label, s[n / 10], s[n / 2],
                s[(int) (n * 0.9)], s[(int) (n * 0.99)], s[(int) (n * 0.999)]);
    }

    public static void main(String[] args) throws Exception {
        String brokers = args[0];
        String topic = args[1];
        String mode = args[2];
        int n = Integer.parseInt(args[3]);
        if (mode.equals("throughput")) {
            throughput(brokers, topic, n, Integer.parseInt(args[4]), args[5], Long.parseLong(args[6]));
        } else if (mode.equals("e2e")) {
            e2e(brokers, topic, n);
        } else {
            throw new IllegalArgumentException("mode " + mode);
        }
    }

    static void throughput(String brokers, String topic, int n, int size, String per, long every) {
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'T');
        List<Long> commits = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(brokers, "bench-" + System.nanoTime()))) {
            producer.initTransactions();
            long start = System.nanoTime();
            long txnStart = start;
            int inTxn = 0;
            producer.beginTransaction();
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, value));
                inTxn++;
                long now = System.nanoTime();
                boolean due = per.equals("ms") ? (now - txnStart) >= every * 1_000_000L : inTxn >= every;
                if (due || i == n - 1) {
                    long c0 = System.nanoTime();
                    producer.commitTransaction();
                    long c1 = System.nanoTime();
                    commits.add((c1 - c0) / 1000);
                    txnStart = c1;
                    inTxn = 0;
                    if (i < n - 1) {
                        producer.beginTransaction();
                    }
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            long[] c = commits.stream().mapToLong(Long::longValue).toArray();
            Arrays.sort(c);
            System.out.printf("throughput records %d seconds %.3f commits %d commit-us p50 %d p99 %d%n", n, seconds,
                    c.length, c[c.length / 2], c[(int) (c.length * 0.99)]);
        }
    }

    static void e2e(String brokers, String topic, int n) {
        Properties cp = new Properties();
        cp.put("bootstrap.servers", brokers);
        cp.put("group.id", "txn-bench-" + System.nanoTime());
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "latest");
        cp.put("isolation.level", "read_committed");
        cp.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        cp.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        cp.put("fetch.max.wait.ms", "0");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(brokers, "bench-e2e-" + System.nanoTime()))) {
            producer.initTransactions();
            List<TopicPartition> tps = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(p -> tps.add(new TopicPartition(p.topic(), p.partition())));
            consumer.assign(tps);
            consumer.seekToEnd(tps);
            consumer.assignment().forEach(consumer::position);
            long[] e2e = new long[n];
            long[] commit = new long[n];
            long[] visible = new long[n];
            byte[] message = new byte[100];
            Arrays.fill(message, (byte) 'A');
            for (int i = 0; i < n; i++) {
                long begin = System.nanoTime();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, message));
                long c0 = System.nanoTime();
                producer.commitTransaction();
                long c1 = System.nanoTime();
                int got = 0;
                long deadline = c1 + 60_000_000_000L;
                while (got == 0 && System.nanoTime() < deadline) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(1000));
                    got += records.count();
                }
                long end = System.nanoTime();
                if (got != 1) {
                    throw new RuntimeException("expected the one record just committed, got " + got);
                }
                e2e[i] = (end - begin) / 1000;
                commit[i] = (c1 - c0) / 1000;
                visible[i] = (end - c1) / 1000;
            }
            System.out.println(pct(e2e, "e2e-us"));
            System.out.println(pct(commit, "commit-us"));
            System.out.println(pct(visible, "visible-us"));
        }
    }
}
