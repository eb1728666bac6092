"""The source table: is a cited URL a primary or a secondary source, and of which kind.

One named table, :data:`SOURCE_TABLE`, evaluated in order by one loop: the first entry that
matches a URL decides its category (the way lychee keeps its per-site quirks, each entry named,
with a reason and a test). An entry matches when all of the conditions it sets hold:

* ``domains``: the host is one of them or a subdomain of one (the longest listed suffix is the
  ``matched`` name in the reason, so ``eur-lex.europa.eu`` reads as itself, not ``europa.eu``);
* ``host``: a regex searched in the host (``.gov``, ``.ac.uk``, ...);
* ``host_prefixes``: the host starts with one of them (``investor.``, ``docs.``, ...);
* ``path``: a regex searched in the lowercased path (``/archives/edgar/``, ``/press/``, ...);
* ``title``: a regex searched in the page title.

The order is the precedence: URL-pattern refinements of known domains first (SEC EDGAR paths
are filings, a journal's ``/news/`` section is news), then the known domains, government
suffixes, investor and press pages, DOI paths, the page's JSON-LD types (the one entry whose
``category`` is ``None``: the declared type names the category), blog, forum and documentation
patterns, academic hosts and title hints. A URL no entry matches is ``unknown`` and secondary.
An entry's category is primary exactly when it is in :data:`PRIMARY_CATEGORIES`.

Domains are listed once each, and an entry never lists a parent (``nih.gov``) of a domain a
later entry lists (``pubmed.ncbi.nlm.nih.gov``) unless it lists that domain too: the most
specific listed domain decides, whatever the order (tests/checks/test_sources.py checks it).

:func:`with_source_kinds` classifies each citation once, where the pages are at hand, and
stores the verdict on the report (``primary``, ``source_kind``) for every later stage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from citeguard.models import CitationReport, Page
from citeguard.web.urls import MAX_URL_CHARS, UrlProblem, host_of, normalize_url

__all__ = [
    "PRIMARY_CATEGORIES",
    "SOURCE_TABLE",
    "Sample",
    "SourceKind",
    "SourceRule",
    "classify_source",
    "host_and_path",
    "source_rule",
    "with_source_kinds",
]


class SourceKind(BaseModel):
    """Primary or secondary, the category that decided it, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    primary: bool
    category: str
    reason: str


#: Categories that count as primary sources.
PRIMARY_CATEGORIES = frozenset(
    {
        "government",
        "regulator",
        "law",
        "court",
        "standard",
        "paper",
        "preprint",
        "doi",
        "filing",
        "investor_relations",
        "press_release",
        "official_docs",
        "repository",
        "first_party",
    }
)


class Sample(NamedTuple):
    """A URL (with the title and JSON-LD types its page would carry) to test an entry on."""

    url: str
    title: str | None = None
    page_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceRule:
    """One entry of the source table (see the module docstring for how it matches)."""

    name: str
    category: str | None  # None: the page's JSON-LD type names the category
    why: str  # one line: why the entry exists
    example: Sample  # classifies to ``category`` by this entry
    near_miss: Sample  # looks like it, must not classify to ``category``
    domains: frozenset[str] = frozenset()
    host: re.Pattern[str] | None = None
    host_prefixes: tuple[str, ...] = ()
    path: re.Pattern[str] | None = None
    title: re.Pattern[str] | None = None
    # Formatted with matched (the listed domain, else the host), host and label (the category
    # with spaces).
    reason: str = "{matched} is a {label} site"
    # A page on the domain that declares itself secondary (NewsArticle, BlogPosting) is that.
    demoted_by_page_types: bool = False


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --------------------------------------------------------------------------------------------
# Domain lists (exact hosts and registrable domains; a subdomain matches its listed parent)
# --------------------------------------------------------------------------------------------

