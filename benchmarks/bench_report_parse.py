"""How well the parser binds a long report's markers to their URLs (issue 43, families 1, 7, 8).

The real research reports the issue was measured on are not the project's, so this scenario
generates seeded synthetic ones in English and Chinese, written here, in every shape the issue
lists: entries ``[n] URL - title``, ``[n]: URL`` / ``［n］：URL``, ``n. Title. URL``, a title line
with its URL on the next line, entries that list several numbers for one URL (``[31] [48] [54]
URL``), full-width markers (``【1】``, ``［1］``), a numbered list of titles without URLs before
the list of URLs (two bibliographies), and scholarly identifiers (``doi:10.…``,
``https://doi.org/10.…``, a bare ``10.NNNN/…``, ``arXiv:…``) in entries and as inline links.

Each report knows which URL every marker cites (a DOI or arXiv id: its resolver URL). Per shape
and language it reports the share of markers bound to their URL (a marker bound to the wrong URL
does not count), reference errors per report (error findings of the validity axis) and the
``blocked_scheme`` count, parsed with the default policy's answer limits, as ``Guard.check``
parses.

Run alone: ``python -m benchmarks.bench_report_parse [--reports N] [--seed N]`` (writes
``benchmarks/results/report_parse.json``), or in the suite: ``python -m benchmarks --only
report_parse``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from citeguard.models import Answer, Severity
from citeguard.parse import AnswerLimits
from citeguard.policy import Policy

if TYPE_CHECKING:
    from benchmarks.context import Config, Context

RESULTS = Path(__file__).resolve().parent / "results"

Lang = Literal["en", "zh"]
EntryStyle = Literal["url_dash_title", "colon", "numbered", "title_then_url"]
ENTRY_STYLES: tuple[EntryStyle, ...] = ("url_dash_title", "colon", "numbered", "title_then_url")


@dataclass(frozen=True)
class Shape:
    """How a report writes its markers and its reference list."""

    entry: EntryStyle = "url_dash_title"
    fullwidth: bool = False  # 【n】 / ［n］ markers and entries
    two_lists: bool = False  # a numbered list of titles without URLs first
    multi_number: bool = False  # several numbers share one URL: "[31] [48] [54] URL"
    scholarly: bool = False  # a share of the sources are DOIs and arXiv ids
    heading: bool = True  # the URL list sits under a "References" / "参考资料" heading

    @property
    def name(self) -> str:
        flags = [
            f for f in ("fullwidth", "two_lists", "multi_number", "scholarly") if getattr(self, f)
        ]
        return "+".join([self.entry, *flags] + ([] if self.heading else ["no_heading"]))


@dataclass
class Report:
    """A generated report and, for every number it uses, the URL that number cites."""

    lang: Lang
    shape: Shape
    text: str
    expected: dict[str, str]  # reference number → the URL it names (a DOI: its resolver URL)
    markers: int  # numbered markers written in the body (a "[3][7]" is two)
    inline_ids: dict[str, str] = field(default_factory=dict)  # inline DOI link → resolver URL
    pages: dict[str, str] = field(default_factory=dict)  # plain URL → its page's title
    cited: set[str] = field(default_factory=set)  # the numbers the body's markers cite


# --------------------------------------------------------------------------------------------
# The words of the reports (written for this benchmark)
# --------------------------------------------------------------------------------------------

_EN_SUBJECTS = (
    "The regional port authority",
    "Battery makers in the northern provinces",
    "A survey of 2,000 households",
    "The national grid operator",
    "Independent analysts",
    "The ministry's annual review",
    "Coastal fisheries",
    "Freight rail operators",
    "Municipal water utilities",
    "Small wind-farm cooperatives",
    "University hospital networks",
    "The statistics office",
)
_EN_VERBS = (
    "reported",
    "estimated",
    "recorded",
    "projected",
    "described",
    "measured",
    "warned of",
    "documented",
)
_EN_OBJECTS = (
    "a rise of {n}% in throughput",
    "{n} new installations over the year",
    "a fall in average waiting times to {n} minutes",
    "capacity additions of {n} megawatts",
    "a backlog of {n} pending applications",
    "costs that were {n}% above the earlier plan",
    "{n} sites still awaiting inspection",
    "an export volume of {n} thousand tonnes",
)
_EN_TAILS = (
    " in {y}",
    " during the {y} season",
    " compared with {y}",
    " by the end of {y}",
    "",
)
_EN_HEADINGS = (
    "Background",
    "Market structure",
    "Supply and demand",
    "Policy environment",
    "Regional differences",
    "Risks",
    "Outlook",
    "Methods and data",
)
_EN_TITLE_WORDS = (
    "Annual report on port logistics",
    "Grid reliability assessment",
    "Household energy survey",
    "Review of freight corridors",
    "Water utility benchmarking",
    "Battery supply chain outlook",
    "Fisheries management plan",
    "Hospital capacity statistics",
    "Wind cooperative census",
    "Inspection backlog briefing",
)
_EN_PUBLISHERS = ("Ministry of Transport", "Energy Agency", "Statistics Office", "Port Council")

_ZH_SUBJECTS = (
    "该地区的港口管理局",
    "北方省份的电池制造商",
    "一项覆盖两千户家庭的调查",
    "国家电网运营方",
    "独立分析机构",
    "主管部门的年度评估",
    "沿海渔业",
    "铁路货运企业",
    "城市供水公司",
    "小型风电合作社",
    "大学附属医院",
    "统计部门",
)
_ZH_PREDICATES = (
    "报告吞吐量增长了{n}%",
    "估计全年新增{n}处设施",
    "记录到平均等待时间降至{n}分钟",
    "预计新增装机容量{n}兆瓦",
    "指出仍有{n}份申请待审批",
    "称成本比原计划高出{n}%",
    "表示还有{n}个站点等待检查",
    "统计出口量为{n}千吨",
)
_ZH_TAILS = ("，时间为{y}年", "，与{y}年相比", "，截至{y}年底", "")
_ZH_HEADINGS = (
    "一、背景",
    "二、市场结构",
    "三、供需情况",
    "四、政策环境",
    "五、区域差异",
    "六、风险",
    "七、展望",
)
_ZH_TITLES = (
    "港口物流年度报告",
    "电网可靠性评估",
    "家庭能源调查",
    "货运走廊回顾",
    "供水企业对标分析",
    "电池供应链展望",
    "渔业管理规划",
    "医院容量统计",
    "风电合作社普查",
    "检查积压情况简报",
)
_ZH_PUBLISHERS = ("交通运输部", "能源研究院", "国家统计局", "港口协会")
_AUTHORS = ("Chen L.", "Okafor A.", "Lindqvist M.", "Haddad R.", "Novak P.", "Tanaka Y.")
_JOURNALS = ("Energy Policy", "Transport Reviews", "Water Research", "J. Applied Statistics")


def _marker(numbers: list[int], fullwidth: bool, rng: random.Random) -> str:
    if fullwidth:
        left, right = rng.choice((("【", "】"), ("［", "］")))
        if len(numbers) > 1 and rng.random() < 0.5:
            return left + "，".join(map(str, numbers)) + right
        return "".join(f"{left}{n}{right}" for n in numbers)
    if len(numbers) > 1 and rng.random() < 0.5:
        return "[" + ", ".join(map(str, numbers)) + "]"
    return "".join(f"[{n}]" for n in numbers)


def _entry_marks(numbers: list[int], fullwidth: bool, colon: bool) -> str:
    if fullwidth:
        marks = " ".join(f"【{n}】" if not colon else f"［{n}］" for n in numbers)
        return marks + ("：" if colon else "")
    return " ".join(f"[{n}]" for n in numbers) + (":" if colon else "")


def _scholarly_id(rng: random.Random, seed: int, k: int) -> tuple[str, str]:
    """(the identifier as a report writes it, its resolver URL)."""
    doi = f"10.{5000 + seed % 4000}/rp.{seed}.{k}"
    kind = rng.choice(("doi_prefix", "doi_url", "bare_doi", "arxiv"))
    if kind == "arxiv":
        ident = f"{2300 + k % 12 + 1}.{10000 + (seed * 37 + k) % 89999:05d}"
        return f"arXiv:{ident}", f"https://arxiv.org/abs/{ident}"
    written = {"doi_prefix": f"doi:{doi}", "doi_url": f"https://doi.org/{doi}", "bare_doi": doi}
    return written[kind], f"https://doi.org/{doi}"


def _owners(rng: random.Random, shape: Shape, n_numbers: int) -> tuple[int, list[int]]:
    """Numbers → sources: one each, or several numbers sharing one URL (``multi_number``);
    (the number of sources, the source of each number)."""
    if not shape.multi_number:
        return n_numbers, list(range(n_numbers))
    n_sources = max(3, n_numbers // 3)
    owner = [rng.randrange(n_sources) for _ in range(n_numbers)]
    for s in range(n_sources):
        owner[s] = s  # every source is cited by at least one number
    rng.shuffle(owner)
    return n_sources, owner


@dataclass
class _Sources:
    """Each source's title, the identifier the report writes, the URL it resolves to, and the
    pages a plain URL serves (its title)."""

    written: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    pages: dict[str, str] = field(default_factory=dict)


def _sources(
    rng: random.Random,
    seed: int,
    zh: bool,
    shape: Shape,
    n_sources: int,
    url_of: Callable[[int], str],
) -> _Sources:
    """Every source's title and identifier: a plain URL, or (``scholarly``, half of them) a DOI
    or arXiv id."""
    out = _Sources()
    for s in range(n_sources):
        title = (
            f"{rng.choice(_ZH_TITLES)}（{2019 + s % 6}）"
            if zh
            else f"{rng.choice(_EN_TITLE_WORDS)} {2019 + s % 6}"
        )
        out.titles.append(title)
        if shape.scholarly and rng.random() < 0.5:
            written, resolved = _scholarly_id(rng, seed, s)
        else:
            written = resolved = url_of(s)
            out.pages[resolved] = title
        out.written.append(written)
        out.expected.append(resolved)
    return out


@dataclass
class _Body:
    """The report's body as it is written: paragraphs, markers placed so far, the inline
    scholarly links (marker → URL) and the numbers cited."""

    paragraphs: list[str] = field(default_factory=list)
    markers: int = 0
    inline_ids: dict[str, str] = field(default_factory=dict)
    cited_numbers: set[str] = field(default_factory=set)


def _claim_text(rng: random.Random, zh: bool) -> tuple[str, int]:
    """One sentence's claim (no marker, no full stop) and its year."""
    num = rng.randint(3, 97)
    year = rng.randint(2015, 2025)
    if zh:
        text = rng.choice(_ZH_SUBJECTS) + rng.choice(_ZH_PREDICATES).format(n=num)
        return text + rng.choice(_ZH_TAILS).format(y=year), year
    text = f"{rng.choice(_EN_SUBJECTS)} {rng.choice(_EN_VERBS)} "
    return text + rng.choice(_EN_OBJECTS).format(n=num) + rng.choice(_EN_TAILS).format(y=year), year


