"""Differential runner: the corpus's requests, byte for byte the same, to Odradek and to a
reference Apache Kafka 3.9 broker; both answers decoded with our codecs and compared field by
field after the few normalisations listed in `normalise` (each says why the field may differ).

Corpus (`corpus/*.jsonl`, run in file-name order, one case per line, all on one broker in one
pass so later cases see the state earlier ones made):

    {"id": "produce-bad-crc", "api": 0, "v": 9, "body": {...}, "why": "..."}

* `body`: the request's fields by their generated names (`protocol/messages`), nested structs as
  objects, `bytes` fields as text (UTF-8) or {"hex": "..."}, `records` fields as a list of batch
  specs (see `build_records`) or {"hex": "..."}. A string "$name" anywhere is the value saved
  earlier under `name` *on the same broker* (member ids, producer ids are the broker's own).
* `raw`: hex of a whole frame after the size prefix (header + body), for malformed requests;
  `size` overrides the size prefix. `header_only`: send the request header and no body (a version
  the codec has no layout for). With `raw`/`header_only`, `api`/`v` only say how to decode an
  answer, if any.
* `save`: {"name": "dotted.path"} stores a value of the (raw) decoded answer for later cases.
* `conn`: connection name (default "main"); a closed connection is reopened for the next case.
* `defer`: send and do not wait; a later {"recv": "<id>"} line reads that answer (for requests a
  broker parks, e.g. a JoinGroup waiting for the rest of the group).
* `until` {"path": ..., "equals": ...} (or a list of them): repeat the request (every
  POLL_INTERVAL, at most `tries` times and READ_TIMEOUT seconds) until the answer has that value: awaiting a state change of the broker
  (a group entering PreparingRebalance, Kafka's producer-id manager ready) instead of sleeping.

The outcome of a case is "response" (with the decoded, normalised body), "closed" (the broker
dropped the connection, Kafka's answer to a request it cannot parse), or "no-response".
"""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.framing import decode_response, encode_request_frame, request_header_version
from protocol.messages import REQUESTS, RequestHeader
from protocol.primitives import ZERO_UUID, Message
from protocol.records import Record, build_batch, compute_crc

HERE = Path(__file__).resolve().parent
CORPUS_DIR = HERE / "corpus"
ALLOWLIST = HERE / "allowlist.json"
BEHAVIOUR = "<behaviour>"  # the allow-list's field name for closed-vs-answered differences
BASE_TIMESTAMP = 1_700_000_000_000  # fixed so timestamps in answers are the corpus's own
CLIENT_ID = "differential"
READ_TIMEOUT = 15.0  # longer than any broker-side wait the corpus asks for
MAX_TRIES = 1000
POLL_INTERVAL = 0.02


@dataclass
class Case:
    id: str
    line: dict[str, Any]
    source: str


@dataclass
class Outcome:
    kind: str  # "response" | "closed" | "no-response" | "no-answer" (waited `timeout` s)
    body: Any = None  # normalised plain data of the answer
    raw: Any = None  # the answer before normalisation (for `save` and reports)


def load_corpus(corpus_dir: Path = CORPUS_DIR) -> list[Case]:
    cases: list[Case] = []
    seen: set[str] = set()
    for path in sorted(corpus_dir.glob("*.jsonl")):
        for n, text in enumerate(path.read_text().splitlines(), 1):
            if not text.strip() or text.lstrip().startswith("//"):
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path.name}:{n}: {e}") from e
            cid = line.get("id") or f"recv:{line['recv']}"
            if cid in seen:
                raise ValueError(f"{path.name}:{n}: duplicate case id {cid!r}")
            seen.add(cid)
            cases.append(Case(cid, line, f"{path.name}:{n}"))
    return cases


# ------------------------------------------------------------------------------------------
# building requests from data


def substitute(v: Any, env: dict[str, Any]) -> Any:
    if isinstance(v, str) and v.startswith("$") and len(v) > 1:
        if v[1:] not in env:
            raise KeyError(f"variable {v} not saved by an earlier case")
        return env[v[1:]]
    if isinstance(v, list):
        return [substitute(x, env) for x in v]
    if isinstance(v, dict):
        return {k: substitute(x, env) for k, x in v.items()}
    return v


def to_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, dict):
        if "hex" in v:
            return bytes.fromhex(v["hex"])
        if "repeat" in v:  # {"repeat": "x", "times": 2000}: a large value without a large corpus
            return (v["repeat"] * v["times"]).encode()
    return str(v).encode()