_LAW = _names(
    """eur-lex.europa.eu legislation.gov.uk law.cornell.edu congress.gov govinfo.gov
    federalregister.gov ecfr.gov uscode.house.gov gesetze-im-internet.de legifrance.gouv.fr
    laws-lois.justice.gc.ca boe.es normattiva.it wetten.overheid.nl legislation.gov.au
    austlii.edu.au canlii.org bailii.org"""
)
_COURTS = _names(
    """supremecourt.gov curia.europa.eu uscourts.gov courtlistener.com judiciary.uk
    echr.coe.int hudoc.echr.coe.int"""
)
_REGULATORS = _names(
    """sec.gov fda.gov ftc.gov fcc.gov cftc.gov finra.org fincen.gov federalreserve.gov
    consumerfinance.gov nhtsa.gov faa.gov osha.gov ema.europa.eu esma.europa.eu eba.europa.eu
    eiopa.europa.eu edpb.europa.eu edps.europa.eu ecb.europa.eu fca.org.uk ico.org.uk
    ofcom.org.uk bankofengland.co.uk cma.gov.uk mhra.gov.uk cnil.fr amf-france.org bafin.de
    bfarm.de bundesnetzagentur.de tga.gov.au asic.gov.au oaic.gov.au"""
)
_STANDARDS = _names(
    """iso.org iec.ch ietf.org rfc-editor.org datatracker.ietf.org w3.org whatwg.org etsi.org
    itu.int standards.ieee.org unicode.org ecma-international.org tc39.es cen.eu cencenelec.eu
    astm.org ansi.org 3gpp.org khronos.org nist.gov csrc.nist.gov owasp.org openid.net
    oasis-open.org"""
)
_JOURNALS = _names(
    """nature.com science.org sciencedirect.com springer.com link.springer.com wiley.com
    onlinelibrary.wiley.com dl.acm.org acm.org ieeexplore.ieee.org nejm.org thelancet.com
    bmj.com jamanetwork.com cell.com plos.org journals.plos.org pnas.org frontiersin.org mdpi.com
    pubmed.ncbi.nlm.nih.gov ncbi.nlm.nih.gov pmc.ncbi.nlm.nih.gov europepmc.org aclanthology.org
    openreview.net proceedings.neurips.cc papers.nips.cc proceedings.mlr.press jmlr.org
    academic.oup.com tandfonline.com journals.sagepub.com jstor.org journals.aps.org
    iopscience.iop.org pubs.acs.org royalsocietypublishing.org annualreviews.org
    cochranelibrary.com biomedcentral.com elifesciences.org usenix.org aaai.org ijcai.org
    cvf.com openaccess.thecvf.com"""
)
_PREPRINTS = _names(
    """arxiv.org biorxiv.org medrxiv.org ssrn.com papers.ssrn.com osf.io preprints.org
    researchsquare.com chemrxiv.org eprint.iacr.org hal.science hal.archives-ouvertes.fr
    psyarxiv.com"""
)
_DOI_RESOLVERS = _names("doi.org dx.doi.org")
_GOVERNMENTS = _names(
    """who.int un.org oecd.org worldbank.org imf.org bis.org europa.eu nih.gov cdc.gov
    canada.ca data.gov census.gov bls.gov"""
)
_PRESS_WIRES = _names(
    "prnewswire.com businesswire.com globenewswire.com accesswire.com newswire.ca"
)
_DOCS_SITES = _names("readthedocs.io readthedocs.org docs.rs pkg.go.dev learn.microsoft.com")
_CODE_HOSTS = _names(
    "github.com gitlab.com codeberg.org bitbucket.org sourceforge.net pypi.org npmjs.com"
)
_NEWS = _names(
    """nytimes.com washingtonpost.com wsj.com ft.com bbc.co.uk bbc.com cnn.com reuters.com
    apnews.com bloomberg.com theguardian.com guardian.co.uk economist.com cnbc.com forbes.com
    businessinsider.com insider.com techcrunch.com theverge.com wired.com arstechnica.com
    engadget.com zdnet.com cnet.com axios.com politico.com politico.eu npr.org nbcnews.com
    cbsnews.com abcnews.go.com foxnews.com usatoday.com latimes.com time.com theatlantic.com
    newsweek.com vox.com huffpost.com independent.co.uk telegraph.co.uk dailymail.co.uk
    lemonde.fr spiegel.de faz.net zeit.de elpais.com aljazeera.com scmp.com nikkei.com
    asia.nikkei.com venturebeat.com statnews.com fiercebiotech.com fiercepharma.com
    marketwatch.com barrons.com theregister.com tomshardware.com anandtech.com 9to5mac.com
    macrumors.com androidauthority.com gizmodo.com mashable.com thenextweb.com
    technologyreview.com sciencedaily.com phys.org newscientist.com livescience.com
    scientificamerican.com euronews.com dw.com france24.com lefigaro.fr corriere.it
    theglobeandmail.com abc.net.au smh.com.au hindustantimes.com timesofindia.indiatimes.com
    indiatimes.com thehill.com fortune.com fastcompany.com qz.com semafor.com
    theinformation.com protocol.com infoq.com medpagetoday.com healio.com law360.com
    reuters.co.uk ap.org upi.com"""
)
_BLOGS = _names(
    """medium.com substack.com wordpress.com blogspot.com blogger.com tumblr.com ghost.io
    hashnode.dev dev.to hubpages.com wix.com weebly.com typepad.com livejournal.com
    towardsdatascience.com hackernoon.com seekingalpha.com"""
)
_CONSUMER_HEALTH = _names(
    """webmd.com healthline.com verywellhealth.com medicalnewstoday.com everydayhealth.com
    drugs.com mayoclinic.org clevelandclinic.org health.com"""
)
_ENCYCLOPEDIAS = _names(
    """wikipedia.org wikimedia.org wikiwand.com britannica.com fandom.com investopedia.com
    scholarpedia.org encyclopedia.com wiktionary.org wikidata.org"""
)
_AGGREGATORS = _names(
    """news.google.com google.com bing.com duckduckgo.com yahoo.com news.yahoo.com
    finance.yahoo.com msn.com flipboard.com feedly.com ground.news allsides.com statista.com
    crunchbase.com zoominfo.com pitchbook.com macrotrends.net tradingeconomics.com
    worldometers.info investing.com scribd.com slideshare.net coursehero.com studocu.com
    semanticscholar.org scholar.google.com researchgate.net academia.edu archive.org
    web.archive.org alltop.com digg.com similarweb.com g2.com capterra.com trustpilot.com
    yelp.com tripadvisor.com"""
)
_FORUMS = _names(
    """reddit.com old.reddit.com quora.com stackexchange.com stackoverflow.com superuser.com
    serverfault.com askubuntu.com mathoverflow.net news.ycombinator.com answers.microsoft.com
    discussions.apple.com community.openai.com discourse.org"""
)
_SOCIAL = _names(
    """x.com twitter.com facebook.com fb.com instagram.com tiktok.com linkedin.com threads.net
    mastodon.social bsky.app pinterest.com t.me telegram.org youtube.com youtu.be vimeo.com
    twitch.tv snapchat.com weibo.com"""
)

