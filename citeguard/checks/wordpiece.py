"""The shipped MiniLM model's tokenizer in Python: BERT's normaliser, pre-tokeniser and WordPiece,
read from the model's own ``tokenizer.json``.

Hand-written rather than the ``tokenizers`` library on purpose: ``tokenizers`` pulls in
``huggingface-hub`` (and hf-xet, fsspec, httpx, PyYAML, ...), 39 MB of a 341 MB base install
for one tokenizer, and the base install's budget is 300 MB. The algorithm is small and fixed
(the file says which one: ``BertNormalizer``, ``BertPreTokenizer``, ``WordPiece``, a
``[CLS] $A [SEP]`` template), and ``tests/checks/test_wordpiece.py`` checks every id against
``tokenizers`` itself over the development data and hostile Unicode. A file that asks for
anything else is refused. Words are cached (a word's pieces never change), so a text costs a
dictionary look-up per word once its words have been seen; inputs are capped by the caller
(``max_length`` tokens are kept).
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from string import punctuation
from typing import Any, NamedTuple

from citeguard.errors import EntailerError

__all__ = ["WordPiece", "WordPieceEncoding"]

# the CJK Unified Ideographs blocks BERT puts spaces around (as tokenizers' BertNormalizer)
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_ASCII_PUNCT = frozenset(punctuation)
# Unicode White_Space (Rust's char::is_whitespace), which BERT splits on
_WHITE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


# the white space that stays a word break (the rest, \x0b \x0c \x85, is control: dropped)
_BREAK = re.compile("[" + re.escape("".join(sorted(_WHITE - set("\x0b\x0c\x85")))) + "]+")
_CHUNK = 2048  # characters normalised at a time, cut at a break: a long text stops early


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _is_control(ch: str) -> bool:
    """BERT's "control": Unicode categories Cc, Cf, Co, Cs except tab, newline and carriage
    return (an unassigned character, Cn, is kept, as tokenizers keeps it)."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


@lru_cache(maxsize=65536)
def _normal_char(ch: str) -> str:
    """One input character after BertNormalizer (clean text, CJK spacing, accents stripped,
    lower case): "" when it is dropped."""
    if ch == "\0" or ch == "\ufffd" or _is_control(ch):
        return ""
    if ch in _WHITE:
        return " "
    out = f" {ch} " if _is_cjk(ord(ch)) else ch
    out = "".join(c for c in unicodedata.normalize("NFD", out) if unicodedata.category(c) != "Mn")
    return out.lower()


def _words(text: str) -> list[str]:
    """BertPreTokenizer: split on white space, each punctuation character a word of its own."""
    out: list[str] = []
    word: list[str] = []
    for ch in text:
        if ch in _WHITE:
            if word:
                out.append("".join(word))
                word = []
        elif _is_punct(ch):
            if word:
                out.append("".join(word))
                word = []
            out.append(ch)
        else:
            word.append(ch)
    if word:
        out.append("".join(word))
    return out


class WordPieceEncoding(NamedTuple):
    """What the model is fed: ids with their attention mask and type ids, and the tokens."""

    ids: list[int]
    tokens: list[str]
    attention_mask: list[int]
    type_ids: list[int]


class WordPiece:
    """A BERT WordPiece tokenizer from a ``tokenizer.json`` (the subset the shipped model uses).

    ``encode(text)`` gives ``[CLS]`` + the text's pieces + ``[SEP]``, at most ``max_length``
    ids (the pieces cut at the end, as ``tokenizers``' longest-first truncation of one text)."""

    def __init__(self, spec: dict[str, Any], *, max_length: int) -> None:
        model = spec.get("model") or {}
        normalizer = spec.get("normalizer") or {}
        expected = (
            model.get("type") == "WordPiece"
            and normalizer.get("type") == "BertNormalizer"
            and normalizer.get("clean_text", True)
            and normalizer.get("handle_chinese_chars", True)
            and normalizer.get("lowercase", True)
            and normalizer.get("strip_accents") in (None, True)
            and (spec.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
        )
        if not expected:
            raise EntailerError("tokenizer.json is not a lower-casing BERT WordPiece tokenizer")
        self._vocab: dict[str, int] = dict(model["vocab"])
        self._unk = str(model.get("unk_token", "[UNK]"))
        self._prefix = str(model.get("continuing_subword_prefix", "##"))
        self._max_word = int(model.get("max_input_chars_per_word", 100))
        self._max_length = max_length
        if not {"[CLS]", "[SEP]", self._unk} <= self._vocab.keys():
            raise EntailerError("tokenizer.json's vocabulary lacks [CLS], [SEP] or its unknown")
        # special tokens are matched in the raw text, before normalisation (as added tokens are)
        specials = sorted(
            (t["content"] for t in spec.get("added_tokens", ()) if t.get("special")),
            key=len,
            reverse=True,
        )
        self._specials = re.compile("|".join(map(re.escape, specials))) if specials else None
        self._pieces = lru_cache(maxsize=65536)(self._word_pieces)

    @classmethod
    def from_file(cls, path: str | Path, *, max_length: int) -> WordPiece:
        try:
            spec = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EntailerError(f"cannot read the tokenizer {path}: {exc}") from exc
        return cls(spec, max_length=max_length)

    def get_vocab(self) -> dict[str, int]:
        """Token → id (a copy)."""
        return dict(self._vocab)

    def _word_pieces(self, word: str) -> tuple[str, ...]:
        if len(word) > self._max_word:
            return (self._unk,)
        pieces: list[str] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self._prefix + word[start:end]
                if piece in self._vocab:
                    break
                end -= 1
            else:
                return (self._unk,)
            pieces.append(piece)
            start = end
        return tuple(pieces)

    def _add_tokens(self, text: str, tokens: list[str], budget: int) -> None:
        """Append ``text``'s pieces to ``tokens`` until ``budget`` is reached, normalising
        ``_CHUNK`` characters at a time (cut at a word break, so cutting changes nothing)."""
        start = 0
        while start < len(text) and len(tokens) < budget:
            end = start + _CHUNK
            if end < len(text):
                cut = _BREAK.search(text, end)
                end = cut.end() if cut else len(text)
            normal = "".join(_normal_char(ch) for ch in text[start:end])
            for word in _words(normal):
                tokens.extend(self._pieces(word))
            start = end

    def encode(self, text: str) -> WordPieceEncoding:
        budget = self._max_length - 2
        tokens: list[str] = []
        parts = self._specials.split(text) if self._specials else [text]
        found = self._specials.findall(text) if self._specials else []
        for i, part in enumerate(parts):
            self._add_tokens(part, tokens, budget)
            if i < len(found):
                tokens.append(found[i])
            if len(tokens) >= budget:
                break
        tokens = ["[CLS]", *tokens[:budget], "[SEP]"]
        ids = [self._vocab[t] for t in tokens]
        return WordPieceEncoding(ids, tokens, [1] * len(ids), [0] * len(ids))

    def encode_batch(self, texts: list[str]) -> list[WordPieceEncoding]:
        return [self.encode(t) for t in texts]
