"""Who is on the other end of a connection: Kafka's principal, `User:<name>`.

A PLAINTEXT connection, and an SSL one without a client certificate, is `User:ANONYMOUS`
(Kafka's KafkaPrincipal.ANONYMOUS). An SSL connection with a verified client certificate is
`User:` + the certificate's subject mapped by `ssl.principal.mapping.rules` (Kafka's
SslPrincipalMapper, whose rule grammar and replacement semantics are followed here). The
subject is formatted as Java's `X500Principal.getName()` does (RFC 2253: the last RDN first,
keywords CN, C, L, ST, O, OU, STREET, DC, UID, other attributes as `OID=#<hex DER>`), because the
rules operators write were written against that string.

Who may call: anyone; pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["ANONYMOUS", "NoMatchingRuleError", "SslPrincipalMapper", "distinguished_name", "principal_of_certificate"]

ANONYMOUS = "User:ANONYMOUS"

_KEYWORDS = {
    NameOID.COMMON_NAME: "CN", NameOID.COUNTRY_NAME: "C", NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST", NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC", NameOID.USER_ID: "UID",
}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(attr: x509.NameAttribute) -> str:
    """`#` + the attribute value's DER (tag, length, bytes), as Java writes unknown attributes."""
    tag = getattr(attr, "_type", None)
    tag_number = getattr(tag, "value", 12)  # UTF8String unless told
    value = attr.value if isinstance(attr.value, str) else attr.value.decode("latin-1")
    body = value.encode("utf-16-be") if tag_number == 30 else value.encode("utf-8")
    n = len(body)
    length = bytes([n]) if n < 128 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    return "#" + (bytes([tag_number]) + length + body).hex()


def distinguished_name(name: x509.Name) -> str:
    """`name` as Java's X500Principal.getName() (RFC 2253) writes it."""
    rdns = []
    for rdn in reversed(list(name.rdns)):
        parts = []
        for attr in rdn:
            keyword = _KEYWORDS.get(attr.oid)
            if keyword is not None:
                parts.append(f"{keyword}={_escape(str(attr.value))}")
            else:
                parts.append(f"{attr.oid.dotted_string}={_der_hex(attr)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


class NoMatchingRuleError(ValueError):
    """No rule of ssl.principal.mapping.rules applies to a subject (Kafka's NoMatchingRule)."""


_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m), dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _java_replacement(replacement: str, m: re.Match[str]) -> str:
    """Java's Matcher replacement: `\\x` is a literal x, `$n` a group; a reference to a group
    that does not exist stays literal (Kafka's escapeLiteralBackReferences)."""
    groups = m.re.groups
    out: list[str] = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
            continue
        if ch == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 1
            number = int(replacement[j])
            j += 1
            while j < len(replacement) and replacement[j].isdigit() and number * 10 + int(replacement[j]) <= groups:
                number = number * 10 + int(replacement[j])
                j += 1
            if number <= groups:
                out.append(m.group(number) or "")
                i = j
                continue
        out.append(ch)
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: the first rule that applies to a subject names the principal."""

    def __init__(self, rules: str | None) -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text.strip()):
            rule = m.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ValueError(f"Invalid rule: {rule}")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as e:
                    raise ValueError(f"Invalid rule: {rule}: {e}") from None
                self.rules.append(_Rule(pattern, parsed.group(4), parsed.group(6)))
            if m.end() == len(text.strip()):
                break

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRuleError(f"No rules apply to {dn}")


def principal_of_certificate(der: bytes, mapper: SslPrincipalMapper) -> str:
    """`User:<mapped subject>` of a peer certificate in DER form."""
    cert = x509.load_der_x509_certificate(der)
    return "User:" + mapper.name(distinguished_name(cert.subject))