# --------------------------------------------------------------------------------------------
# Host and path patterns
# --------------------------------------------------------------------------------------------

# Government-owned suffixes, matched on the host: .gov, .mil, .int, .gov.uk, gouv.fr,
# gob.es, govt.nz, go.jp, gc.ca, ...
_GOV_HOST_RE = re.compile(
    r"(?:^|\.)(?:gov|mil|int)$|(?:^|\.)(?:gov|gouv|gob|govt|go|gv|gc|gub|govern|government)\.[a-z]{2}$"
    r"|(?:^|\.)(?:bund|bundesregierung)\.de$|(?:^|\.)admin\.ch$|(?:^|\.)overheid\.nl$"
    r"|(?:^|\.)government\.nl$|(?:^|\.)europa\.eu$|(?:^|\.)governo\.it$|(?:^|\.)regeringen\.se$"
)
_ACADEMIC_HOST_RE = re.compile(r"(?:^|\.)edu$|(?:^|\.)(?:edu|ac)\.[a-z]{2}$")

_IR_HOST_PREFIXES = ("investor.", "investors.", "ir.")
_PRESS_HOST_PREFIXES = ("newsroom.", "press.", "pressroom.", "media.", "mediacenter.")
_DOCS_HOST_PREFIXES = ("docs.", "developer.", "developers.", "dev.", "api.", "documentation.")
_BLOG_HOST_PREFIXES = ("blog.", "blogs.")
_FORUM_HOST_PREFIXES = ("forum.", "forums.", "community.", "discuss.", "discourse.", "boards.")

_SEC_FILING_RE = re.compile(r"^/(?:archives/edgar|cgi-bin/browse-edgar|ix\b|edgar/)")
_DOI_PATH_RE = re.compile(r"/doi/(?:abs/|full/|pdf/|epdf/)?10\.\d{4,9}/")
_NATURE_NEWS_RE = re.compile(r"^/articles/d\d{5}-")
_IR_PATH_RE = re.compile(r"/(?:investors?|investor-relations|ir|shareholders?)(?:/|$|\.)")
_PRESS_PATH_RE = re.compile(
    r"/(?:press|press-releases?|pressroom|newsroom|news-releases?|media-cent(?:er|re)|"
    r"media/press|pressreleases|announcements?)(?:/|$|\.)"
)
_DOCS_PATH_RE = re.compile(
    r"/(?:docs?|documentation|reference|manual|api|release-notes|releasenotes|changelog|"
    r"releases|spec|specification|handbook)(?:/|$|\.)"
)
_BLOG_PATH_RE = re.compile(r"/(?:blog|blogs|posts?)(?:/|$)")
_FORUM_PATH_RE = re.compile(r"/(?:forums?|community|discussions?|questions|threads?|issues)(?:/|$)")
_REPO_FORUM_PATH_RE = re.compile(r"^/[^/]+/[^/]+/(?:issues|discussions|pull)(?:/|$)")
_NEWS_PATH_RE = re.compile(r"^/(?:news|opinion)(?:/|$)")
_PAPER_PATH_RE = re.compile(r"/(?:papers?|publications?|pubs?)/|\.pdf$")

