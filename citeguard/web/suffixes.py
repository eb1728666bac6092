"""The public-suffix list, as two sets of strings: where a host's registrable domain begins.

The list is tldextract's bundled snapshot (``.tld_set_snapshot``, private suffixes included),
read from the installed package without importing it: nothing is downloaded at run time. The
match is tldextract's (its ``suffix_index``: labels from the right while a rule continues them,
the longest rule wins, ``*`` wildcards and ``!`` exceptions, ``xn--`` labels compared decoded),
kept as sets rather than tldextract's trie: the trie is ~18,600 Python objects that every full
pass of the garbage collector walks (~4 ms each on a 2-core machine, on whatever thread
triggers it, the event loop's included), and importing tldextract brings ``requests`` (~13,000
more). Two sets of strings are two objects to the collector. ``tests/web/test_suffixes.py``
checks the two agree on every rule of the list and on hosts around them.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import idna

__all__ = ["SuffixList", "suffix_list"]

_SNAPSHOT = ".tld_set_snapshot"
# tldextract's reading of a rule line (suffix_list.PUBLIC_SUFFIX_RE)
_RULE = re.compile(r"^(?P<suffix>[.*!]*\w[\S]*)", re.UNICODE | re.MULTILINE)


class SuffixList:
    """The rules of the public-suffix list.

    ``rules``: every rule as written (``co.uk``, ``*.ck``, ``!www.ck``); ``nodes``: every
    dot-suffix of a rule (``uk``, ``co.uk``, ``ck``, ``*.ck``, ``!www.ck``), the paths of
    tldextract's trie.
    """

    __slots__ = ("nodes", "rules")

    def __init__(self, rules: frozenset[str]) -> None:
        self.rules = rules
        nodes: set[str] = set()
        for rule in rules:
            labels = rule.split(".")
            for i in range(len(labels)):
                nodes.add(".".join(labels[i:]))
        self.nodes = frozenset(nodes)

    @classmethod
    def parse(cls, text: str) -> SuffixList:
        """The rules of a public-suffix list file (comments and blank lines skipped)."""
        return cls(frozenset(m.group("suffix") for m in _RULE.finditer(text)))

    def suffix_start(self, labels: list[str]) -> int | None:
        """The index in ``labels`` where the public suffix begins (``len(labels)``: never;
        ``None``: no rule matches the last label)."""
        nodes, rules = self.nodes, self.rules
        n = len(labels)
        suffix_idx = at = n
        path = ""
        for label in reversed(labels):
            decoded = _decode_punycode(label)
            cand = f"{decoded}.{path}" if path else decoded
            if cand in nodes:
                at -= 1
                path = cand
                if cand in rules:
                    suffix_idx = at
                continue
            if (f"*.{path}" if path else "*") in nodes:
                exception = f"!{decoded}.{path}" if path else f"!{decoded}"
                return at if exception in nodes else at - 1
            break
        return None if suffix_idx == n else suffix_idx

    def registrable(self, host: str) -> str:
        """The registrable domain (eTLD+1) of a lowercase ASCII host name, ``""`` when it has
        none (no rule matches, or the host is itself a public suffix)."""
        labels = host.split(".")
        start = self.suffix_start(labels)
        if not start:  # None, or 0: the whole host is a suffix
            return ""
        return ".".join(labels[start - 1 :])


def _decode_punycode(label: str) -> str:
    # as tldextract: an xn-- label is compared in its Unicode form, when it decodes
    lowered = label.lower()
    if lowered.startswith("xn--"):
        try:
            decoded: str = idna.decode(lowered)
        except (UnicodeError, IndexError):
            return lowered
        return decoded
    return lowered


def _snapshot_path() -> Path | None:
    spec = importlib.util.find_spec("tldextract")  # finds the package; does not import it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / _SNAPSHOT
    return path if path.is_file() else None


@functools.cache
def suffix_list() -> SuffixList:
    """The bundled list, read once (~15 ms; :meth:`citeguard.Guard.warm_up` reads it in a
    thread)."""
    path = _snapshot_path()
    if path is not None:
        return SuffixList.parse(path.read_text(encoding="utf-8"))
    # a tldextract that keeps its snapshot elsewhere: its own reading of it (the same rules)
    import tldextract

    extractor = tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )
    tlds = extractor._get_tld_extractor()
    return SuffixList(frozenset([*tlds.public_tlds, *tlds.private_tlds]))
