import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client of tests/cluster/test_cluster_clients.py, driven line by line so that the test
 * decides when each record is sent (before, during and after a broker restart):
 *
 * <ul>
 *   <li>{@code FollowLeaders produce <bootstrap> <topic>}: each stdin line {@code <partition> <value>}
 *       is sent (default producer: idempotent, acks=all; delivery.timeout.ms 60 s so records for a
 *       partition without a leader wait for it); each acknowledgement prints
 *       {@code ack <partition> <offset> <value>}, each failure {@code err <value> <exception>}; at
 *       end of input it flushes, closes and prints {@code done}.
 *   <li>{@code FollowLeaders consume <bootstrap> <topic> [<key>=<value> ...]}: assigns every partition
 *       (no group), reads from the beginning and prints {@code rec <partition> <offset> <value>} until
 *       stdin closes; the optional consumer settings come last (e.g. {@code client.rack=r2}).
 * </ul>
 */
public final class FollowLeaders {
    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        if (mode.equals("produce")) {
            produce(bootstrap, topic);
        } else {
            Properties extra = new Properties();
            for (int i = 3; i < args.length; i++) {
                String[] kv = args[i].split("=", 2);
                extra.put(kv[0], kv[1]);
            }
            consume(bootstrap, topic, extra);
        }
    }

    static synchronized void println(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void produce(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] fields = line.split(" ", 2);
                String value = fields[1];
                producer.send(new ProducerRecord<>(topic, Integer.parseInt(fields[0]), null, value), (md, e) -> {
                    if (e != null) {
                        println("err " + value + " " + e);
                    } else {
                        println("ack " + md.partition() + " " + md.offset() + " " + value);
                    }
                });
            }
            producer.flush();
        }
        println("done");
    }

    static void consume(String bootstrap, String topic, Properties extra) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(extra);
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the test closes stdin to stop the consumer
                }
            } catch (Exception e) {
                // closed either way
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            println("assigned " + partitions.size());
            while (!stop.get()) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    println("rec " + r.partition() + " " + r.offset() + " " + r.value());
                }
            }
        }
    }
}