_PRIMARY_TITLE_RE = re.compile(
    r"\b(?:press\s+release|form\s+10-[kq]|form\s+8-k|annual\s+report|investor\s+relations|"
    r"regulation\s+\(eu\)|directive\s+\(eu\)|official\s+journal|rfc\s+\d+|"
    r"release\s+notes|documentation|white\s*paper|proceedings)\b",
    re.IGNORECASE,
)
_SECONDARY_TITLE_RE = re.compile(
    r"\b(?:opinion|op-ed|blog|newsletter|podcast|reddit|quora|wikipedia)\b", re.IGNORECASE
)

# JSON-LD @type (last path segment, lowercased) → category. A primary type anywhere in the
# page's list wins over a secondary one.
_PRIMARY_TYPES = {
    "scholarlyarticle": "paper",
    "medicalscholarlyarticle": "paper",
    "legislation": "law",
    "legislationobject": "law",
    "governmentorganization": "government",
    "governmentservice": "government",
    "governmentpermit": "government",
    "governmentbuilding": "government",
    "techarticle": "official_docs",
    "apireference": "official_docs",
    "dataset": "paper",
    "thesis": "paper",
    "patent": "filing",
    "report": "filing",
}
_SECONDARY_TYPES = {
    "newsarticle": "news",
    "reportagenewsarticle": "news",
    "analysisnewsarticle": "news",
    "opinionnewsarticle": "news",
    "backgroundnewsarticle": "news",
    "reviewnewsarticle": "news",
    "livebloposting": "blog",
    "liveblogposting": "blog",
    "blogposting": "blog",
    "blog": "blog",
    "socialmediaposting": "social",
    "discussionforumposting": "forum",
    "qapage": "forum",
    "question": "forum",
    "review": "blog",
    "videoobject": "social",
}

# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

