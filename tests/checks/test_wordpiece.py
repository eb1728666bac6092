"""citeguard's WordPiece tokenizer gives the ids ``tokenizers`` gives, from the shipped model's own
``tokenizer.json``: on the development data's claims and evidence, on every character of the
scripts people write in, on mixed hostile text, on special tokens in the text and on truncation.

Where the two differ is a character Unicode assigned after the tables ``tokenizers`` was built
with (Python's are newer): a few hundred rare characters, counted and bounded here.
"""

from __future__ import annotations

import json
import random
import unicodedata
from pathlib import Path

import pytest

from citeguard.checks.onnx_minilm import TOKENIZER_FILE, shipped_model_dir
from citeguard.checks.wordpiece import WordPiece
from citeguard.errors import EntailerError

tokenizers = pytest.importorskip("tokenizers")

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "claims"
PATH = shipped_model_dir() / TOKENIZER_FILE
MAX = 256  # the shipped model's max_seq_length

# the blocks everyday text is written in: Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic,
# Devanagari, Thai, general punctuation, currency, arrows and maths, CJK, kana, Hangul,
# full-width forms, emoji
COMMON = [
    (0x20, 0x5FF),
    (0x600, 0x6FF),
    (0x900, 0x97F),
    (0xE00, 0xE7F),
    (0x2000, 0x22FF),
    (0x3000, 0x30FF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3),
    (0xFF00, 0xFFEF),
    (0x1F300, 0x1F64F),
]
# in those blocks, added in Unicode 14 (2021): Python's tables have it, tokenizers' do not
LATER = {"\u061d"}


@pytest.fixture(scope="module")
def ours() -> WordPiece:
    return WordPiece.from_file(PATH, max_length=MAX)


@pytest.fixture(scope="module")
def theirs() -> object:
    t = tokenizers.Tokenizer.from_file(str(PATH))
    t.enable_truncation(max_length=MAX)
    t.no_padding()
    return t


def _differ(ours: WordPiece, theirs: object, texts: list[str]) -> list[str]:
    got = [e.ids for e in ours.encode_batch(texts)]
    want = [e.ids for e in theirs.encode_batch(texts)]  # type: ignore[attr-defined]
    return [t for t, a, b in zip(texts, got, want, strict=True) if a != b]


@pytest.mark.skipif(not DATA.is_dir(), reason="shared/data/claims is absent")
def test_same_ids_on_the_development_data(ours: WordPiece, theirs: object) -> None:
    texts: list[str] = []
    for path in sorted(DATA.glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f):
                if n >= 300:
                    break
                row = json.loads(line)
                texts += [v for v in row.values() if isinstance(v, str) and len(v) > 10]
    assert len(texts) > 1000
    assert _differ(ours, theirs, texts) == []


def test_same_ids_for_every_character_people_write(ours: WordPiece, theirs: object) -> None:
    chars = [
        chr(c)
        for lo, hi in COMMON
        for c in range(lo, hi + 1)
        if unicodedata.category(chr(c)) != "Cs" and chr(c) not in LATER
    ]
    # alone, inside a word, and beside punctuation and space
    texts = [f"{c}" for c in chars] + [f"ab{c}cd x{c}." for c in chars]
    assert _differ(ours, theirs, texts) == []


def test_rare_characters_differ_only_where_unicode_versions_do(
    ours: WordPiece, theirs: object
) -> None:
    assigned = [
        chr(c) for c in range(0x80, 0x30000) if unicodedata.category(chr(c)) not in ("Cs", "Cn")
    ]
    differ = _differ(ours, theirs, [f"a{c}b" for c in assigned])
    # measured: 503 of ~150,000 (Unicode 13-14 additions Python knows and tokenizers does not)
    assert len(differ) < 0.005 * len(assigned)


def test_same_ids_on_mixed_hostile_text(ours: WordPiece, theirs: object) -> None:
    rng = random.Random(7)
    pool = [chr(c) for lo, hi in COMMON for c in range(lo, hi + 1) if chr(c) not in LATER]
    pool += list("\t\n\r\x00\x0b\x0c\x1c\x85\xa0\u200b\u200d\u2028\u3000\ufeff\ufffd ,.-'\"()[]")
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 400))) for _ in range(2000)]
    texts += [
        "Café ÉCOLE Zürich ΟΔΟΣ İstanbul straße ﬁ ①",
        "Hello [SEP] world[CLS]x [MASK][PAD]",
        "x" * 150 + " short " + "y" * 99,
        "word " * 1000,
        "[SEP]" * 400,
        "don't stop-believing... (maybe) [1] https://example.com/a?b=c&d=e",
    ]
    assert _differ(ours, theirs, texts) == []


def test_a_long_text_is_cut_to_the_models_length(ours: WordPiece) -> None:
    enc = ours.encode("word " * 100_000)
    assert len(enc.ids) == MAX and enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    assert enc.attention_mask == [1] * MAX and enc.type_ids == [0] * MAX


def test_another_tokenizer_is_refused(tmp_path: Path) -> None:
    spec = json.loads(PATH.read_text(encoding="utf-8"))
    spec["model"]["type"] = "BPE"
    with pytest.raises(EntailerError, match="WordPiece"):
        WordPiece(spec, max_length=MAX)
