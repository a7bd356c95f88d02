"""Dataset-aware answer extraction: a model's free-text answer -> the integer label that is scored.

Labels: option tasks (tcga, gtex, tcga_slidebench, tcga_expert_vqa) use the 1-based option index;
panda uses the ISUP grade 0..5, and a declared benchmark's grade question (``answer: grade``, no options)
any integer grade 0..1000. Rules, in order; the first that yields a label decides:

1. JSON. The last JSON object in the text (fenced or bare, prose around it is fine; single-quoted
   Python-style dicts are accepted) holding ``answer`` (panda: ``isup_grade``, else ``answer``) decides;
   nested objects are searched too, shallowest first (``{"final_answer": {"isup_grade": 2}}`` is 2).
   Its value may be an int, a numeric string, a letter (4-option questions) or the option text. A value
   that is not a valid label makes the result ``None``: the model's formal answer was invalid.
   The released prompts ask for the JSON "at the end" of the reply and the official code keeps the
   whole reply, so the answer is the one the reply ends with: an object quoted earlier while reasoning
   does not count, nor does one followed by an answer key in an object that did not parse (cut off or
   malformed) or by an object the reply's end cut short. In an object that does not parse, an answer
   key (where an object's key stands, after "{" or ",") whose value is complete is read
   (``{"answer": 3, "reasoning": "...`` cut at the token limit is 3, reason "JSON-like ..."); one
   whose value the reply's end cut (``{"answer": "Squamous ce``) is no answer, and so is a reply that
   ends in an object cut before any answer key. Objects are found by the one bounded scanner for
   model text (``core/jsonscan.py``, also the GIANT agent's action parser, which likewise reads no
   action from a reply ending in a cut-off object) in the reply's last 64 KiB, whatever its length.
   An answer key outside any object (``"answer": 3`` alone on a line) is read last.
2. Explicit statement. "answer is/answer:/final answer/correct option is/I choose/I'm going with ..."
   phrases, the last one first; within the sentence after it, the first valid candidate (option text,
   letter, number) wins. A statement naming only invalid candidates (e.g. "Answer: 7" of 4 options)
   gives ``None``; a statement without any candidate ("the answer is unclear") is skipped. "answer is
   not 2" is skipped.
3. Whole text: the first marked candidate (option text, "option 3", "(C)", "C)" at a line start, a lone
   letter: the whole answer or a capital alone on its line; panda: "ISUP grade 3", "grade group 3"),
   else the first bare integer in range.

A negated candidate ("not 2", "not option 2", "not liver", "not grade group 2") is never a label.
A JSON value, an explicit statement or (rule 3) the whole text that names every option ("1, 2, 3 or 4",
"A, B, C or D", all option texts, all six grades) is no answer: reason "lists every option".
Only ASCII digits are numbers: Arabic-Indic, full-width or superscript digits are never labels.

PANDA null grade (``panda_null_grade``): models often write ``{"isup_grade": null}`` (or ``None``,
``"null"``, ``"none"``) for benign tissue, where no Gleason pattern and so no grade exists. ``benign``
(default) reads it as ISUP 0; ``no_answer`` gives no label. Either way the reason starts with
``panda_null_grade`` so null grades can be counted. The choice matters: an independent
implementation's PANDA balanced accuracy moved from 9.7 % to 20.3 % on this mapping alone.

Candidates: an integer is "bare" only when standalone (not in 4+3, 3-4, 95%, 3/5, 2.5, TCGA-05-4244,
40x, 3 mm) and not inside an option's text ("Grade 2" is the option, not the number 2); on panda,
numbers in a Gleason phrase ("Gleason score 4+3=7", "Gleason pattern 4", "patterns 3 and 4") are never
grades. Letters A-D count only for 4-option questions and never as the article "A" ("A tumor ..."), or
in words like "B-cell". Option text matches case-insensitively on word boundaries, a hyphen
equal to a space ("small-cell" = "small cell"); when matches overlap
(options "Lung" and "Lung adenocarcinoma"), the longest wins. Out-of-range integers are not labels.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Any

from giant_assets.benchmarks.declaration import MAX_GRADE
from giant_assets.benchmarks.registry import BUILT_IN_NAMES
from giant_assets.core.jsonscan import MAX_PARSED_CHARS, Found, scan_objects

PANDA = "panda"
PANDA_GRADE_RANGE = (0, 5)
DECLARED_GRADE_RANGE = (0, MAX_GRADE)  # a declared grade benchmark: any integer grade the model states
LETTERS = "ABCD"
_OPTION_KEYS = ("answer", "final_answer", "choice", "option")
_GRADE_KEYS = ("isup_grade", "answer", "final_answer")
PANDA_NULL_REASON = "panda_null_grade"  # every extraction of a null ISUP grade starts with this
PANDA_NULL_POLICIES = ("benign", "no_answer")
_NULL_TEXTS = frozenset({"null", "none"})


@dataclass(frozen=True)
class ExtractedAnswer:
    """The scored label (None: nothing valid found), how it was found or why not, and the input text."""

    label: int | None
    reason: str
    raw: str


@dataclass(frozen=True)
class _Candidate:
    start: int
    label: int | None  # None: a candidate that is not a valid label (out of range, letter of 30 options)
    what: str  # e.g. 'letter "B"', 'option text "Lung"'


@dataclass(frozen=True)
class _Task:
    """What counts as a label: grades 0..5, or options 1..n (letters A-D when n == 4)."""

    options: tuple[str, ...] | None  # None: grades
    panda_null_grade: str = "benign"
    grades: tuple[int, int] = PANDA_GRADE_RANGE  # the grade range of a grade task

    @property
    def is_grade(self) -> bool:
        return self.options is None

    def in_range(self, k: int) -> bool:
        lo, hi = self.grades if self.options is None else (1, len(self.options))
        return lo <= k <= hi

    def describe(self, k: int) -> str:
        return f"grade {k}" if self.is_grade else f"option {k}"

    def covers_all(self, candidates: list[_Candidate]) -> bool:
        """True when the candidates name every label of the task (a list of the choices, not a choice)."""
        lo, hi = self.grades if self.options is None else (1, len(self.options))
        return hi > lo and {c.label for c in candidates if c.label is not None} >= set(range(lo, hi + 1))

    @property
    def valid(self) -> str:
        lo, hi = self.grades if self.options is None else (1, len(self.options))
        return f"{'grade' if self.is_grade else 'option'} {lo}..{hi}"


def extract_label(
    text: str, *, benchmark_name: str, options: list[str] | None, panda_null_grade: str = "benign"
) -> ExtractedAnswer:
    """Canonical integer label of a model answer (see the module docstring for the rules).

    ``panda_null_grade``: ``benign`` (default) reads a null ISUP grade as 0, ``no_answer`` as no label.
    """
    if panda_null_grade not in PANDA_NULL_POLICIES:
        raise ValueError(f"panda_null_grade must be one of {PANDA_NULL_POLICIES}, got {panda_null_grade!r}")
    if benchmark_name == PANDA:
        task = _Task(None, panda_null_grade)
    elif options:
        task = _Task(tuple(str(o) for o in options))
    elif benchmark_name in BUILT_IN_NAMES:
        raise ValueError(f"benchmark {benchmark_name!r}: an option task needs its options, got {options!r}")
    else:  # a declared benchmark's grade question (its items are validated: option kinds have options)
        task = _Task(None, grades=DECLARED_GRADE_RANGE)
    raw = text
    if not text or not text.strip():
        return ExtractedAnswer(None, "empty answer", raw)
    for rule in (_from_json, _from_explicit, _from_text):
        found = rule(text, task)
        if found is not None:
            label, reason = found
            return ExtractedAnswer(label, reason, raw)
    kinds = "option number, letter or option text"
    if task.is_grade:
        kinds = f"{'ISUP ' if benchmark_name == PANDA else ''}{task.valid}"
    return ExtractedAnswer(None, f"no {kinds} found", raw)


# --- rule 1: JSON -------------------------------------------------------------------------------


def _find_key(obj: Any, keys: tuple[str, ...]) -> tuple[str, Any] | None:
    """The first of ``keys`` (case-insensitive) in a dict, searching nested dicts breadth-first.

    A key whose value is itself an object is not an answer; its contents are searched instead.
    """
    level = [obj] if isinstance(obj, dict) else []
    while level:
        nested = []
        for node in level:
            lowered = {str(k).strip().lower(): v for k, v in node.items()}
            for key in keys:
                if key in lowered and not isinstance(lowered[key], dict):
                    return key, lowered[key]
            nested.extend(v for v in node.values() if isinstance(v, dict))
        level = nested
    return None


_KEY_VALUE = re.compile(r"""["'](isup_grade|answer|final_answer)["']\s*:\s*["']?([^,}"'\n]{1,80})""", re.I)
# an answer key where an object's key stands (after "{" or ","), and its value in an object that did not
# parse: a string closed on its line, a bare token followed by a delimiter, or a value the text's end cut
_KEY_IN_OBJECT = re.compile(r"""[{,]\s*["'](isup_grade|answer|final_answer)["']\s*:\s*""", re.I)
_QUOTED_VALUE = re.compile(r""""([^"\\\n]{0,200})"|'([^'\\\n]{0,200})'""")
_BARE_VALUE = re.compile(r"""[^\s,}\]"'{\[]{1,80}(?=[\s,}\]])""")
_CUT_VALUE = re.compile(r"""(?:"[^"\n]*|'[^'\n]*|[^\s,}\]"'{\[]*)\s*""")


