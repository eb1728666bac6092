"""The source-diversity axis: how many sites an answer leans on, and how many of them are primary.

Three deterministic checks, each a pure function of the question and the citation reports:

* **Domain floor.** The answer must cite at least ``policy.domain_floor[class]`` distinct
  registrable domains, where the class is the question's kind (lookup 1, comparison 2,
  synthesis 4 by default). Excluding URLs cannot add a domain, so a shortfall is a finding with
  ``details["feedback"]`` for the answer function, never an offender.
* **Per-domain cap.** At most ``policy.per_domain_cap`` citations from one registrable domain;
  the later ones become ``offending_urls`` (the first ``cap`` are kept). The cap is waived for a
  domain the question is about: an EU AI Act question may cite eur-lex.europa.eu repeatedly and
  an Apple question may cite apple.com.
* **Primary share.** The share of primary citations (laws, filings, papers, standards,
  government, regulator, investor and press pages, official docs, DOIs and preprints, and the
  question subject's own site) must reach ``policy.min_primary_share`` for the question's class
  and each of its topics. By default a regulatory, legal or medical question with no primary
  source fails however grounded it is. Which sources are primary is the source table's call
  (:mod:`citeguard.checks.sources`): a report's ``source_kind`` and ``primary``, set once
  upstream, are used as they are; a report without them is classified here by URL and title.

**Which citations count.** Every distinct cited URL whose status *resolves*
(``CitationStatus.outcome is Outcome.RESOLVES``: ok, passage missing or altered, not entailed,
not retrieved). A broken or unverifiable link is the validity axis's finding and an offender
already; counting it here too would let a dead link satisfy the floor, or fail the floor twice
for one cause. When no citation resolves the axis is not evaluated (``evaluated=False``).

Speed matters (this runs on every attempt): regexes are compiled once at import, the domain of
each report is taken from ``CitationReport.domain`` when the validity stage filled it, and
registrable domains are cached per call, never across calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from citeguard.checks.base import AnnotatorKind, CheckContext, skipped
from citeguard.checks.sources import (
    PRIMARY_CATEGORIES,
    classify_source,
    host_and_path,
)
from citeguard.models import AxisResult, CitationReport, Finding, Outcome, Severity, Verdict
from citeguard.policy import DiversityPolicy, Policy
from citeguard.text import word_set
from citeguard.web.urls import registrable_domain

__all__ = ["QuestionClass", "QuestionKind", "check_diversity", "classify_question"]

QuestionKind = Literal["lookup", "comparison", "synthesis"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QuestionClass(_Model):
    """What kind of question this is, what it is about, and the cues that decided it."""

    kind: QuestionKind
    topics: frozenset[str] = frozenset()  # regulatory, legal, medical, financial, scientific, ...
    about_domains: list[str] = Field(default_factory=list)  # domains and owner names, e.g. apple
    cues: list[str] = Field(default_factory=list)
    # every kind the question may be (``kind`` first); empty or one entry: the kind is confident
    plausible: list[QuestionKind] = Field(default_factory=list)

    @field_serializer("topics")
    def _sorted_topics(self, topics: frozenset[str]) -> list[str]:
        # Sets serialise in hash order, which changes between processes; verdicts must replay.
        return sorted(topics)


# --------------------------------------------------------------------------------------------
# Question classification
# --------------------------------------------------------------------------------------------

# Cue tables keyed by lowercase n-grams (n ≤ 4) of the question's word tokens. Dictionary look-ups
# over a handful of tokens cost a few microseconds where case-insensitive regex alternations
# cost tens; the axis runs on every attempt.
_CUES: dict[str, tuple[str, ...]] = {}
# Word prefixes ("regulat" matches regulation, regulatory, ...), bucketed by their first 4 chars.
_STEMS: dict[str, list[tuple[str, str]]] = {}
# Case-sensitive n-grams (acronyms and proper names: "WHO" is not "who").
_CASED: dict[str, tuple[str, ...]] = {}


def _cue(group: str, phrases: str) -> None:
    for phrase in phrases.split(","):
        key = " ".join(phrase.split())
        if not key:
            continue
        if key.endswith("*"):
            stem = key[:-1]
            _STEMS.setdefault(stem[:4], []).append((stem, group))
        else:
            _CUES[key] = (*_CUES.get(key, ()), group)


def _cased(group: str, phrases: str) -> None:
    for phrase in phrases.split(","):
        key = " ".join(phrase.split())
        if key:
            _CASED[key] = (*_CASED.get(key, ()), group)


_cue(
    "comparison",
    """vs, versus, compare, compared, compares, comparing, comparison, differ, differs,
    difference between, differences between, different from, better than, worse than,
    cheaper than, faster than, safer than, more expensive than, which is better, which is best,
    which is faster, which is cheaper, pros and cons, tradeoff, tradeoffs, trade-off,
    trade-offs, alternative to, alternatives to, stack up, head to head, side by side""",
)
_cue(
    "synthesis",
    """overview, summarize, summarise, summary, explain, why, landscape, state of, trend, trends,
    implications, implication, impact, impacts, effects of, effect of, analyze, analyse, analysis,
    review of, survey, history of, evolution of, best practices, approaches, strategies,
    what are the main, what are the key, what are the major, what are the different, risks,
    challenges, outlook, debate, evidence for, evidence on, evidence about, literature,
    research on, report on, guide to, consensus, arguments, how does, how do, how did, how can,
    how should, how to""",
)
_cue(
    "regulatory",
    """regulat*, complian*, directive, directives, guidance, rulemaking, enforcement, supervisory,
    obligation, obligations, sanction, sanctions, tariff, tariffs, licensing, licencing,
    approval, approved, authorisation, authorization, ai act, gdpr, hipaa, ccpa""",
)
_cue(
    "legal",
    """law, laws, lawful, unlawful, legal, legally, legality, illegal, court, courts, lawsuit,
    lawsuits, sue, sued, suing, ruling, ruled, statute, statutes, statutory, contract, contracts,
    liabilit*, liable, copyright, patent, patents, trademark, trademarks, attorney, attorneys,
    lawyer, lawyers, litigat*, constitution*, precedent, criminal, legislat*, verdict, judgment,
    judgement, appeal""",
)
_cue(
    "medical",
    """medic*, drug, drugs, dose, doses, dosage, dosing, treatment, treatments, therap*, symptom,
    symptoms, disease, diseases, diagnos*, clinical, vaccin*, cancer, diabetes, side effect,
    side effects, patient, patients, health, surgery, prescri*, pregnan*, virus, viral,
    infection, infections, covid*, disorder, disorders, syndrome, antibiotic, antibiotics,
    trial, trials, mg, overdose, contraindicat*""",
)
_cue(
    "financial",
    """stock, stocks, share price, shares, earnings, revenue, profit, profits, 10-k, 10-q,
    annual report, filing, filings, dividend, dividends, market cap, market capitalization,
    valuation, interest rate, interest rates, inflation, bond, bonds, yield, yields, etf, etfs,
    fund, funds, invest*, ipo, gdp, tax, taxes, crypto*, bitcoin, exchange rate,
    exchange rates, price, prices, pricing, cost, costs, fiscal, quarterly""",
)
_cue(
    "scientific",
    """study, studies, research, paper, papers, evidence, experiment, experiments,
    peer-reviewed, meta-analysis, meta-analyses, physics, chemistry, biology, climate, species,
    genom*, theorem""",
)
_cue(
    "technical",
    """api, sdk, version, versions, release, releases, library, framework, protocol, kernel,
    compiler, software, bug, bugs, install*, deprecat*, changelog, python, javascript, rust,
    java, linux, kubernetes""",
)
_cased(
    "regulatory",
    "FDA, SEC, FTC, FCC, EPA, FCA, EMA, ESMA, CNIL, ICO, DSA, DMA, MiCA, NIS2, Act, Regulation, "
    "Directive",
)
_TOPICS = ("regulatory", "legal", "medical", "financial", "scientific", "technical")
# Synthesis cues that as often open a one-fact question ("how did X die", "why is the sky blue",
# "the impact of the 2011 quake"): a question they decide may be a lookup, so the gate applies
# the lookup floor and says so. The others ("overview", "what are the main", "literature", "state
# of", ...) ask for breadth outright.
_WEAK_SYNTHESIS = word_set(
    """why explain impact impacts effect effects implications implication trend trends risks
    challenges outlook debate arguments approaches strategies analysis analyze analyse"""
) | {
    "effects of",
    "effect of",
    "history of",
    "evolution of",
    "how does",
    "how do",
    "how did",
    "how can",
    "how should",
    "how to",
    "guide to",
    "research on",
    "report on",
    "best practices",
}

# Owners whose documents live on a domain other than their name: the question is "about" these
# domains, so the per-domain cap is waived for them and their pages count as first-party.
_OWNER_CUES: tuple[tuple[str, str], ...] = (
    (
        "europa.eu",
        """EU, E.U, European Union, European Commission, European Parliament, European Council,
        AI Act, GDPR, DSA, DMA, Digital Services Act, Digital Markets Act, MiCA, NIS2, CJEU, EMA,
        ESMA, EBA, EDPB, ECB""",
    ),
    ("fda.gov", "FDA, Food and Drug Administration"),
    ("sec.gov", "SEC, Securities and Exchange Commission, EDGAR"),
    ("who.int", "WHO, World Health Organization, World Health Organisation"),
    ("cdc.gov", "CDC"),
    ("nih.gov", "NIH, PubMed"),
    ("irs.gov", "IRS"),
    ("ftc.gov", "FTC"),
    ("fcc.gov", "FCC"),
    ("epa.gov", "EPA"),
    ("nasa.gov", "NASA"),
    ("nist.gov", "NIST"),
    ("federalreserve.gov", "Federal Reserve, Fed"),
    ("govinfo.gov", "U.S Code, US Code, CFR, Federal Register, Congress"),
    ("congress.gov", "U.S Code, US Code, Congress"),
    ("ecfr.gov", "CFR"),
    ("federalregister.gov", "Federal Register"),
    ("ietf.org", "IETF, RFC"),
    ("rfc-editor.org", "IETF, RFC"),
    ("w3.org", "W3C, WCAG"),
    ("iso.org", "ISO"),
    ("legislation.gov.uk", "UK law, UK Parliament, UK government, HMRC"),
    ("parliament.uk", "UK Parliament"),
    ("ofcom.org.uk", "Ofcom"),
    ("un.org", "United Nations, UN"),
    ("oecd.org", "OECD"),
    ("imf.org", "IMF"),
    ("worldbank.org", "World Bank"),
)
for _domain, _phrases in _OWNER_CUES:
    _cased("owner:" + _domain, _phrases)


_CASED_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’.-]*[A-Za-z0-9]|[A-Za-z0-9]")
_DOMAIN_IN_TEXT_RE = re.compile(r"\b((?:[a-z0-9-]+\.)+[a-z]{2,})\b", re.IGNORECASE)
_MAX_QUESTION_CHARS = 2000
# A long question usually asks for more than one fact.
_SYNTHESIS_MIN_WORDS = 28
_NOT_OWNERS = word_set(
    """
    what which who whom whose when where why how is are was were do does did can could should
    would will the a an in on of for to and or i my me we our you your please tell give list
    find show compare explain summarize summarise describe according if as at by from with
    this that these those there it its about between vs versus latest current most new
    act law rule guidance regulation directive ceo cfo cto january february march april may
    june july august september october november december monday tuesday wednesday thursday friday
    saturday sunday
    """
)


def _ngrams(tokens: Sequence[str], table: Mapping[str, tuple[str, ...]]) -> list[tuple[str, str]]:
    """(group, phrase) for every n-gram (n ≤ 4) of ``tokens`` found in ``table``, in order."""
    hits: list[tuple[str, str]] = []
    n = len(tokens)
    for i in range(n):
        phrase = tokens[i]
        for j in range(i + 1, min(i + 4, n) + 1):
            if j > i + 1:
                phrase = f"{phrase} {tokens[j - 1]}"
            groups = table.get(phrase)
            if groups is not None:
                hits.extend((g, phrase) for g in groups)
    return hits


def classify_question(question: str) -> QuestionClass:
    """Classify a question by kind (lookup, comparison, synthesis), topics and subject domains.

    Deterministic cue rules; ``cues`` lists the phrases that decided it. ``about_domains`` holds
    registrable domains the question names or implies (``europa.eu`` for the AI Act) and owner
    names (``apple`` for "Apple"), matched against a citation's domain label.
    """
    question = question[:_MAX_QUESTION_CHARS]  # a question, not a document
    cased = [
        t.strip("'’.").removesuffix("'s").removesuffix("’s")
        for t in _CASED_WORD_RE.findall(question)
    ]
    lower = [t.lower() for t in cased]
    first: dict[str, str] = {}
    for group, phrase in _ngrams(lower, _CUES):
        first.setdefault(group, phrase)
    for token in lower:
        for stem, group in _STEMS.get(token[:4], ()):
            if token.startswith(stem) and group not in first:
                first[group] = token
    about: dict[str, None] = {}
    for group, phrase in _ngrams(cased, _CASED):
        if group.startswith("owner:"):
            about.setdefault(group[6:], None)
        else:
            first.setdefault(group, phrase)

    cues: list[str] = []
    kind: QuestionKind = "lookup"
    plausible: list[QuestionKind] = []
    if "comparison" in first:
        kind = "comparison"
        cues.append(f"comparison: {first['comparison']!r}")
    elif "synthesis" in first:
        kind = "synthesis"
        cues.append(f"synthesis: {first['synthesis']!r}")
        if first["synthesis"] in _WEAK_SYNTHESIS:
            plausible = ["synthesis", "lookup"]
            cues.append(f"uncertain: {first['synthesis']!r} also opens one-fact questions")
    elif len(cased) >= _SYNTHESIS_MIN_WORDS:
        kind = "synthesis"
        cues.append(f"synthesis: {len(cased)} words")
        plausible = ["synthesis", "lookup"]
        cues.append("uncertain: a long question may still ask for one fact")
    topics = frozenset(t for t in _TOPICS if t in first)
    cues.extend(f"{t}: {first[t]!r}" for t in _TOPICS if t in first)

    if "." in question:
        for dm in _DOMAIN_IN_TEXT_RE.finditer(question):
            text = dm.group(1).lower()
            if not text.replace(".", "").isdigit():
                domain = registrable_domain(text)
                if domain and "." in domain:
                    about.setdefault(domain, None)
    # Capitalised names (Apple, OpenAI, iPhone, Deutsche Bank), lowercased and joined, are the
    # label of the owner's domain more often than not (apple.com, openai.com, deutschebank.de).
    run: list[str] = []
    for token in (*cased, ""):
        if (
            token
            and not token[0].isdigit()
            and token.lower() not in _NOT_OWNERS
            and (token[0].isupper() or (len(token) > 1 and token[1].isupper()))
        ):
            run.append(token.lower().replace("-", "").replace(".", ""))
            continue
        if run:
            for label in run:
                if len(label) >= 3:
                    about.setdefault(label, None)
            if len(run) > 1:
                about.setdefault("".join(run), None)
            run = []
    return QuestionClass(
        kind=kind, topics=topics, about_domains=list(about), cues=cues, plausible=plausible
    )


# --------------------------------------------------------------------------------------------
# The axis
# --------------------------------------------------------------------------------------------


def _site_of(host: str) -> str:
    """The registrable domain of ``host`` (already lowercased, ``www.`` removed)."""
    if host.count(".") <= 1 and host.isascii():
        # A one- or two-label ASCII host is its own registrable domain (or is a bare public
        # suffix or IP-like name, which registrable_domain also returns whole): skip tldextract.
        return host
    return registrable_domain(host) or host


def _domain_label(domain: str) -> str:
    # "apple.com" → "apple"; "deutsche-bank.de" → "deutschebank"; an IP stays as is.
    label = domain.split(".", 1)[0]
    return label.replace("-", "")


def _is_about(domain: str, about: frozenset[str]) -> bool:
    return domain in about or _domain_label(domain) in about


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


_Source = tuple[str, str, bool, str]  # (url, domain, primary, category)


def _gate_kind(qc: QuestionClass, klass: str, policy: DiversityPolicy) -> tuple[bool, str]:
    """(uncertain, the kind gated on): an uncertain kind is gated on the most lenient floor
    of the kinds it may be."""
    uncertain = (
        policy.question_class is None
        and len(set(qc.plausible)) > 1
        and policy.uncertain_class == "lenient"
    )
    if not uncertain:
        return False, klass
    floor_kind = min(
        qc.plausible, key=lambda k: (policy.domain_floor.get(k, 1), qc.plausible.index(k))
    )
    return True, floor_kind


def _domain_of(report: CitationReport, url: str, cache: dict[str, str]) -> str:
    """The report's site: its domain, else the registrable domain of ``url``'s host."""
    if report.domain:
        return report.domain
    host = host_and_path(url)[0]
    domain = cache.get(host)
    if domain is None:
        domain = _site_of(host)
        cache[host] = domain
    return domain


def _primary_of(report: CitationReport, url: str) -> tuple[bool, str]:
    """(primary, category): classified upstream when it was, else by the source table (a
    primary flag set upstream from page signals wins over the table)."""
    if report.source_kind is not None:
        # Classified once upstream (sources.with_source_kinds), page signals included.
        category = report.source_kind
        primary = report.primary if report.primary is not None else category in PRIMARY_CATEGORIES
        return primary, category
    kind = classify_source(url, title=report.title)
    if report.primary is not None and report.primary != kind.primary:
        # Set upstream from page signals (JSON-LD types) this function cannot see.
        return report.primary, "page_signals"
    return kind.primary, kind.category


def _count_sources(citations: Sequence[CitationReport], about: frozenset[str]) -> list[_Source]:
    """The resolving citations, each with its domain, primary flag and category."""
    cache: dict[str, str] = {}
    counted: list[_Source] = []
    for report in citations:
        if report.status.outcome is not Outcome.RESOLVES:
            continue
        url = report.final_url or report.normalized_url or report.url
        domain = _domain_of(report, url, cache)
        primary, category = _primary_of(report, url)
        if not primary and _is_about(domain, about):
            # The subject's own site speaks for the subject: apple.com on an Apple question.
            primary, category = True, "first_party"
        counted.append((url, domain, primary, category))
    return counted


def _class_uncertain(
    qc: QuestionClass, klass: str, floor_kind: str, floor: int, guess_floor: int, n_domains: int
) -> Finding:
    """The guessed kind's floor was not applied: a warning when the answer falls short of it."""
    short = n_domains < guess_floor
    return Finding(
        code="diversity.class_uncertain",
        message=(
            f"the question looks like a {klass} question (at least {guess_floor} "
            f"domains), but may be a {floor_kind} one; gated on the lenient floor of "
            f"{floor}" + (f"; it cites {_plural(n_domains, 'domain')}" if short else "")
        ),
        severity=Severity.WARNING if short else Severity.INFO,
        axis="diversity",
        details={
            "question_class": klass,
            "gate_class": floor_kind,
            "plausible": list(qc.plausible),
            "floor": floor,
            "floor_if_guess": guess_floor,
            "distinct_domains": n_domains,
        },
    )


