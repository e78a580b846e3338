"""Kafka's JAAS configuration syntax, as `sasl.jaas.config` takes it (Kafka's JaasConfig), for
the broker's listeners and for the CLI's client properties (clients/client_properties.py):

    <LoginModuleClass> <required|requisite|sufficient|optional> key="value" key2=value2 ... ;

Values are quoted with `"` or `'` (with backslash escapes) or bare words; `//` and `/* */`
comments are skipped, as Java's StreamTokenizer under JaasConfig does. A `sasl.jaas.config`
value holds exactly one login module entry, as Kafka requires. Error messages are Kafka's and
never repeat an option's value (a JAAS text holds passwords).

Pure: text in, JaasEntry out."""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
_WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasConfigError(ValueError):
    """The text is not a valid JAAS configuration entry."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: 'word', 'string' (a quoted value) or a punctuation character."""
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
                raise JaasConfigError("unterminated /* comment in JAAS config")
            i = end + 2
        elif ch in "\"'":
            i, value = _quoted(text, i)
            out.append(("string", value))
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
    raise JaasConfigError("unterminated quoted value in JAAS config")


def parse_jaas_config(text: str) -> JaasEntry:
    """The one login module entry of `text`; JaasConfigError saying what is wrong otherwise."""
    tokens = _tokens(text)
    if not tokens:
        raise JaasConfigError("JAAS config property does not contain any login modules")
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        if tokens[pos][0] != "word":
            raise JaasConfigError("Invalid JAAS config: expected a login module class name")
        module = tokens[pos][1]
        if pos + 1 >= len(tokens) or tokens[pos + 1][0] != "word":
            raise JaasConfigError(f"Login module control flag not specified in JAAS config for {module}")
        flag = tokens[pos + 1][1].lower()
        if flag not in FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{tokens[pos + 1][1]}' in JAAS config")
        pos += 2
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            if pos + 2 >= len(tokens) or tokens[pos][0] != "word" or tokens[pos + 1][0] != "=" \
                    or tokens[pos + 2][0] not in ("word", "string"):
                raise JaasConfigError("Invalid JAAS config: expected key=value options after the control flag")
            options[tokens[pos][1]] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        pos += 1
        entries.append(JaasEntry(module, flag, options))
    if len(entries) != 1:
        raise JaasConfigError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]