def build_records(spec: Any) -> bytes | None:
    """A `records` field: null, {"hex": ...}, or a list of batches, each
    {"records": [{"key", "value", "headers", "ts"}], "base_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "compression", "timestamp_type", plus damage:
    "bad_crc": true (CRC off by one), "magic": n (byte 16 rewritten, CRC left as computed),
    "truncate": n (last n bytes cut)}."""
    if spec is None or isinstance(spec, dict):
        return to_bytes(spec)
    out = bytearray()
    for b in spec:
        recs = [
            Record(0, r.get("ts", 0), i, to_bytes(r.get("key")), to_bytes(r.get("value")),
                   [(k, to_bytes(hv)) for k, hv in r.get("headers", [])])
            for i, r in enumerate(b.get("records", []))
        ]
        batch = bytearray(build_batch(
            recs, base_timestamp=b.get("base_timestamp", BASE_TIMESTAMP),
            producer_id=b.get("producer_id", -1), producer_epoch=b.get("producer_epoch", -1),
            base_sequence=b.get("base_sequence", -1), compression=b.get("compression", 0),
            timestamp_type=b.get("timestamp_type", 0),
            is_transactional=b.get("transactional", False)))
        if "magic" in b:
            batch[16] = b["magic"]
        if b.get("bad_crc"):
            struct.pack_into(">I", batch, 17, (compute_crc(batch) + 1) & 0xFFFFFFFF)
        if "truncate" in b:
            del batch[len(batch) - b["truncate"]:]
        out += batch
    return bytes(out)


def build_message(cls: type[Message], data: dict[str, Any]) -> Message:
    fields = {f.name: f for f in cls.FIELDS}
    kwargs: dict[str, Any] = {}
    for name, v in data.items():
        if name not in fields:
            raise KeyError(f"{cls.__name__} has no field {name!r} (fields: {sorted(fields)})")
        f = fields[name]
        if f.struct is not None:
            if v is None:
                kwargs[name] = None
            elif f.type.startswith("[]"):
                kwargs[name] = [build_message(f.struct, x) for x in v]
            else:
                kwargs[name] = build_message(f.struct, v)
        elif f.type == "records":
            kwargs[name] = build_records(v)
        elif f.type == "bytes":
            kwargs[name] = to_bytes(v)
        elif f.type == "uuid":
            kwargs[name] = ZERO_UUID if v is None else uuid.UUID(v)
        else:
            kwargs[name] = v
    return cls(**kwargs)


def request_frame(line: dict[str, Any], corr: int, env: dict[str, Any]) -> bytes:
    """The exact bytes of a case, size prefix included."""
    if "raw" in line:
        data = bytes.fromhex(substitute(line["raw"], env).replace(" ", ""))
        return struct.pack(">i", line.get("size", len(data))) + data
    api, v = line["api"], line["v"]
    if line.get("header_only"):
        header = RequestHeader(request_api_key=api, request_api_version=v, correlation_id=corr,
                               client_id=CLIENT_ID)
        data = header.encode(1)
        return struct.pack(">i", len(data)) + data
    body = build_message(REQUESTS[api], substitute(line.get("body", {}), env))
    return encode_request_frame(api, v, corr, CLIENT_ID, body)


# ------------------------------------------------------------------------------------------
# normalisation: only what legitimately differs between two correct brokers


