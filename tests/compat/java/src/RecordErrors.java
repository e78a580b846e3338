import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What the producer tells the application about records a broker refused (KIP-467):
 * {@code RecordErrors <bootstrap> <topic> <k=v,...|-> <round> [<round> ...]} creates the topic (one
 * partition, the given configs), then sends each round as one batch to partition 0 (linger.ms is
 * long, so the batch is sent by the flush that ends the round) with the default producer
 * (idempotent, acks=all). A round is {@code key:ms,key:ms,...}: a key ("-" for none) and the
 * record's timestamp relative to the round's start. Prints one line per record:
 * {@code {"round": r, "i": i, "offset": o}} or {@code {"round": r, "i": i, "error": class, "message": m}}.
 */
public final class RecordErrors {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        Map<String, String> configs = new HashMap<>();
        if (!args[2].equals("-")) {
            for (String kv : args[2].split(",")) {
                String[] parts = kv.split("=", 2);
                configs.put(parts[0], parts[1]);
            }
        }
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(configs))).all()
                    .get(30, TimeUnit.SECONDS);
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "60000");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "1048576");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int r = 3; r < args.length; r++) {
                String[] specs = args[r].split(",");
                long start = System.currentTimeMillis();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < specs.length; i++) {
                    String[] kt = specs[i].split(":");
                    String key = kt[0].equals("-") ? null : kt[0];
                    long ts = start + Long.parseLong(kt[1]);
                    sent.add(producer.send(new ProducerRecord<>(topic, 0, ts, key, "v" + (r - 3) + "-" + i)));
                }
                producer.flush();
                for (int i = 0; i < sent.size(); i++) {
                    try {
                        RecordMetadata md = sent.get(i).get(60, TimeUnit.SECONDS);
                        Json.print(Json.obj("round", r - 3, "i", i, "offset", md.offset()));
                    } catch (ExecutionException e) {
                        Throwable c = e.getCause();
                        Json.print(Json.obj("round", r - 3, "i", i, "error", c.getClass().getName(),
                                "message", c.getMessage()));
                    }
                }
            }
        }
    }
}
