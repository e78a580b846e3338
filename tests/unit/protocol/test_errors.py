"""protocol.errors against hand-written expectations read off Kafka's Errors.java.

Retriable codes are those whose Java exception class extends RetriableException (directly or via
InvalidMetadataException / RefreshRetriableException) in org.apache.kafka.common.errors.
"""

from __future__ import annotations

import ast
import dataclasses
import pickle
import sys
from pathlib import Path

import pytest

from protocol import errors
from protocol.errors import (
    ERRORS,
    ErrorCode,
    ErrorInfo,
    KafkaProtocolError,
    error_info,
    error_name,
)

MAX_CODE = 133  # SHARE_SESSION_LIMIT_REACHED, the highest code Kafka has assigned (4.1)

# (code, Kafka name, retriable), written out by hand from Kafka's Errors.java.
SAMPLE = [
    (-1, "UNKNOWN_SERVER_ERROR", False),
    (0, "NONE", False),
    (1, "OFFSET_OUT_OF_RANGE", False),
    (2, "CORRUPT_MESSAGE", True),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
    (5, "LEADER_NOT_AVAILABLE", True),
    (6, "NOT_LEADER_OR_FOLLOWER", True),
    (7, "REQUEST_TIMED_OUT", True),
    (8, "BROKER_NOT_AVAILABLE", False),
    (10, "MESSAGE_TOO_LARGE", False),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True),
    (15, "COORDINATOR_NOT_AVAILABLE", True),
    (16, "NOT_COORDINATOR", True),
    (17, "INVALID_TOPIC_EXCEPTION", False),
    (19, "NOT_ENOUGH_REPLICAS", True),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
    (22, "ILLEGAL_GENERATION", False),
    (25, "UNKNOWN_MEMBER_ID", False),
    (27, "REBALANCE_IN_PROGRESS", False),
    (35, "UNSUPPORTED_VERSION", False),
    (36, "TOPIC_ALREADY_EXISTS", False),
    (41, "NOT_CONTROLLER", True),
    (42, "INVALID_REQUEST", False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False),
    (47, "INVALID_PRODUCER_EPOCH", False),
    (48, "INVALID_TXN_STATE", False),
    (51, "CONCURRENT_TRANSACTIONS", True),
    (56, "KAFKA_STORAGE_ERROR", True),
    (59, "UNKNOWN_PRODUCER_ID", False),
    (74, "FENCED_LEADER_EPOCH", True),
    (75, "UNKNOWN_LEADER_EPOCH", True),
    (78, "OFFSET_NOT_AVAILABLE", True),
    (79, "MEMBER_ID_REQUIRED", False),
    (82, "FENCED_INSTANCE_ID", False),
    (87, "INVALID_RECORD", False),
    (90, "PRODUCER_FENCED", False),
    (100, "UNKNOWN_TOPIC_ID", True),
    (110, "FENCED_MEMBER_EPOCH", False),
    (113, "STALE_MEMBER_EPOCH", False),
    (119, "INVALID_REGISTRATION", False),
    (120, "TRANSACTION_ABORTABLE", False),
    (121, "INVALID_RECORD_STATE", False),
    (122, "SHARE_SESSION_NOT_FOUND", True),
    (123, "INVALID_SHARE_SESSION_EPOCH", True),
    (124, "FENCED_STATE_EPOCH", False),
    (127, "VOTER_NOT_FOUND", False),
    (129, "REBOOTSTRAP_REQUIRED", False),
    (133, "SHARE_SESSION_LIMIT_REACHED", True),
]

# Every code whose exception extends RetriableException in Kafka 4.x (3.9: the same, below 128).
# fmt: off
RETRIABLE = {
    2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 84, 88,
    89, 100, 103, 106, 122, 123, 133,
}
# fmt: on