def normalise(v: Any, env_values: dict[Any, str], key: str = "") -> Any:
    """Plain data with the broker-specific values replaced by placeholders.

    - cluster_id: each cluster draws its own random id at format time.
    - topic_id: random per topic (KIP-516); only zero vs non-zero is compared.
    - port: each broker listens on its own free port (hosts are both 127.0.0.1 and compared).
    - log_dir (DescribeLogDirs): each broker's own temporary directory.
    - session_id (Fetch): random per fetch session; only zero vs non-zero is compared.
    - member ids, leader ids and producer ids the broker generated: replaced by the name the
      corpus saved them under (`save`), so that each must still be the same *reference* on both
      brokers (the leader must be the member that joined first...), while the random part of
      `clientId-UUID` and the producer-id block each broker allocates are not compared.
    - error_message: free text for people; clients log it and none parses it or branches on
      whether it is null (Kafka itself leaves it null on most produce errors).
    - log_append_time_ms other than -1: the broker's clock at the append (LogAppendTime
      topics); -1 (CreateTime) is compared.
    - transaction_start_time_ms other than -1 and 0 (DescribeTransactions): the coordinator's
      clock when the transaction began; -1 (no transaction yet) and 0 (an error's answer) are
      compared.
    - documentation (DescribeConfigs, KIP-569): prose for people, like error_message; only
      null vs text is compared.
    - SCRAM salts need nothing: AlterUserScramCredentials' salt and salted password are the
      corpus's own bytes (the random salt is the client's, not the broker's), and no answer
      carries a salt or key (DescribeUserScramCredentials answers mechanisms and iterations).
    Nothing else is touched: error codes, offsets, timestamps, record bytes and every other
    field are compared as they are."""
    if isinstance(v, dict):
        return {k: normalise(x, env_values, k) for k, x in v.items()}
    if isinstance(v, list):
        return [normalise(x, env_values, key) for x in v]
    if isinstance(v, bytes):
        return {"hex": v.hex()} if v else ""
    if isinstance(v, uuid.UUID):
        return "<topic-id>" if v != ZERO_UUID else "<zero-uuid>"
    if key == "cluster_id" and v is not None:
        return "<cluster-id>"
    if key == "port":
        return "<port>"
    if key == "log_dir":
        return "<log-dir>"
    if key == "session_id" and v:
        return "<session-id>"
    if key == "error_message":
        return "<message>"
    if key == "documentation" and v is not None:
        return "<documentation>"
    if (key == "log_append_time_ms" and v != -1) or (key == "transaction_start_time_ms" and v not in (-1, 0)):
        return "<broker-clock>"
    if key in GENERATED_ID_FIELDS and isinstance(v, str | int) and not isinstance(v, bool):
        name = env_values.get((key, v))
        if name is not None:
            return "$" + name
    return v


GENERATED_ID_FIELDS = frozenset({"member_id", "leader", "producer_id", "group_instance_id"})


def get_path(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


# member_id: a group's members are a hash map in Kafka, answered in no fixed order
LIST_KEYS = ("name", "partition_index", "partition", "topic", "api_key", "key", "group_id", "resource_name", "index",
             "member_id")


def _keyed(items: list[Any]) -> tuple[str, dict[Any, Any]] | None:
    """A list of dicts with a unique identifying field, as that field -> dict."""
    if not items or not all(isinstance(x, dict) for x in items):
        return None
    for k in LIST_KEYS:
        if all(k in x for x in items):
            keys = [x[k] for x in items]
            if len(set(map(repr, keys))) == len(keys):
                return k, {x[k]: x for x in items}
    return None


def _reached(raw: Any, until: dict[str, Any] | list[dict[str, Any]]) -> bool:
    conds = until if isinstance(until, list) else [until]
    try:
        return all(get_path(raw, c["path"]) == c["equals"] for c in conds)
    except (KeyError, IndexError):  # e.g. a partition not there yet
        return False


def diff(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, odradek value, kafka value) of every leaf that differs.

    Lists of entries with an identifying field (topics by name, partitions by index, configs by
    name, API keys by key, group members by member id...) are compared entry by entry as `path[key]`: their order is not
    part of the protocol (KRaft answers Metadata partitions and DeleteTopics results in hash
    order), and an entry only one broker has is reported as `<absent>` on the other. Other
    lists are compared element by element, or as a whole when their lengths differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            yield from diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}" if path else k)
    elif isinstance(a, list) and isinstance(b, list):
        ka, kb = _keyed(a), _keyed(b)
        if ka and kb and ka[0] == kb[0]:
            da, db = ka[1], kb[1]
            for k in list(da) + [k for k in db if k not in da]:
                yield from diff(da.get(k, "<absent>"), db.get(k, "<absent>"), f"{path}[{k}]")
        elif len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                yield from diff(x, y, f"{path}.{i}" if path else str(i))
        else:
            yield path, a, b
    elif a != b:
        yield path, a, b


def compare(o: Outcome, k: Outcome) -> list[tuple[str, Any, Any]]:
    if o.kind != k.kind:
        return [(BEHAVIOUR, o.kind, k.kind)]
    if o.kind != "response":
        return []
    return list(diff(o.body, k.body))


# ------------------------------------------------------------------------------------------
# running a corpus against one broker


class _Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT)
        self.corr = 0
        self.closed = False

    def read_frame(self) -> bytes | None:
        """The next frame, or None once the broker has closed the connection."""
        try:
            head = self._read(4)
            if head is None:
                return None
            return self._read(struct.unpack(">i", head)[0])
        except (ConnectionResetError, BrokenPipeError):
            return None

    def _read(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)


