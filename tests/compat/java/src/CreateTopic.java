import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;

/**
 * {@code CreateTopic <bootstrap> <topic> <partitions>}: creates the topic (replication factor 1)
 * and prints {@code {"created": topic, "partitions": n}} with the partition count it describes.
 */
public final class CreateTopic {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(p)) {
            create(admin, args[1], Integer.parseInt(args[2]));
        }
    }

    static void create(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
        int described = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
                .get(topic).partitions().size();
        Json.print(Json.obj("created", topic, "partitions", described));
    }
}
