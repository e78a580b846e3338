// Prints the __transaction_state key and values of tests/unit/protocol/test_coordinator_records.py as Kafka 3.9's own
// generated classes encode them (MessageUtil.toVersionPrefixedBytes, as TransactionLog.keyToBytes
// and valueToBytes do). Run from the repository root:
//   java -cp "$(ls build/java/kafka/*.jar | tr '\n' ':')" scripts/TransactionLogGolden.java
import java.util.*;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.transaction.generated.*;

public class TransactionLogGolden {
    static String hex(byte[] b) { StringBuilder s = new StringBuilder(); for (byte x : b) s.append(String.format("%02x", x)); return s.toString(); }
    public static void main(String[] a) {
        System.out.println("key " + hex(MessageUtil.toVersionPrefixedBytes((short) 0, new TransactionLogKey().setTransactionalId("tx"))));
        List<TransactionLogValue.PartitionsSchema> parts = new ArrayList<>();
        parts.add(new TransactionLogValue.PartitionsSchema().setTopic("t").setPartitionIds(Arrays.asList(0, 2)));
        parts.add(new TransactionLogValue.PartitionsSchema().setTopic("ab").setPartitionIds(Arrays.asList(7)));
        for (short v = 0; v <= 1; v++) {
            TransactionLogValue ongoing = new TransactionLogValue().setProducerId(1000L).setProducerEpoch((short) 3)
                .setTransactionTimeoutMs(60000).setTransactionStatus((byte) 1).setTransactionPartitions(parts)
                .setTransactionLastUpdateTimestampMs(1700000000123L).setTransactionStartTimestampMs(1700000000001L);
            System.out.println("ongoing v" + v + " " + hex(MessageUtil.toVersionPrefixedBytes(v, ongoing)));
            TransactionLogValue empty = new TransactionLogValue().setProducerId(1000L).setProducerEpoch((short) 4)
                .setTransactionTimeoutMs(60000).setTransactionStatus((byte) 0).setTransactionPartitions(null)
                .setTransactionLastUpdateTimestampMs(1700000000200L).setTransactionStartTimestampMs(-1L);
            System.out.println("empty v" + v + " " + hex(MessageUtil.toVersionPrefixedBytes(v, empty)));
        }
    }
}
