"""all-MiniLM-L6-v2 through ONNX Runtime, int8: the encoder every local model runs on.

The int8 model and its tokenizer ship inside the package (``citeguard/models_data/minilm/``:
``model_int8.onnx``, ~23 MB, and ``tokenizer.json``), built once at development time by
``training/build_minilm_onnx.py`` from the bundled all-MiniLM-L6-v2 weights (torch's exporter,
then ONNX Runtime's dynamic int8 quantisation). At run time it needs only ``onnxruntime``
and ``numpy`` (base dependencies; the tokenizer is :mod:`citeguard.checks.wordpiece`, which
reads ``tokenizer.json``): no torch, no sentence-transformers, nothing built or downloaded.
``manifest.json`` records both files' sha256; :meth:`OnnxMiniLMEncoder.load`
checks them and refuses a file that does not match (:class:`~citeguard.errors.EntailerError`).

Why int8 on ONNX Runtime: on two CPU cores it scored ~1.8-3x as many pairs per second as torch
in fp32 (the suite's ``entail`` scenario and ``training/train_support.py --evaluate``), and its
session releases the GIL for the whole forward pass. Its vectors differ slightly from fp32 ones
(token cosine ~0.96), so the support model has its own coefficients for it
(``support_model_int8.json``), fitted and held-out-scored on its features.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from citeguard.checks.minilm import default_threads
from citeguard.checks.support import Encoded, _content_table, _unit_rows
from citeguard.checks.wordpiece import WordPiece
from citeguard.errors import EntailerError

__all__ = [
    "ENCODER_NAME",
    "OnnxMiniLMEncoder",
    "onnx_available",
    "shipped_model_dir",
]

ENCODER_NAME = "minilm-onnx-int8"
MODEL_FILE = "model_int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
_RUNTIME = ("onnxruntime",)


def onnx_available() -> bool:
    """Whether ONNX Runtime is installed (looked up, not imported)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in _RUNTIME)
    except (ImportError, ValueError):
        return False


def shipped_model_dir() -> Path:
    """The directory of the int8 model, its tokenizer, manifest and licence, in the package."""
    return Path(str(importlib.resources.files("citeguard"))) / "models_data" / "minilm"


def _verified(directory: Path) -> tuple[bytes, dict[str, Any]]:
    """The model's bytes and the manifest, after checking both files' sha256 against it."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
        expected: dict[str, str] = manifest["files"]
        model = (directory / MODEL_FILE).read_bytes()
        tokenizer = (directory / TOKENIZER_FILE).read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EntailerError(
            f"the MiniLM model files in {directory} cannot be read ({exc}); "
            f"reinstall citeguard-agent"
        ) from exc
    for name, data in ((MODEL_FILE, model), (TOKENIZER_FILE, tokenizer)):
        got = hashlib.sha256(data).hexdigest()
        if got != expected.get(name):
            raise EntailerError(
                f"{directory / name} has sha256 {got}, but the manifest records "
                f"{expected.get(name)}: the file is damaged or was replaced; reinstall "
                f"citeguard-agent (or rebuild it with training/build_minilm_onnx.py)"
            )
    return model, manifest


class OnnxMiniLMEncoder:
    """Sentence and token embeddings of all-MiniLM-L6-v2, int8, on ONNX Runtime.

    The same :class:`~citeguard.checks.support.Encoded` as
    :class:`~citeguard.checks.support.MiniLMEncoder`: mean-pooled sentence vector, token vectors
    without ``[CLS]``/``[SEP]``, the content-token mask. ``threads`` is ONNX Runtime's intra-op
    thread count (default 1 less than the CPUs, at least 1). ``model_dir`` replaces the shipped
    model directory (:func:`shipped_model_dir`; the same files and manifest).
    """

    name = ENCODER_NAME

    def __init__(self, model_dir: Path | None = None, *, threads: int | None = None) -> None:
        self._dir = model_dir
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._content_ids: Any = None

    @property
    def tokenizer(self) -> Any:
        """The :class:`~citeguard.checks.wordpiece.WordPiece` tokenizer (loaded on first use)."""
        self.load()
        return self._tokenizer

    def load(self) -> None:
        """Check the shipped files' sha256, open the session and the tokenizer, once."""
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
            except ImportError as exc:  # a base dependency, missing only after --no-deps
                raise EntailerError(
                    f"the local model needs onnxruntime ({exc}); install "
                    f"citeguard-agent with its dependencies: pip install citeguard-agent"
                ) from exc
            directory = self._dir or shipped_model_dir()
            model, manifest = _verified(directory)
            try:
                # one text a pass, unpadded (see encode)
                tokenizer = WordPiece.from_file(
                    directory / TOKENIZER_FILE, max_length=int(manifest["max_seq_length"])
                )
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads or default_threads()
                options.inter_op_num_threads = 1
                options.log_severity_level = 3
                session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
            except EntailerError:
                raise
            except Exception as exc:  # ORT's own error types
                raise EntailerError(f"cannot load the ONNX model from {directory}: {exc}") from exc
            self._tokenizer = tokenizer
            self._content_ids = _content_table(tokenizer.get_vocab())
            self._session = session

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        """Sentence and token embeddings of ``texts``, in order.

        One text per forward pass: dynamic int8 quantisation scales activations over the whole
        input tensor, so in a padded batch a text's vectors would depend on its neighbours (a
        cosine of 0.97 to itself alone was measured). Alone, a text always gets the same
        vectors, and on two cores one text a pass was also the fastest (~250 texts/s on one
        thread against ~140 in batches of 16: no padding)."""
        if not texts:
            return []
        self.load()
        out: list[Encoded] = []
        for enc in self._tokenizer.encode_batch(list(texts)):
            ids = np.array([enc.ids], dtype=np.int64)
            feed = {
                "input_ids": ids,
                "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
                "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
            }
            (hidden,) = self._session.run(["hidden"], feed)
            toks = hidden[0]
            inner = slice(1, max(1, len(toks) - 1))  # drop [CLS] and [SEP]
            ids_in, toks_in = ids[0][inner], toks[inner]
            out.append(
                Encoded(
                    vector=_unit_rows(toks.mean(axis=0)),
                    token_vectors=(
                        _unit_rows(toks_in) if len(toks_in) else np.zeros((0, 384), np.float32)
                    ),
                    content=(self._content_ids[ids_in] if len(ids_in) else np.zeros(0, np.bool_)),
                )
            )
        return out