def _from_json(text: str, task: _Task) -> tuple[int | None, str] | None:
    """Rule 1: the answer the reply ends with, in a parsed object or in one that did not parse (cut off at
    the reply's end, or malformed); see the module docstring."""
    keys = _GRADE_KEYS if task.is_grade else _OPTION_KEYS
    tail = text[-MAX_PARSED_CHARS:]
    scan = scan_objects(tail, python_literals=True)
    last: tuple[int, str, Any] | None = None  # end, key, value of the last parsed object with an answer
    for found in reversed(scan.objects):
        hit = _find_key(found.value, keys)
        if hit is not None:
            last = (found.end, *hit)
            break
    after = 0 if last is None else last[0]
    unparsed = _last_unparsed_key(tail, after, scan.objects, keys)
    if unparsed is not None:
        return _unparsed_answer(*unparsed, task)
    if any(start >= after for start in scan.cut_off):
        return None, "the reply ends in a JSON object cut off before any answer field (no answer)"
    if last is not None:
        _, key, value = last
        if _is_null_grade(key, value, task):
            return _null_grade(task, f"JSON {key!r} is null ({value!r})")
        label, what = _value_label(value, task)
        if label is None:
            return None, f"JSON {key!r} value {value!r} {what or f'is not a valid {task.valid}'}"
        return label, f"JSON {key!r}: {what}"
    for match in reversed(list(_KEY_VALUE.finditer(tail))):  # "answer": 3 outside any object
        key = match.group(1).lower()
        if key not in keys:
            continue
        value = match.group(2).strip()
        if _is_null_grade(key, value, task):
            return _null_grade(task, f"JSON-like {key!r} (object not parseable) is {value!r}")
        label, what = _value_label(value, task)
        if label is not None:
            return label, f"JSON-like {key!r} (object not parseable): {what}"
    return None


