import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a consumer group (CooperativeStickyAssignor, manual commits), driven on stdin.
 *
 * <p>Usage: {@code GroupMember <bootstrap> <topic> <group> <name> [group.instance.id]}. Each poll's
 * records are "processed" (printed: {@code {"ev":"rec","p":..,"o":..}}) and then committed with
 * commitSync; a failed commit is printed and retried with the next one; partitions being revoked
 * get their processed positions committed in onPartitionsRevoked, so a record is processed once
 * across rebalances. Rebalance callbacks print {@code assigned}/{@code revoked}/{@code lost} with
 * the partitions, the member's whole assignment and its generation. Commands on stdin, one a line:
 * {@code status} prints the assignment and generation; {@code close} closes the consumer (a static
 * member does not leave the group on close, a dynamic one does) and exits; end of input = close.
 */
public final class GroupMember {
    private static String name;
    private static KafkaConsumer<String, String> consumer;
    private static final Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        name = args[3];
        String instanceId = args.length > 4 ? args[4] : null;

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "200");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "200");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, instanceId == null ? "6000" : "30000");
        if (instanceId != null) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);

        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) commands.add(line.trim());
            } catch (Exception ignored) {
                // treated as end of input
            }
            commands.add("close");
        });
        stdin.setDaemon(true);
        stdin.start();

        consumer = new KafkaConsumer<>(p);
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (TopicPartition tp : partitions) {
                    OffsetAndMetadata om = processed.remove(tp);
                    if (om != null) commit.put(tp, om);
                }
                if (!commit.isEmpty()) commit(commit, "revoked");
                event("revoked", partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                event("assigned", partitions);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) processed.remove(tp);
                event("lost", partitions);
            }
        });
        Json.print(Json.obj("ev", "started", "m", name));
        long deadline = System.currentTimeMillis() + 600_000;  // bounded even if the driver never says close
        while (System.currentTimeMillis() < deadline) {
            String cmd = commands.poll();
            if ("close".equals(cmd)) break;
            if ("status".equals(cmd)) event("status", List.of());
            boolean any = false;
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                any = true;
                Json.print(Json.obj("ev", "rec", "m", name, "p", r.partition(), "o", r.offset()));
                processed.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            if (any) commit(new HashMap<>(processed), "poll");
        }
        consumer.close();
        Json.print(Json.obj("ev", "closed", "m", name));
    }

    private static void commit(Map<TopicPartition, OffsetAndMetadata> offsets, String when) {
        try {
            consumer.commitSync(offsets);
            Json.print(Json.obj("ev", "committed", "m", name, "when", when, "offsets", offsetList(offsets)));
        } catch (WakeupException e) {
            throw e;
        } catch (KafkaException e) {
            Json.print(Json.obj("ev", "commit_failed", "m", name, "when", when, "error", e.getClass().getSimpleName()));
        }
    }

    private static List<Object> offsetList(Map<TopicPartition, OffsetAndMetadata> offsets) {
        List<Object> out = new ArrayList<>();
        offsets.forEach((tp, om) -> out.add(List.of(tp.partition(), om.offset())));
        return out;
    }

    private static List<Integer> partitions(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).sorted().toList();
    }

    private static void event(String ev, Collection<TopicPartition> partitions) {
        ConsumerGroupMetadata g = consumer.groupMetadata();
        Json.print(Json.obj("ev", ev, "m", name, "parts", partitions(partitions),
                "now", partitions(consumer.assignment()), "gen", g.generationId(), "member", g.memberId()));
    }
}