@dataclass(frozen=True)
class _Plan:
    """What every sentence of the body reads: the report's seed, language and shape, how many
    markers to place over how many numbers, and the first source's title (inline links')."""

    seed: int
    zh: bool
    shape: Shape
    n_markers: int
    n_numbers: int
    first_title: str


def _sentence(rng: random.Random, body: _Body, plan: _Plan) -> str:
    """One sentence with its marker (most sentences cite one or two numbers; ``scholarly``: half
    of the others an inline DOI link), counted into ``body``."""
    seed, zh, shape, n_markers = plan.seed, plan.zh, plan.shape, plan.n_markers
    n_numbers, first_title = plan.n_numbers, plan.first_title
    text, year = _claim_text(rng, zh)
    cited: list[int] = []
    if body.markers < n_markers and rng.random() < 0.85:
        k = 2 if rng.random() < 0.15 and body.markers + 1 < n_markers else 1
        cited = sorted(rng.sample(range(1, n_numbers + 1), k))
        body.cited_numbers.update(map(str, cited))
        body.markers += k
    mark = _marker(cited, shape.fullwidth or (zh and rng.random() < 0.2), rng)
    if shape.scholarly and not cited and rng.random() < 0.5:
        written, resolved = _scholarly_id(rng, seed + 7919, len(body.inline_ids))
        if not written.startswith("arXiv:"):
            doi = resolved.removeprefix("https://doi.org/")
            author = rng.choice(_AUTHORS).split()[0]
            link = f"[{author}, {year}, {first_title}](doi:{doi})"
            body.inline_ids[link] = resolved
            mark = " " + link
    if zh:
        return f"{text}{mark}。"
    return f"{text}{' ' if mark and not mark.startswith(' ') else ''}{mark.strip()}."