@dataclass
class BrokerRun:
    """One pass of the corpus over one broker, with that broker's saved values."""

    port: int
    env: dict[str, Any] = field(default_factory=dict)
    env_values: dict[Any, str] = field(default_factory=dict)  # (field, value) -> saved name
    conns: dict[str, _Conn] = field(default_factory=dict)
    deferred: dict[str, tuple[_Conn, dict[str, Any]]] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def conn(self, name: str) -> _Conn:
        c = self.conns.get(name)
        if c is None or c.closed:
            c = self.conns[name] = _Conn(self.port)
        return c

    def close(self) -> None:
        for c in self.conns.values():
            c.sock.close()

    def run(self, cases: list[Case]) -> dict[str, Outcome]:
        for case in cases:
            try:
                self.step(case)
            except Exception as e:
                raise RuntimeError(f"case {case.id} ({case.source}) on port {self.port}: {e}") from e
        return self.outcomes

    def step(self, case: Case) -> None:
        line = case.line
        if "recv" in line:
            conn, dline = self.deferred.pop(line["recv"])
            self.outcomes[line["recv"]] = self.receive(conn, dline)
            return
        conn = self.conn(line.get("conn", "main"))
        until = line.get("until")
        deadline = time.monotonic() + READ_TIMEOUT
        for _ in range(line.get("tries", MAX_TRIES) if until else 1):
            conn.corr += 1
            conn.sock.sendall(request_frame(line, conn.corr, self.env))
            if line.get("defer"):
                self.deferred[case.id] = (conn, line)
                return
            outcome = self.receive(conn, line)
            if not until or outcome.kind != "response":
                break
            if _reached(outcome.raw, until) or time.monotonic() > deadline:
                break
            time.sleep(POLL_INTERVAL)  # a poll of the broker's state, bounded by tries and time
        if until and outcome.kind == "response" and not _reached(outcome.raw, until):
            raise TimeoutError(f"never reached {until}: {outcome.raw}")
        self.outcomes[case.id] = outcome

    def receive(self, conn: _Conn, line: dict[str, Any]) -> Outcome:
        if line.get("no_response"):  # acks=0: nothing comes back; prove the connection lives
            return Outcome("no-response")
        conn.sock.settimeout(line.get("timeout", READ_TIMEOUT))
        try:
            frame = conn.read_frame()
        except TimeoutError:
            if "timeout" not in line:
                raise TimeoutError(f"no answer within {READ_TIMEOUT}s") from None
            # a case that expects a broker may never answer (a request Kafka's handler dies
            # on): recorded as such, and the connection, muted for good, is dropped
            conn.closed = True
            conn.sock.close()
            return Outcome("no-answer")
        if frame is None:
            conn.closed = True
            conn.sock.close()
            return Outcome("closed")
        api, v = line["api"], line["v"]
        if line.get("answer_v") is not None:  # ApiVersions answers an unknown version as v0
            v = line["answer_v"]
        corr, body = decode_response(frame, api, v)
        raw = body.to_dict()
        raw["<correlation_id>"] = corr - conn.corr  # 0: the answer belongs to this request
        for name, path in line.get("save", {}).items():
            value = get_path(raw, path)
            self.env[name] = value
            if value in ("", -1, None):  # an error answer: nothing generated to normalise
                continue
            self.env_values[(path.rsplit(".", 1)[-1], value)] = name
            for f in GENERATED_ID_FIELDS:  # the same id appears under other names (leader...)
                self.env_values.setdefault((f, value), name)
        return Outcome("response", None, raw)

    def finish(self) -> dict[str, Outcome]:
        """Normalise with every saved value known (an id can appear before it is saved)."""
        for o in self.outcomes.values():
            if o.kind == "response":
                o.body = normalise(o.raw, self.env_values)
        return self.outcomes


def run_corpus(port: int, cases: list[Case]) -> dict[str, Outcome]:
    run = BrokerRun(port)
    try:
        run.run(cases)
        if run.deferred:
            raise RuntimeError(f"deferred cases never received: {sorted(run.deferred)}")
    finally:
        run.close()
    return run.finish()


def load_allowlist(path: Path = ALLOWLIST) -> dict[tuple[str, str], str]:
    entries = json.loads(path.read_text())
    out: dict[tuple[str, str], str] = {}
    for e in entries:
        key = (e["case"], e["field"])
        if key in out:
            raise ValueError(f"allow-list names {key} twice")
        if not e.get("reason", "").strip():
            raise ValueError(f"allow-list entry {key} has no reason")
        out[key] = e["reason"]
    return out


def header_bytes(api: int, v: int, corr: int = 1) -> bytes:
    """Helper for writing raw cases: the request header a client would send."""
    h = RequestHeader(request_api_key=api, request_api_version=v, correlation_id=corr,
                      client_id=CLIENT_ID)
    return h.encode(request_header_version(api, v))


def elapsed(t0: float) -> float:
    return round(time.monotonic() - t0, 2)