@pytest.mark.parametrize(("code", "name", "retriable"), SAMPLE)
def test_sample_matches_kafka(code: int, name: str, retriable: bool) -> None:
    assert ErrorCode[name] == code
    assert ErrorCode(code).name == name
    info = error_info(code)
    assert info == ERRORS[code]
    assert (info.code, info.name, info.retriable) == (code, name, retriable)
    assert error_name(code) == name


def test_retriable_set_is_kafkas() -> None:
    assert {code for code, info in ERRORS.items() if info.retriable} == RETRIABLE


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (-1, "The server experienced an unexpected error when processing the request."),
        (3, "This server does not host this topic-partition."),
        (35, "The version of API is not supported."),
        (45, "The broker received an out of order sequence number."),
        (47, "Producer attempted to produce with an old epoch."),
        (53, "Transactional Id authorization failed."),
        (122, "The share session was not found."),
    ],
)
def test_default_messages(code: int, message: str) -> None:
    assert ERRORS[code].message == message


def test_every_error_but_none_has_a_message() -> None:
    assert ERRORS[0].message == ""
    assert all(info.message for code, info in ERRORS.items() if code != 0)


def test_codes_are_contiguous_from_minus_one_to_max() -> None:
    assert sorted(ERRORS) == list(range(-1, MAX_CODE + 1))
    assert max(ERRORS) == ErrorCode.SHARE_SESSION_LIMIT_REACHED == MAX_CODE


def test_enum_and_dict_agree() -> None:
    assert len(ErrorCode) == len(ERRORS)
    for member in ErrorCode:
        info = ERRORS[member]
        assert (info.code, info.name) == (member.value, member.name)
        assert type(info.code) is int


def test_names_unique_and_kafka_style() -> None:
    names = [info.name for info in ERRORS.values()]
    assert len(set(names)) == len(names)
    assert all(name.isupper() and name.isidentifier() for name in names)


@pytest.mark.parametrize("code", [9999, -5, -2, MAX_CODE + 1, 32767, -32768])
def test_unknown_code_falls_back_to_unknown_server_error(code: int) -> None:
    assert error_info(code) is ERRORS[ErrorCode.UNKNOWN_SERVER_ERROR]
    assert error_name(code) == "UNKNOWN_SERVER_ERROR"
    assert not error_info(code).retriable


def test_lookup_accepts_enum_members() -> None:
    assert error_info(ErrorCode.NOT_LEADER_OR_FOLLOWER).name == "NOT_LEADER_OR_FOLLOWER"


def test_error_info_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ERRORS[6].retriable = False  # type: ignore[misc]
    assert isinstance(ERRORS[6], ErrorInfo)


def test_protocol_error_carries_code_and_default_message() -> None:
    exc = KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert exc.code == 3
    assert exc.info is ERRORS[3]
    assert exc.message == ERRORS[3].message
    assert str(exc) == (
        "UNKNOWN_TOPIC_OR_PARTITION (3): This server does not host this topic-partition."
    )


def test_protocol_error_custom_message() -> None:
    exc = KafkaProtocolError(47, "epoch 3 is older than 5")
    assert exc.code == 47
    assert exc.info.name == "INVALID_PRODUCER_EPOCH"
    assert str(exc) == "INVALID_PRODUCER_EPOCH (47): epoch 3 is older than 5"
    with pytest.raises(KafkaProtocolError) as caught:
        raise exc
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_protocol_error_unknown_code_keeps_code() -> None:
    exc = KafkaProtocolError(9999)
    assert exc.code == 9999
    assert exc.info is ERRORS[-1]
    assert str(exc).startswith("UNKNOWN_SERVER_ERROR (9999): ")


def test_protocol_error_pickles() -> None:
    exc = pickle.loads(pickle.dumps(KafkaProtocolError(6, "moved")))
    assert (exc.code, exc.message, str(exc)) == (6, "moved", "NOT_LEADER_OR_FOLLOWER (6): moved")


def test_module_imports_only_stdlib() -> None:
    tree = ast.parse(Path(errors.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            imported.add((node.module or "").partition(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
