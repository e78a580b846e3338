"""Java's `.properties` syntax, as `java.util.Properties.load` reads it: the format of Kafka's
server.properties and of every client config file (`--command-config`, `--producer.config`).

Why not a simpler `key=value` split: client files carry values a split gets wrong -- a
`sasl.jaas.config` continued over lines with `\\`, a password holding `\\` or `=`, a `\\uXXXX`
escape, an inline PEM whose lines end in `\\n\\`. The rules, as Properties.load:

* natural lines end at `\\n`, `\\r` or `\\r\\n`; a line whose first non-blank character is `#`
  or `!` is a comment, a blank line is skipped;
* a line ending in an odd number of backslashes continues on the next one, whose leading
  blanks are dropped;
* the key ends at the first unescaped `=`, `:` or blank; blanks, then one `=` or `:`, then
  blanks separate it from the value (so `key value`, `key=value` and `key : value` all work);
  trailing blanks belong to the value (Kafka's config parsing trims them);
* `\\t \\n \\r \\f \\uXXXX` are escapes; a backslash before any other character stands for that
  character (`\\=`, `\\:`, `\\\\`, `\\#`).

Pure: text in, dict out (later keys win, as in Java).
"""

from __future__ import annotations

__all__ = ["parse_properties"]

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_BLANKS)
            i += 1
        if _continues(line):  # a continuation at the end of the text continues into nothing
            line = line[:-1]
        out.append(line)
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        i += 1
        if ch != "\\" or i >= len(raw):
            if ch != "\\":
                out.append(ch)
            continue
        nxt = raw[i]
        i += 1
        if nxt == "u":
            digits = raw[i:i + 4]
            if len(digits) < 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"malformed \\uxxxx escape: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(nxt, nxt))
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of a logical line."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANKS:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:]
    return key, rest.lstrip(_BLANKS)


def parse_properties(text: str) -> dict[str, str]:
    """Every key and value of a properties text, unescaped (ValueError for a bad \\u escape)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props