def _last_unparsed_key(
    tail: str, after: int, parsed: list[Found], keys: tuple[str, ...]
) -> tuple[str, Any, bool] | None:
    """(key, value, cut) of the last answer key written as an object's key at or after ``after`` outside
    every parsed object (its object cut off or malformed): its complete value, or ``cut`` when the text's
    end cut the value. Keys whose value is neither (an object, an escaped string) are passed over."""
    starts = [f.start for f in parsed]
    for match in reversed(list(_KEY_IN_OBJECT.finditer(tail, after))):
        key, pos = match.group(1).lower(), match.end()
        k = bisect.bisect_right(starts, match.start()) - 1
        if key not in keys or (k >= 0 and parsed[k].end > match.start()):
            continue  # not an answer key, or one inside a parsed object (read there)
        quoted = _QUOTED_VALUE.match(tail, pos)
        if quoted is not None:
            return key, next(g for g in quoted.groups() if g is not None), False
        bare = _BARE_VALUE.match(tail, pos)
        if bare is not None:
            return key, _bare(bare.group(0)), False
        if _CUT_VALUE.fullmatch(tail, pos):
            return key, tail[pos:], True
    return None


def _unparsed_answer(key: str, value: Any, cut: bool, task: _Task) -> tuple[int | None, str]:
    """The label of an answer key in an object that did not parse; none when the value was cut off."""
    if cut:
        return None, f"JSON-like {key!r}: the reply ends inside its value ({value!r}; no answer)"
    if _is_null_grade(key, value, task):
        return _null_grade(task, f"JSON-like {key!r} (object not parseable) is {value!r}")
    label, what = _value_label(value, task)
    if label is None:
        why = what or f"is not a valid {task.valid}"
        return None, f"JSON-like {key!r} (object not parseable) value {value!r} {why}"
    return label, f"JSON-like {key!r} (object not parseable): {what}"