def _body(rng: random.Random, plan: _Plan) -> _Body:
    """Headed sections of paragraphs, markers at the end of most sentences, until
    ``n_markers`` are placed."""
    body = _Body()
    zh = plan.zh
    headings = _ZH_HEADINGS if zh else _EN_HEADINGS
    section = 0
    while body.markers < plan.n_markers:
        if not body.paragraphs or rng.random() < 0.2:
            head = headings[section % len(headings)]
            body.paragraphs.append(f"## {head}" if zh else f"## {section + 1}. {head}")
            section += 1
        sentences = [_sentence(rng, body, plan) for _ in range(rng.randint(3, 5))]
        body.paragraphs.append(("" if zh else " ").join(sentences))
    return body


def _title_list(
    rng: random.Random, zh: bool, n_numbers: int, owner: list[int], titles: list[str]
) -> list[str]:
    """``two_lists``' first list: the titles, numbered, without URLs."""
    refs = ["## 参考文献" if zh else "## References"]
    for n in range(n_numbers):
        title = titles[owner[n]]
        if zh:
            refs.append(f"{n + 1}. 《{title}》，{rng.choice(_ZH_PUBLISHERS)}，{2019 + n % 6}年")
        else:
            refs.append(f"{n + 1}. {title}, {rng.choice(_EN_PUBLISHERS)}, {2019 + n % 6}")
    refs.append("")
    return refs


