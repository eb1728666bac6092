"""Writing the repairs into the answer: structured items, and the text (links, anchors, bare
URLs, reference list markers and entries)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any
from urllib.parse import urlsplit

from citeguard.models import (
    Answer,
    Citation,
    Claim,
)
from citeguard.repair.records import (
    _REF_KINDS,
    _Decision,
    _Fate,
    _norm,
    _short,
)


def _apply(
    answer: Answer, items: list[dict[str, Any]] | None, decisions: Sequence[_Decision]
) -> tuple[str, list[dict[str, Any]] | None] | None:
    """The answer with ``decisions`` applied: (text, None) for text answers, ("", items) for
    structured ones; ``None`` when an edit cannot be made in place."""
    if items is not None:
        new_items = _apply_structured(answer, items, decisions)
        return None if new_items is None else ("", new_items)
    text = _apply_text(answer, decisions)
    return None if text is None else (text, None)


def _fates(decisions: Sequence[_Decision]) -> tuple[dict[int, _Fate], set[int], dict[int, str]]:
    fates: dict[int, _Fate] = {}
    dropped: set[int] = set()
    quotes: dict[int, str] = {}
    for d in decisions:
        f = d.failure
        if d.kind == "swap" and d.target is not None:
            for i in f.citations:
                fates[i] = _Fate("to", d.target.url, d.target.raw, d.target.title)
        elif d.kind in ("dedup", "drop_url"):
            for i in f.citations:
                fates[i] = _Fate("remove")
        elif d.kind == "drop_claim" and f.claim is not None:
            dropped.add(f.claim.index)
        elif d.kind == "correct_quote" and f.claim is not None and d.quote is not None:
            quotes[f.claim.index] = d.quote
    return fates, dropped, quotes


def _apply_structured(
    answer: Answer, items: list[dict[str, Any]], decisions: Sequence[_Decision]
) -> list[dict[str, Any]] | None:
    fates, dropped, quotes = _fates(decisions)
    old_quotes = {d.failure.claim.index: d.failure.quote for d in decisions if d.failure.claim}
    # claim index → item index, as the parser counts them (items with claim text)
    owners: dict[int, int] = {}
    for pos, entry in enumerate(items):
        if isinstance(entry, Mapping):
            raw = entry.get("claim")
            if isinstance(raw, str) and raw.strip():
                owners[len(owners)] = pos
    out: list[dict[str, Any]] = [dict(i) if isinstance(i, Mapping) else i for i in items]
    gone: set[int] = set()
    for claim in answer.claims:
        n = owners.get(claim.index)
        if n is None:
            continue
        if claim.index in dropped:
            gone.add(n)
            continue
        item = out[n]
        raw_urls = item.get("url")
        urls = [raw_urls] if isinstance(raw_urls, str) else list(raw_urls or [])
        new_urls: list[str] = []
        for ci in claim.citation_indices:
            c = answer.citations[ci]
            fate = fates.get(ci, _Fate())
            url = c.url if fate.kind == "keep" else fate.raw if fate.kind == "to" else None
            if url is not None and _norm(url) not in {_norm(u) for u in new_urls}:
                new_urls.append(url)
        if [_norm(u) for u in new_urls] != [_norm(u) for u in urls if isinstance(u, str)]:
            if not new_urls:
                return None
            item["url"] = (
                new_urls[0] if isinstance(raw_urls, str) and len(new_urls) == 1 else new_urls
            )
        if claim.index in quotes:
            old = old_quotes.get(claim.index)
            new = quotes[claim.index]
            if isinstance(item.get("quote"), str) and item["quote"].strip():
                item["quote"] = new
            if old and isinstance(item.get("claim"), str) and old in item["claim"]:
                item["claim"] = item["claim"].replace(old, new, 1)
    return [i for pos, i in enumerate(out) if pos not in gone]


# reference list lines: "[1] url", "- [1]: url", "[^1]: url", "[id]: url", "1. Title — url"
_DEF_BRACKET = re.compile(r"[ \t]*(?:[-*+•][ \t]+)?\[(?P<l>[^\[\]\n]{1,200})\][.:)]?[ \t]*")
_DEF_NUMBER = re.compile(r"[ \t]*(?P<l>\d{1,3})[.)][ \t]+")
_EMPTY_ITEM = re.compile(r"[ \t]*(?:[-*+•]|\d{1,3}[.)])?[ \t]*")


def _key(label: str) -> str:
    return " ".join(label.split()).lower()


@dataclass
class _DefLine:
    start: int  # of the line
    end: int  # of the line, without its newline
    label: tuple[int, int]  # the label inside the line
    prefix: int  # where the entry's text begins (after the label's brackets)


def _def_line(text: str, label: str, url: str, claims: Sequence[Claim]) -> _DefLine | None:
    """The reference list line that defines ``label`` as ``url``."""
    pos = 0
    while pos <= len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        line = text[pos:end]
        inside = any(c.start <= pos < c.end for c in claims)
        if url in line and not inside:
            for pattern in (_DEF_BRACKET, _DEF_NUMBER):
                m = pattern.match(line)
                if m is not None and _key(m.group("l")) == label:
                    return _DefLine(pos, end, (pos + m.start("l"), pos + m.end("l")), pos + m.end())
        if nl < 0:
            break
        pos = nl + 1
    return None


def _title_of(entry: str, url: str) -> str:
    rest = entry.replace(url, " ")
    return rest.strip(" \t—–-:|()[]<>").strip()


def _clean_title(title: str) -> str:
    title = re.sub(r"[\[\]()<>\n]", " ", title)
    return _short(title, 120)


def _define(text: str, d: _DefLine, label: str, old_url: str, new_url: str, title: str) -> str:
    """``d``'s line with ``label``, ``new_url`` for ``old_url`` and ``title`` for its title."""
    head = text[d.start : d.label[0]] + label + text[d.label[1] : d.prefix]
    entry = text[d.prefix : d.end]
    old_title = _title_of(entry, old_url)
    entry = entry.replace(old_url, new_url, 1)
    if old_title:
        new_title = _clean_title(title) or (urlsplit(new_url).hostname or new_url)
        entry = entry.replace(old_title, new_title, 1)
    return head + entry