def _bare(value: str) -> Any:
    """A bare JSON-like token as a value: null/None as None, else its text (a number is read from it)."""
    return None if value.lower() in _NULL_TEXTS else value


def _is_null_grade(key: str, value: Any, task: _Task) -> bool:
    return (
        task.is_grade
        and key == "isup_grade"
        and (value is None or (isinstance(value, str) and value.strip().lower() in _NULL_TEXTS))
    )


def _null_grade(task: _Task, what: str) -> tuple[int | None, str]:
    if task.panda_null_grade == "benign":
        return 0, f"{PANDA_NULL_REASON}: {what} -> grade 0 (benign)"
    return None, f"{PANDA_NULL_REASON}: {what} -> no answer (policy no_answer)"


def _value_label(value: Any, task: _Task) -> tuple[int | None, str]:
    """Label of a JSON value: int/float, numeric string, letter or option text; else (None, why or "")."""
    if isinstance(value, bool):
        return None, ""
    if isinstance(value, int | float):
        if not math.isfinite(value) or value != int(value) or not task.in_range(int(value)):
            return None, ""
        return int(value), task.describe(int(value))
    if not isinstance(value, str):
        return None, ""
    norm = _squash(value)
    if task.options is not None:
        exact = [i for i, opt in enumerate(task.options, start=1) if _squash(opt) == norm]
        if exact:
            return exact[0], f'option text "{value.strip()}" -> option {exact[0]}'
    candidates = _candidates(_normalise(value), task, strict=False)
    if task.covers_all(candidates):
        return None, "lists every option (no answer)"
    return _first_valid(candidates, task) or (None, "")


# --- rule 2: explicit answer statements ------------------------------------------------------------

_EXPLICIT = re.compile(
    r"""(?:
          \b(?:final\s+(?:answer|choice|grade|isup\s+grade|prediction)
            |(?:correct|best|most\s+likely)\s+(?:answer|option|choice)
            |answer)
          (?:\s+(?:is|would\s+be|will\s+be|should\s+be|=)|\s*[:=])
        | \bi(?:'ll|'d|\s+will|\s+would)?\s+(?:choose|select|pick|go\s+with)
        | \bi(?:'m|\s+am)\s+going\s+with
        )[ \t:*-]*""",
    re.I | re.X,
)
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
_NEGATED = re.compile(r"(?:\w+\s+)?not\b", re.I)
_SEGMENT_CHARS = 200
_LOOKBACK = 40  # chars searched before a candidate for its marker ("option", "("); keeps it linear


