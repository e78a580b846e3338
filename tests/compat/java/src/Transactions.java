import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's transactional producer and isolation levels, end to end. Every step prints a JSON line.
 *
 * <ul>
 *   <li>{@code Transactions commit-abort <bootstrap> <transactional.id> <topic> <partitions>}:
 *       three transactions, each sending one record to every partition: "c-p" committed, "a-p"
 *       aborted, "d-p" committed ({@code {"committed": "c"}}, {@code {"aborted": "a"}}, ...).
 *   <li>{@code Transactions fence <bootstrap> <transactional.id> <topic>}: the first producer
 *       sends "f1" in a transaction and leaves it open; a second producer with the same id calls
 *       {@code initTransactions()}, which completes once the coordinator aborted the first's
 *       transaction ({@code {"initialized": "second"}}); the second commits "f2"; the first's
 *       commit then fails ({@code {"first": "commit", "error": class}}).
 *   <li>{@code Transactions timeout <bootstrap> <transactional.id> <topic> <timeout.ms>}: sends
 *       "t1" in a transaction with {@code transaction.timeout.ms}, waits twice the timeout, then
 *       sends "t2" and commits: prints the error of the send and of the commit.
 *   <li>{@code Transactions consume <bootstrap> <topic> <read_committed|read_uncommitted>}:
 *       every partition from the beginning up to its end offset (the last stable offset for
 *       read_committed), {@code {"values": [sorted values]}}.
 * </ul>
 */
public final class Transactions {
    static KafkaProducer<String, String> producer(String bootstrap, String transactionalId, String... extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");  // callers may override it
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (int i = 0; i < extra.length; i += 2) p.put(extra[i], extra[i + 1]);
        return new KafkaProducer<>(p);
    }

    static String name(Throwable e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return cause.getClass().getSimpleName();
    }

    interface Step {
        void run() throws Exception;
    }

    /** The simple name of the exception a step throws (the cause of an ExecutionException), or null. */
    static String errorOf(Step step) {
        try {
            step.run();
            return null;
        } catch (Exception e) {
            return name(e);
        }
    }

    static void sendAll(KafkaProducer<String, String> p, String topic, int partitions, String prefix)
            throws Exception {
        for (int i = 0; i < partitions; i++) {
            String v = prefix + "-" + i;
            p.send(new ProducerRecord<>(topic, i, v, v)).get(60, TimeUnit.SECONDS);
        }
    }

    static void commitAbort(String bootstrap, String tid, String topic, int partitions) throws Exception {
        try (KafkaProducer<String, String> p = producer(bootstrap, tid)) {
            p.initTransactions();
            p.beginTransaction();
            sendAll(p, topic, partitions, "c");
            p.commitTransaction();
            Json.print(Json.obj("committed", "c"));
            p.beginTransaction();
            sendAll(p, topic, partitions, "a");
            p.abortTransaction();
            Json.print(Json.obj("aborted", "a"));
            p.beginTransaction();
            sendAll(p, topic, partitions, "d");
            p.commitTransaction();
            Json.print(Json.obj("committed", "d"));
        }
    }

    static void fence(String bootstrap, String tid, String topic) throws Exception {
        try (KafkaProducer<String, String> first = producer(bootstrap, tid);
             KafkaProducer<String, String> second = producer(bootstrap, tid)) {
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, "f1", "f1")).get(60, TimeUnit.SECONDS);
            Json.print(Json.obj("first", "sent"));
            second.initTransactions();
            Json.print(Json.obj("initialized", "second"));
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, "f2", "f2")).get(60, TimeUnit.SECONDS);
            second.commitTransaction();
            Json.print(Json.obj("committed", "f2"));
            Json.print(Json.obj("first", "commit", "error", errorOf(first::commitTransaction)));
        }
    }

    static void timeout(String bootstrap, String tid, String topic, int timeoutMs) throws Exception {
        try (KafkaProducer<String, String> p = producer(bootstrap, tid,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(timeoutMs))) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "t1", "t1")).get(60, TimeUnit.SECONDS);
            Json.print(Json.obj("sent", "t1"));
            Thread.sleep(2L * timeoutMs);  // the transaction is left open past its timeout
            Json.print(Json.obj("send", "t2", "error", errorOf(
                    () -> p.send(new ProducerRecord<>(topic, 0, "t2", "t2")).get(60, TimeUnit.SECONDS))));
            Json.print(Json.obj("commit", "t2", "error", errorOf(p::commitTransaction)));
        }
    }

    static void consume(String bootstrap, String topic, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = c.partitionsFor(topic, Duration.ofSeconds(30)).stream()
                    .map(i -> new TopicPartition(topic, i.partition())).collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("not at " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) values.add(r.value());
            }
            Collections.sort(values);
            Json.print(Json.obj("values", values));
        }
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "commit-abort" -> commitAbort(args[1], args[2], args[3], Integer.parseInt(args[4]));
            case "fence" -> fence(args[1], args[2], args[3]);
            case "timeout" -> timeout(args[1], args[2], args[3], Integer.parseInt(args[4]));
            case "consume" -> consume(args[1], args[2], args[3]);
            default -> throw new IllegalArgumentException(args[0]);
        }
    }
}