def _style(label: str) -> str:
    return "footnote" if label.startswith("^") else "number" if label.isdigit() else "name"


def _new_label(style: str, taken: set[str], like: str) -> str:
    if style == "number":
        n = max((int(t) for t in taken if t.isdigit()), default=0) + 1
        return str(n)
    if style == "footnote":
        nums = [int(t[1:]) for t in taken if t.startswith("^") and t[1:].isdigit()]
        return f"^{max(nums, default=0) + 1}"
    k = 2
    while f"{like}-{k}" in taken:
        k += 1
    return f"{like}-{k}"


def _marker(marker: str, kind: str, old: Sequence[str], new: Sequence[str]) -> str | None:
    """``marker`` citing ``new`` labels instead of ``old`` ones."""
    if kind == "numbered":
        return "[" + ", ".join(new) + "]"
    if len(new) != 1:
        return None
    if kind == "footnote":
        return f"[{new[0]}]" if new[0].startswith("^") else None
    # reference links: [text][id], [text][] and the shortcut [id]
    if marker.endswith("[]"):
        return marker[:-2] + f"[{new[0]}]"
    m = re.fullmatch(r"(\[(?:[^\[\]]|\[[^\[\]]*\])*\])(\[[^\[\]]*\])?", marker)
    if m is None:
        return None
    return m.group(1) + f"[{new[0]}]"


def _inline_target(raw: str) -> str:
    return f"<{raw}>" if re.search(r"[\s()<>]", raw) else raw