#: The source table, in precedence order: the first matching entry decides.
SOURCE_TABLE: tuple[SourceRule, ...] = (
    # URL-pattern refinements within known domains.
    SourceRule(
        name="sec_edgar",
        category="filing",
        why="EDGAR paths on sec.gov are company filings, not the regulator's own pages",
        example=Sample("https://www.sec.gov/Archives/edgar/data/320193/000032019323000106/a.htm"),
        near_miss=Sample("https://www.sec.gov.evil.com/Archives/edgar/data/320193/a.htm"),
        domains=frozenset({"sec.gov"}),
        path=_SEC_FILING_RE,
        reason="SEC EDGAR filing",
    ),
    SourceRule(
        name="journal_news",
        category="news",
        why="a journal's /news/ and /opinion/ sections are journalism, not papers",
        example=Sample("https://www.science.org/news/2024/01/some-story"),
        near_miss=Sample("https://www.science.org/doi/10.1126/science.abc1234"),
        domains=_JOURNALS,
        path=_NEWS_PATH_RE,
        reason="news section of journal site {matched}",
    ),
    SourceRule(
        name="nature_news",
        category="news",
        why="Nature's news pieces live under /articles/d41586-..., next to its papers",
        example=Sample("https://www.nature.com/articles/d41586-024-01234-5"),
        near_miss=Sample("https://www.nature.com/articles/s41586-024-07421-0"),
        domains=frozenset({"nature.com"}),
        path=_NATURE_NEWS_RE,
        reason="news section of journal site {matched}",
    ),
    SourceRule(
        name="repository_threads",
        category="forum",
        why="issues, discussions and pull requests on a code host are conversations",
        example=Sample("https://github.com/python/cpython/issues/12345"),
        near_miss=Sample("https://github.com/python/cpython/blob/main/README.rst"),
        domains=_CODE_HOSTS,
        path=_REPO_FORUM_PATH_RE,
        reason="issue or discussion thread on {matched}",
    ),
    # Known domains.
    SourceRule(
        name="laws",
        category="law",
        why="official legislation databases publish the law's own text",
        example=Sample("https://eur-lex.europa.eu/eli/reg/2024/1689/oj"),
        near_miss=Sample("https://eur-lex.europa.eu.example.com/eli/reg/2024/1689/oj"),
        domains=_LAW,
    ),
    SourceRule(
        name="courts",
        category="court",
        why="courts and official case-law databases publish the judgments themselves",
        example=Sample("https://www.supremecourt.gov/opinions/23pdf/22-451_7m58.pdf"),
        near_miss=Sample("https://notsupremecourt.gov/opinions/23pdf/22-451_7m58.pdf"),
        domains=_COURTS,
    ),
    SourceRule(
        name="regulators",
        category="regulator",
        why="regulators' own sites state their rules, guidance and decisions",
        example=Sample("https://www.fda.gov/medical-devices/software"),
        near_miss=Sample("https://www.fda.gov.example.com/medical-devices/software"),
        domains=_REGULATORS,
    ),
    SourceRule(
        name="standards",
        category="standard",
        why="standards bodies publish the standard's own text",
        example=Sample("https://www.rfc-editor.org/rfc/rfc9110"),
        near_miss=Sample("https://rfc-editor.org.example.com/rfc/rfc9110"),
        domains=_STANDARDS,
    ),
    SourceRule(
        name="journals",
        category="paper",
        why="journal publishers and paper indexes host the papers themselves",
        example=Sample("https://www.thelancet.com/journals/lancet/article/PIIS0140-6736/fulltext"),
        near_miss=Sample("https://thelancet.com.example.com/journals/lancet/article/x"),
        domains=_JOURNALS,
        demoted_by_page_types=True,
    ),
    SourceRule(
        name="preprints",
        category="preprint",
        why="preprint servers host the authors' own papers before review",
        example=Sample("https://arxiv.org/abs/2310.03214"),
        near_miss=Sample("https://myarxiv.org/abs/2310.03214"),
        domains=_PREPRINTS,
        demoted_by_page_types=True,
    ),
    SourceRule(
        name="doi_resolvers",
        category="doi",
        why="a DOI link resolves to the publisher's record of the work",
        example=Sample("https://doi.org/10.21105/joss.02439"),
        near_miss=Sample("https://notdoi.org/10.21105/joss.02439"),
        domains=_DOI_RESOLVERS,
        demoted_by_page_types=True,
    ),
    SourceRule(
        name="governments",
        category="government",
        why="intergovernmental and public bodies whose domains carry no government suffix",
        example=Sample("https://www.oecd.org/en/topics/artificial-intelligence.html"),
        near_miss=Sample("https://oecd.org.example.com/en/topics/artificial-intelligence.html"),
        domains=_GOVERNMENTS,
    ),
    SourceRule(
        name="press_wires",
        category="press_release",
        why="wire services carry companies' press releases verbatim",
        example=Sample("https://www.businesswire.com/home/20240101005000/en/"),
        near_miss=Sample("https://notbusinesswire.com/home/20240101005000/en/"),
        domains=_PRESS_WIRES,
        demoted_by_page_types=True,
    ),
    SourceRule(
        name="docs_sites",
        category="official_docs",
        why="documentation hosts serve projects' own manuals",
        example=Sample("https://requests.readthedocs.io/en/latest/"),
        near_miss=Sample("https://readthedocs.io.example.com/en/latest/"),
        domains=_DOCS_SITES,
        demoted_by_page_types=True,
    ),
    SourceRule(
        name="code_hosts",
        category="repository",
        why="code hosts and package indexes serve a project's own code and metadata",
        example=Sample("https://github.com/python/cpython"),
        near_miss=Sample("https://github.com.example.io/python/cpython"),
        domains=_CODE_HOSTS,
        demoted_by_page_types=True,
    ),
    SourceRule(
        name="news_sites",
        category="news",
        why="news outlets report on sources; they are not the source",
        example=Sample("https://www.reuters.com/technology/ai-act-2026-01-01/"),
        near_miss=Sample("https://reuters.com.example.org/technology/ai-act-2026-01-01/"),
        domains=_NEWS,
    ),
    SourceRule(
        name="blog_platforms",
        category="blog",
        why="blogging platforms host anyone's commentary",
        example=Sample("https://someone.substack.com/p/my-take"),
        near_miss=Sample("https://notsubstack.com/p/my-take"),
        domains=_BLOGS,
    ),
    SourceRule(
        name="consumer_health",
        category="consumer_health",
        why="consumer health sites summarise the medical literature for patients",
        example=Sample("https://www.webmd.com/diabetes/metformin"),
        near_miss=Sample("https://webmd.com.example.com/diabetes/metformin"),
        domains=_CONSUMER_HEALTH,
    ),
    SourceRule(
        name="encyclopedias",
        category="encyclopedia",
        why="encyclopaedias and wikis summarise other sources",
        example=Sample("https://en.wikipedia.org/wiki/Artificial_Intelligence_Act"),
        near_miss=Sample("https://en.wikipedia.org.example.com/wiki/Artificial_Intelligence_Act"),
        domains=_ENCYCLOPEDIAS,
    ),
    SourceRule(
        name="aggregators",
        category="aggregator",
        why="search engines, statistics portals, archives and review sites collect others' work",
        example=Sample("https://www.statista.com/statistics/1/"),
        near_miss=Sample("https://statista.com.example.com/statistics/1/"),
        domains=_AGGREGATORS,
    ),
    SourceRule(
        name="forums",
        category="forum",
        why="Q&A sites and forums are users' conversations",
        example=Sample("https://www.reddit.com/r/MachineLearning/comments/abc/"),
        near_miss=Sample("https://reddit.com.example.com/r/MachineLearning/comments/abc/"),
        domains=_FORUMS,
    ),
    SourceRule(
        name="social",
        category="social",
        why="social networks and video sites carry anyone's posts",
        example=Sample("https://x.com/someone/status/1"),
        near_miss=Sample("https://xx.com/someone/status/1"),
        domains=_SOCIAL,
    ),
    # Host and path patterns.
    SourceRule(
        name="government_hosts",
        category="government",
        why="government-owned suffixes: .gov, .mil, .int, .gov.uk, gouv.fr, bund.de, europa.eu",
        example=Sample("https://www.gov.uk/guidance/vat-rates"),
        near_miss=Sample("https://www.gov.uk.example.com/guidance/vat-rates"),
        host=_GOV_HOST_RE,
        reason="{host} is a government domain",
    ),
    SourceRule(
        name="investor_hosts",
        category="investor_relations",
        why="investor./ir. hosts are a company's own statements to shareholders",
        example=Sample("https://investor.apple.com/sec-filings/default.aspx"),
        near_miss=Sample("https://investorplace.com/sec-filings/default.aspx"),
        host_prefixes=_IR_HOST_PREFIXES,
        reason="company investor-relations page",
    ),
    SourceRule(
        name="investor_paths",
        category="investor_relations",
        why="/investors/ sections are a company's own statements to shareholders",
        example=Sample("https://www.example-corp.com/investors/annual-report-2026"),
        near_miss=Sample("https://www.example-corp.com/investorsclub/annual-report-2026"),
        path=_IR_PATH_RE,
        reason="company investor-relations page",
    ),
    SourceRule(
        name="press_hosts",
        category="press_release",
        why="newsroom./press. hosts are a company's own announcements",
        example=Sample("https://newsroom.example-corp.com/2026-01-01-results"),
        near_miss=Sample("https://newsroomy.example-corp.com/2026-01-01-results"),
        host_prefixes=_PRESS_HOST_PREFIXES,
        reason="company press or newsroom page",
    ),
    SourceRule(
        name="press_paths",
        category="press_release",
        why="/press/ and /newsroom/ sections are a company's own announcements",
        example=Sample("https://www.example-corp.com/press/2026/new-product"),
        near_miss=Sample("https://www.example-corp.com/pressure-washers/new-product"),
        path=_PRESS_PATH_RE,
        reason="company press or newsroom page",
    ),
    SourceRule(
        name="doi_paths",
        category="paper",
        why="a /doi/10.x/ path is a publisher's page for the work",
        example=Sample("https://journals.example.org/doi/full/10.1234/abcd.5678"),
        near_miss=Sample("https://journals.example.org/doi/full/abcd.5678"),
        path=_DOI_PATH_RE,
        reason="publisher page for a DOI",
    ),
    SourceRule(
        name="page_types",
        category=None,
        why="a page's JSON-LD type (ScholarlyArticle, Legislation, NewsArticle) says what it is",
        example=Sample("https://journal.example.org/article/42", page_types=("ScholarlyArticle",)),
        near_miss=Sample("https://journal.example.org/article/42", page_types=("WebPage",)),
    ),
    SourceRule(
        name="blog_hosts",
        category="blog",
        why="blog./blogs. hosts carry commentary",
        example=Sample("https://blog.example-corp.com/engineering/how-we-scale"),
        near_miss=Sample("https://blogx.example-corp.com/engineering/how-we-scale"),
        host_prefixes=_BLOG_HOST_PREFIXES,
        reason="blog page",
    ),
    SourceRule(
        name="blog_paths",
        category="blog",
        why="/blog/ and /posts/ sections carry commentary",
        example=Sample("https://www.example-corp.com/blog/how-we-scale"),
        near_miss=Sample("https://www.example-corp.com/blogroll/how-we-scale"),
        path=_BLOG_PATH_RE,
        reason="blog page",
    ),
    SourceRule(
        name="forum_hosts",
        category="forum",
        why="forum./community. hosts are users' conversations",
        example=Sample("https://forum.example-corp.com/t/install-fails/42"),
        near_miss=Sample("https://forumx.example-corp.com/t/install-fails/42"),
        host_prefixes=_FORUM_HOST_PREFIXES,
        reason="forum or community page",
    ),
    SourceRule(
        name="forum_paths",
        category="forum",
        why="/forums/, /questions/ and /issues/ sections are users' conversations",
        example=Sample("https://www.example-corp.com/community/install-fails"),
        near_miss=Sample("https://www.example-corp.com/communityfund/install-fails"),
        path=_FORUM_PATH_RE,
        reason="forum or community page",
    ),
    SourceRule(
        name="docs_hosts",
        category="official_docs",
        why="docs./developer. hosts are a vendor's own documentation",
        example=Sample("https://docs.python.org/3/whatsnew/3.12.html"),
        near_miss=Sample("https://docsify.example.org/3/whatsnew/3.12.html"),
        host_prefixes=_DOCS_HOST_PREFIXES,
        reason="official documentation page",
    ),
    SourceRule(
        name="docs_paths",
        category="official_docs",
        why="/docs/, /reference/ and /release-notes/ sections are a vendor's own documentation",
        example=Sample("https://www.example-corp.com/docs/getting-started"),
        near_miss=Sample("https://www.example-corp.com/docsis/getting-started"),
        path=_DOCS_PATH_RE,
        reason="official documentation page",
    ),
    SourceRule(
        name="academic_papers",
        category="paper",
        why="papers and publication pages on university sites are the authors' own work",
        example=Sample("https://cs.stanford.edu/people/jdoe/papers/thesis.pdf"),
        near_miss=Sample("https://cs.stanford.edu/people/jdoe/teaching.html"),
        host=_ACADEMIC_HOST_RE,
        path=_PAPER_PATH_RE,
        reason="paper or publication on academic site {host}",
    ),
    SourceRule(
        name="academic_sites",
        category="academic",
        why="other university pages (courses, people, news) are not publications",
        example=Sample("https://www.ox.ac.uk/about"),
        near_miss=Sample("https://www.edu.example.com/about"),
        host=_ACADEMIC_HOST_RE,
        reason="{host} is an academic site (not a publication page)",
    ),
    SourceRule(
        name="official_titles",
        category="official_docs",
        why="a title naming an official document (Form 10-K, RFC 9110, release notes)",
        example=Sample("https://acme.example/q3", title="Acme Corp Form 10-K annual report"),
        near_miss=Sample("https://acme.example/q3", title="Acme annual reporting tips"),
        title=_PRIMARY_TITLE_RE,
        reason="title names an official document",
    ),
    SourceRule(
        name="commentary_titles",
        category="blog",
        why="a title marking commentary (opinion, op-ed, blog, podcast)",
        example=Sample("https://acme.example/q3", title="My blog: thoughts on Acme"),
        near_miss=Sample("https://acme.example/q3", title="Weblogs of the past"),
        title=_SECONDARY_TITLE_RE,
        reason="title marks commentary",
    ),
)


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------

