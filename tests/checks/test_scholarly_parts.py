"""The scholarly check's parts on their own: which entries read as papers, the metadata readers
(landing-page tags, Crossref JSON, arXiv Atom), venue names, and the title rules."""

from __future__ import annotations

import json

import pytest

from citeguard.checks.scholarly.compare import find_work, mismatches, place_title
from citeguard.checks.scholarly.entry import MAX_TOKENS, read_entry
from citeguard.checks.scholarly.sources import arxiv_works, crossref_works, page_work
from citeguard.checks.scholarly.work import Person, Work, same_venue
from citeguard.parse import parse_answer
from citeguard.parse.scholarly import looks_scholarly


def test_a_paper_named_with_no_link_is_a_looked_up_citation_and_a_news_title_is_not() -> None:
    answer = parse_answer(
        "Proteins fold [1]. Markets fell [2].\n\nReferences\n"
        "[1] Smith, J., & Lee, K. (2020). Folding proteins quickly. Journal of Biology, 3, 1-9.\n"
        "[2] 《Markets fall again》, Daily Paper, 2024\n"
    )
    (cit,) = answer.citations
    assert cit.url == "reference:1" and cit.normalized_url is None
    assert cit.reference is not None and cit.reference.startswith("Smith, J.")
    assert cit.claim_index == 0
    assert [f.code for f in answer.findings if f.code == "reference_without_url"] == [
        "reference_without_url"
    ]


@pytest.mark.parametrize(
    ("entry", "scholarly"),
    [
        ("Vaswani A, Shazeer N. Attention is all you need. NIPS. 2017.", True),
        ('A. Vaswani and N. Shazeer, "Attention is all you need," in NIPS, 2017.', True),
        ("Ashish Vaswani and Noam Shazeer. 2017. Attention is all you need. In NIPS.", True),
        ("@article{k, title={Attention}, author={A}}", True),
        ("The city council report on housing, 2024", False),
        ("Annual report 2023 of the harbour authority of the city", False),
    ],
)
def test_which_entries_read_as_papers(entry: str, scholarly: bool) -> None:
    assert looks_scholarly(entry) is scholarly


def test_a_hostile_entry_is_read_within_its_caps() -> None:
    entry = read_entry("Smith, J. (2020). " + "word " * 200_000)
    assert len(entry.text) <= 1_500
    assert len(entry.words) <= MAX_TOKENS


def test_landing_page_metadata_from_each_kind_of_tag() -> None:
    dc = (
        b'<html><head><meta name="DC.title" content="Sparse Probing">'
        b'<meta name="DC.creator" content="Garcia, Maria">'
        b'<meta name="DC.date" content="2021-03-04"></head><body></body></html>'
    )
    work = page_work(dc, "https://repo.example.org/x")
    assert work is not None
    assert (work.title, work.year, work.authors[0].family) == ("Sparse Probing", 2021, "Garcia")
    assert work.source == "the Dublin Core tags of repo.example.org"
    ld = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebPage", "name": "not this"},
            {
                "@type": "ScholarlyArticle",
                "headline": "Deep Residual Learning",
                "author": [{"@type": "Person", "givenName": "Kaiming", "familyName": "He"}],
                "datePublished": "2016-06-27",
                "isPartOf": {"name": "CVPR"},
            },
        ],
    }
    page = f'<html><head><script type="application/ld+json">{json.dumps(ld)}</script></head>'
    work = page_work(page.encode(), "https://pub.example.com/a")
    assert work is not None
    assert (work.title, work.year, work.venue, str(work.authors[0])) == (
        "Deep Residual Learning",
        2016,
        "CVPR",
        "Kaiming He",
    )
    news = b'<html><head><meta property="og:title" content="A story"></head></html>'
    assert page_work(news, "https://news.example.com/") is None