def _retarget(c: Citation, marker: str, raw: str) -> str:
    """A link, anchor or bare URL pointing at ``raw`` instead."""
    if c.kind == "inline_link":
        i = marker.rfind("](")
        j = marker.find(c.url, i) if i >= 0 else -1
        if j >= 0:
            return marker[:j] + _inline_target(raw) + marker[j + len(c.url) :]
        return f"[{c.label or raw}]({_inline_target(raw)})"
    if c.kind == "html_anchor":
        escaped = raw.replace("&", "&amp;").replace('"', "&quot;")
        new, n = re.subn(
            r"""(href\s*=\s*)(?:"[^"]*"|'[^']*'|[^\s"'>]+)""",
            lambda m: f'{m.group(1)}"{escaped}"',
            marker,
            count=1,
            flags=re.IGNORECASE,
        )
        return new if n else f'<a href="{escaped}">{c.label or raw}</a>'
    # a bare URL (or an <autolink>)
    if c.url in marker:
        return marker.replace(c.url, raw, 1)
    return f"<{raw}>" if marker.startswith("<") else raw


def _cut(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened over the spaces that would be left doubled or dangling."""
    s = start
    while s > 0 and text[s - 1] in " \t":
        s -= 1
    if s < start and (end >= len(text) or text[end] in " \t\n.,;:!?)"):
        return s, end
    e = end
    while e < len(text) and text[e] in " \t":
        e += 1
    return start, e


# an edit of the answer's text: replace [start, end) with the string
_Edit = tuple[int, int, str]


def _apply_text(answer: Answer, decisions: Sequence[_Decision]) -> str | None:
    """The text answer with ``decisions`` written in, or ``None`` when an edit cannot be made
    in place: dropped claims cut, quotes corrected, links re-pointed, then the reference list
    (markers and entries) rewritten, all as edits of the original text spliced at the end."""
    text = answer.text
    fates, dropped, quotes = _fates(decisions)
    cuts = [_cut(text, answer.claims[ci].start, answer.claims[ci].end) for ci in sorted(dropped)]
    edits: list[_Edit] = [(s, e, "") for s, e in cuts]
    quoted = _quote_edits(answer, decisions, quotes)
    if quoted is None:
        return None
    edits += quoted
    view = _TextView(text, fates, dropped, cuts)
    edits += _link_edits(answer, view)
    by_label = _ref_citations(answer)
    plan = _plan_refs(answer, decisions, by_label, view)
    markers = _marker_edits(by_label, plan, view)
    if markers is None:
        return None
    edits += markers
    entries = _entry_edits(answer, plan)
    if entries is None:
        return None
    edits += entries
    out = _splice(text, edits)
    return None if out is None else _tidy(out, dropped=len(dropped))


@dataclass
class _TextView:
    """The answer's text with what happens to each citation: its fate, and the cut spans of
    the dropped claims (whose citations go with them)."""

    text: str
    fates: Mapping[int, _Fate]
    dropped: set[int]
    cuts: list[tuple[int, int]]

    def in_cut(self, pos: int) -> bool:
        return any(s <= pos < e for s, e in self.cuts)

    def fate_of(self, c: Citation) -> _Fate:
        if c.claim_index is not None and c.claim_index in self.dropped:
            return _Fate("remove")
        return self.fates.get(c.index, _Fate())


def _quote_edits(
    answer: Answer, decisions: Sequence[_Decision], quotes: Mapping[int, str]
) -> list[_Edit] | None:
    """Each corrected quote in place of the old one, inside its claim (``None`` when one is
    not found there)."""
    old_quotes = {d.failure.claim.index: d.failure.quote for d in decisions if d.failure.claim}
    edits: list[_Edit] = []
    for ci, words in quotes.items():
        claim, was = answer.claims[ci], old_quotes.get(ci)
        i = answer.text.find(was, claim.start, claim.end) if was else -1
        if i < 0 or was is None:
            return None
        edits.append((i, i + len(was), words))
    return edits


def _link_edits(answer: Answer, view: _TextView) -> list[_Edit]:
    """Links, anchors and bare URLs, each occurrence on its own: re-pointed, or removed (a
    link keeps its words)."""
    text = view.text
    edits: list[_Edit] = []
    for c in answer.citations:
        if c.start < 0 or c.kind in _REF_KINDS or view.in_cut(c.start):
            continue
        fate = view.fate_of(c)
        marker = text[c.start : c.end]
        if fate.kind == "to":
            edits.append((c.start, c.end, _retarget(c, marker, fate.raw)))
        elif fate.kind == "remove":
            if c.kind in ("inline_link", "html_anchor") and c.label:
                edits.append((c.start, c.end, c.label))
            else:
                edits.append((*_cut(text, c.start, c.end), ""))
    return edits


def _ref_citations(answer: Answer) -> dict[str, list[Citation]]:
    """The reference list markers in the text, by label."""
    by_label: dict[str, list[Citation]] = {}
    for c in answer.citations:
        if c.kind in _REF_KINDS and c.label is not None and c.start >= 0:
            by_label.setdefault(c.label, []).append(c)
    return by_label


@dataclass
class _RefPlan:
    """What becomes of the reference list: each label's final URL (normalised), the entries
    re-pointed in place, those removed, and the new entries (template label, new label,
    target) that markers re-pointed at an unlisted page need."""

    refs: Mapping[str, str]
    final: dict[str, str]
    redefine: dict[str, _Fate] = field(default_factory=dict)
    remove: set[str] = field(default_factory=set)
    taken: set[str] = field(default_factory=set)
    added: list[tuple[str, str, _Fate]] = field(default_factory=list)

    def label_for(self, label: str, fate: _Fate) -> str:
        """The label a marker citing ``label`` uses to cite ``fate``'s page: its own, another
        entry of the same style listing the page, or a new entry."""
        if self.final.get(label) == fate.url:
            return label
        for other, url in self.final.items():
            if url == fate.url and _style(other) == _style(label):
                return other
        new = _new_label(_style(label), self.taken, label)
        self.taken.add(new)
        self.final[new] = fate.url
        self.added.append((label, new, fate))
        return new


def _plan_refs(
    answer: Answer,
    decisions: Sequence[_Decision],
    by_label: Mapping[str, list[Citation]],
    view: _TextView,
) -> _RefPlan:
    """Decide per label: an entry some passing marker still cites stays; one whose markers all
    go to one page is re-pointed (or removed when a staying entry lists that page); one whose
    markers all go is removed, and so is a broken entry no claim cites."""
    refs = answer.references
    plan = _RefPlan(refs, {k: _norm(u) for k, u in refs.items()}, taken=set(refs))
    fates_of = {label: [view.fate_of(c) for c in cits] for label, cits in by_label.items()}
    stable = {
        label: plan.final[label]
        for label, fs in fates_of.items()
        if label in plan.final and any(f.kind == "keep" for f in fs)
    }
    for label, fs in fates_of.items():
        if label in stable:
            continue
        target = _entry_target(label, fs, stable)
        if target is None:
            plan.remove.add(label)
            continue
        plan.redefine[label] = target
        plan.final[label] = target.url
    dropped_urls = {d.failure.url for d in decisions if d.kind == "drop_url"}
    for label, url in refs.items():
        if label not in by_label and _norm(url) in dropped_urls:
            plan.remove.add(label)
    for label in plan.remove:
        plan.final.pop(label, None)
    return plan


def _entry_target(label: str, fates: Sequence[_Fate], stable: Mapping[str, str]) -> _Fate | None:
    """The page an entry none of whose markers stay is re-pointed at: the one most of its
    markers go to; ``None`` (remove the entry) when they all go, or when an entry of the same
    style that stays lists that page already (the markers point there)."""
    targets = [f for f in fates if f.kind == "to"]
    if not targets:
        return None
    main = Counter(f.url for f in targets).most_common(1)[0][0]
    if any(u == main and _style(s) == _style(label) for s, u in stable.items()):
        return None
    return next(f for f in targets if f.url == main)


def _marker_edits(
    by_label: Mapping[str, list[Citation]], plan: _RefPlan, view: _TextView
) -> list[_Edit] | None:
    """Each marker (``[1]``, ``[1, 2]``, ``[^1]``, ``[text][id]``) citing its new labels, or
    cut when it cites none; ``None`` when a marker cannot be written in its style."""
    groups: dict[tuple[int, int], list[Citation]] = {}
    for cits in by_label.values():
        for c in cits:
            groups.setdefault((c.start, c.end), []).append(c)
    edits: list[_Edit] = []
    for (start, end), cits in sorted(groups.items()):
        if view.in_cut(start):
            continue
        cits.sort(key=lambda c: c.index)
        old = [c.label or "" for c in cits]
        new = _marker_labels(cits, plan, view)
        if new == old:
            continue
        if not new:
            edits.append((*_cut(view.text, start, end), ""))
            continue
        rewritten = _marker(view.text[start:end], cits[0].kind, old, new)
        if rewritten is None:
            return None
        edits.append((start, end, rewritten))
    return edits


def _marker_labels(cits: Sequence[Citation], plan: _RefPlan, view: _TextView) -> list[str]:
    """The labels one marker cites after the repair, in order, each once."""
    new: list[str] = []
    for c in cits:
        fate = view.fate_of(c)
        label = c.label or ""
        if fate.kind == "keep":
            lab: str | None = label
        elif fate.kind == "to":
            lab = plan.label_for(label, fate)
        else:
            lab = None
        if lab is not None and lab not in new:
            new.append(lab)
    return new


def _entry_edits(answer: Answer, plan: _RefPlan) -> list[_Edit] | None:
    """The reference list entries: re-pointed, removed, and the new ones appended after the
    list's last entry; ``None`` when an entry's line is not found."""
    text, refs = answer.text, plan.refs
    lines: dict[str, _DefLine] = {}
    for label in {*plan.redefine, *plan.remove, *(t for t, _n, _f in plan.added)}:
        found = _def_line(text, label, refs.get(label, "\0"), answer.claims)
        if found is None:
            return None
        lines[label] = found
    edits: list[_Edit] = []
    for label, fate in plan.redefine.items():
        d = lines[label]
        edits.append((d.start, d.end, _define(text, d, label, refs[label], fate.raw, fate.title)))
    for label in plan.remove:
        d = lines[label]
        edits.append((d.start, min(len(text), d.end + 1), ""))
    if plan.added:
        edits.append(_appended_entries(answer, plan, lines))
    return edits


def _appended_entries(answer: Answer, plan: _RefPlan, lines: Mapping[str, _DefLine]) -> _Edit:
    """The new entries, each like its template's line, after the last entry that stays."""
    text, refs = answer.text, plan.refs
    kept = [d for lab, d in lines.items() if lab not in plan.remove]
    removed = {lines[r].start for r in plan.remove}
    every = [
        x
        for x in (_def_line(text, lab, u, answer.claims) for lab, u in refs.items())
        if x is not None and x.start not in removed
    ]
    last = max([*kept, *every], key=lambda d: d.end)
    new_lines = [
        _define(text, lines[tmpl], new, refs[tmpl], fate.raw, fate.title)
        for tmpl, new, fate in plan.added
    ]
    return (last.end, last.end, "".join("\n" + ln for ln in new_lines))


def _splice(text: str, edits: list[_Edit]) -> str | None:
    """``text`` with ``edits`` made; ``None`` when two overlap (the answer's layout is not one
    repair can follow)."""
    edits.sort(key=lambda e: (e[0], e[1]))
    for (_s1, e1, _a), (s2, _e2, _b) in pairwise(edits):
        if s2 < e1:
            return None
    out = text
    for s, e, rep in sorted(edits, key=lambda x: (x[0], x[1]), reverse=True):
        out = out[:s] + rep + out[e:]
    return out


def _tidy(text: str, *, dropped: int) -> str:
    kept = []
    for line in text.split("\n"):
        line = line.rstrip()
        if line and _EMPTY_ITEM.fullmatch(line):
            continue  # a list item whose claim was removed
        kept.append(line)
    out = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    if dropped:
        note = f"[citeguard removed {dropped} claim(s) that no source supports]"
        out = f"{out}\n\n{note}" if out else note
    return out
