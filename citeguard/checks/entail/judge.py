"""The judge backend (:class:`JudgeEntailer`): an OpenAI-compatible chat-completions endpoint
asked for strict JSON, one request per cited page for all the claims citing it."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from citeguard.checks._consistency import clean_claim
from citeguard.checks.entail.base import EntailmentRequest, Pair, _empty_score
from citeguard.checks.entail.windows import _candidate_windows, _Window
from citeguard.checks.judge import ChatJudge
from citeguard.closing import AsyncClosing
from citeguard.errors import JudgeError, PolicyError
from citeguard.models import EntailmentLabel, EntailmentScore
from citeguard.policy import EntailmentPolicy, JudgePolicy

# --------------------------------------------------------------------------------------------
# JudgeEntailer
# --------------------------------------------------------------------------------------------

JUDGE_SYSTEM_PROMPT = """\
You check whether a source passage supports a claim. Use only the passage, not your own knowledge.
Reply with one JSON object and nothing else:
{"label": "supported" | "contradicted" | "not_supported" | "uncertain", \
"confidence": <number 0..1>, "reason": "<one short sentence>"}
- "supported": the passage states everything the claim says (paraphrase is fine).
- "contradicted": the passage states something incompatible with the claim (a different number,
  date or name, or the opposite statement).
- "not_supported": the passage clearly does not state what the claim says (it is about something
  else, or leaves out part of the claim).
- "uncertain": you cannot tell from the passage."""


JUDGE_PAGE_SYSTEM_PROMPT = """\
You check whether passages from one source page support each of several claims. Use only the
passages, not your own knowledge, and judge each claim on its own.
The user message is a JSON object: {"claims": [{"id": "<claim id>", "claim": "<text>"}, ...],
"passages": ["<passage>", ...]}.
Reply with one JSON object and nothing else, holding exactly one verdict per claim id:
{"verdicts": [{"id": "<claim id>", \
"label": "supported" | "contradicted" | "not_supported" | "uncertain", \
"confidence": <number 0..1>, "reason": "<one short sentence>"}, ...]}
- "supported": the passages state everything the claim says (paraphrase is fine).
- "contradicted": the passages state something incompatible with the claim (a different number,
  date or name, or the opposite statement).
- "not_supported": the passages clearly do not state what the claim says (they are about
  something else, or leave out part of the claim).
- "uncertain": you cannot tell from the passages."""

# what judges say for the labels (earlier prompts asked for "unsupported")
_JUDGE_LABELS: dict[str, str] = {
    "unsupported": "not_supported",
    "not supported": "not_supported",
    "notsupported": "not_supported",
    "cannot_tell": "uncertain",
    "cannot tell": "uncertain",
    "unknown": "uncertain",
    "unsure": "uncertain",
}


class JudgeVerdict(BaseModel):
    """The strict JSON a judge must return."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    label: EntailmentLabel
    confidence: float = Field(ge=0, le=1)
    reason: str = ""

    @field_validator("label", mode="before")
    @classmethod
    def _lower(cls, v: object) -> object:
        if not isinstance(v, str):
            return v
        v = v.strip().lower()
        return _JUDGE_LABELS.get(v, v)


class JudgeClaimVerdict(JudgeVerdict):
    """One entry of a page request's ``verdicts``: a :class:`JudgeVerdict` for the claim ``id``."""

    id: str

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return v.strip() if isinstance(v, str) else v


