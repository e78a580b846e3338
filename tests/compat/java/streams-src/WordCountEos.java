import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams' word count with {@code processing.guarantee=exactly_once_v2}: lines of the input
 * topic split into words, re-keyed by word (the repartition topic {@code <app>-words-repartition}),
 * counted in a RocksDB store (its changelog {@code <app>-counts-changelog}), every new count
 * written to the output topic as (word, long). Exactly once means a line read once more after a
 * crash or a broker failure changes no count: the read of the input, the counts' changelog, the
 * output and the consumer offsets are committed in one transaction.
 *
 * <p>{@code WordCountEos <bootstrap> <application.id> <input> <output> <state.dir>
 * <replication.factor> <group.instance.id> [processing.guarantee]} runs until SIGTERM (a clean close) or SIGKILL. Each
 * state change is printed on stderr as {@code streams-state <old> -> <new>}, so the test waits for
 * RUNNING on the line. The group membership is static ({@code group.instance.id}): the same
 * program restarted after a kill -9 takes its member's place at once instead of waiting for the
 * session timeout, and its transactional id (from the process id kept in the state dir) fences
 * the killed one's open transaction.
 */
public final class WordCountEos {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.length > 7 ? args[7] : StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, args[5]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "2");
        // purge the repartition topic every second (not 30 s) so the test sees DeleteRecords work
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, "1000");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), args[6]);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "10000");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), "10000");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.split(" ")))
            .map((key, word) -> KeyValue.pair(word, word))
            .groupByKey(Grouped.as("words"))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, old) -> {
            System.err.println("streams-state " + old + " -> " + now);
            System.err.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("streams-error " + e);
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