def _domain_floor(
    per_domain: Mapping[str, list[str]], floor: int, floor_kind: str
) -> tuple[float, Finding | None]:
    """(score, finding): fewer distinct domains than the floor is an error."""
    n_domains = len(per_domain)
    score = min(1.0, n_domains / floor) if floor > 0 else 1.0
    if n_domains >= floor:
        return score, None
    names = ", ".join(per_domain)
    return score, Finding(
        code="diversity.domain_floor",
        message=(
            f"only {_plural(n_domains, 'distinct domain')} ({names}); "
            f"a {floor_kind} question needs at least {floor}"
        ),
        axis="diversity",
        details={
            "distinct_domains": n_domains,
            "floor": floor,
            "feedback": (
                f"Cite sources from at least {floor} different websites; the answer "
                f"currently relies on {names} only. Excluding URLs cannot fix this: add "
                "independent sources."
            ),
        },
    )


def _per_domain_cap(
    per_domain: Mapping[str, list[str]], cap: int, about: frozenset[str], n: int
) -> tuple[float, list[str], list[str], list[Finding]]:
    """(score, offending URLs, exempt domains, findings): a domain's citations past the cap
    are offenders, except on the domains the question is about."""
    exempt: list[str] = []
    offending: list[str] = []
    findings: list[Finding] = []
    for domain, urls in per_domain.items():
        if len(urls) <= cap:
            continue
        if _is_about(domain, about):
            exempt.append(domain)
            continue
        extra = urls[cap:]
        offending.extend(extra)
        findings.append(
            Finding(
                code="diversity.per_domain_cap",
                message=(
                    f"{len(urls)} citations from {domain} exceed the cap of {cap}; "
                    f"cite other sites instead of {_plural(len(extra), 'extra URL')} from it"
                ),
                axis="diversity",
                details={"domain": domain, "count": len(urls), "cap": cap, "over_cap": extra},
            )
        )
    over = sum(max(0, len(u) - cap) for d, u in per_domain.items() if d not in exempt)
    return 1.0 - over / n, offending, exempt, findings


