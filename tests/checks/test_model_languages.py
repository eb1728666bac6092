"""The local support model says where it is blind: in a language it is not shown to judge, its
probability neither accepts nor rejects; the deterministic checks still decide."""

from __future__ import annotations

from citeguard.checks.entail import LocalEntailer
from citeguard.checks.entail.local import UNJUDGED
from citeguard.policy import EntailmentPolicy

PAGE_ZH = (
    "据统计，到2022年，预计约为1.7亿人。国家债务在去年达到126万亿元。该地区的出生率没有明显上升。"
)
PAGE_DE = (
    "Die Stadtwerke haben im vergangenen Jahr ihren Umsatz deutlich gesteigert. Der Gewinn "
    "stieg auf 12 Millionen Euro, wie der Vorstand am Dienstag mitteilte."
)


async def test_a_chinese_paraphrase_is_uncertain_and_names_the_language() -> None:
    e = LocalEntailer()
    (score,) = await e.score([("到2022年，预计人口约为1.7亿。", PAGE_ZH)])
    assert score.label == "uncertain"
    assert "not shown to judge Chinese (zh)" in score.reason
    await e.aclose()


async def test_in_a_blind_language_the_deterministic_checks_still_decide() -> None:
    e = LocalEntailer()
    unrelated, changed = await e.score(
        [
            # another report's sentence: none of its numbers and few of its words on the page
            ("该市的汽车销量在2019年增长了35%，达到420万辆。", PAGE_ZH),
            # the same thing with another value
            ("Der Gewinn stieg auf 15 Millionen Euro, wie der Vorstand mitteilte.", PAGE_DE),
        ]
    )
    assert unrelated.label == "not_supported"
    assert "none of the claim's numbers" in unrelated.reason
    assert changed.label == "contradicted"
    await e.aclose()


async def test_a_language_the_policy_vouches_for_is_judged_by_the_model() -> None:
    claim = "Der Gewinn stieg auf 12 Millionen Euro."
    blind, judged = (
        LocalEntailer(),
        LocalEntailer(policy=EntailmentPolicy(model_languages=("en", "de"))),
    )
    (b,) = await blind.score([(claim, PAGE_DE)])
    (j,) = await judged.score([(claim, PAGE_DE)])
    assert b.label == "uncertain" and "German (de)" in b.reason
    assert "not shown to judge" not in j.reason  # the model's own bands read it
    # the blind entailer never runs the model on the pair: it could not change the label
    assert blind.texts_encoded == 0 and judged.texts_encoded > 0
    assert b.score == UNJUDGED and not b.probabilities and b.thresholds is None
    assert j.probabilities["supported"] == j.score
    await blind.aclose()
    await judged.aclose()


async def test_english_is_judged_as_before() -> None:
    e = LocalEntailer()
    (score,) = await e.score(
        [("The company's profit rose to 12 million euros.", "Profit rose to 12 million euros.")]
    )
    assert "not shown to judge" not in score.reason
    await e.aclose()


def test_a_verbatim_claim_stands_when_the_main_text_found_is_a_sliver_of_the_page() -> None:
    from citeguard.checks.pairs import ExtractedPage, _Pair, verify_pair
    from citeguard.models import Claim, Page
    from citeguard.policy import Policy

    sentence = "Dies ist vor allem im stationären Betrieb wichtig."
    text = f"Menü Start Produkte. {sentence} " + "Weitere Artikel und Angebote. " * 40

    def verdict(main: str) -> str | None:
        page = Page(url="https://example.de/a", kind="html", text=text, main_text=main)
        claim = Claim(index=0, text=sentence, start=0, end=len(sentence))
        pair = _Pair(claim=claim, url=page.url, claim_text=sentence, quote=None)
        verify_pair(pair, ExtractedPage.of(page), Policy(), floor=0.0)
        return None if pair.entailment is None else pair.entailment.backend

    # the extractor found a sliver (the menu): the claim's words on the page settle it
    assert verdict("Menü Start Produkte.") == "verbatim"
    # a main text that is the article, without the claim: boilerplate is not settled so
    assert verdict("Weitere Artikel und Angebote. " * 30) is None
