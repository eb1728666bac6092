"""The query axis: did the agent's search string keep what the user asked for?

A rewrite that drops a constraint returns a clean-looking result set that misses it, and no
synthesis recovers from that. :func:`score_query` compares one search query with the user's
prompt on a 1–5 rubric with three parts:

* **constraints** — years, versions (``v2.1``, ``Python 3.12``, ``iOS 18``), numbers with units
  and comparators ("over 10 hours", "under $500", ">= 16GB"), regions and countries (EU, US,
  Germany, ...), quoted phrases and exclusions ("without ads", "-term");
* **entities** — organisations, products, laws, people, acronyms and other capitalised names;
* **breadth** — generic words added (best, top, overview, guide, review, list, tips, ...), a
  year the prompt did not ask for, new names or terms, specificity lost, or a narrow lookup
  turned into a bare topic. Needless expansion is penalised as much as a drop.

Each part is scored with one rubric from its *hard* and *weak* issues:

======================  =====
issues                  score
======================  =====
none                    5
weak only               5 − weak, at least 2
one hard                2
two or more hard        1
======================  =====

Hard issues: a dropped year, version, number constraint, region, quoted phrase, exclusion or
entity; a reversed comparator; an exclusion turned into a search term; an added generic word or
year; a lookup turned into a topic. Weak issues: a comparator dropped but its number kept, a
phrase kept without quotes, a shortened name, added names or terms beyond the first, a low
share of the prompt's key terms. ``overall`` is the lowest of the three parts: one failing part
is enough to miss what the user asked for.

:func:`check_queries` scores every recorded query of an answer. A constraint or entity one
query drops but a sibling query keeps is reported (info) and not counted: agents often split a
comparison into one query per side.

The axis is a package, one module per sub-stage: :mod:`.lexicon` (the vocabulary and patterns),
:mod:`.prompt` (what the prompt asks for, what a query holds), :mod:`.score` (one query against
the prompt, one rule per kind of item), :mod:`.axis` (the answer's queries together), :mod:`.judge`
(the optional LLM judge) and :mod:`.check` (the registered check).
"""

from __future__ import annotations

from citeguard.checks.query.axis import check_queries
from citeguard.checks.query.check import QueryCheck as QueryCheck
from citeguard.checks.query.judge import JudgeQueryScorer
from citeguard.checks.query.score import QueryScore, score_query

__all__ = ["JudgeQueryScorer", "QueryScore", "check_queries", "score_query"]
