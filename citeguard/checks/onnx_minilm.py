"""all-MiniLM-L6-v2 through ONNX Runtime, int8: the support scorer's fast encoder.

Built offline from the bundled weights (:func:`~citeguard.checks.minilm.bundled_model_path`):
the transformer is exported to ONNX with torch's exporter and its matrix weights quantised to
int8 by ONNX Runtime's dynamic quantisation. Nothing is downloaded. The built model (~23 MB) is
kept in a per-user cache directory, keyed by the weight files (name, size, time) and the
library versions, so only the first process on a machine pays the build (~15 s on two cores);
a cache that cannot be written is skipped (the model is then built in memory), and one that
cannot be read is rebuilt.

Why: on two CPU cores it scored ~1.8-3x as many pairs per second as torch in fp32 (the
suite's ``entail`` scenario and ``benchmarks/train_support.py --evaluate``), and its session
releases the GIL for the whole forward pass. Its vectors differ slightly from fp32 ones (token
cosine ~0.96), so the support model has its own coefficients for it
(``support_model_int8.json``), fitted and held-out-scored on its features.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from citeguard.checks.minilm import default_threads
from citeguard.checks.support import Encoded, _content_table, _unit_rows
from citeguard.errors import EntailerError, MissingExtraError

__all__ = ["ENCODER_NAME", "OnnxMiniLMEncoder", "default_cache_dir", "onnx_available"]

log = logging.getLogger(__name__)

ENCODER_NAME = "minilm-onnx-int8"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_available() -> bool:
    """Whether ONNX Runtime and the ONNX exporter's package are installed (no import)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))
    except (ImportError, ValueError):
        return False


def default_cache_dir() -> Path:
    """``$CITEGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/citeguard``, else ``~/.cache/citeguard``."""
    explicit = os.environ.get("CITEGUARD_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "citeguard"


def _versions() -> str:
    out = []
    for dist in ("torch", "onnx", "onnxruntime"):
        try:
            out.append(f"{dist}={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{dist}=?")
    return ",".join(out)


def _weights_key(model_dir: Path) -> str:
    """The model files' names, sizes and modification times: a new or reinstalled model gets a
    new key, and no process start re-reads the 90 MB of weights to hash them."""
    h = hashlib.sha256(str(model_dir.resolve()).encode())
    for p in sorted(model_dir.iterdir()):
        if p.is_file() and p.name.endswith((".safetensors", ".bin", ".json", ".txt")):
            st = p.stat()
            h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:24]


class _DropQuantizerAdvice(logging.Filter):
    """ONNX Runtime's quantiser logs a pre-processing tip on the root logger; drop that one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _build_int8(model_dir: Path) -> bytes:
    """The transformer as an int8 ONNX model (bytes). Needs torch, transformers, onnx and
    onnxruntime; reads only ``model_dir``."""
    try:
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise MissingExtraError("torch", "local") from exc
    from citeguard.checks.minilm import quiet_model_load

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            out = self.inner(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return out.last_hidden_state

    with quiet_model_load():
        auto_model = AutoModel.from_pretrained(str(model_dir), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    sample = tokenizer(
        ["a short text", "and a somewhat longer one"], return_tensors="pt", padding=True
    )
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "hidden")}
    advice = _DropQuantizerAdvice()
    with tempfile.TemporaryDirectory(prefix="citeguard-onnx-") as tmp:
        fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Hidden(auto_model.eval()),
                tuple(sample[name] for name in _INPUTS),
                str(fp32),
                input_names=list(_INPUTS),
                output_names=["hidden"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
            logging.getLogger().addFilter(advice)
            try:
                quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
            finally:
                logging.getLogger().removeFilter(advice)
        return int8.read_bytes()


class OnnxMiniLMEncoder:
    """Sentence and token embeddings of all-MiniLM-L6-v2, int8, on ONNX Runtime.

    The same :class:`~citeguard.checks.support.Encoded` as
    :class:`~citeguard.checks.support.MiniLMEncoder`: mean-pooled sentence vector, token vectors
    without ``[CLS]``/``[SEP]``, the content-token mask. ``threads`` is ONNX Runtime's intra-op
    thread count (default 1 less than the CPUs, at least 1). ``cache_dir=None`` uses
    :func:`default_cache_dir`; ``cache=False`` never touches the disk.
    """

    name = ENCODER_NAME

    def __init__(
        self,
        model_path: str | None = None,
        *,
        threads: int | None = None,
        cache_dir: Path | None = None,
        cache: bool = True,
    ) -> None:
        self._path = model_path
        self._threads = threads
        self._cache_dir = cache_dir
        self._use_cache = cache
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._content_ids: Any = None
        self.built_from_cache: bool | None = None

    def _cache_path(self, model_dir: Path) -> Path:
        versions = hashlib.sha256(_versions().encode()).hexdigest()[:12]
        key = f"{_weights_key(model_dir)}-{versions}"
        return (self._cache_dir or default_cache_dir()) / f"minilm-int8-{key}.onnx"

    def _open_session(self, model_dir: Path, options: Any) -> Any:
        """An inference session over the cached model, or over a fresh build (then cached). A
        cached file ONNX Runtime cannot read (truncated, damaged) is rebuilt and replaced."""
        import onnxruntime as ort

        path = self._cache_path(model_dir)
        if self._use_cache:
            try:
                session = ort.InferenceSession(
                    path.read_bytes(), options, providers=["CPUExecutionProvider"]
                )
                self.built_from_cache = True
                return session
            except FileNotFoundError:
                pass
            except Exception as exc:  # ORT's own error types: rebuilt below
                log.warning("citeguard: rebuilding the damaged ONNX model cache %s (%s)", path, exc)
        data = _build_int8(model_dir)
        self.built_from_cache = False
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        if self._use_cache:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path)  # atomic: a concurrent reader sees all or nothing
            except OSError as exc:
                log.info("citeguard: ONNX model cache not written (%s)", exc)
        return session

    def load(self) -> None:
        """Open the int8 model's session (built, or read from the cache) and the tokenizer, once.

        With the cache warm this imports neither torch nor transformers."""
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingExtraError("onnxruntime", "local") from exc
            from citeguard.checks.minilm import bundled_model_path

            model_dir = Path(self._path) if self._path else bundled_model_path()
            try:
                max_len = int(
                    json.loads((model_dir / "sentence_bert_config.json").read_text())[
                        "max_seq_length"
                    ]
                )
                tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
                tokenizer.enable_truncation(max_length=max_len)
                tokenizer.no_padding()  # one text a pass (see encode)
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads or default_threads()
                options.inter_op_num_threads = 1
                options.log_severity_level = 3
                session = self._open_session(model_dir, options)
            except MissingExtraError:
                raise
            except Exception as exc:  # tokenizers' and ORT's own error types
                raise EntailerError(f"cannot build the ONNX model from {model_dir}: {exc}") from exc
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