def _required_share(
    policy: DiversityPolicy, klass: str, topics: frozenset[str]
) -> tuple[float, str]:
    """(the highest primary share the kind or a topic asks for, which one asks it)."""
    required = 0.0
    required_by = ""
    for key in (klass, *sorted(topics)):
        want = policy.min_primary_share.get(key)
        if want is not None and want > required:
            required, required_by = want, key
    return required, required_by


def _primary_share(
    n_primary: int, n: int, required: float, required_by: str
) -> tuple[float, Finding | None]:
    """(score, finding): a primary share below the required one is an error."""
    share = n_primary / n
    score = min(1.0, share / required) if required > 0 else 1.0
    if share >= required:
        return score, None
    what = (
        f"no primary sources among {_plural(n, 'citation')}"
        if n_primary == 0
        else f"only {n_primary} of {n} citations are primary sources ({share:.0%})"
    )
    return score, Finding(
        code="diversity.primary_share",
        message=(
            f"{what}; a {required_by} question needs at least {required:.0%} primary "
            "sources (laws, regulator or government pages, filings, papers, standards, "
            "official announcements)"
        ),
        axis="diversity",
        details={
            "primary": n_primary,
            "citations": n,
            "share": share,
            "required": required,
            "required_by": required_by,
            "feedback": (
                f"Cite primary sources for this {required_by} question: the law or "
                "regulation text, the regulator's or government's own pages, filings, "
                "papers or official announcements, not only news, blogs or "
                "encyclopaedias."
            ),
        },
    )


