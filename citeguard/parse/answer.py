"""The entry point: :func:`parse_answer` and the answer size caps (:class:`AnswerLimits`);
text, structured items and provider responses each to their parser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from citeguard.models import Answer, Finding
from citeguard.parse.assemble import _assemble
from citeguard.parse.base import _AXIS, MAX_MARKER_RANGE, _Hit, _HitBudget, _mask, _TooManyHits
from citeguard.parse.claims import _split_claims
from citeguard.parse.links import _find_anchors, _find_bare, _find_scholarly
from citeguard.parse.markdown import _code_spans, _html_breaks, _split_lines
from citeguard.parse.markers import _find_brackets, _find_glued, _fullwidth_markers
from citeguard.parse.quotes import _find_quotes, _inside_quotes
from citeguard.parse.references import _scan_layout
from citeguard.parse.sources import _Source
from citeguard.parse.structured import _parse_structured
from citeguard.providers.base import ProviderAnswer
from citeguard.providers.dispatch import read_provider
from citeguard.web.urls import DEFAULT_ALLOWED_SCHEMES

if TYPE_CHECKING:
    from citeguard.policy import Policy


__all__ = ["MAX_MARKER_RANGE", "AnswerLimits", "parse_answer"]


def parse_answer(
    text: str | Sequence[Mapping[str, Any]] | ProviderAnswer | object,
    *,
    allowed_schemes: frozenset[str] = DEFAULT_ALLOWED_SCHEMES,
    references: Sequence[Any] | Mapping[Any, Any] | None = None,
    documents: Mapping[int | str, str] | None = None,
    limits: AnswerLimits | None = None,
) -> Answer:
    """Parse an answer into claims and citations, with character offsets into the answer text.

    ``text`` is either the answer as markdown/plain text/HTML fragments, or structured input: a
    sequence of ``{"claim": str, "url": str | list[str], "quote": str | None}`` mappings (one
    claim per item; citations then have ``start == end == -1`` and ``Answer.text`` is the claims
    joined by newlines), or a provider response (an OpenAI, Anthropic, Gemini or Perplexity SDK
    object, its dict or its JSON text, or a :class:`~citeguard.providers.ProviderAnswer`): its
    text parsed with its citation objects bound to the claims they back, and the searches it
    reports in ``Answer.searches``. ``allowed_schemes`` is the URL scheme allow-list
    (``Policy.fetch``'s).

    ``references``: sources that arrive beside a text (a list: ``[1]`` cites the first; a
    mapping: ``[t][key]`` / ``[key]`` cite by key; each a URL or a mapping/object with ``url``
    and ``title``). A text that cites none of them with a marker lists them all as ``external``
    citations of no claim. ``documents``: ``{document_index or title: url}`` for an Anthropic
    response's document citations, which carry no URL (without it they are ``not_checkable``).

    Never raises on bad input: problems are :class:`~citeguard.models.Finding` values with codes
    ``unresolved_marker``, ``unused_reference`` (warning), ``malformed_url``, ``blocked_scheme``,
    ``reference_without_url``, ``duplicate_reference``, ``malformed_marker``,
    ``structured_invalid_item``, ``structured_missing_field``, ``not_checkable`` and
    ``invalid_input``; what a heuristic assumed is ``glued_marker_assumed`` (warning) or
    ``bracket_data_assumed`` (info).
    """
    if limits is not None:
        return limits.parse(
            text, allowed_schemes=allowed_schemes, references=references, documents=documents
        )
    return _read(text, allowed_schemes, references, documents, _HitBudget())


def _read(
    text: object,
    allowed_schemes: frozenset[str],
    references: Sequence[Any] | Mapping[Any, Any] | None,
    documents: Mapping[int | str, str] | None,
    budget: _HitBudget,
) -> Answer:
    provider = read_provider(text, documents=documents)
    if provider is not None:
        return _parse_provider(provider, allowed_schemes, references, budget)
    if isinstance(text, str):
        return _parse_text(text, allowed_schemes, budget, _Source.of(None, references))
    if isinstance(text, Sequence) and not isinstance(text, bytes | bytearray):
        return _parse_structured(text, allowed_schemes, budget)
    return Answer(
        text="",
        findings=[
            Finding(
                code="invalid_input",
                message=(
                    "answer must be text, a list of {claim, url, quote} items or a provider "
                    "response (or its item, choice, message or content part), "
                    f"not {type(text).__name__}"
                ),
                axis=_AXIS,
            )
        ],
    )


@dataclass(frozen=True, slots=True)
class AnswerLimits:
    """How much of one answer is checked (``Policy.max_answer_chars``, ``max_claims``,
    ``max_citations``). Time, memory and the garbage collector's pauses all grow with the
    claims an answer holds, so a hostile answer is cut, not worked through: a text over
    ``max_chars`` is not parsed, nor one with more than :attr:`max_hits` citation markers and
    links, and past ``max_claims`` claims or ``max_citations`` citations only the first ones
    are kept. Either way an ``answer_too_large`` error finding fails the validity axis: an
    answer that was not checked whole never passes."""

    max_chars: int
    max_claims: int
    max_citations: int

    @classmethod
    def of(cls, policy: Policy) -> AnswerLimits:
        return cls(policy.max_answer_chars, policy.max_claims, policy.max_citations)

    @property
    def max_hits(self) -> int:
        """The most citation markers, links, provider annotations and marker findings the
        parser records: four times ``max_citations`` (a provider's annotation over a link is
        two, the link and the annotation). Each is an object until the answer is assembled,
        so past this the text is not read at all rather than read and cut."""
        return 4 * self.max_citations

    def parse(
        self,
        answer: object,
        *,
        allowed_schemes: frozenset[str],
        references: Sequence[Any] | Mapping[Any, Any] | None,
        documents: Mapping[int | str, str] | None,
    ) -> Answer:
        if isinstance(answer, str) and len(answer) > self.max_chars:
            return Answer(
                text="",
                findings=[
                    self._finding(
                        f"the answer has {len(answer):,} characters; the policy checks at most "
                        f"{self.max_chars:,} (Policy.max_answer_chars)",
                        chars=len(answer),
                    )
                ],
            )
        items = None
        if isinstance(answer, Sequence) and not isinstance(answer, str | bytes | bytearray):
            items = len(answer)
            if items > self.max_claims and read_provider(answer) is None:
                answer = answer[: self.max_claims]  # one claim per item: the rest is not read
        try:
            parsed = _read(
                answer, allowed_schemes, references, documents, _HitBudget(self.max_hits)
            )
        except _TooManyHits:
            return Answer(
                text="",
                findings=[
                    self._finding(
                        f"the answer has more than {self.max_hits:,} citation markers and links; "
                        f"the policy reads at most {self.max_hits:,} (four times "
                        "Policy.max_citations): it was not parsed",
                        markers=self.max_hits + 1,
                    )
                ],
            )
        return self._cut(parsed, items)

    def _cut(self, parsed: Answer, items: int | None) -> Answer:
        claims, citations = len(parsed.claims), len(parsed.citations)
        # reference-list entries no claim cites are fetched too (the user sees them): they
        # count against ``max_citations`` after the claims' own citations
        listed = [
            k for k, f in enumerate(parsed.findings) if f.code == "unused_reference" and f.url
        ]
        over = (items or 0) > self.max_claims
        fits = claims <= self.max_claims and citations + len(listed) <= self.max_citations
        if not over and fits:
            return parsed
        keep, cited = 0, 0  # the longest run of leading claims within both caps
        for claim in parsed.claims[: self.max_claims]:
            last = max(claim.citation_indices, default=-1) + 1
            if max(cited, last) > self.max_citations:
                break
            cited, keep = max(cited, last), keep + 1
        cited = cited if keep < claims else min(citations, self.max_citations)
        room = max(0, self.max_citations - cited)
        dropped = set(listed[room:])  # not fetched, not reported: the answer fails as too large
        what = (
            f"{items:,} structured items"
            if over and items is not None
            else f"{claims:,} claims and {citations:,} citations"
            + (f" and {len(listed):,} listed references no claim cites" if listed else "")
        )
        checked = f"the first {keep:,} claims" + (
            f" and {min(room, len(listed)):,} listed references" if listed else ""
        )
        finding = self._finding(
            f"the answer has {what}; the policy checks at most {self.max_claims:,} claims and "
            f"{self.max_citations:,} citations (Policy.max_claims, max_citations): only "
            f"{checked} were checked",
            claims=claims if items is None else items,
            citations=citations,
            checked_claims=keep,
            **({"listed_references": len(listed)} if listed else {}),
        )
        kept = [f for k, f in enumerate(parsed.findings) if k not in dropped]
        return parsed.model_copy(
            update={
                "claims": parsed.claims[:keep],
                "citations": parsed.citations[:cited],
                "findings": [*kept, finding],
            }
        )

    @staticmethod
    def _finding(message: str, **details: int) -> Finding:
        return Finding(code="answer_too_large", message=message, axis=_AXIS, details=details)


def _parse_text(
    text: str, allowed_schemes: frozenset[str], budget: _HitBudget, source: _Source | None = None
) -> Answer:
    # ``work`` is ``text`` with its <br> line breaks made newlines and its full-width markers
    # ("【1】") written in ASCII (same length, same offsets): layout, markers and claims are read
    # from ``work``; markers and claims are cut from ``text``.
    work = _fullwidth_markers(_html_breaks(text))
    lines = _split_lines(work)
    layout = _scan_layout(work, lines, budget)
    if source is not None:
        source.add_definitions(layout)

    def_spans = [(lines[i].start, lines[i].end) for i in sorted(layout.def_lines)]
    code_spans = _code_spans(work, lines, layout)
    masked = _mask(work, def_spans)

    hits: list[_Hit] = []
    link_spans: list[tuple[int, int]] = []
    findings = layout.findings

    anchor_hits = _find_anchors(masked, budget)
    hits.extend(anchor_hits)
    masked = _mask(masked, [(h.start, h.end) for h in anchor_hits])

    bracket_hits, skipped = _find_brackets(text, masked, code_spans, layout.defs, findings, budget)
    hits.extend(bracket_hits)
    link_spans.extend((h.start, h.end) for h in bracket_hits if h.url is not None)
    link_spans.extend(skipped)  # images and fragment links: no bare URLs inside them either
    masked = _mask(masked, link_spans)

    bare_hits = _find_bare(masked, budget)
    bare_hits += _find_scholarly(_mask(masked, [(h.start, h.end) for h in bare_hits]), budget)
    hits.extend(bare_hits)
    if not any(h.kind == "numbered" for h in bracket_hits):
        glued_mask = _mask(masked, [(h.start, h.end) for h in bare_hits])
        hits.extend(_find_glued(glued_mask, code_spans, layout.defs, budget))
    hits.sort(key=lambda h: h.start)
    if source is not None:
        hits = source.mark(hits, budget)

    quotes = _find_quotes(_mask(masked, [(h.start, h.end) for h in hits] + code_spans))
    # (a provider's annotation over such a URL still makes it a citation)
    quoted = _inside_quotes(
        [h for h in hits if h.kind == "bare_url" and h.provider is None], quotes
    )
    if quoted:  # a URL inside a quoted passage is part of the quote, not a citation of its own
        hits = [h for h in hits if id(h) not in quoted]
        quotes = _find_quotes(_mask(masked, [(h.start, h.end) for h in hits] + code_spans))
    claims_spans, orphan_spans = _split_claims(work, lines, layout, hits, quotes)

    return _assemble(
        text=text,
        hits=hits,
        claim_spans=claims_spans,
        orphan_spans=orphan_spans,
        quotes=quotes,
        layout=layout,
        allowed_schemes=allowed_schemes,
        source=source,
    )


def _parse_provider(
    answer: ProviderAnswer,
    allowed_schemes: frozenset[str],
    references: Sequence[Any] | Mapping[Any, Any] | None,
    budget: _HitBudget,
) -> Answer:
    """A provider response: its text parsed with its citation objects, its searches kept."""
    parsed = _parse_text(answer.text, allowed_schemes, budget, _Source.of(answer, references))
    # a chat message read alone lacks its completion's sources, unless they were passed
    notes = [f for f in answer.findings if references is None or f.code != "sources_not_in_part"]
    return parsed.model_copy(
        update={"findings": [*parsed.findings, *notes], "searches": list(answer.searches)}
    )