def _entry(
    rng: random.Random, zh: bool, shape: Shape, s: int, nums: list[int], sources: _Sources
) -> list[str]:
    """The reference entry (one or two lines) of source ``s``, listing every number ``nums``
    that cites it, in the shape's entry style."""
    entry = shape.entry
    style = "url_dash_title" if entry == "numbered" and len(nums) > 1 else entry
    written, title = sources.written[s], sources.titles[s]
    scholarly = written != sources.expected[s] or written.startswith("https://doi.org/")
    if scholarly and style != "title_then_url":
        author, journal = rng.choice(_AUTHORS), rng.choice(_JOURNALS)
        text = f"{author} ({2019 + s % 6}). {title}. {journal}. {written}"
        if style == "numbered":
            return [f"{nums[0]}. {text}"]
        return [f"{_entry_marks(nums, shape.fullwidth, style == 'colon')} {text}"]
    if style == "url_dash_title":
        return [f"{_entry_marks(nums, shape.fullwidth, False)} {written} - {title}"]
    if style == "colon":
        return [f"{_entry_marks(nums, shape.fullwidth, True)} {written}"]
    if style == "numbered":
        return [f"{nums[0]}. {title}. {written}"]
    label = rng.choice(("", "", "URL: ", "链接：" if zh else "Link: "))
    return [f"{_entry_marks(nums, shape.fullwidth, False)} {title}", f"{label}{written}"]


