"""The claim-support features (``train_support.py``): the sentence encoder and every pair's
features, embeddings cached under /tmp/support_cache."""

from __future__ import annotations

import pickle
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from citeguard.checks.support import (
    FEATURE_NAMES,
    TORCH_ENCODER,
    Encoded,
    MiniLMEncoder,
    pair_features,
    prepare_pair,
    texts_to_encode,
)
from training.support_data import CACHE, EMBED_VERSION, K_MAX, _sha

EMB_FEATURES = FEATURE_NAMES[: FEATURE_NAMES.index("cov_all")]  # the embedding-dependent ones


def make_encoder(name: str) -> Any:
    """The encoder the features come from: torch fp32 or ONNX Runtime int8 (2 threads)."""
    if name == "minilm-onnx-int8":
        from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder

        return OnnxMiniLMEncoder(threads=2)
    return MiniLMEncoder(threads=2, batch_size=64)


def compute_features(
    rows: Sequence[dict[str, Any]], encoder_name: str = TORCH_ENCODER
) -> tuple[np.ndarray, np.ndarray]:
    """(n, k_max, n_features) features for k = 1..K_MAX units, and a mask of usable rows."""
    CACHE.mkdir(parents=True, exist_ok=True)
    suffix = "" if encoder_name == TORCH_ENCODER else f"_{encoder_name}"
    path = CACHE / f"emb_feats_{EMBED_VERSION}_k{K_MAX}{suffix}.pkl"
    cache: dict[str, list[dict[str, float]]] = {}
    if path.is_file():
        cache = pickle.loads(path.read_bytes())
    t0 = time.perf_counter()
    prepared = [prepare_pair(r["claim"], r["evidence"], k_units=K_MAX) for r in rows]
    print(f"lexical features: {time.perf_counter() - t0:.1f}s", flush=True)
    keys = [_sha(r["claim"] + "\x00" + r["evidence"]) for r in rows]
    todo = [i for i, p in enumerate(prepared) if not p.empty and keys[i] not in cache]
    encoder = make_encoder(encoder_name)
    chunk = 400
    for start in range(0, len(todo), chunk):
        idx = todo[start : start + chunk]
        texts = texts_to_encode([prepared[i] for i in idx])
        enc: dict[str, Encoded] = dict(zip(texts, encoder.encode(texts), strict=True))
        for i in idx:
            p = prepared[i]
            cache[keys[i]] = [
                {k: v for k, v in pair_features(p, enc, k_units=k).items() if k in EMB_FEATURES}
                for k in range(1, K_MAX + 1)
            ]
        path.write_bytes(pickle.dumps(cache))
        print(f"embedded {start + len(idx)}/{len(todo)} pairs", flush=True)
    x = np.zeros((len(rows), K_MAX, len(FEATURE_NAMES)))
    ok = np.zeros(len(rows), dtype=bool)
    for i, p in enumerate(prepared):
        if p.empty:
            continue
        ok[i] = True
        per_k = cache[keys[i]]
        for k in range(K_MAX):
            # Fewer units than k: the features of all units it has.
            f = {**p.lexical, **per_k[min(k, len(p.units) - 1)]}
            x[i, k] = [f[name] for name in FEATURE_NAMES]
    return x, ok


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------