def _from_explicit(text: str, task: _Task) -> tuple[int | None, str] | None:
    norm = _normalise(text)
    for match in reversed(list(_EXPLICIT.finditer(norm))):
        rest = norm[match.end() : match.end() + _SEGMENT_CHARS]
        rest = rest[len(rest) - len(rest.lstrip()) :]
        end = _SENTENCE_END.search(rest)
        segment = rest[: end.start()] if end else rest
        if not segment.strip() or _NEGATED.match(segment):
            continue
        phrase = " ".join(match.group(0).split()).strip(" :*-")
        candidates = _candidates(segment, task, strict=False)
        if task.covers_all(candidates):
            return None, f'explicit "{phrase}" lists every option (no answer)'
        best = _first_valid(candidates, task)
        if best is not None:
            return best[0], f'explicit "{phrase}": {best[1]}'
        if candidates:
            return None, f'explicit "{phrase}" names {candidates[0].what}, not a valid {task.valid}'
    return None


# --- rule 3: the whole text -----------------------------------------------------------------------


def _from_text(text: str, task: _Task) -> tuple[int | None, str] | None:
    candidates = _candidates(_normalise(text), task, strict=True)
    if task.covers_all(candidates):
        return None, "the text lists every option and states no answer"
    marked = [c for c in candidates if not c.what.startswith("number")]
    for tier, name in ((marked, "first marked candidate"), (candidates, "first number in range")):
        best = _first_valid(tier, task)
        if best is not None:
            others = {c.label for c in candidates if c.label is not None} - {best[0]}
            note = (
                f" (also mentioned: {', '.join(task.describe(k) for k in sorted(others))})" if others else ""
            )
            return best[0], f"{name}: {best[1]}{note}"
    return None


# --- candidates -------------------------------------------------------------------------------------

_MARKDOWN = re.compile(r"[*`]+|^\s{0,3}#{1,6}\s+", re.M)
_INT = re.compile(
    r"(?<![\w.,+/×^-])([0-9]+)(?![\w×]|[.,][0-9]|\s*[%+/×]|\s*-\s*[0-9]|-\w|\s+(?:mm|cm|µm|um|mg|ml|hpf)\b)",
    re.I,
)
_INT_MARKED = re.compile(r"(?:\b(?:option|choice|number)\s*#?\s*|#\s*|[(\[{]\s*)$", re.I)
_LETTER = re.compile(r"(?<![\w'’-])([A-Da-d])(?![\w'’]|-\w)")
_LETTER_PREFIX = re.compile(r"\b(?:option|choice|letter)\s+$", re.I)
_ARTICLE_FOLLOWERS = frozenset(
    [
        "because",
        "since",
        "as",
        "given",
        "due",
        "based",
        "which",
        "and",
        "or",
        "but",
        "is",
        "was",
        "with",
        "per",
        "from",
    ]
)
_WORD_AFTER = re.compile(r"\s+([A-Za-z]+)")
_NEGATION = re.compile(r"\bnot\s+(?:(?:option|choice|letter|number)\s+#?\s*|[(\[]\s*)?$", re.I)
_ISUP = re.compile(
    r"\b(?:isup(?:[\s_-]*grade)?(?:[\s_-]*group)?|grade[\s_-]*group|gg)\s*(?:is\s+|of\s+|[:=-]\s*)?([0-9]+)\b",
    re.I,
)
_GLEASON = re.compile(
    r"\b(?:gleason(?:\s+(?:score|pattern|grade|sum)s?)?|patterns?)\s*(?:of\s+|is\s+|are\s+|[:=]\s*)?"
    r"[0-9]+(?:\s*(?:\+|and|&)\s*[0-9]+)?(?:\s*=\s*[0-9]+)?",
    re.I,
)


def _normalise(text: str) -> str:
    """Markdown emphasis, code ticks and heading marks removed; everything else kept in place."""
    return _MARKDOWN.sub("", text)


def _squash(text: str) -> str:
    """Lower case, hyphens as spaces, whitespace collapsed, edge punctuation dropped."""
    return " ".join(text.lower().replace("-", " ").split()).strip(" .:;,'\"")


