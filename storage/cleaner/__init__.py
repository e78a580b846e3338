"""Log compaction (Kafka's log cleaner): ``cleanup.policy=compact`` keeps the latest record of
every key.

* :mod:`storage.cleaner.records` -- record spans of a batch and rebuilding a batch from the
  records it retains (pure, bytes in and out);
* :mod:`storage.cleaner.offset_map` -- OffsetMap, key -> latest offset of the dirty section;
* :mod:`storage.cleaner.transactions` -- CleanedTransactionMetadata: aborted transactions and
  transaction markers while cleaning;
* :mod:`storage.cleaner.cleaner` -- Cleaner: one cleaning of one log (build the map, group the
  segments, write ``.cleaned`` segments), run in a worker process, never on the event loop;
* :mod:`storage.cleaner.manager` -- LogCleanerManager: which log to clean next, the
  ``cleaner-offset-checkpoint`` files, partitions being cleaned or paused.

The swap of cleaned segments into a log is :meth:`storage.log.Log.replace_segments`; the task
that drives all of it is ``broker.log_cleaner.LogCleaner``.
"""
