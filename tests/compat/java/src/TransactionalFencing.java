import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * {@code TransactionalFencing <bootstrap> <transactional.id> <topic>}: two transactional
 * producers with the same transactional.id. The first calls {@code initTransactions()} (printed
 * as {@code {"initialized": "first"}}), then the second (which bumps the epoch and so fences the
 * first: {@code {"initialized": "second"}}); the first then begins a transaction and sends: the
 * send and the commit each print {@code {"first": step, "error": exception class}}, which Kafka
 * answers with ProducerFencedException. Errors of the second producer fail the program.
 */
public final class TransactionalFencing {
    static KafkaProducer<String, String> producer(String bootstrap, String transactionalId) {
        return Transactions.producer(bootstrap, transactionalId, ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], transactionalId = args[1], topic = args[2];
        try (KafkaProducer<String, String> first = producer(bootstrap, transactionalId);
             KafkaProducer<String, String> second = producer(bootstrap, transactionalId)) {
            first.initTransactions();
            Json.print(Json.obj("initialized", "first"));
            second.initTransactions();
            Json.print(Json.obj("initialized", "second"));
            first.beginTransaction();
            String sendError = null;
            try {
                first.send(new ProducerRecord<>(topic, "k", "v")).get(60, TimeUnit.SECONDS);
            } catch (ExecutionException | ProducerFencedException e) {
                sendError = Transactions.name(e);
            }
            Json.print(Json.obj("first", "send", "error", sendError));
            String commitError = null;
            try {
                first.commitTransaction();
            } catch (Exception e) {
                commitError = Transactions.name(e);
            }
            Json.print(Json.obj("first", "commit", "error", commitError));
        }
    }
}