def _entry_id(entry: Mapping[str, Any]) -> str | None:
    raw = entry.get("id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    return raw.strip() if isinstance(raw, str) else None


@dataclass(frozen=True, slots=True)
class _PageReply:
    """A page request's verdicts by claim id, and why the other ids have none."""

    verdicts: dict[str, JudgeClaimVerdict]
    problems: dict[str, str]


def _page_reply_parser(ids: Sequence[str]) -> Callable[[dict[str, Any]], _PageReply]:
    """Validate a page reply: each ``verdicts`` entry on its own, so one bad entry costs only
    its claim. A missing, duplicated or invalid id is a problem of that id; a reply without a
    ``verdicts`` list is malformed (a retryable :class:`JudgeError`)."""
    wanted = frozenset(ids)

    def parse(data: dict[str, Any]) -> _PageReply:
        entries = data.get("verdicts")
        if not isinstance(entries, list):
            raise JudgeError(
                "judge reply has no 'verdicts' list",
                detail="invalid response (no 'verdicts' list)",
                retryable=True,
            )
        found: dict[str, list[JudgeClaimVerdict]] = {}
        invalid: set[str] = set()
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            try:
                v = JudgeClaimVerdict.model_validate(entry)
            except ValidationError:
                eid = _entry_id(entry)
                if eid is not None:
                    invalid.add(eid)
                continue
            if v.id in wanted:
                found.setdefault(v.id, []).append(v)
        verdicts: dict[str, JudgeClaimVerdict] = {}
        problems: dict[str, str] = {}
        for cid in ids:
            got = found.get(cid, [])
            if len(got) == 1:
                verdicts[cid] = got[0]
            elif got:
                problems[cid] = f"claim id {cid!r} answered {len(got)} times"
            elif cid in invalid:
                problems[cid] = f"invalid verdict for claim id {cid!r}"
            else:
                problems[cid] = f"no verdict for claim id {cid!r}"
        return _PageReply(verdicts, problems)

    return parse


def _page_reply_problem(reply: _PageReply) -> str | None:
    if not reply.problems:
        return None
    problems = list(reply.problems.values())
    more = f" and {len(problems) - 2} more" if len(problems) > 2 else ""
    return "; ".join(problems[:2]) + more


@dataclass
class _PageAsk:
    """One judge request for claims citing one page: their windows, merged into passages."""

    passages: list[str]
    claims: list[tuple[str, str]] = field(default_factory=list)  # (claim, its window)
    members: list[list[int]] = field(default_factory=list)  # request indices per claim


def _pack_page(items: Sequence[tuple[str, str, list[int]]], cap: int) -> list[_PageAsk]:
    """Claims citing one page → as few requests as their evidence allows (usually one).

    ``items`` are (claim, window, request indices). A window already inside a passage adds no
    text; a window that contains passages replaces them; a request's passages stay within
    ``cap`` characters, and a claim whose window would not fit starts the next request (so no
    claim is judged on cut evidence; a single window longer than ``cap`` is cut to it).
    """
    asks: list[_PageAsk] = []
    for claim, window, members in items:
        window = window[:cap]
        home = next((a for a in asks if any(window in p for p in a.passages)), None)
        if home is None and asks:
            last = asks[-1]
            kept = [p for p in last.passages if p not in window]
            if sum(map(len, kept)) + len(window) <= cap:
                last.passages = [*kept, window]
                home = last
        if home is None:
            home = _PageAsk(passages=[window])
            asks.append(home)
        home.claims.append((claim, window))
        home.members.append(members)
    return asks


class JudgeEntailer(AsyncClosing):
    """Entailment by an LLM judge behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Sends the claim and the best lexical evidence window through
    :class:`~citeguard.checks.judge.ChatJudge` (``response_format`` set to a JSON object) and
    validates the reply against :class:`JudgeVerdict`. 429, 5xx, connection errors, timeouts
    and malformed replies are retried (``judge.retries``, exponential backoff from
    ``judge.backoff``, honouring ``Retry-After``). When the judge still gives no verdict the
    pair is ``uncertain`` with a reason starting ``"judge unavailable: "`` — it never raises
    for that, and never calls such a pair supported. A ``supported`` verdict below
    ``policy.support_threshold`` confidence is reported as ``uncertain``; a judge that answers
    it cannot tell says ``uncertain`` itself.

    :meth:`score_requests` (what the validity axis calls) groups the requests by ``page`` and
    asks once per page about every claim citing it (:data:`JUDGE_PAGE_SYSTEM_PROMPT`: each claim
    with an id, the union of the claims' evidence windows as passages, at most
    ``judge.max_evidence_chars`` characters a request; more evidence than that takes another
    request). The reply's ``verdicts`` are validated entry by entry (:class:`JudgeClaimVerdict`):
    an id missing, duplicated or invalid is retried like a malformed reply, and when the retries
    are spent that claim alone is ``uncertain`` with ``"judge unavailable: ..."``. A page cited
    by one claim only is asked the per-pair question of :meth:`score`.

    Inside a guarded run every request is metered, capped by ``Policy.cost_budget`` (claims
    whose request was not sent end ``"judge unavailable: cost budget spent"``), traced, and
    recorded in or replayed from the snapshot store (see :mod:`citeguard.checks.judge`).

    ``judge`` (a :class:`~citeguard.policy.JudgePolicy`, default ``JudgePolicy()``) holds the
    endpoint settings: ``base_url`` and ``model`` default to its own, ``api_key`` to the
    environment variable named by ``judge.api_key_env``, the token prices to its
    ``*_price_per_million``; ``judge.concurrency`` requests are in flight per :meth:`score` or
    :meth:`score_requests` call. Pass ``session`` to share an aiohttp session (it is then not
    closed by :meth:`aclose`).
    """

    name: str = "judge"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        api_key: str | None = None,
        policy: EntailmentPolicy | None = None,
        judge: JudgePolicy | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self._policy = policy or EntailmentPolicy()
        self._judge = judge or JudgePolicy()
        base_url = base_url or self._judge.base_url
        model = model or self._judge.model
        if not base_url or not model:
            raise PolicyError("JudgeEntailer needs a base_url and a model")
        self._client = ChatJudge(
            base_url,
            model,
            api_key if api_key is not None else os.environ.get(self._judge.api_key_env),
            timeout=self._judge.timeout,
            retries=self._judge.retries,
            backoff=self._judge.backoff,
            session=session,
            input_price_per_million=self._judge.input_price_per_million,
            output_price_per_million=self._judge.output_price_per_million,
        )

    async def aclose(self) -> None:
        """Close the session this entailer created (a passed-in session is left open)."""
        await self._client.aclose()

    def _best_windows(self, requests: Sequence[EntailmentRequest]) -> list[str | None]:
        """Each request's best lexical evidence window (``None``: nothing to ask about)."""
        out: list[str | None] = []
        for r in requests:
            claim = clean_claim(r.claim)
            ws = _candidate_windows(claim, r.evidence, self._policy, limit=1) if claim else []
            out.append(ws[0].text if ws else None)
        return out

    async def score_requests(self, requests: Sequence[EntailmentRequest]) -> list[EntailmentScore]:
        """Score each request, one judge request per page (see the class docstring)."""
        reqs = list(requests)
        if not reqs:
            return []
        # Window selection is regex work over possibly long pages: keep it off the loop.
        windows = await asyncio.to_thread(self._best_windows, reqs)
        out: list[EntailmentScore | None] = [None] * len(reqs)
        singles: list[tuple[str, str, list[int]]] = []
        by_page: dict[str, dict[tuple[str, str], list[int]]] = {}
        for i, (r, w) in enumerate(zip(reqs, windows, strict=True)):
            if w is None:
                out[i] = _empty_score(r.claim, r.evidence, self.name)
            elif r.page is None:
                singles.append((clean_claim(r.claim), w, [i]))
            else:
                # the same claim on the same evidence is asked about once
                by_page.setdefault(r.page, {}).setdefault((clean_claim(r.claim), w), []).append(i)
        asks: list[_PageAsk] = []
        for claims in by_page.values():
            items = [(c, w, members) for (c, w), members in claims.items()]
            if len(items) == 1:
                singles.append(items[0])
            else:
                asks += _pack_page(items, self._judge.max_evidence_chars)
        gate = asyncio.Semaphore(self._judge.concurrency)

        async def single(claim: str, window: str, members: list[int]) -> None:
            async with gate:
                score = await self._ask(claim, window)
            for i in members:
                out[i] = score

        async def page(ask: _PageAsk) -> None:
            async with gate:
                scores = await self._ask_page(ask, reqs)
            for members, score in zip(ask.members, scores, strict=True):
                for i in members:
                    out[i] = score

        await asyncio.gather(*(single(*s) for s in singles), *(page(a) for a in asks))
        done = [s for s in out if s is not None]
        assert len(done) == len(reqs)  # every request was scored above
        return done

    async def _ask_page(
        self, ask: _PageAsk, reqs: Sequence[EntailmentRequest]
    ) -> list[EntailmentScore]:
        """One judge request about every claim of ``ask``; a score per claim, in order."""
        given = [reqs[members[0]].claim_id for members in ask.members]
        ids = (
            [str(g) for g in given]
            if all(given) and len(set(given)) == len(given)
            else [str(n) for n in range(1, len(given) + 1)]
        )
        user = json.dumps(
            {
                "claims": [
                    {"id": cid, "claim": claim}
                    for cid, (claim, _) in zip(ids, ask.claims, strict=True)
                ],
                "passages": ask.passages,
            },
            ensure_ascii=False,
        )
        try:
            reply = await self._client.ask(
                JUDGE_PAGE_SYSTEM_PROMPT,
                user,
                _page_reply_parser(ids),
                complete=_page_reply_problem,
            )
        except JudgeError as exc:
            return [self._unavailable(exc.detail, window) for _, window in ask.claims]
        scores: list[EntailmentScore] = []
        for cid, (_, window) in zip(ids, ask.claims, strict=True):
            verdict = reply.verdicts.get(cid)
            scores.append(
                self._to_score(verdict, window)
                if verdict is not None
                else self._unavailable(reply.problems.get(cid, "no verdict"), window)
            )
        return scores

    def _unavailable(self, detail: str, evidence: str) -> EntailmentScore:
        # a judge that errs or is not asked settles nothing: never supported, never a reject
        return EntailmentScore(
            label="uncertain",
            score=0.0,
            probabilities={},
            evidence=evidence,
            backend=self.name,
            reason=f"judge unavailable: {detail}",
        )

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        """Ask the judge about each pair, ``judge.concurrency`` at a time."""
        if not pairs:
            return []
        # Window selection is regex work over possibly long pages: keep it off the loop.
        windows = await asyncio.to_thread(
            lambda: [
                _candidate_windows(clean_claim(c), e, self._policy, limit=1)
                if clean_claim(c)
                else []
                for c, e in pairs
            ]
        )
        gate = asyncio.Semaphore(self._judge.concurrency)

        async def one(pair: Pair, ws: list[_Window]) -> EntailmentScore:
            claim, evidence = pair
            if not ws:
                return _empty_score(claim, evidence, self.name)
            async with gate:
                return await self._ask(clean_claim(claim), ws[0].text)

        return list(await asyncio.gather(*(one(p, w) for p, w in zip(pairs, windows, strict=True))))

    async def _ask(self, claim: str, evidence: str) -> EntailmentScore:
        try:
            verdict = await self._client.ask(
                JUDGE_SYSTEM_PROMPT,
                f"Claim:\n{claim}\n\nPassage:\n{evidence}",
                JudgeVerdict.model_validate,
            )
        except JudgeError as exc:
            return self._unavailable(exc.detail, evidence)
        return self._to_score(verdict, evidence)

    def _to_score(self, verdict: JudgeVerdict, evidence: str) -> EntailmentScore:
        """The judge's label as it is; a ``supported`` below ``policy.support_threshold``
        confidence is ``uncertain``. ``score``: the judge's P(supported) (its confidence when
        it says supported, else the rest of it spread over the other labels)."""
        conf = verdict.confidence
        label: EntailmentLabel = verdict.label
        reason = f"judge: {verdict.reason}" if verdict.reason else "judge verdict"
        if label == "supported" and conf < self._policy.support_threshold:
            label = "uncertain"
            reason = f"judge not confident enough ({conf:.2f}): {verdict.reason}"
        others = [
            lab
            for lab in ("supported", "contradicted", "not_supported", "uncertain")
            if lab != verdict.label
        ]
        probabilities = {verdict.label: conf, **{lab: (1.0 - conf) / 3 for lab in others}}
        return EntailmentScore(
            label=label,
            score=probabilities["supported"],
            probabilities=probabilities,
            evidence=evidence,
            backend=self.name,
            reason=reason,
        )
