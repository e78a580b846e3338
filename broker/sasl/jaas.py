"""Kafka's JAAS configuration syntax, as `sasl.jaas.config` takes it (Kafka's JaasConfig):

    <LoginModuleClass> <required|requisite|sufficient|optional> key="value" key2=value2 ... ;

Values are double-quoted (with backslash escapes) or bare words. Only the first login module
is used, as Kafka requires exactly one for `sasl.jaas.config`."""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasConfigError(ValueError):
    """The text is not a valid JAAS configuration entry."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: 'word', 'string', '=' and ';'."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, c))
            i += 1
        elif c == '"':
            i += 1
            buf: list[str] = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(text[i])
                i += 1
            if i >= n:
                raise JaasConfigError("unterminated quoted value in JAAS config")
            i += 1
            out.append(("string", "".join(buf)))
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '=;"':
                j += 1
            out.append(("word", text[i:j]))
            i = j
    return out


def parse_jaas_config(text: str) -> JaasEntry:
    """The login module entry of `text`; JaasConfigError naming what is wrong otherwise."""
    toks = _tokens(text)
    if len(toks) < 3 or toks[0][0] != "word" or toks[1][0] != "word":
        raise JaasConfigError("JAAS config entry not terminated by semi-colon" if toks else
                              "JAAS config property does not contain a login module")
    module, flag = toks[0][1], toks[1][1].lower()
    if flag not in FLAGS:
        raise JaasConfigError(f"Invalid login module control flag '{toks[1][1]}' in JAAS config")
    options: dict[str, str] = {}
    i = 2
    while i < len(toks) and toks[i][0] != ";":
        if i + 2 >= len(toks) or toks[i][0] != "word" or toks[i + 1][0] != "=" or toks[i + 2][0] not in ("word", "string"):
            raise JaasConfigError("Invalid JAAS config: expected key=value options after the control flag")
        options[toks[i][1]] = toks[i + 2][1]
        i += 3
    if i >= len(toks):
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    if i + 1 != len(toks):
        raise JaasConfigError("JAAS config property contains 2 login modules, should be 1 module")
    return JaasEntry(module, flag, options)
