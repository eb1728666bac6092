"""What builds the artefacts citeguard ships: ``python -m training NAME`` (see
``training/README.md``).

One command per artefact, each rebuilding it end to end from ``../shared/data`` (read, never
copied): the claim-support model (``support``), its bands (``support-bands``), the whole-page
bands (``whole-page-bands``), the regime model (``regime``), the regime-confidence table
(``regime-confidence``) and the int8 MiniLM encoder (``minilm``). Nothing in ``citeguard/``
imports this package; the wheel does not contain it.
"""