def test_crossref_and_arxiv_answers_are_read() -> None:
    body = {
        "status": "ok",
        "message": {
            "items": [
                {
                    "DOI": "10.1/x",
                    "title": ["<i>Main</i>"],
                    "subtitle": ["A subtitle"],
                    "author": [{"given": "Ann", "family": "Lee"}, {"name": "The Consortium"}],
                    "issued": {"date-parts": [[2019, 5]]},
                    "container-title": ["Nature"],
                    "type": "journal-article",
                },
                {"DOI": "10.1/y", "title": ["A preprint"], "type": "posted-content"},
                {"DOI": "10.1/z"},  # no title: not a work
            ]
        },
    }
    works = crossref_works(json.dumps(body).encode())
    assert works is not None and [w.doi for w in works] == ["10.1/x", "10.1/y"]
    assert works[0].title == "Main: A subtitle" and works[0].year == 2019
    assert works[0].published is not None and works[0].published.month == 5
    assert [p.family for p in works[0].authors] == ["Lee", "Consortium"]
    assert works[1].preprint and not works[0].preprint
    assert crossref_works(b"<html>not json</html>") is None
    atom = (
        b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>http://arxiv.org/abs/1706.03762v7'
        b"</id><published>2017-06-12T17:57:34Z</published><title>Attention Is All\n You Need"
        b"</title><author><name>Ashish Vaswani</name></author><arxiv:journal_ref>NeurIPS 2017"
        b"</arxiv:journal_ref></entry><entry><id>http://arxiv.org/api/errors</id>"
        b"<title>Error</title></entry></feed>"
    )
    (paper,) = arxiv_works(atom)
    assert (paper.title, paper.arxiv_id, paper.year) == (
        "Attention Is All You Need",
        "1706.03762v7",
        2017,
    )
    assert paper.venue == "NeurIPS 2017" and not paper.preprint


@pytest.mark.parametrize(
    ("cited", "found", "same"),
    [
        (
            "Adv Neural Inf Process Syst",
            "Advances in Neural Information Processing Systems 35",
            True,
        ),
        ("Proc. NeurIPS", "Advances in Neural Information Processing Systems", True),
        ("AAAI", "Proceedings of the AAAI Conference on Artificial Intelligence", True),
        ("J. Mach. Learn. Res.", "Journal of Machine Learning Research", True),
        ("ICML", "NeurIPS", False),
        ("International Conference on Quantum Machine Learning", "ICML", False),
        ("Mach. Learn.", "J. Mach. Learn. Res.", False),
    ],
)
def test_venue_names(cited: str, found: str, same: bool) -> None:
    assert same_venue(cited, found) is same


PAPER = Work(
    title="BERT: Pre-training of Deep Bidirectional Transformers",
    authors=(Person("Jacob", "Devlin"), Person("Ming-Wei", "Chang")),
    year=2019,
    venue="NAACL",
    source="Crossref",
)


_AUTH = "Devlin, J., & Chang, M.-W."
_TITLE = "BERT: Pre-training of deep bidirectional transformers"


@pytest.mark.parametrize(
    ("entry", "fields"),
    [
        (f"{_AUTH} (2019). BERT. In NAACL.", {"title"}),  # too little of the title to place
        (f"{_AUTH} (2019). {_TITLE}. In NAACL.", set()),
        (f"{_AUTH} (2019). {{BERT}}: {_TITLE[6:]} for language understanding. In NAACL.", set()),
        (f"{_AUTH} (2019). {_TITLE.replace('deep', 'shallow')}. In NAACL.", {"title"}),
        (
            "Devlin J, Chang MW. BERT: pre-training of deep bidirectional transformers. "
            "NAACL. 2019.",
            set(),
        ),
        (f"Devlin, J. et al. (2019). {_TITLE}. NAACL.", set()),
        (f"Devlin, J. (2019). {_TITLE}. NAACL.", {"authors"}),
        (f"{_AUTH} (2018). {_TITLE}. arXiv preprint.", set()),  # a preprint a year early
        (f"{_AUTH} (2017). {_TITLE}. arXiv preprint.", {"year"}),
        (f"{_AUTH} (2018). {_TITLE}. In NAACL.", {"year"}),
        (
            f"{_AUTH} (2019). BERT&#58; Pre-training of deep bidirectional transformers. NAACL.",
            set(),
        ),
        # a hyphen inside a word, and "&" for "and", are spelling, not another title
        (f"{_AUTH} (2019). BERT: Pretraining of deep bi-directional transformers. NAACL.", set()),
    ],
)
def test_what_counts_as_a_wrong_field(entry: str, fields: set[str]) -> None:
    e = read_entry(entry)
    placed = place_title(e, PAPER)
    found = find_work(e, [PAPER]) if placed is None else (PAPER, placed)
    got = {m.field for m in mismatches(e, PAPER, found[1] if found else None)}
    assert got == fields