def _references(
    rng: random.Random, zh: bool, shape: Shape, n_numbers: int, owner: list[int], sources: _Sources
) -> list[str]:
    """The reference list(s): the titles first (``two_lists``), the heading (``heading``),
    then one entry per source."""
    refs = _title_list(rng, zh, n_numbers, owner, sources.titles) if shape.two_lists else []
    if shape.heading:
        refs.append(
            ("## 来源" if shape.two_lists else "## 参考资料")
            if zh
            else ("## Sources" if shape.two_lists else "## References")
        )
    # one entry per source, listing every number that cites it
    numbers_of: dict[int, list[int]] = {}
    for n in range(n_numbers):
        numbers_of.setdefault(owner[n], []).append(n + 1)
    for s in sorted(numbers_of, key=lambda s: numbers_of[s][0]):
        refs += _entry(rng, zh, shape, s, numbers_of[s], sources)
    return refs


def make_report(
    seed: int,
    lang: Lang,
    shape: Shape,
    *,
    n_markers: int,
    url_of: Callable[[int], str] = lambda k: f"https://site{k % 23}.example.com/docs/{k}",
) -> Report:
    """A report of about ``n_markers`` numbered markers over dozens of paragraphs, its reference
    list written in ``shape``. ``url_of(k)``: the plain URL of source ``k``. The steps draw
    from one seeded generator in this order: owners, sources, body, references."""
    rng = random.Random(f"{seed}:{lang}:{shape.name}")
    zh = lang == "zh"
    n_numbers = max(6, n_markers // 3)
    n_sources, owner = _owners(rng, shape, n_numbers)
    sources = _sources(rng, seed, zh, shape, n_sources, url_of)
    expected = {str(n + 1): sources.expected[owner[n]] for n in range(n_numbers)}
    body = _body(rng, _Plan(seed, zh, shape, n_markers, n_numbers, sources.titles[0]))
    refs = _references(rng, zh, shape, n_numbers, owner, sources)
    text = "\n\n".join(body.paragraphs) + "\n\n" + "\n".join(refs) + "\n"
    return Report(
        lang,
        shape,
        text,
        expected,
        body.markers,
        body.inline_ids,
        sources.pages,
        body.cited_numbers,
    )


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------

_LIMITS = AnswerLimits.of(Policy())


def measure(report: Report, answer: Answer | None = None) -> dict[str, Any]:
    """Markers bound to their URL, reference errors and ``blocked_scheme`` findings of one
    report (``answer``: its parse, else parsed here with the default policy's limits)."""
    if answer is None:
        answer = _LIMITS.parse(
            report.text,
            allowed_schemes=Policy().fetch.allowed_schemes,
            references=None,
            documents=None,
        )
    bound = sum(
        1
        for c in answer.citations
        if c.kind == "numbered" and c.label is not None and report.expected.get(c.label) == c.url
    )
    inline = sum(1 for c in answer.citations if report.inline_ids.get(c.marker) == c.url)
    errors = Counter(
        f.code
        for f in answer.findings
        if f.severity is Severity.ERROR and f.axis in (None, "validity")
    )
    return {
        "markers": report.markers,
        "bound": bound,
        "inline_ids": len(report.inline_ids),
        "inline_bound": inline,
        "errors": dict(errors),
        "blocked_scheme": sum(f.code == "blocked_scheme" for f in answer.findings),
    }


def shapes() -> list[Shape]:
    """Every entry style with each feature alone, and every feature at once."""
    out: list[Shape] = []
    for entry in ENTRY_STYLES:
        out.append(Shape(entry))
        out.append(Shape(entry, fullwidth=True))
        out.append(Shape(entry, two_lists=True))
        out.append(Shape(entry, multi_number=True))
        out.append(Shape(entry, scholarly=True))
        out.append(Shape(entry, heading=False))
        out.append(Shape(entry, fullwidth=True, two_lists=True, multi_number=True, scholarly=True))
    return out


def bench(reports_per_shape: int, seed: int = 0) -> dict[str, Any]:
    """Generate ``reports_per_shape`` reports per shape and language (50–300 markers each) and
    measure each."""
    rng = random.Random(seed)
    by_shape: dict[str, dict[str, Any]] = {}
    totals: dict[str, Counter[str]] = {"en": Counter(), "zh": Counter()}
    started = time.perf_counter()
    n_reports = 0
    for shape in shapes():
        for lang in ("en", "zh"):
            acc: Counter[str] = Counter()
            for r in range(reports_per_shape):
                report = make_report(
                    seed * 100_003 + r, lang, shape, n_markers=rng.randint(50, 300)
                )
                m = measure(report)
                n_reports += 1
                acc["reports"] += 1
                acc["markers"] += m["markers"]
                acc["bound"] += m["bound"]
                acc["inline_ids"] += m["inline_ids"]
                acc["inline_bound"] += m["inline_bound"]
                acc["errors"] += sum(m["errors"].values())
                acc["reports_with_errors"] += bool(m["errors"])
                acc["blocked_scheme"] += m["blocked_scheme"]
                for code, k in m["errors"].items():
                    acc["error:" + code] += k
            totals[lang] += acc
            by_shape[f"{shape.name}/{lang}"] = _row(acc)
    overall = totals["en"] + totals["zh"]
    return {
        "seed": seed,
        "reports": n_reports,
        "parse_s": round(time.perf_counter() - started, 2),
        "overall": _row(overall),
        "by_language": {lang: _row(acc) for lang, acc in totals.items()},
        "by_shape": by_shape,
    }


def _row(acc: Counter[str]) -> dict[str, Any]:
    reports = max(1, acc["reports"])
    return {
        "reports": acc["reports"],
        "markers": acc["markers"],
        "bound_share": round(acc["bound"] / max(1, acc["markers"]), 4),
        "inline_ids_bound": f"{acc['inline_bound']}/{acc['inline_ids']}",
        "errors_per_report": round(acc["errors"] / reports, 2),
        "reports_with_errors": acc["reports_with_errors"],
        "blocked_scheme": acc["blocked_scheme"],
        "errors_by_code": {k[6:]: v for k, v in sorted(acc.items()) if k.startswith("error:")},
    }


def _targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    o = res["overall"]
    return [
        {
            "name": "report markers bound to their URL (synthetic reports, every shape)",
            "target": ">= 0.99",
            "value": o["bound_share"],
            "met": o["bound_share"] >= 0.99,
        },
        {
            "name": "reference errors per report (synthetic reports)",
            "target": "0",
            "value": o["errors_per_report"],
            "met": o["errors_per_report"] == 0,
        },
        {
            "name": "blocked_scheme for a DOI or arXiv id (synthetic reports)",
            "target": "0",
            "value": o["blocked_scheme"],
            "met": o["blocked_scheme"] == 0,
        },
    ]


async def scenario(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``report_parse``: 5 reports per shape and language (full), 2 (quick), 1 (smoke)."""
    import asyncio

    res = await asyncio.to_thread(bench, cfg.pick(5, 2, 1), cfg.seed)
    res["targets"] = _targets(res)
    return res


def summary_lines(r: dict[str, Any]) -> list[str]:
    """The SUMMARY.md section of the ``report_parse`` scenario."""
    lines = [
        "## Report parse rate (synthetic reports, issue 43)",
        "",
        f"{r['reports']} generated reports (seed {r['seed']}), English and Chinese, 50–300 "
        "markers each, in every shape the issue lists.",
        "",
        "| reports | markers | bound to their URL | errors per report | reports with errors "
        "| blocked_scheme |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in [("all", r["overall"]), *r["by_language"].items()]:
        lines.append(
            f"| {name} ({row['reports']}) | {row['markers']} | {row['bound_share']} | "
            f"{row['errors_per_report']} | {row['reports_with_errors']} | "
            f"{row['blocked_scheme']} |"
        )
    lines.append("")
    return lines


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reports", type=int, default=5, help="reports per shape and language")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    res = bench(args.reports, args.seed)
    res["targets"] = _targets(res)
    out = args.out or RESULTS / "report_parse.json"
    out.write_text(json.dumps(res, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print("\n".join(summary_lines(res)))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