_SIMPLE_URL_RE = re.compile(r"https?://([A-Za-z0-9.-]+)(?::\d+)?(?=[/?#]|$)([^?#]*)", re.ASCII)


def host_and_path(url: str) -> tuple[str, str]:
    """Lowercase host (less ``www.``) and lowercase path of ``url``; ``("", "")`` if none."""
    # Normalised http(s) URLs with a plain host are nearly all of them: a regex is several
    # times cheaper than a parser. Anything else (userinfo, IPv6, IDN, a backslash) is read the
    # way a browser reads it (WHATWG, through the one canonicaliser).
    if len(url) > MAX_URL_CHARS:
        # malformed (normalize_url refuses it) and no site: the table's host and path patterns
        # over 100 kB took 30-50 ms on the event loop
        return "", ""
    m = _SIMPLE_URL_RE.match(url)
    if m is not None:
        host = m.group(1).lower().rstrip(".")
        return host.removeprefix("www."), m.group(2).lower()
    try:
        canonical = normalize_url(url)
    except UrlProblem:
        return host_of(url).removeprefix("www."), ""
    m = _SIMPLE_URL_RE.match(canonical)
    path = m.group(2).lower() if m is not None else urlsplit(canonical).path.lower()
    return host_of(canonical).removeprefix("www."), path


