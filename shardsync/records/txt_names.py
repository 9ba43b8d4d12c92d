"""external-dns's TXT name mapper (registry/mapper/mapper.go, v0.22): endpoint name + type <-> TXT name.

Split out of shardsync.records.registry so both stay readable. Besides the mapping itself it knows the DNS
limit external-dns enforces when it builds the TXT endpoint: a label longer than 63 characters makes
`endpoint.NewEndpoint` return nil, so no ownership TXT record is written for that RRset (`txt_name_fits`).
"""

from __future__ import annotations

from dataclasses import dataclass

from shardsync.records.endpoint import MAX_LABEL_LENGTH

RECORD_TYPE_TEMPLATE = "%{record_type}"
# The record types external-dns's name mapper recognises in a TXT name, in its order: the order decides
# which type wins when a templated affix is ambiguous, so it must not be sorted. DNAME came in v0.22.
TXT_NAME_RECORD_TYPES = ("A", "AAAA", "CNAME", "NS", "MX", "PTR", "SRV", "NAPTR", "TXT", "DNAME")


class RegistryConfigError(ValueError):
    """The registry's flags contradict each other (prefix and suffix both set, empty owner id)."""


@dataclass(frozen=True, slots=True)
class TxtNameMapper:
    """external-dns's affix name mapper: endpoint name + type <-> ownership TXT name.

    `<prefix><type>-<first label><suffix>.<rest>`; with `%{record_type}` in the prefix or suffix the type
    goes there instead of before the first label. A leading `*` label becomes `wildcard_replacement` when
    one is set (a `*` inside a name is not valid in most providers).
    """

    prefix: str = ""
    suffix: str = ""
    wildcard_replacement: str = ""

    def __post_init__(self) -> None:
        if self.prefix and self.suffix:
            raise RegistryConfigError("--txt-prefix and --txt-suffix are mutually exclusive")
        object.__setattr__(self, "prefix", self.prefix.lower())
        object.__setattr__(self, "suffix", self.suffix.lower())
        object.__setattr__(self, "wildcard_replacement", self.wildcard_replacement.lower())

    @property
    def templated(self) -> bool:
        return RECORD_TYPE_TEMPLATE in self.prefix or RECORD_TYPE_TEMPLATE in self.suffix

    def _split(self, dns_name: str) -> tuple[str, str]:
        host, _, rest = dns_name.lower().partition(".")
        if host == "*" and self.wildcard_replacement:
            host = self.wildcard_replacement
        return host, rest

    def txt_name(self, dns_name: str, record_type: str) -> str:
        """The typed ownership TXT name of an RRset (what external-dns v0.18+ writes)."""
        rtype = record_type.lower()
        host, rest = self._split(dns_name)
        prefix = self.prefix.replace(RECORD_TYPE_TEMPLATE, rtype)
        suffix = self.suffix.replace(RECORD_TYPE_TEMPLATE, rtype)
        if not self.templated:
            host = f"{rtype}-{host}"
        name = prefix + host + suffix
        return f"{name}.{rest}" if rest else name

    def legacy_txt_name(self, dns_name: str) -> str:
        """The untyped ownership TXT name external-dns wrote before v0.12 (read, upgraded, never written)."""
        host, rest = self._split(dns_name)
        prefix = self.prefix.replace(RECORD_TYPE_TEMPLATE, "")
        suffix = self.suffix.replace(RECORD_TYPE_TEMPLATE, "")
        name = prefix + host + suffix
        return f"{name}.{rest}" if rest else name

    def endpoint_name(self, txt_name: str) -> tuple[str, str]:
        """(endpoint name, record type) an ownership TXT name stands for; type "" for a legacy name.

        The endpoint name keeps the wildcard replacement (it is matched against replaced names) and is ""
        when the TXT name does not carry our affix.
        """
        name = txt_name.lower()
        if not self.suffix:
            return self._drop_affix(name)
        dots = self.suffix.count(".")
        parts = name.split(".", 1 + dots)
        if len(parts) <= dots:
            return "", ""
        base, rtype = self._drop_affix(".".join(parts[: 1 + dots]))
        if len(parts) <= 1 + dots:
            return base, rtype
        return f"{base}.{parts[1 + dots]}", rtype

    def _drop_affix(self, name: str) -> tuple[str, str]:
        prefix, suffix = self.prefix, self.suffix
        if self.templated:
            for rtype in TXT_NAME_RECORD_TYPES:
                lower = rtype.lower()
                typed_prefix = prefix.replace(RECORD_TYPE_TEMPLATE, lower)
                typed_suffix = suffix.replace(RECORD_TYPE_TEMPLATE, lower)
                if not suffix and name.startswith(typed_prefix):
                    return name[len(typed_prefix) :], rtype
                if suffix and name.endswith(typed_suffix):
                    return name[: len(name) - len(typed_suffix)], rtype
            prefix = prefix.replace(RECORD_TYPE_TEMPLATE, "")
            suffix = suffix.replace(RECORD_TYPE_TEMPLATE, "")
        if not self.suffix and name.startswith(prefix):
            return _type_from_default_position(name[len(prefix) :])
        if self.suffix and name.endswith(suffix):
            return _type_from_default_position(name[: len(name) - len(suffix)])
        return "", ""


def _type_from_default_position(name: str) -> tuple[str, str]:
    first = name.split("-", 1)[0]
    for rtype in TXT_NAME_RECORD_TYPES:
        if first == rtype.lower():
            return name.removeprefix(first + "-"), rtype
    return name, ""


def txt_name_fits(txt_name: str) -> bool:
    """Whether external-dns would build a TXT endpoint under `txt_name`: no label over 63 characters.

    (`cname-` + a 63-character first label does not fit; external-dns then writes no TXT record.)
    """
    return all(len(label) <= MAX_LABEL_LENGTH for label in txt_name.split("."))
