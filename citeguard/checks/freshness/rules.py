"""The question's regime by deterministic cue rules, and the rules' cues as model features."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from citeguard.checks.freshness.confidence import _with_confidence
from citeguard.models import (
    FreshnessClass,
    Regime,
)
from citeguard.text import fold_whitespace

# --------------------------------------------------------------------------------------------
# Question regime
# --------------------------------------------------------------------------------------------

_F = re.IGNORECASE
_MAX_QUESTION_CHARS = 2000
# A bounded gap inside one sentence: "how much is ... worth ... now". Unbounded ``.*`` between
# two alternations is quadratic on long inputs.
_GAP = r"[^?!\n]{0,80}?"

_YEAR_RE = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
# A year that starts an open range ("since 2009", "between 2009 and now") anchors nothing.
_OPEN_RANGE_RE = re.compile(
    r"\b(?:since|from)\s+(?:\w+\s+)?(?:1[5-9]\d\d|20\d\d)\b(?!\s*(?:to|until|-|–)\s*\d)"
    r"|\bbetween\s+(?:1[5-9]\d\d|20\d\d)\s+and\s+(?:now|today|the\s+present)\b",
    _F,
)

# (label, pattern) tables; the first match of a table gives its cue.
_REAL_TIME: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("price", re.compile(r"\b(?:stock|share|spot|gas|fuel|petrol|ticket)\s+prices?\b", _F)),
    (
        "price",
        re.compile(
            r"\b(?:current|today'?s?|live|latest)\s+(?:\w+\s+){0,2}(?:price|prices|rate|quote)\b"
            r"|\bprices?\s+(?:of\s+\S+\s+)?(?:now|today|right\s+now|currently)\b"
            rf"|\bhow\s+much\s+(?:is|are|does)\b{_GAP}\b(?:worth|trading|cost)\b{_GAP}\b(?:now|today)\b"
            r"|\btrading\s+at\b|\bmarket\s+cap\w*\b",
            _F,
        ),
    ),
    ("exchange rate", re.compile(r"\bexchange\s+rates?\b|\bconversion\s+rate\b|\bforex\b", _F)),
    (
        "weather",
        re.compile(
            r"\bweather\b|\bforecast\b|\btemperature\b|\bhumidity\b|\bair\s+quality\b"
            r"|\bwater\s+level\b|\brainfall\b|\bsnow\s+(?:depth|report)\b|\bwildfire\s+status\b",
            _F,
        ),
    ),
    (
        "score",
        re.compile(
            rf"\bscores?\s+(?:of|in|for)\b{_GAP}\b(?:game|match|fixture|final)\b|\bwho\s+is\s+winning\b"
            r"|\blive\s+(?:score|results?|updates?|standings)\b|\bcurrent\s+score\b",
            _F,
        ),
    ),
    (
        "status",
        re.compile(
            r"\b(?:is|are)\s+\S+(?:\s+\S+)?\s+(?:down|offline|online|delayed|open|closed)"
            r"(?:\s+(?:right\s+)?now|\s+today)?\s*\??\s*$"
            r"|\b(?:outage|service\s+status|flight\s+status|traffic)\b",
            _F,
        ),
    ),
    (
        "clock",
        re.compile(
            r"\bwhat\s+(?:time|day|date|month|year)\s+is\s+it\b|\btoday'?s\s+date\b"
            r"|\bwhat\s+is\s+today\b|\bhow\s+many\s+days\s+(?:are\s+)?(?:left\s+)?until\b",
            _F,
        ),
    ),
    (
        "now",
        re.compile(
            r"\btoday\b|\bright\s+now\b|\bat\s+the\s+moment\b|\btonight\b|\bthis\s+(?:morning|"
            r"afternoon|evening)\b|\bat\s+this\s+(?:moment|hour)\b",
            _F,
        ),
    ),
)
# Office holders change over years: "the current CEO/host/president" is slow, not fast.
_HOLDER_RE = re.compile(
    r"\b(?:current|currently|now|present|sitting|incumbent|today'?s)\s+(?:\S+\s+){0,3}?"
    r"(?:ceo|cfo|cto|chief\s+executive|president|prime\s+minister|premier|chancellor|host|"
    r"coach|manager|chair(?:man|woman|person)?|leader|head|king|queen|monarch|pope|governor|"
    r"mayor|minister|secretary|director|owner|editor|captain|speaker|senator|ambassador|"
    r"commissioner|spouse|wife|husband|partner|employer|political\s+party)\b",
    _F,
)
# The roles and relations a question can ask the present holder of (entity type "a person's
# role"): "who is the governor of Missouri", "the owner of Eurosport currently", "which team does
# X play for currently", "which position does X hold".
_ROLE = (
    r"(?:ceo|cfo|cto|chief(?:\s+\w+){0,2}|president|vice[\s-]president|prime\s+minister|premier|"
    r"chancellor|host|presenter|anchor|coach|manager|chair(?:man|woman|person)?|leader|head|king|"
    r"queen|monarch|pope|emperor|governor|mayor|minister|secretary|director|owner|editor|"
    r"captain|speaker|senator|ambassador|commissioner|spouse|wife|husband|partner|girlfriend|"
    r"boyfriend|employer|attorney\s+general|justice|judge|dean|commander|archbishop|bishop|"
    r"ruler|treasurer|rector|conductor|quarterback|goalkeeper|qb|pitcher|goalie|whip|"
    r"govern[eo]r|chief\s+justice|starting\s+(?:quarterback|qb|pitcher|goalie|lineup))s?"
)
_WHO_IS = r"(?:who\s+(?:is|are)|who'?s)"
_ROLE_RE = re.compile(
    rf"^\s*(?:{_WHO_IS}|(?:which|what)\s+\w+\s+(?:is|are))\s+(?:the\s+)?(?:\S+\s+){{0,3}}?{_ROLE}"
    r"\s+(?:of|for|in|at|to|on)\b"
    # a bare query or "the name of the ...": "chief justice of X", "name of the governor of X"
    rf"|^\s*(?:what\s+is\s+)?(?:the\s+)?(?:name\s+of\s+the\s+)?(?:\S+\s+){{0,2}}?{_ROLE}\s+of\b"
    r"|^\s*(?:who|which\s+\w+)\s+(?:holds|heads|leads|runs|owns|coaches|manages|chairs|governs|"
    r"rules|hosts|represents|controls)\b(?![^?!\n]{0,40}\brecords?\b)"
    rf"|\b(?:new|incoming|newly\s+appointed)\s+{_ROLE}\b|\bcandidates\s+for\b"
    rf"|^\s*{_WHO_IS}\s+(?:the\s+)?(?:\S+\s+){{0,6}}?{_ROLE}\s*\??$"
    # a role before "currently": looked for only when the question says "currently" (the
    # lookahead reads the question once), not at every word of a long one
    r"|^(?=[^?!\n]*\b(?:currently|now|at\s+present|presently)\b)"
    rf"[^?!\n]*?\b{_ROLE}\b{_GAP}\b(?:currently|now|at\s+present|presently)\b"
    rf"|\b(?:plays?|belongs?|works?)\s+(?:for|to)\b{_GAP}\b(?:currently|now)\b"
    r"|\bposition\s+(?:does|do)\b|\bhome\s+venue\b",
    _F,
)
# The holder before the present one is relative to today as well: "the previous chair of ...",
# "which team did X play for before the current team".
_PREVIOUS_RE = re.compile(
    r"\b(?:previous|predecessor|before\s+the\s+current|prior\s+to\s+the\s+current)\b", _F
)
# "When was the last time ...", "When did the United States last win ...": the last
# occurrence so far changes whenever it happens again.
_LAST_TIME_RE = re.compile(
    r"\blast\s+time\b|^\s*when\s+(?:was|did|were)\b[^?!\n]{0,80}\blast\s*\??$|\bthe\s+last\s+(?:\d+\s+|two\s+|three\s+|few\s+)?(?:season|episode|"
    r"person|man|woman|team|player|game|match|election|presidential\s+election|super\s+bowl|"
    r"world\s+cup|olympics|winner|champion\w*|states?|countr(?:y|ies))\b"
    r"|^(?![^?!\n]*\d)\s*who\s+(?:won|wins|is\s+winning|is\s+leading)\s+"
    r"(?!the\s+battle\b|the\s+war\b)"
    r"(?:the\s+)?(?:\S+\s+){0,6}?(?:cup|championships?|series|finals?|awards?|prize|trophy|"
    r"title|medal|election|season|tournament|league|open|bowl|race|grand\s+prix|contest)\b|\b(?:did|has|have|was|were)\s+(?:\S+\s+){1,5}?last\s+(?:win|won|play|"
    r"played|score|scored|make|made|host|hosted|appear|appeared|go|went|beat|reach|reached|get|got|"
    r"have|had|be|been|visit|visited|qualif\w+|lose|lost|erupt\w*|happen\w*)\b"
    r"|\b(?:their|there|his|her|its)\s+last\s+(?!time\b)\w+"
    # "when did England make it to the world cup final": the latest time so far, unless "first"
    r"|^\s*when\s+did\s+(?![^?!\n]*\bfirst\b)[^?!\n]{0,60}?\b(?:win|won|make\s+it\s+to|"
    r"get\s+to|host|reach)\b",
    _F,
)
# "the latest French player to win ...", "the most recent team to win back-to-back ...":
# a record qualified by a category changes slowly even though it says "latest".
_QUALIFIED_LATEST_RE = re.compile(
    r"\b(?:latest|most\s+recent|last)\s+(?:\w+[\s-]+){1,4}?to\s+(?:win|be|become|have|hold|"
    r"receive|reach|score|do|make|get|take|play|walk|go|climb|visit|land)\b",
    _F,
)
_FIRST_TO_RE = re.compile(
    r"\b(?:first|earliest)\s+(?:ever\s+)?(?:\w+[\s-]+){0,4}?(?:to|ever)\b"
    r"|\bwas\s+the\s+first\b|\bfirst\s+(?:film|book|movie|song|album|person|man|woman)\b",
    _F,
)
_NUMBER_WORD = (
    r"(?:\d+(?:st|nd|rd|th)?|one|two|three|four|five|six|seven|eight|nine|ten|first|second|"
    r"third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)"
)
# A numbered instance is fixed once it has happened (a time anchor without a year): "season 4
# of X", "episode 117", "the 45th chief justice", "the first pope".
_NUMBERED_RE = re.compile(
    rf"\b(?:season|series|episode|edition|chapter|volume)\s+{_NUMBER_WORD}\b"
    rf"|\b{_NUMBER_WORD}\s+(?:season|series|edition)\b"
    r"|\b(?:the|was|is)\s+(?:\d+(?:st|nd|rd|th)?|first|second|third|fourth|fifth|sixth|"
    rf"seventh|eighth|ninth|tenth)\s+(?:\w+\s+){{0,2}}?{_ROLE}\b",
    _F,
)
# ... unless the question counts what has come out so far ("how many episodes of season 20
# have aired").
_SO_FAR_RE = re.compile(r"\b(?:have|has)\s+(?:\w+\s+)?(?:aired|been|come)\b|\bso\s+far\b", _F)
# A superlative over nature does not change in a lifetime: "the longest river in the US",
# "the most abundant element in the earth's crust", "the largest lake by volume".
_NATURAL_SUPERLATIVE_RE = re.compile(
    r"\b(?:largest|biggest|smallest|tallest|highest|lowest|longest|shortest|deepest|fastest|"
    r"hottest|coldest|heaviest|lightest|widest|driest|wettest|most\s+abundant)\s+"
    r"(?:[\w-]+\s+){0,2}?(?:rivers?|lakes?|mountains?|peaks?|waterfalls?|falls|deserts?|"
    r"oceans?|seas?|islands?|volcano(?:es)?|canyons?|glaciers?|caves?|animals?|birds?|fish|"
    r"mammals?|insects?|trees?|elements?|moons?|bones?|muscles?|organs?|glands?|continents?|"
    r"bays?|gulfs?|dinosaurs?|snakes?|sharks?|whales?)\b"
    r"|\bby\s+(?:area|volume|land\s+area)\b",
    _F,
)
# "current" or "now" makes even a "first ... to" question relative to today.
_NOW_WORD_RE = re.compile(r"\b(?:current(?:ly)?|now|today|present)\b", _F)
_FAST: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "latest",
        re.compile(r"\b(?:latest|newest|most\s+recent(?:ly)?|just\s+(?:released|announced))\b", _F),
    ),
    (
        "upcoming",
        re.compile(
            r"\b(?:upcoming|next|forthcoming|coming\s+soon|scheduled\s+for)\b"
            r"|\bnew\s+(?:season|episode|album|movie|film|book|game|series|version|model|single|"
            r"show)\b"
            rf"|^(?![^\n]*\d)\s*when\s+(?:does|do|is|are|will)\b{_GAP}\b(?:start|starts|begin|begins|"
            r"come\s+out|comes\s+out|air|airs|premiere|open|opens|released?|take\s+place|"
            r"coming\s+back|come\s+back|return|returns|"
            r"be\s+held)\b"
            # a fixture or show in the present progressive: "who is playing halftime at the pro
            # bowl", "where is the summit being held"
            r"|\b(?:is|are|'s)\s+(?:\S+\s+){0,3}?(?:playing|singing|performing|hosting)\b"
            r"|\bbeing\s+(?:held|played|hosted)\b"
            r"|\bgoing\s+to\s+be\s+(?:held|in|played|hosted)\b",
            _F,
        ),
    ),
    (
        "recent period",
        re.compile(
            r"\b(?:last|this\s+past)\s+(?:year|season|week|weekend|night|month)\b|\byesterday\b"
            # a weekday names a day of this week: "launched its mission on Wednesday"
            r"|\b(?:on|last|this|since)\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|"
            r"sunday)\b",
            _F,
        ),
    ),
    (
        "news in progress",
        re.compile(
            r"\b(?:is|are)\s+(?:(?:now|reportedly|currently|still)\s+)?(?:being\s+\w+|"
            r"considering|planning|demanding|seeking|spreading|facing|expected\s+to|set\s+to|"
            r"preparing|threatening|calling\s+for|pushing|suing|investigating|debating|weighing|"
            r"proposing|offering|recalling|banning|testing|urging|scrambling|warning|bracing)\b"
            r"|\bnewly\b|\breportedly\b"
            # news told in the present perfect: "X has rebranded Twitter as what?"
            r"|\b(?:has|have)\s+(?:been\s+)?(?:announced|rebranded|recalled|shelved|banned|"
            r"unveiled|approved|filed|sued|resigned|confirmed|agreed|pledged|revealed|ordered|"
            r"called\s+for|decided|declared|named|appointed|arrested|charged|indicted|found|"
            r"kicked|blocked|suspended|cancell?ed|reopened|vowed|warned)\b",
            _F,
        ),
    ),
    (
        "this period",
        re.compile(
            r"\bthis\s+(?:week|month|year|season|quarter|weekend)(?:'s)?\b|\bthis\s+year'?s\b", _F
        ),
    ),
    ("so far", re.compile(r"\bso\s+far\b|\bto\s+date\b|\byet\b|\bstill\b|\bas\s+of\s+now\b", _F)),
    ("recent", re.compile(r"\brecent(?:ly)?\b|\bthese\s+days\b|\bnowadays\b", _F)),
    ("titleholder", re.compile(rf"\b(?:reigning|defending)\b|\bchampions?\b{_GAP}\bnow\b", _F)),
    ("current", re.compile(r"\bcurrent(?:ly)?\b|\bnow\b|\bpresent(?:ly)?\b|\bas\s+of\b", _F)),
    (
        "live count",
        re.compile(
            rf"\bfollowers\b|\bsubscribers\b|\bcurrent\s+age\b|\bhow\s+old\s+is\b{_GAP}\bnow\b"
            r"|\bpeople\s+(?:are\s+there\s+)?in\s+the\s+world\b|\bworld\s+population\b"
            r"|\bstandings\b|\brankings?\b|\bpolls?\b|\bleaderboard\b|\bbox\s+office\b"
            r"|\bnumber\s+one\b|\bno\.\s*1\b|\bworld\s+no\b|\btop[\s-]ranked\b|\branked\b"
            rf"|\bnet\s+worth\b|\bhow\s+much\s+(?:does|do|is|are)\b{_GAP}\bcost\b"
            r"|\bprices?\s+of\b|\bat\s+the\s+top\s+of\s+the\b"
            r"|\bleads?\s+the\s+(?:league|standings|table|charts?|polls?)\b"
            r"|\b(?:richest|wealthiest|most[\s-](?:followed|subscribed|streamed|viewed|watched|"
            r"downloaded|liked)|highest[\s-]paid|top[\s-](?:grossing|selling|scorers?))\b"
            r"(?![^?!\n]{0,80}\b(?:ever|all[\s-]time|history|of\s+the\s+(?:decade|century))\b)",
            _F,
        ),
    ),
)
# Things whose state changes over years: rules in force, records, superlatives, rosters.
_SLOW_TOPIC_RE = re.compile(
    r"\b(?:regulat\w*|laws?|legal|legislation|guidance|guidelines?|polic(?:y|ies)|rules?|"
    r"requires?|requirements?|minimum\s+wage|wages?|tax\s+rates?|tax(?:es)?|tariffs?|"
    r"directive|act|compliance|standards?|recommendations?|approved|approval|licen[cs]e)\b",
    _F,
)
_SLOW: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("rules in force", _SLOW_TOPIC_RE),
    (
        "record",
        re.compile(
            r"\brecords?\b|\bof\s+all\s+time\b|\bever\b|\bin\s+history\b"
            r"|\bthe\s+only\s+(?:\w+\s+){0,3}?(?:recipients?|winners?|persons?|people|wom[ae]n|"
            r"m[ae]n|players?|teams?|countr(?:y|ies)|states?|ones?)\b",
            _F,
        ),
    ),
    ("last occurrence", _LAST_TIME_RE),
    (
        "most so far",
        re.compile(
            r"\ball[\s-]time\b"
            r"|\b(?:has|have)\s+(?:won|sold|scored|played|made|had)\s+(?:more|the\s+most)\b"
            r"|^\s*who\s+(?:has|have)\s+(?:won|scored|sold|played\s+for|coached)\b"
            # a list that grows: "list of all presidents of X", "what cities have hosted the
            # olympics", "who hasn't made it to the super bowl"
            r"|^\s*list\s+of\b|\b(?:has|have|hasn't|haven't)\s+(?:\w+\s+){0,2}?"
            r"(?:won|hosted|been\s+held|made\s+it|played\s+in)\b",
            _F,
        ),
    ),
    (
        "statistic",
        re.compile(
            r"\baverage\b|\bper\s*cent(?:age)?\s+of\b|\bgdp\b|\bunemployment\b|\bmedian\b"
            r"|\binflation\s+rate\b|\bnational\s+debt\b|\bin\s+debt\b|\blife\s+expectancy\b",
            _F,
        ),
    ),
    (
        "superlative",
        re.compile(
            r"\b(?:largest|biggest|smallest|tallest|highest|lowest|longest|shortest|oldest|"
            r"youngest|deepest|fastest|richest|hottest|coldest|most\s+\w+|best[\s-]selling|"
            r"\w+est-\w+)\b"
            # a ranking: "the rank of India in ...", "the leading producer of wool", "top ten"
            r"|\brank(?:ed|ing)?\s+(?:of|in)\b|\bleading\s+(?!to\b)\w+|\btop\s+(?:ten|\d+)\b",
            _F,
        ),
    ),
    (
        "roster",
        re.compile(
            r"\bplays?\s+for\b|\bteam\s+does\b|\bclub\s+does\b|\bmarried\s+to\b|\bwho\s+owns\b"
            r"|\bowner\s+of\b|\bheadquarter\w*\b|\bpopulation\s+of\b|\bhow\s+old\s+is\b",
            _F,
        ),
    ),
    ("ongoing state", re.compile(rf"\bhow\s+long\s+(?:has|have)\b{_GAP}\bbeen\b", _F)),
    (
        "cumulative count",
        re.compile(
            rf"\bhow\s+many\b{_GAP}\b(?:have|has)\b|\bin\s+total\b|\btotal\s+number\b"
            # a count of what exists now: "how many public schools are there in chicago",
            # "number of cities in texas", "how many episodes of X" (no season named)
            rf"|\bhow\s+many\b{_GAP}\b(?:are|is)\s+there\b|^\s*(?:what\s+is\s+)?(?:the\s+)?"
            r"number\s+of\b|\bhow\s+many\s+(?:episodes|seasons|series)\b",
            _F,
        ),
    ),
    (
        "version",
        re.compile(
            r"\bversions?\b|\breleases?\b|\bv\d+(?:\.\d+)*\b|\b[a-z][\w+#-]*\s+\d+(?:\.\d+)+\b"
            r"|\bsupported\b|\bdeprecated\b",
            _F,
        ),
    ),
)
_INSENSITIVE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "historical event",
        re.compile(
            r"\b(?:invented|founded|born|died|painted|directed|wrote|written|composed|"
            r"discovered|created|built|premiered|assassinated|signed|established|launched|"
            r"killed|won\s+(?:the\s+)?\d{4})\b|\bhistor(?:y|ical)\b|\bancient\b|\boriginally\b",
            _F,
        ),
    ),
    (
        "definition",
        re.compile(
            r"\bcapital\s+of\b|\bdefinition\s+of\b|\bmeaning\s+of\b|\bstand\s+for\b"
            r"|\bwhat\s+does\s+\S+\s+mean\b|\bformula\s+for\b|\bhow\s+many\s+\w+\s+(?:in|are\s+in)"
            r"\s+an?\b|\bboiling\s+point\b|\bspeed\s+of\s+light\b|\bname\s+of\s+the\s+main\b",
            _F,
        ),
    ),
    (
        "past tense",
        re.compile(
            rf"^\s*(?:when|where|who|what|which|how|in\s+what\s+\w+)\b{_GAP}\b(?:did|was|were)\b"
            r"|^\s*(?:did|was|were)\b",
            _F,
        ),
    ),
)


def _first(table: Sequence[tuple[str, re.Pattern[str]]], text: str) -> tuple[str, str] | None:
    for label, pattern in table:
        m = pattern.search(text)
        if m:
            return label, m.group(0).strip()
    return None


def classify_freshness(question: str, *, now: datetime | None = None) -> FreshnessClass:
    """Classify how fast the answer to ``question`` changes, with the cues that decided it.

    Rules, in order (the first that fires decides):

    1. a year two or more years before ``now`` anchors the question in the past → insensitive
       ("in 2021 ...", "the 2022 World Cup"), unless it opens a range to the present ("since
       2009", "between 2009 and now");
    2. "the first X to ..." is a record that cannot change → insensitive; so is a numbered
       instance ("season 4 of X", "episode 117", "the 45th chief justice") unless the
       question counts what has come out so far or says "now";
    3. prices, exchange rates, weather, live scores, service status, the clock, "today",
       "right now" → real-time (but "right now" on a rule in force, such as a minimum wage,
       is slow);
    4. "the current CEO / host / president ...", "who's the governor of X", "chief justice of
       X" → slow: office holders change over years;
    5. "the latest/most recent <category> to win ..." → slow (a qualified record);
    6. latest, most recent, upcoming, next, a fixture in the present progressive ("who is
       playing at ..."), this week/month/year, last year/season/week, a weekday ("on
       Monday"), news in progress or told in the present perfect ("is considering", "has
       rebranded"), so far, yet, still, recent, current, live counts (followers, population,
       current age) → fast; "current" or "now" on a rule in force is slow;
    7. the current year → fast; last year → slow;
    8. a superlative over nature ("the longest river", "the largest lake by volume") →
       insensitive;
    9. rules in force (regulations, guidance, laws, wages, taxes), records ("the only woman
       to ..."), the last occurrence ("when did X win the cup"), superlatives and rankings,
       rosters, counts of what exists now ("how many X are there"), lists that grow,
       versions and releases → slow;
    10. historical events, definitions, past tense → insensitive;
    11. otherwise insensitive.
    """
    regime, label, cue = _rule_decision(question, now or datetime.now(UTC))
    return _with_confidence(FreshnessClass(regime=regime, cues=[cue]), label)


def _rule_decision(question: str, today: datetime) -> tuple[Regime, str, str]:
    """:func:`classify_freshness`'s rules: the regime, the label of the rule that decided (one
    of :data:`RULE_LABELS`) and the cue it read."""
    # A question is a sentence or two; beyond this it is a document, and the cues are up front.
    q = fold_whitespace(question[:_MAX_QUESTION_CHARS])
    years = [int(y) for y in _YEAR_RE.findall(q)]
    open_range = _OPEN_RANGE_RE.search(q)
    if years and not open_range:
        past = [y for y in years if y <= today.year - 2]
        if past and len(past) == len(years):
            return Regime.INSENSITIVE, "past year", f"past year {past[0]}"
    first_to = _FIRST_TO_RE.search(q)
    if first_to and not _NOW_WORD_RE.search(q):
        return Regime.INSENSITIVE, "fixed record", f"fixed record: {first_to.group(0)!r}"
    numbered = _NUMBERED_RE.search(q)
    if numbered and not _NOW_WORD_RE.search(q) and not _SO_FAR_RE.search(q):
        return Regime.INSENSITIVE, "numbered instance", f"numbered instance: {numbered.group(0)!r}"
    slow_topic = _SLOW_TOPIC_RE.search(q)
    real_time = _first(_REAL_TIME, q)
    if real_time is not None:
        label, text = real_time
        if label == "now" and slow_topic:
            cue = f"rule in force asked {text!r}: {slow_topic.group(0)!r}"
            return Regime.SLOW, "rule in force asked now", cue
        return Regime.REAL_TIME, label, f"{label}: {text!r}"
    holder = _HOLDER_RE.search(q) or _ROLE_RE.search(q)
    if holder:
        return Regime.SLOW, "office holder", f"office holder: {holder.group(0)!r}"
    previous = _PREVIOUS_RE.search(q)
    if previous:
        return Regime.SLOW, "previous holder", f"previous holder: {previous.group(0)!r}"
    qualified = _QUALIFIED_LATEST_RE.search(q)
    if qualified:
        return Regime.SLOW, "qualified record", f"qualified record: {qualified.group(0)!r}"
    if open_range:
        return Regime.SLOW, "open range", f"count over an open range: {open_range.group(0)!r}"
    fast = _first(_FAST, q)
    if fast is not None:
        label, text = fast
        if label == "current" and slow_topic:
            cue = f"rule in force asked {text!r}: {slow_topic.group(0)!r}"
            return Regime.SLOW, "rule in force asked current", cue
        return Regime.FAST, label, f"{label}: {text!r}"
    if years and not open_range:
        if today.year in years:
            return Regime.FAST, "current year", f"current year {today.year}"
        if today.year - 1 in years:
            return Regime.SLOW, "last year", f"last year {today.year - 1}"
    natural = _NATURAL_SUPERLATIVE_RE.search(q)
    if natural:
        return (
            Regime.INSENSITIVE,
            "natural superlative",
            f"natural superlative: {natural.group(0)!r}",
        )
    slow = _first(_SLOW, q)
    if slow is not None:
        return Regime.SLOW, slow[0], f"{slow[0]}: {slow[1]!r}"
    insensitive = _first(_INSENSITIVE, q)
    if insensitive is not None:
        return Regime.INSENSITIVE, insensitive[0], f"{insensitive[0]}: {insensitive[1]!r}"
    return Regime.INSENSITIVE, "no cue", "no time-sensitive cue"


#: every label :func:`_rule_decision` can decide by, in a fixed order
RULE_LABELS: tuple[str, ...] = (
    "past year",
    "fixed record",
    "numbered instance",
    "rule in force asked now",
    *dict.fromkeys(label for label, _ in _REAL_TIME),
    "office holder",
    "previous holder",
    "qualified record",
    "open range",
    *(label for label, _ in _FAST),
    "rule in force asked current",
    "current year",
    "last year",
    "natural superlative",
    *(label for label, _ in _SLOW),
    *(label for label, _ in _INSENSITIVE),
    "no cue",
)
# Every cue pattern, whether or not it decided: (name, patterns).
_CUE_TABLES: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    *(
        (f"{kind}:{label}", tuple(p for lab, p in table if lab == label))
        for kind, table in (
            ("real_time", _REAL_TIME),
            ("fast", _FAST),
            ("slow", _SLOW),
            ("insensitive", _INSENSITIVE),
        )
        for label in dict.fromkeys(lab for lab, _ in table)
    ),
    ("office holder", (_HOLDER_RE, _ROLE_RE)),
    ("previous holder", (_PREVIOUS_RE,)),
    ("qualified record", (_QUALIFIED_LATEST_RE,)),
    ("first to", (_FIRST_TO_RE,)),
    ("numbered instance", (_NUMBERED_RE,)),
    ("natural superlative", (_NATURAL_SUPERLATIVE_RE,)),
    ("now word", (_NOW_WORD_RE,)),
    ("open range", (_OPEN_RANGE_RE,)),
)
_YEAR_FEATURES = ("past", "last", "current", "future")
#: the names of :func:`regime_features`, in order: the rules' regime, the rule that decided,
#: every cue that fired, and where the years the question names lie relative to ``now``
REGIME_FEATURE_NAMES: tuple[str, ...] = (
    *(f"rules={r.value}" for r in Regime),
    *(f"decided by={label}" for label in RULE_LABELS),
    *(f"cue={name}" for name, _ in _CUE_TABLES),
    *(f"year={where}" for where in _YEAR_FEATURES),
)


def regime_features(
    question: str, *, now: datetime | None = None
) -> tuple[list[float], tuple[Regime, str, str]]:
    """The cue-rule features of ``question`` (named by :data:`REGIME_FEATURE_NAMES`) and the
    rules' own decision (regime, rule label, cue)."""
    today = now or datetime.now(UTC)
    decision = _rule_decision(question, today)
    q = fold_whitespace(question[:_MAX_QUESTION_CHARS])
    years = {int(y) for y in _YEAR_RE.findall(q)}
    year_hits = (
        any(y <= today.year - 2 for y in years),
        today.year - 1 in years,
        today.year in years,
        any(y > today.year for y in years),
    )
    values = [
        *(float(decision[0] is r) for r in Regime),
        *(float(decision[1] == label) for label in RULE_LABELS),
        *(float(any(p.search(q) for p in patterns)) for _, patterns in _CUE_TABLES),
        *(float(hit) for hit in year_hits),
    ]
    return values, decision