_DNS_NAME_MAX = 253  # the longest name DNS carries: no entry of a table lists a longer one


def _suffixes(host: str) -> list[str]:
    """``host`` and each parent name, longest first: a.b.c → a.b.c, b.c, c. Only names of at
    most 253 characters (the rest match no entry): linear in ``host``, not quadratic, on an
    LLM's 100 kB "host" of dots."""
    longest = _DNS_NAME_MAX
    out = [host] if len(host) <= longest else []
    # the first dot whose suffix fits: host[dot + 1:] has len(host) - dot - 1 characters
    dot = host.find(".", max(0, len(host) - longest - 1))
    while dot >= 0:
        out.append(host[dot + 1 :])
        dot = host.find(".", dot + 1)
    return out


def _from_types(page_types: Sequence[str]) -> tuple[bool, str, str] | None:
    if not page_types:
        return None
    secondary: tuple[bool, str, str] | None = None
    for raw in page_types:
        name = raw.rsplit("/", 1)[-1].lower()
        category = _PRIMARY_TYPES.get(name)
        if category is not None:
            return True, category, f"page declares JSON-LD type {raw}"
        category = _SECONDARY_TYPES.get(name)
        if category is not None and secondary is None:
            secondary = (False, category, f"page declares JSON-LD type {raw}")
    return secondary


