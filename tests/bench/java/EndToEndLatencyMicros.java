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
 * Kafka's EndToEndLatency loop with the same client settings (linger.ms 0, acks=all, a consumer
 * with fetch.max.wait.ms 0 assigned to the topic's partitions at their end): send one 100-byte
 * record, wait for its acknowledgement, poll until the consumer has it. EndToEndLatency prints
 * whole milliseconds, truncated, so a median of 0.99 ms and one of 1.01 ms read 0 and 1; this
 * prints microseconds: "us p10 A p50 B p90 C p99 D p99.9 E".
 *
 * Usage: EndToEndLatencyMicros BOOTSTRAP TOPIC N
 */
public class EndToEndLatencyMicros {
    public static void main(String[] args) throws Exception {
        String brokers = args[0];
        String topic = args[1];
        int n = Integer.parseInt(args[2]);
        Properties cp = new Properties();
        cp.put("bootstrap.servers", brokers);
        cp.put("group.id", "test-group-" + System.currentTimeMillis());
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "latest");
        cp.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        cp.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        cp.put("fetch.max.wait.ms", "0");
        Properties pp = new Properties();
        pp.put("bootstrap.servers", brokers);
        pp.put("linger.ms", "0");
        pp.put("max.block.ms", Long.toString(Long.MAX_VALUE));
        pp.put("acks", "all");
        pp.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        pp.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            List<TopicPartition> tps = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(p -> tps.add(new TopicPartition(p.topic(), p.partition())));
            consumer.assign(tps);
            consumer.seekToEnd(tps);
            consumer.assignment().forEach(consumer::position);
            long[] micros = new long[n];
            long[] produce = new long[n];
            long[] poll = new long[n];
            byte[] message = new byte[100];
            Arrays.fill(message, (byte) 'A');
            for (int i = 0; i < n; i++) {
                long begin = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, message)).get();
                long acknowledged = System.nanoTime();
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(60_000));
                long end = System.nanoTime();
                long elapsed = end - begin;
                produce[i] = (acknowledged - begin) / 1000;
                poll[i] = (end - acknowledged) / 1000;
                if (records.count() != 1) {
                    throw new RuntimeException("expected the one record just sent, got " + records.count());
                }
                micros[i] = elapsed / 1000;
            }
            print("us", micros);
            print("produce", produce);
            print("poll", poll);
        }
    }

    private static void print(String label, long[] micros) {
        int n = micros.length;
        Arrays.sort(micros);
        System.out.printf("%s p10 %d p50 %d p90 %d p99 %d p99.9 %d%n", label, micros[n / 10], micros[n / 2],
                micros[(int) (n * 0.9)], micros[(int) (n * 0.99)], micros[(int) (n * 0.999)]);
    }
}
