"""Scripts, languages and words, for text in any language a report is written in.

* **words**: :func:`segment` splits a text into words whatever its script. Space-delimited
  scripts split at spaces and punctuation as before; a run of Han characters (Chinese, and the
  kanji of Japanese) is segmented by jieba's dictionary (``rjieba``, the Rust port, dictionary
  compiled into its wheel), and a run of kana, Thai, Lao, Khmer or Myanmar letters, which no
  shipped dictionary covers, into overlapping character bigrams (what search engines index CJK
  text by). :func:`cjk_chars` splits such runs into single characters instead: the unit an
  alignment of two near-identical sentences compares.
* **languages**: :func:`language_of` names a text's language: by script where the script says
  it (Han → ``zh``, kana → ``ja``, Hangul → ``ko``, Thai → ``th``, ...), else by ``py3langid``
  (langid.py's model, shipped inside its package; ~0.7 s to load once, ~0.2 ms a text).
  :func:`warm_up` loads it ahead of the first page.

Everything is linear in its input; a language is read from at most :data:`LANG_SAMPLE_CHARS`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = [
    "LANGUAGE_NAMES",
    "LANG_SAMPLE_CHARS",
    "NO_SPACE_SCRIPTS",
    "cjk_chars",
    "has_no_space_script",
    "language_of",
    "script_language",
    "segment",
    "warm_up",
]

# Han ideographs (with extensions A and the compatibility block), kana, Hangul, Thai, Lao, Khmer
# and Myanmar: scripts written without spaces between words (Hangul is spaced, but its syllables
# are \w like the others, and it is read as Korean by script).
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_SEA = "\u0e00-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f"
NO_SPACE_SCRIPTS = _HAN + _KANA + _SEA
_NO_SPACE_RE = re.compile(f"[{NO_SPACE_SCRIPTS}]")
_HAN_RUN_RE = re.compile(f"[{_HAN}]+")
# one word: a run of a no-space script, or a run of other word characters (numbers keep their
# separators: "1.7", "2,5"), with inner apostrophes
_WORD_RE = re.compile(
    f"[{NO_SPACE_SCRIPTS}]+"
    r"|\d+(?:[.,]\d+)*"
    f"|[^\\W\\d{NO_SPACE_SCRIPTS}]+(?:['’][^\\W{NO_SPACE_SCRIPTS}]+)*"
    f"|(?:(?![{NO_SPACE_SCRIPTS}])\\w)+"
)

#: Characters of a text its language is read from (the start of a page says it as well as all).
LANG_SAMPLE_CHARS = 2_000
# a text with fewer letters than this is too short for the language model: "und" (unknown)
_MIN_LETTERS = 12


def has_no_space_script(text: str) -> bool:
    """Whether ``text`` holds a character of a script written without spaces between words."""
    return _NO_SPACE_RE.search(text) is not None


def _bigrams(run: str) -> list[str]:
    if len(run) < 3:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@functools.cache
def _jieba() -> Any:
    import rjieba

    return rjieba


def _han_words(run: str) -> list[str]:
    if len(run) <= 1:
        return [run]
    return [w for w in _jieba().cut(run) if w.strip()]


def _no_space_words(run: str) -> list[str]:
    """A run of a no-space script as words: Han by the dictionary, the rest as bigrams, a
    mixed run (kanji and kana) piece by piece."""
    out: list[str] = []
    pos = 0
    for m in _HAN_RUN_RE.finditer(run):
        if m.start() > pos:
            out.extend(_bigrams(run[pos : m.start()]))
        out.extend(_han_words(m.group()))
        pos = m.end()
    if pos < len(run):
        out.extend(_bigrams(run[pos:]))
    return out


def segment(text: str) -> list[str]:
    """The words of ``text`` in order, as written (not folded), whatever its script."""
    out: list[str] = []
    for m in _WORD_RE.finditer(text):
        word = m.group()
        if _NO_SPACE_RE.match(word):
            out.extend(_no_space_words(word))
        else:
            out.append(word)
    return out


_CJK_CHAR_RE = re.compile(f"[{NO_SPACE_SCRIPTS}]")


def cjk_chars(text: str) -> str:
    """``text`` with a space either side of every character of a no-space script, so a word
    tokenizer reads each as a word of its own (the rest is unchanged)."""
    if not has_no_space_script(text):
        return text
    return _CJK_CHAR_RE.sub(lambda m: f" {m.group()} ", text)


#: Names of the languages reports are most often written in, for reasons a person reads.
LANGUAGE_NAMES = {
    "en": "English", "de": "German", "fr": "French", "es": "Spanish", "pt": "Portuguese",
    "it": "Italian", "nl": "Dutch", "pl": "Polish", "ru": "Russian", "zh": "Chinese",
    "ja": "Japanese", "ko": "Korean", "th": "Thai", "ar": "Arabic", "tr": "Turkish",
    "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish", "cs": "Czech",
}  # fmt: skip

# scripts that name their language
_SCRIPT_LANGS = (
    (re.compile(f"[{_KANA}]"), "ja"),
    (re.compile("[\uac00-\ud7af\u1100-\u11ff]"), "ko"),
    (re.compile(f"[{_HAN}]"), "zh"),
    (re.compile("[\u0e00-\u0e7f]"), "th"),
    (re.compile("[\u0e80-\u0eff]"), "lo"),
    (re.compile("[\u1780-\u17ff]"), "km"),
    (re.compile("[\u1000-\u109f]"), "my"),
)
_LETTER_RE = re.compile(r"[^\W\d_]")


@functools.cache
def _identifier() -> Any:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # type: ignore[import-untyped]

    return LanguageIdentifier.from_model_file(MODEL_FILE)


def warm_up(*, identify: bool = True) -> None:
    """Load the word dictionary (and, with ``identify``, the language model) now, not on the
    first page that needs it (~0.5 s and ~0.7 s of one core)."""
    _jieba()
    if identify:
        _identifier()


def script_language(text: str) -> str | None:
    """The language ``text``'s script names (a fifth of its letters in Han, kana, Hangul,
    Thai...), or None: a regular-expression pass, no model (safe on the event loop)."""
    sample = text[:LANG_SAMPLE_CHARS]
    letters = len(_LETTER_RE.findall(sample))
    if letters == 0:
        return None
    for pattern, lang in _SCRIPT_LANGS:
        # a script that is a fifth of the letters names the language (a Chinese sentence
        # quoting "GDP" and "OECD" is still Chinese); kana before Han: Japanese writes both
        if len(pattern.findall(sample)) * 5 >= letters:
            return lang
    return None


def language_of(text: str) -> str:
    """The ISO 639-1 code of ``text``'s language (``"und"`` when it cannot be told)."""
    by_script = script_language(text)
    if by_script is not None:
        return by_script
    sample = text[:LANG_SAMPLE_CHARS]
    if len(_LETTER_RE.findall(sample)) < _MIN_LETTERS:
        return "und"
    lang, _prob = _identifier().classify(sample)
    return str(lang)
