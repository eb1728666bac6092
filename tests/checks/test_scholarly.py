"""Scholarly references through the Guard, against local servers on 127.0.0.1 (the farm): a DOI
resolver that redirects to a publisher's page carrying ``citation_*`` tags, a Crossref-format
``/works`` API and an arXiv-format ``/api/query`` API. Every kind of error a reference can carry,
each beside a control that passes."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import pytest
from aiohttp import web
from conftest import Farm

from citeguard import CitationStatus, FetchPolicy, Guard, Policy, SQLiteSnapshotStore
from citeguard.checks.scholarly import check_references
from citeguard.models import CitationReport, FetchResult, Verdict
from citeguard.parse import parse_answer
from citeguard.web.fetch import Fetcher

S = CitationStatus
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

# the papers the local services hold
ATTENTION = {
    "DOI": "10.5555/attn.2017",
    "title": ["Attention Is All You Need"],
    "author": [
        {"given": "Ashish", "family": "Vaswani"},
        {"given": "Noam", "family": "Shazeer"},
        {"given": "Niki", "family": "Parmar"},
    ],
    "issued": {"date-parts": [[2017]]},
    "container-title": ["Advances in Neural Information Processing Systems"],
    "type": "proceedings-article",
}
RESNET = {
    "DOI": "10.5555/resnet.2016",
    "title": ["Deep Residual Learning for Image Recognition"],
    "author": [
        {"given": "Kaiming", "family": "He"},
        {"given": "Xiangyu", "family": "Zhang"},
        {"given": "Shaoqing", "family": "Ren"},
        {"given": "Jian", "family": "Sun"},
    ],
    "issued": {"date-parts": [[2016]]},
    "container-title": ["IEEE Conference on Computer Vision and Pattern Recognition (CVPR)"],
    "type": "proceedings-article",
}
GPT = {
    "DOI": "10.48550/arXiv.2005.14165",
    "title": ["Language Models are Few-Shot Learners"],
    "author": [
        {"given": "Tom", "family": "Brown"},
        {"given": "Benjamin", "family": "Mann"},
        {"given": "Nick", "family": "Ryder"},
    ],
    "issued": {"date-parts": [[2020]]},
    "container-title": [],
    "type": "posted-content",
}
CITATION_TAGS = {
    "Garcia2021": {
        "citation_title": "Sparse Probing of Proteins: A Study",
        "citation_author": ["García, María", "Okafor, Chidi"],
        "citation_publication_date": "2021/03/04",
        "citation_journal_title": "Journal of Protein Science",
        "citation_doi": "10.5555/jps.2021.7",
    }
}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class Services:
    """The DOI resolver, the publisher, Crossref and arXiv on the farm."""

    def __init__(self, farm: Farm, works: list[dict[str, object]]) -> None:
        self.farm = farm
        self.works = works
        self.queries: list[dict[str, str]] = []
        farm.add("doi.org", "*", self._resolve)
        farm.add("www.journal.example.net", "*", self._landing)
        farm.add("api.crossref.test", "*", self._crossref)
        farm.add("export.arxiv.test", "/api/query", self._arxiv)

    async def _resolve(self, request: web.Request) -> web.StreamResponse:
        doi = request.path.lstrip("/")
        if doi in ("10.5555/jps.2021.7",):
            raise web.HTTPFound(self.farm.url("www.journal.example.net", "/article/Garcia2021"))
        if doi == "10.5555/attn.2017":  # a landing page with no scholarly tags
            raise web.HTTPFound(self.farm.url("www.journal.example.net", "/article/bare"))
        return web.Response(status=404, text="DOI Not Found")

    async def _landing(self, request: web.Request) -> web.StreamResponse:
        key = request.path.rsplit("/", 1)[-1]
        if key == "bare":
            page = "<html><head><title>Article</title></head><body><p>Attention.</p></body>"
            return web.Response(text=page + "</html>", content_type="text/html")
        tags = CITATION_TAGS.get(key)
        if tags is None:
            return web.Response(status=404, text="no such article")
        meta = "".join(
            f'<meta name="{name}" content="{escape(v)}">'
            for name, value in tags.items()
            for v in (value if isinstance(value, list) else [value])
        )
        page = f"<html><head><title>{tags['citation_title']}</title>{meta}</head>"
        page += "<body><article><p>Proteins were probed sparsely.</p></article></body></html>"
        return web.Response(text=page, content_type="text/html")

    async def _crossref(self, request: web.Request) -> web.StreamResponse:
        self.queries.append(dict(request.query))
        if request.path.startswith("/works/"):
            doi = request.path[len("/works/") :]
            for w in self.works:
                if str(w["DOI"]).lower() == doi.lower():
                    return web.json_response({"status": "ok", "message": w})
            return web.Response(status=404, text="Resource not found.")
        query = _words(request.query.get("query.bibliographic", ""))
        scored = sorted(
            ((len(query & _words(" ".join(w["title"]))), k) for k, w in enumerate(self.works)),  # type: ignore[arg-type]
            reverse=True,
        )
        rows = int(request.query.get("rows", "5"))
        items = [self.works[k] for score, k in scored[:rows] if score > 0]
        body = {"status": "ok", "message-type": "work-list", "message": {"items": items}}
        return web.Response(text=json.dumps(body), content_type="application/json")

    async def _arxiv(self, request: web.Request) -> web.StreamResponse:
        ident = request.query.get("id_list", "")
        entries = ""
        if ident == "2401.00001":
            entries = (
                "<entry><id>http://arxiv.org/abs/2401.00001v1</id>"
                "<published>2024-01-01T00:00:00Z</published>"
                "<title>Tiny Recursive Models Reason Well</title>"
                "<author><name>Alexia Jolicoeur-Martineau</name></author></entry>"
            )
        feed = f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">{entries}</feed>'
        return web.Response(text=feed, content_type="application/atom+xml")


def _policy(farm: Farm, **scholarly: object) -> Policy:
    return Policy(
        fetch=FetchPolicy(
            allow_private_addresses=True,
            url_timeout=3.0,
            answer_deadline=5.0,
            retries=0,
            doi_resolver_url=farm.url("doi.org", "/"),
        ),
        scholarly={  # type: ignore[arg-type]
            "crossref_url": farm.url("api.crossref.test", "/"),
            "arxiv_api_url": farm.url("export.arxiv.test", "/api/"),
            **scholarly,
        },
        entailment={"check_entailment": False, "backend": "none"},  # type: ignore[arg-type]
        passage={"check_passages": False},  # type: ignore[arg-type]
        diversity={"enabled": False},  # type: ignore[arg-type]
        freshness={"enabled": False},  # type: ignore[arg-type]
    )


@pytest.fixture
def services(farm: Farm) -> Services:
    return Services(farm, [ATTENTION, RESNET, GPT])


async def _check(farm: Farm, entry: str, **scholarly: object) -> tuple[Verdict, CitationReport]:
    text = (
        f"Attention layers replaced recurrence in sequence models [1].\n\nReferences\n[1] {entry}\n"
    )
    async with Guard(_policy(farm, **scholarly), resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(text)
    (report,) = verdict.citations
    return verdict, report


# --------------------------------------------------------------------------------------------
# a DOI: the resolver is a hop, the publisher's page is the paper
# --------------------------------------------------------------------------------------------

DOI_OK = (
    "García, M., & Okafor, C. (2021). Sparse probing of proteins: A study. "
    "Journal of Protein Science. doi:10.5555/jps.2021.7"
)


async def test_a_doi_reaches_the_publisher_and_the_reference_names_its_paper(
    farm: Farm, services: Services
) -> None:
    verdict, report = await _check(farm, DOI_OK)
    assert report.status is S.OK, report.reason
    assert report.via_resolver == "doi.org"
    assert report.final_url == farm.url("www.journal.example.net", "/article/Garcia2021")
    assert report.scholarly is not None and report.scholarly.doi == "10.5555/jps.2021.7"
    assert "citation_* tags of www.journal.example.net" in report.reason
    assert verdict.passed


async def test_a_fabricated_doi_is_not_found(farm: Farm, services: Services) -> None:
    verdict, report = await _check(farm, DOI_OK.replace("jps.2021.7", "jps.2021.8"))
    assert report.status is S.NOT_FOUND
    assert "does not know this identifier" in report.reason
    assert not verdict.passed


@pytest.mark.parametrize(
    ("entry", "field", "cited", "found"),
    [
        (  # a real DOI with another paper's title (hybrid fabrication)
            DOI_OK.replace("Sparse probing of proteins: A study", "Dense folding of enzymes"),
            "title",
            "Dense folding of enzymes",
            "Sparse Probing of Proteins: A Study",
        ),
        (
            DOI_OK.replace("Okafor, C.", "Smith, J."),
            "authors",
            "Smith",
            "María García, Chidi Okafor",
        ),
        (DOI_OK.replace("(2021)", "(2019)"), "year", "2019", "2021"),
        (
            DOI_OK.replace("Journal of Protein Science", "Nature Machine Intelligence"),
            "venue",
            "Nature Machine Intelligence",
            "Journal of Protein Science",
        ),
    ],
)
async def test_a_doi_whose_reference_names_another_paper_is_a_metadata_mismatch(
    farm: Farm, services: Services, entry: str, field: str, cited: str, found: str
) -> None:
    verdict, report = await _check(farm, entry)
    assert report.status is S.METADATA_MISMATCH, report.reason
    assert report.scholarly is not None
    (m,) = report.scholarly.mismatches
    assert (m.field, m.found) == (field, found)
    assert cited in m.cited
    assert m.source == "the citation_* tags of www.journal.example.net"
    assert field in report.reason and found in report.reason
    assert not verdict.passed


@pytest.mark.parametrize(
    ("entry", "status"),
    [
        (
            "Vaswani, A., Shazeer, N., & Parmar, N. (2017). Attention is all you need. In NeurIPS. "
            "doi:10.5555/attn.2017",
            S.OK,
        ),
        (
            "Vaswani, A., Shazeer, N., & Parmar, N. (2015). Attention is all you need. In NeurIPS. "
            "doi:10.5555/attn.2017",
            S.METADATA_MISMATCH,
        ),
    ],
)
async def test_a_doi_whose_landing_page_has_no_tags_is_compared_with_crossref(
    farm: Farm, services: Services, entry: str, status: CitationStatus
) -> None:
    _verdict, report = await _check(farm, entry)
    assert report.status is status, report.reason
    assert report.via_resolver == "doi.org"
    assert (
        report.scholarly is not None and report.scholarly.source == "Crossref (10.5555/attn.2017)"
    )
    assert [q for q in services.queries if "query.bibliographic" in q] == []  # by DOI, no search
    assert farm.count(host="api.crossref.test", path="/works/10.5555/attn.2017") == 1


# --------------------------------------------------------------------------------------------
# no link: looked up in Crossref by the entry's text
# --------------------------------------------------------------------------------------------

ATTN = "Vaswani, A., Shazeer, N., & Parmar, N. (2017). Attention is all you need. In NeurIPS."


@pytest.mark.parametrize(
    "entry",
    [
        ATTN,
        # tolerated: case, accents, LaTeX, "et al.", initials, a subtitle-free title
        "Vaswani A, et al. ATTENTION IS ALL YOU NEED. Adv Neural Inf Process Syst. 2017.",
        'A. Vaswani, N. Shazeer, and N. Parmar, "Attention is all you need," in Proc. NIPS, 2017.',
        "Ashish Vaswani, Noam Shazeer, and Niki Parmar. 2017. Attention Is All You Need. "
        "In Advances in Neural Information Processing Systems.",
        "@inproceedings{v17, title={{Attention} is All you Need}, author={Vaswani, Ashish and "
        "Shazeer, Noam and Parmar, Niki}, booktitle={NeurIPS}, year={2017}}",
        "He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning for image "
        "recognition. In \\emph{Proc. CVPR}.",
        # a preprint's year one off from the record's, where the entry says preprint
        "Brown, T., Mann, B., & Ryder, N. (2021). Language models are few-shot learners. "
        "arXiv preprint.",
    ],
)
async def test_a_real_paper_with_no_link_is_found_with_its_doi(
    farm: Farm, services: Services, entry: str
) -> None:
    verdict, report = await _check(farm, entry)
    assert report.status is S.OK, report.reason
    assert report.url == "reference:1"
    assert report.scholarly is not None and report.scholarly.doi is not None
    assert report.scholarly.doi in report.reason
    assert report.claim_indices == [0]
    # a paper with no page of its own is dated by its metadata (the freshness axis reads it)
    assert report.published is not None and report.date_source == "scholarly metadata"
    assert verdict.passed
    as_json = json.loads(verdict.model_dump_json())
    assert as_json["citations"][0]["scholarly"]["doi"] == report.scholarly.doi


async def test_an_invented_title_with_no_link_is_not_found(farm: Farm, services: Services) -> None:
    entry = "Vaswani, A., & Shazeer, N. (2017). Recurrent gating for protein folding. In NeurIPS."
    verdict, report = await _check(farm, entry)
    assert report.status is S.NOT_FOUND
    assert "no work with this title" in report.reason
    assert not verdict.passed


@pytest.mark.parametrize(
    ("entry", "field", "found"),
    [
        (ATTN.replace("Parmar, N.", "Doe, J."), "authors", "Ashish Vaswani, Noam Shazeer"),
        (ATTN.replace(", & Parmar, N.", ""), "authors", "Niki Parmar"),  # a partial list
        (ATTN.replace("2017", "2031"), "year", "2017"),  # a future date
        (ATTN.replace("NeurIPS", "ICML"), "venue", "Advances in Neural"),
        (ATTN.replace("all you need", "all we need"), "title", "Attention Is All You Need"),
        (  # a preprint cited as a journal paper
            "Brown, T., Mann, B., & Ryder, N. (2020). Language models are few-shot learners. "
            "Journal of Machine Learning Research, 21, 1-40.",
            "venue",
            "a preprint",
        ),
    ],
)
async def test_a_paper_with_no_link_and_a_wrong_field_is_a_metadata_mismatch(
    farm: Farm, services: Services, entry: str, field: str, found: str
) -> None:
    verdict, report = await _check(farm, entry)
    assert report.status is S.METADATA_MISMATCH, report.reason
    assert report.scholarly is not None
    fields = {m.field: m for m in report.scholarly.mismatches}
    assert field in fields
    assert found in fields[field].found or found in fields[field].cited
    assert fields[field].source.startswith("Crossref")
    assert not verdict.passed


async def test_crossref_is_asked_with_the_contact_address_and_the_rows(
    farm: Farm, services: Services
) -> None:
    await _check(farm, ATTN, crossref_mailto="ops@example.org", rows=3)
    (query,) = services.queries
    assert query["mailto"] == "ops@example.org"
    assert query["rows"] == "3"
    assert "Attention is all you need" in query["query.bibliographic"]


async def test_lookups_off_leave_an_unlinked_paper_not_checkable(
    farm: Farm, services: Services
) -> None:
    _verdict, report = await _check(farm, ATTN, lookup_unlinked=False)
    assert report.status is S.NOT_CHECKABLE
    assert services.queries == []


async def test_an_unreachable_crossref_is_unverifiable_not_a_verdict_on_the_paper(
    farm: Farm, services: Services
) -> None:
    _verdict, report = await _check(farm, ATTN, crossref_url="http://no-such-host.test/")
    # the service could not be asked: unverifiable, never a not_found about the paper
    assert report.status is S.CONNECTION_ERROR
    assert "Crossref look-up" in report.reason and "DNS" in report.reason


# --------------------------------------------------------------------------------------------
# the arXiv API, where an arXiv page carries no metadata; a web page is left as it was
# --------------------------------------------------------------------------------------------


async def _stage(farm: Farm, entry: str, url: str, body: bytes) -> dict[str, object]:
    answer = parse_answer(f"A recursive model reasons [1].\n\nReferences\n[1] {entry}\n")
    (cit,) = answer.citations
    assert cit.normalized_url == url
    fetched = {url: FetchResult(url=url, final_url=url, status=S.OK, reason="HTTP 200", body=body)}
    policy = _policy(farm).scholarly
    async with Fetcher(_policy(farm).fetch, resolver=farm.resolver) as fetcher:
        out = await check_references(answer, fetched, fetcher=fetcher, policy=policy)
    return dict(out)


@pytest.mark.parametrize(
    ("entry", "status"),
    [
        (
            "Jolicoeur-Martineau, A. (2024). Tiny recursive models reason well. arXiv:2401.00001",
            S.OK,
        ),
        (
            "Jolicoeur-Martineau, A. (2024). Large recursive models reason badly. arXiv:2401.00001",
            S.METADATA_MISMATCH,
        ),
    ],
)
async def test_an_arxiv_id_whose_page_has_no_metadata_is_read_from_the_arxiv_api(
    farm: Farm, services: Services, entry: str, status: CitationStatus
) -> None:
    url = "https://arxiv.org/abs/2401.00001"
    out = await _stage(farm, entry, url, b"<html><head><title>x</title></head></html>")
    outcome = out[url]
    assert outcome.status is status  # type: ignore[attr-defined]
    assert outcome.report.source == "the arXiv API (arXiv:2401.00001v1)"  # type: ignore[attr-defined]
    assert farm.count(host="export.arxiv.test") == 1


async def test_a_web_page_without_scholarly_metadata_is_not_compared(
    farm: Farm, services: Services
) -> None:
    entry = "Smith, J. (2020). Why lighthouses matter. Harbour News. https://news.example.com/a"
    out = await _stage(
        farm, entry, "https://news.example.com/a", b"<html><head><title>Other</title></head></html>"
    )
    assert out == {}
    assert services.queries == []


# --------------------------------------------------------------------------------------------
# look-ups are recorded and replayed like every fetch; the CLI's flags reach them
# --------------------------------------------------------------------------------------------


async def test_lookups_are_recorded_and_replayed_from_the_snapshot_store(
    farm: Farm, services: Services, tmp_path: Path
) -> None:
    text = "Attention replaced recurrence [1]. Proteins were probed [2].\n\nReferences\n"
    text += f"[1] {ATTN}\n[2] {DOI_OK}\n"
    path = tmp_path / "snap.sqlite"
    store = SQLiteSnapshotStore(path)
    try:
        async with Guard(
            _policy(farm),
            resolver=farm.resolver,
            cache=store,
            snapshot_mode="record",
            now=lambda: NOW,
        ) as g:
            recorded = await g.check(text)
    finally:
        await store.close()
    asked = len(farm.requests)
    assert services.queries and asked
    store = SQLiteSnapshotStore(path, read_only=True)
    try:
        async with Guard(
            _policy(farm),
            resolver=farm.resolver,
            cache=store,
            snapshot_mode="replay",
            now=lambda: NOW,
        ) as g:
            replayed = await g.check(text)
    finally:
        await store.close()
    assert len(farm.requests) == asked  # nothing asked of the servers again
    assert [(c.url, c.status, c.reason, c.scholarly) for c in replayed.citations] == [
        (c.url, c.status, c.reason, c.scholarly) for c in recorded.citations
    ]
    assert {c.status for c in replayed.citations} == {S.OK}


async def test_the_check_command_takes_the_services_urls(
    farm: Farm, services: Services, tmp_path: Path
) -> None:
    answer = tmp_path / "answer.md"
    answer.write_text(f"Attention replaced recurrence [1].\n\nReferences\n[1] {ATTN}\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "citeguard",
        "check",
        str(answer),
        "--json",
        "--allow-private",
        "--entailment",
        "none",
        "--crossref-url",
        farm.url("api.crossref.test", "/"),
        "--crossref-mailto",
        "ops@example.org",
        "--resolve",
        f"api.crossref.test:{farm.port}:127.0.0.1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    body = json.loads(out)
    (cit,) = body["citations"]
    assert (cit["url"], cit["status"]) == ("reference:1", "ok"), err.decode()
    assert cit["scholarly"]["doi"] == "10.5555/attn.2017"
    assert services.queries[0]["mailto"] == "ops@example.org"


async def test_an_answer_makes_at_most_max_lookups_requests(farm: Farm, services: Services) -> None:
    n = 40
    claims = " ".join(f"Finding {k} holds [{k}]." for k in range(1, n + 1))
    refs = "\n".join(
        f"[{k}] Doe, J., & Roe, R. (2020). Invented study number {k} of things. In NeurIPS."
        for k in range(1, n + 1)
    )
    policy = _policy(farm, max_lookups=5)
    async with Guard(policy, resolver=farm.resolver, now=lambda: NOW) as g:
        verdict = await g.check(f"{claims}\n\nReferences\n{refs}\n")
    statuses = [c.status for c in verdict.citations]
    assert len(services.queries) == 5
    assert statuses.count(S.NOT_FOUND) == 5
    assert statuses.count(S.NOT_CHECKABLE) == n - 5
    spent = next(c for c in verdict.citations if c.status is S.NOT_CHECKABLE)
    assert "look-ups are spent" in spent.reason
