"""Errors raised by the log (storage/), each carrying the Kafka error a client should see.

Every class is a :class:`protocol.errors.KafkaProtocolError`, so a broker handler that catches
that one type puts ``e.code`` in the partition's ``error_code`` (STYLE #7) without a mapping
table of its own. The Kafka exception each mirrors is named in its docstring; errors Kafka has
no wire code for (offsets out of order on a follower, index overflow) carry
UNKNOWN_SERVER_ERROR, as Kafka's ``Errors.forException`` would.

Who may raise/catch: anything in storage/ raises them; the broker catches them.
"""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaProtocolError

__all__ = [
    "CorruptRecordError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LogSegmentOffsetOverflowError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "RecordValidationError",
    "StorageError",
    "UnexpectedAppendOffsetError",
]


class StorageError(KafkaProtocolError):
    """Base class; on its own, a disk problem (Kafka's KafkaStorageException)."""

    CODE: int = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, message: str | None = None) -> None:
        super().__init__(self.CODE, message)

    @property
    def error_name(self) -> str:
        """Kafka's name of the error, e.g. ``"OFFSET_OUT_OF_RANGE"``."""
        return self.info.name


class KafkaStorageError(StorageError):
    """An I/O error in a log dir, which took the dir offline (Kafka's KafkaStorageException as
    UnifiedLog.maybeHandleIOException raises it, after the LogDirFailureChannel was told), or an
    operation refused because the dir is offline already. Whoever catches it logs no traceback
    and does not retry: the dir's partitions stop (broker.replica_manager.handle_log_dir_failure)."""


class OffsetOutOfRangeError(StorageError):
    """Read or lookup outside [log start offset, log end offset] (OffsetOutOfRangeException)."""

    CODE = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(StorageError):
    """Bad batch length, magic or CRC (CorruptRecordException)."""

    CODE = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(StorageError):
    """A batch that is well formed but not acceptable from a client (InvalidRecordException):
    inconsistent offset range or count, control batch, base offset not 0, missing key on a
    compacted topic."""

    CODE = ErrorCode.INVALID_RECORD


class InvalidTimestampError(StorageError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms."""

    CODE = ErrorCode.INVALID_TIMESTAMP


class RecordValidationError(StorageError):
    """Records of a batch failed the per-record checks (Kafka's RecordValidationException,
    KIP-467): ``invalid`` is the partition's error -- InvalidTimestampError when any record's
    timestamp is refused, else InvalidRecordError -- and ``record_errors`` lists every bad
    record as (batch index, message). The Produce response (v8+) carries both, so that a client
    can fail those records with their own error; nothing of the batch is appended."""

    def __init__(self, invalid: StorageError, record_errors: list[tuple[int, str | None]]) -> None:
        KafkaProtocolError.__init__(self, invalid.code, invalid.message)
        self.invalid = invalid
        self.record_errors = record_errors


class RecordTooLargeError(StorageError):
    """One batch larger than max.message.bytes (RecordTooLargeException)."""

    CODE = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError):
    """The whole append larger than segment.bytes (RecordBatchTooLargeException)."""

    CODE = ErrorCode.RECORD_LIST_TOO_LARGE


class OffsetsOutOfOrderError(StorageError):
    """A follower append whose batches' offsets are not increasing (OffsetsOutOfOrderException)."""

    CODE = ErrorCode.UNKNOWN_SERVER_ERROR


class UnexpectedAppendOffsetError(StorageError):
    """A follower append starting below the log end offset (UnexpectedAppendOffsetException)."""

    CODE = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class LogSegmentOffsetOverflowError(StorageError):
    """An offset that does not fit the segment's 4-byte relative index offsets
    (LogSegmentOffsetOverflowException)."""

    CODE = ErrorCode.UNKNOWN_SERVER_ERROR