def _candidates(text: str, task: _Task, *, strict: bool) -> list[_Candidate]:
    """Every candidate in ``text`` by position. ``strict`` (whole text): letters only where marked."""
    found: list[_Candidate] = []
    masked: list[tuple[int, int]] = []
    if task.options is not None:
        for start, end, k in _option_spans(text, task.options):
            found.append(_Candidate(start, k, f'option text "{text[start:end]}" -> option {k}'))
            masked.append((start, end))
        if len(task.options) == len(LETTERS):
            found.extend(c for c in _letters(text, strict=strict) if not _inside(c.start, masked))
    else:
        masked.extend(m.span() for m in _GLEASON.finditer(text))
        for m in _ISUP.finditer(text):
            if not _inside(m.start(1), masked):
                k = int(m.group(1))
                found.append(_Candidate(m.start(), k if task.in_range(k) else None, f'"{m.group(0)}"'))
                masked.append(m.span())
    for m in _INT.finditer(text):
        if _inside(m.start(), masked):
            continue
        k = int(m.group(1))
        marked = task.options is not None and bool(
            _INT_MARKED.search(text, max(0, m.start() - _LOOKBACK), m.start())
        )
        kind = "marked number" if marked else "number"
        found.append(_Candidate(m.start(), k if task.in_range(k) else None, f"{kind} {k}"))
    found.sort(key=lambda c: c.start)
    return [c for c in found if not _NEGATION.search(text, max(0, c.start - 24), c.start)]


def _first_valid(candidates: list[_Candidate], task: _Task) -> tuple[int, str] | None:
    for c in candidates:
        if c.label is not None:
            return c.label, c.what if c.what.endswith(
                task.describe(c.label)
            ) else f"{c.what} -> {task.describe(c.label)}"
    return None


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= pos < end for start, end in spans)


def _option_spans(text: str, options: tuple[str, ...]) -> list[tuple[int, int, int]]:
    """Non-overlapping option-text matches (start, end, 1-based option); the longest wins an overlap."""
    spans = []
    for k, option in enumerate(options, start=1):
        words = [w for w in re.split(r"[\s-]+", option) if w]  # "small-cell" and "small cell" are one
        if not words:
            continue
        pattern = r"(?<![\w-])" + r"[\s-]+".join(re.escape(w) for w in words) + r"(?![\w]|-\w)"
        spans.extend((m.start(), m.end(), k) for m in re.finditer(pattern, text, re.I))
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    kept: list[tuple[int, int, int]] = []
    for span in spans:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def _letters(text: str, *, strict: bool) -> list[_Candidate]:
    whole = text.strip(" \t\n.:;!()[]{}")
    out = []
    for m in _LETTER.finditer(text):
        letter, start, end = m.group(1), m.start(), m.end()
        before, after = text[max(0, start - 1) : start], text[end : end + 1]
        bracketed = before in "([{" and before != "" and after in ")]}" and after != ""
        prefixed = bool(_LETTER_PREFIX.search(text, max(0, start - _LOOKBACK), start))
        line_start = _at_line_start(text, start)
        listed = line_start and after in ").:" and after != ""
        line_end = text.find("\n", end, end + _LOOKBACK)
        line_end = len(text) if line_end == -1 and end + _LOOKBACK >= len(text) else line_end
        own_line = line_end != -1 and text[start:line_end].strip(" \t.:;!)]}") == letter
        alone = whole == letter or (line_start and own_line and letter.isupper())
        if letter.islower() and not (bracketed or prefixed or alone):
            continue
        if strict and not (bracketed or prefixed or listed or alone):
            continue
        if letter == "A" and not (bracketed or prefixed or listed or alone):
            word = _WORD_AFTER.match(text, end)
            if word and word.group(1).lower() not in _ARTICLE_FOLLOWERS:
                continue  # the article: "A tumor ...", "A well-differentiated ..."
        k = LETTERS.index(letter.upper()) + 1
        out.append(_Candidate(start, k, f'letter "{letter}" -> option {k}'))
    return out


def _at_line_start(text: str, pos: int) -> bool:
    """Only blanks between the line's start and ``pos``; looks back at most _LOOKBACK characters,
    so checking every letter of a long line stays linear."""
    before = text[max(0, pos - _LOOKBACK) : pos]
    newline = before.rfind("\n")
    return not before[newline + 1 :].strip() and (newline != -1 or pos <= _LOOKBACK)