def _cap_waived(exempt: list[str]) -> Finding:
    return Finding(
        code="diversity.cap_waived",
        message=f"per-domain cap waived for {', '.join(exempt)}: the question is about its owner",
        severity=Severity.INFO,
        axis="diversity",
        details={"domains": exempt},
    )


def check_diversity(
    question: str,
    citations: Sequence[CitationReport],
    policy: DiversityPolicy,
    *,
    qclass: QuestionClass | None = None,
) -> AxisResult:
    """Judge the sources of one answer: domain floor, per-domain cap and primary share.

    Counts the distinct cited URLs that resolve (see the module docstring). Over-cap
    citations are ``offending_urls``; a floor or primary shortfall, which exclusion cannot fix,
    is a finding whose ``details["feedback"]`` tells the answer function what to add.
    ``score`` is the lowest of the three sub-scores in 0..1.
    """
    if not policy.enabled:
        return AxisResult(
            name="diversity", passed=True, evaluated=False, details={"reason": "disabled"}
        )
    qc = qclass if qclass is not None else classify_question(question)
    klass = policy.question_class or qc.kind
    about = frozenset(qc.about_domains)
    uncertain, floor_kind = _gate_kind(qc, klass, policy)
    counted = _count_sources(citations, about)
    base_details: dict[str, object] = {
        "question_class": klass,
        "gate_class": floor_kind,
        "plausible_classes": list(qc.plausible),
        "kind": qc.kind,
        "topics": sorted(qc.topics),
        "cues": qc.cues,
    }
    if not counted:
        return AxisResult(
            name="diversity",
            passed=True,
            evaluated=False,
            details={**base_details, "reason": "no cited URL resolved; nothing to judge"},
        )

    findings: list[Finding] = []
    per_domain: dict[str, list[str]] = {}
    for url, domain, _, _ in counted:
        per_domain.setdefault(domain, []).append(url)
    n = len(counted)

    # 1. Domain floor.
    floor = policy.domain_floor.get(floor_kind, 1)
    guess_floor = policy.domain_floor.get(klass, 1)
    if uncertain and guess_floor != floor:
        findings.append(
            _class_uncertain(qc, klass, floor_kind, floor, guess_floor, len(per_domain))
        )
    domain_score, floor_finding = _domain_floor(per_domain, floor, floor_kind)
    findings.extend([floor_finding] if floor_finding is not None else [])
    # 2. Per-domain cap, waived for the domains the question is about.
    cap = policy.per_domain_cap
    cap_score, offending, exempt, cap_findings = _per_domain_cap(per_domain, cap, about, n)
    findings.extend(cap_findings)
    # 3. Primary share per class and topic.
    n_primary = sum(1 for c in counted if c[2])
    required, required_by = _required_share(policy, klass, qc.topics)
    primary_score, primary_finding = _primary_share(n_primary, n, required, required_by)
    findings.extend([primary_finding] if primary_finding is not None else [])
    if exempt:
        findings.append(_cap_waived(exempt))

    return AxisResult(
        name="diversity",
        passed=not any(f.severity is Severity.ERROR for f in findings),
        score=round(min(domain_score, cap_score, primary_score), 4),
        findings=findings,
        offending_urls=offending,
        details={
            **base_details,
            "distinct_domains": len(per_domain),
            "domain_floor": floor,
            "per_domain_cap": cap,
            "domains": {d: len(u) for d, u in per_domain.items()},
            "cap_waived": exempt,
            "primary_share": round(n_primary / n, 4),
            "min_primary_share": required,
            "sources": {
                url: {"domain": d, "primary": p, "category": c} for url, d, p, c in counted
            },
        },
    )


class DiversityCheck:
    """The diversity axis as a registered check (see :func:`check_diversity`)."""

    name = "diversity"
    hint = "Draw on more independent sources (different sites, and primary sources)."
    feeds_back_when_advisory = False

    def __init__(self, policy: Policy) -> None:
        self._policy = policy.diversity

    async def run(self, ctx: CheckContext) -> AxisResult:
        if not self._policy.enabled:
            return skipped(self.name)
        return check_diversity(ctx.question, ctx.citations, self._policy)

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        return "CODE"

    async def aclose(self) -> None:
        return None
