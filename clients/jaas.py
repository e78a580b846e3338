"""Kafka's `sasl.jaas.config` value: one JAAS login module entry, as Kafka's JaasConfig parses it.

    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a\\"b";

A login module class, a control flag (required, requisite, sufficient, optional), `name=value`
options (a value quoted with `"` or `'`, with backslash escapes, or a bare word) and a `;`.
`//` and `/* */` comments are skipped, as Java's StreamTokenizer does. A client's value must hold
exactly one entry (Kafka: "should be 1 module").

Pure: text in, JaasEntry out; errors are ValueError with what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JaasEntry", "parse_jaas"]

FLAGS = ("required", "requisite", "sufficient", "optional")
_WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str]


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) with kind word, quoted or a punctuation character."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("unterminated /* comment")
            i = end + 2
        elif ch in "\"'":
            i, value = _quoted(text, i)
            out.append(("quoted", value))
        elif ch in _WORD:
            start = i
            while i < len(text) and text[i] in _WORD:
                i += 1
            out.append(("word", text[start:i]))
        else:
            out.append((ch, ch))
            i += 1
    return out


def _quoted(text: str, start: int) -> tuple[int, str]:
    quote, i, chars = text[start], start + 1, []
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return i + 1, "".join(chars)
        if ch == "\\" and i + 1 < len(text):
            i += 1
            chars.append(_ESCAPES.get(text[i], text[i]))
        else:
            chars.append(ch)
        i += 1
    raise ValueError("unterminated quoted value")


def parse_jaas(text: str) -> JaasEntry:
    """The one login module entry of a client's sasl.jaas.config."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        if kind != "word":
            raise ValueError(f"expected a login module class name, found {module!r}")
        if pos + 1 >= len(tokens) or tokens[pos + 1][1].lower() not in FLAGS:
            raise ValueError(f"expected a control flag ({', '.join(FLAGS)}) after {module}")
        flag = tokens[pos + 1][1].lower()
        pos += 2
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            if pos + 2 >= len(tokens) or tokens[pos][0] != "word" or tokens[pos + 1][0] != "=" \
                    or tokens[pos + 2][0] not in ("word", "quoted"):
                raise ValueError(f"expected name=value options after {module} {flag}, found {tokens[pos][1]!r}")
            options[tokens[pos][1]] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise ValueError("the login module entry must end with ';'")
        pos += 1
        entries.append(JaasEntry(module, flag, options))
    if len(entries) != 1:
        raise ValueError(f"it holds {len(entries)} login modules, a client's should hold 1")
    return entries[0]