_Index = tuple[dict[str, tuple[int, ...]], tuple[int, ...]]


def _index(table: Sequence[SourceRule]) -> _Index:
    """Positions of the entries listing each domain, and of the entries listing none: a URL
    is tried only against the entries that can match its host, in table order."""
    by_domain: dict[str, list[int]] = {}
    domainless: list[int] = []
    for i, rule in enumerate(table):
        if not rule.domains:
            domainless.append(i)
        for d in rule.domains:
            by_domain.setdefault(d, []).append(i)
    return {d: tuple(v) for d, v in by_domain.items()}, tuple(domainless)


_SOURCE_INDEX: Final[_Index] = _index(SOURCE_TABLE)


def _classify(
    host: str,
    path: str,
    page_types: Sequence[str],
    title: str | None,
    table: Sequence[SourceRule],
) -> tuple[bool, str, str, SourceRule | None]:
    """The first entry of ``table`` that matches; plain tuples to stay cheap."""
    suffixes = _suffixes(host)
    index = _SOURCE_INDEX if table is SOURCE_TABLE else _index(table)
    by_domain, domainless = index
    candidates = sorted({*domainless, *(i for s in suffixes for i in by_domain.get(s, ()))})
    for rule in (table[i] for i in candidates):
        matched = host
        if rule.domains:
            if rule.domains.isdisjoint(suffixes):
                continue
            matched = next(s for s in suffixes if s in rule.domains)
        if rule.host is not None and not rule.host.search(host):
            continue
        if rule.host_prefixes and not host.startswith(rule.host_prefixes):
            continue
        if rule.path is not None and not rule.path.search(path):
            continue
        if rule.title is not None and not (title and rule.title.search(title)):
            continue
        if rule.category is None:
            typed = _from_types(page_types)
            if typed is None:
                continue
            return (*typed, rule)
        if rule.demoted_by_page_types:
            typed = _from_types(page_types)
            if typed is not None and not typed[0]:
                return False, typed[1], f"{typed[2]} on {matched}", rule
        category = rule.category
        reason = rule.reason.format(matched=matched, host=host, label=category.replace("_", " "))
        return category in PRIMARY_CATEGORIES, category, reason, rule
    return False, "unknown", f"no rule marks {host or 'this URL'} as a primary source", None


def classify_source(
    url: str,
    *,
    page_types: Sequence[str] = (),
    title: str | None = None,
    table: Sequence[SourceRule] = SOURCE_TABLE,
) -> SourceKind:
    """Classify a cited URL as a primary or secondary source by the first matching entry.

    ``page_types`` are the page's JSON-LD ``@type`` values and ``title`` its title, when known.
    Anything no entry of ``table`` matches is ``unknown`` and secondary.
    """
    host, path = host_and_path(url)
    primary, category, reason, _ = _classify(host, path, page_types, title, table)
    return SourceKind(primary=primary, category=category, reason=reason)


def source_rule(
    url: str,
    *,
    page_types: Sequence[str] = (),
    title: str | None = None,
    table: Sequence[SourceRule] = SOURCE_TABLE,
) -> SourceRule | None:
    """The entry of ``table`` that decides ``url`` (``None``: no entry, so ``unknown``)."""
    host, path = host_and_path(url)
    return _classify(host, path, page_types, title, table)[3]


def with_source_kinds(
    citations: list[CitationReport], pages: Mapping[str, Page]
) -> list[CitationReport]:
    """Each citation with ``primary`` and ``source_kind`` set from the source table, once.

    The page fetched for a citation (keyed by its normalised URL) lends its JSON-LD types; the
    citation's title is a hint for otherwise unknown sites.
    """
    out: list[CitationReport] = []
    for c in citations:
        page = pages.get(c.normalized_url or "")
        kind = classify_source(
            c.final_url or c.url, page_types=page.types if page else (), title=c.title
        )
        out.append(c.model_copy(update={"primary": kind.primary, "source_kind": kind.category}))
    return out
