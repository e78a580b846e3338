"""A single node (embedded controller) with two log dirs, one of them a small tmpfs the test
fills (issue #20 §1b): when it is not the metadata dir, its partitions go offline -- answered
KAFKA_STORAGE_ERROR, one error line, DescribeLogDirs shows it -- and the other dir serves on;
when it is the first dir (the node's metadata file lives there) the node halts, as Kafka halts
when its metadata log dir fails. The halt when the only dir fails is test_lifecycle's."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages import DescribeLogDirsRequest, MetadataRequest
from protocol.messages import metadata_request as mr
from tests.broker_process import BrokerProcess
from tests.full_disk import fill, mounted_tmpfs
from tests.integration.test_lifecycle import produce
from tests.raw_client import RawConnection


def log_dirs(c: RawConnection) -> dict[str, tuple[int, set[tuple[str, int]]]]:
    r = c.call(35, 4, DescribeLogDirsRequest(topics=None))
    return {d.log_dir: (d.error_code, {(t.name, p.partition_index) for t in d.topics for p in t.partitions})
            for d in r.results}


@pytest.mark.parametrize("small_first", [False, True], ids=["second-dir-fails", "metadata-dir-fails"])
def test_a_single_node_loses_one_of_two_log_dirs(tmp_path: Path, small_first: bool) -> None:
    good = tmp_path / "good"
    with mounted_tmpfs(tmp_path / "small", "4m") as small:
        dirs = f"{small},{good}" if small_first else f"{good},{small}"
        b = BrokerProcess(Path(dirs), overrides=["num.partitions=2", "offsets.topic.num.partitions=1"]).start()
        try:
            with RawConnection(b.port) as c:
                c.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t")],
                                              allow_auto_topic_creation=True))
                assert produce(c, "t", [0, 1], b"before") == {0: 0, 1: 0}
                placed = log_dirs(c)
                on_small = placed[str(small)][1]
                assert len(on_small) == 1, placed  # one partition in each dir
                (_, p_small), (_, p_good) = on_small.pop(), placed[str(good)][1].pop()
                fill(small / "filler")
                if small_first:
                    try:
                        produce(c, "t", [p_small], b"x" * 5000)
                    except (ConnectionError, EOFError, OSError):
                        pass  # halted before it answered
                else:
                    assert produce(c, "t", [p_small], b"x" * 5000) == {p_small: ErrorCode.KAFKA_STORAGE_ERROR}
                    assert produce(c, "t", [p_small], b"y") == {p_small: ErrorCode.KAFKA_STORAGE_ERROR}
                    assert produce(c, "t", [p_good], b"after") == {p_good: 0}  # the other dir serves on
                    after = log_dirs(c)
                    assert after[str(small)] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
                    assert after[str(good)] == (0, {("t", p_good)})
            if not small_first:  # the log reader thread may not have it yet
                b.wait_for_line(f"Log directory {small} is offline", timeout=5)
            loud = [line for line in b.lines if "level='error'" in line or "level='critical'" in line]
            if small_first:
                assert b.proc is not None and b.proc.wait(timeout=20) == 1, b.log_text()[-3000:]
                b.wait_for_line("Shutdown broker because the metadata log dir", timeout=5)
                loud = [line for line in b.lines if "level='error'" in line or "level='critical'" in line]
                assert len(loud) == 2 and f"metadata log dir {small} has failed" in loud[1], "\n".join(loud)
            else:
                assert b.proc is not None and b.proc.poll() is None
                assert len(loud) == 1 and f"Log directory {small} is offline" in loud[0], "\n".join(loud)
            assert "Traceback" not in b.log_text(), b.log_text()[-3000:]
        finally:
            b.kill()
