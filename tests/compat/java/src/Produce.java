import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A data source for the group tests: {@code Produce <bootstrap> <topic> <partitions> <count>}
 * sends value "v-i" to partition i % partitions (default producer: idempotent, acks=all), flushes,
 * fails on any send error, and prints {@code {"produced": count}}.
 */
public final class Produce {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]), count = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, "v-" + i), (md, e) -> {
                    if (e != null) failure.compareAndSet(null, e);
                });
            }
            producer.flush();
        }
        if (failure.get() != null) throw failure.get();
        Json.print(Json.obj("produced", count));
    }
}
