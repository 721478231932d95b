"""Find the final answer in a model's response, and say where it came from.

Priority order (the first rule that finds something wins; each can be turned off in
``ExtractionConfig``; docs/math_verifier.md has the full table):

0. the response is cut at the first chat-template marker (``<|im_start|>``, ``<|im_end|>``,
   ``<|endoftext|>``, ...): a small model that runs on into the next turn has finished;
1. a short answer stated by a final-answer or answer phrase *after* the last box (the
   model's last word: "\\boxed{C} ... The answer is 48.");
2. ``boxed``: the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces, or ``\\boxed 5``);
   boxes one after another with only a separator between them (``\\boxed{2}`` and
   ``\\boxed{3}``) are one answer, ``2, 3``;
3. ``final-answer``: the lm-eval/Minerva form "Final Answer: The final answer is $X$. I hope
   it is correct.", "final answer is X", "Final answer: X";
4. ``answer-phrase``: "the answer is X", "Answer: X", "Answer \\( X \\)", GSM8K's ``#### X``,
   and the answer words of ``languages`` (``réponse``, ``答案``);
5. ``bare``: the whole text, when it is itself a short bare answer (``\\frac{1}{2}``, ``x = 3``);
6. ``math-span`` / ``last-number``: the last ``$...$``/``\\(...\\)``/``\\[...\\]`` span or the last
   number in the text (``12,340``, ``12 340``, ``-3.5``, ``7/2``), whichever ends later (a
   closing "so the largest n is 21." beats an earlier ``$n^2 < 500$``). ``last_number``
   is a setting. These two rules skip a long response that was cut off (``is_unfinished``:
   it ends without a full stop, formula or bracket), unless ``unfinished_fallback=True``.

With ``choice=True`` (the reference is a letter such as ``C``), the answer is a letter: found
by rules 1-4 and read from their text (``\\boxed{(C)}``, "Answer: C. Carol"), else by the
``mcq`` rule after lighteval's: a letter that opens the response or a line ("(C) Carol",
"C. because ..."), else the last standalone letter not negated ("it is for sure C, not A or
B" gives C).

Work is bounded on any input: we scan at most a few box candidates from the end, never read
more than ``_MAX_BOX_CHARS`` of one box, and only search the tail of megabyte responses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from tasks.brackets import matching_brace

SOURCES = (
    "boxed",
    "final-answer",
    "answer-phrase",
    "mcq",
    "bare",
    "math-span",
    "last-number",
    "none",
)
"""Every value of ``Extraction.source`` (and of ``Verdict.answer_source`` for math)."""

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_MAX_BOX_CANDIDATES = 20  # unclosed boxes to skip before giving up (adversarial text)
_MAX_BOX_CHARS = 10_000  # a box longer than this is not an answer
_MAX_BARE_CHARS = 200
_TAIL_CHARS = 20_000  # the phrase, span and number rules only look at the end of a response

# Answer words per language, after lighteval's translation literals (answer, final answer).
_ANSWER_WORDS = {
    "en": (r"final\s+answer", r"answer"),
    "fr": (r"r[ée]ponse\s+finale", r"r[ée]ponse"),
    "zh": (r"最终答案", r"答案"),
}
_CHAT_MARKERS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end|>",
    "<|user|>",
    "<|assistant|>",
    "</s>",
    "<|end_of_text|>",
)


@dataclass(frozen=True)
class ExtractionConfig:
    """Which extraction rules run (see the module docstring for their order).

    A frozen dataclass, like math-verify's extraction configs, so it can be shared and hashed.
    """

    boxed: bool = True
    final_answer: bool = True
    answer_phrase: bool = True
    bare: bool = True
    math_span: bool = True
    last_number: bool = True
    languages: tuple[str, ...] = ("en", "fr", "zh")
    choices: tuple[str, ...] = ("A", "B", "C", "D", "E")
    unfinished_fallback: bool = False
    chat_markers: tuple[str, ...] = field(default=_CHAT_MARKERS)
    # A comparison option carried here so one config reaches every step: expressions without
    # ``i`` are real functions, and a sample point where neither side is real is outside their
    # domain (``\\frac{1}{\\sqrt x} = \\sqrt{1/x}``); one where only one side is real is a
    # difference of domains (math-6: ``\\ln|x| != \\ln x``). ``"loose"`` lets such a point decide
    # nothing (the math-4/5 rule: ``\\log(a^2 b) = 2\\log a + \\log b``, but also
    # ``\\ln|x| = \\ln x``). False compares complex values everywhere.
    real_domain: bool | str = True
    # Conventions (marft_envs/math/conventions.py), tried only on a pair the cascade found
    # different; each can turn "different" into "equal". Defaults measured in
    # docs/math_verifier.md (math-7).
    rounded_decimals: bool = True  # 12.67 = 38/3 (a decimal at its own written places)
    percent_fraction: bool = True  # 50\% = 1/2 as well as 50\% = 50
    degrees_radians: bool = True  # 45^\circ = \pi/4 against an angle written with \pi
    integer_parameter: bool = True  # x = 2m\pi = 2k\pi (an integer parameter renamed)

    def __post_init__(self) -> None:
        unknown = set(self.languages) - set(_ANSWER_WORDS)
        if unknown:
            raise ValueError(
                f"unknown answer languages {sorted(unknown)}; valid: {sorted(_ANSWER_WORDS)}"
            )
        if self.real_domain not in (True, False, "loose"):
            raise ValueError(
                f"real_domain must be True, False or 'loose', got {self.real_domain!r}"
            )
        bad = [c for c in self.choices if not re.fullmatch(r"[A-Za-z0-9]", c)]
        if bad:
            raise ValueError(f"choices must be single letters or digits, got {bad}")


DEFAULT_CONFIG = ExtractionConfig()


@dataclass(frozen=True)
class Extraction:
    """An extracted answer and the rule that found it (one of ``SOURCES``)."""

    answer: str | None
    source: str


_NONE = Extraction(None, "none")


def _read_box(text: str, start: int) -> tuple[str, int] | None:
    """The argument of a box command whose name ends at ``start`` and the index after it."""
    i = start
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    if i >= n:
        return None
    if text[i] != "{":
        # "\boxed 5": one token up to whitespace or the end of the math.
        m = re.match(r"[^\s$]+", text[i : i + 200])
        if start == i or not m:  # "\boxedx" is another command, not a box
            return None
        return m.group(0), i + m.end()
    j = matching_brace(text, i, i + _MAX_BOX_CHARS)
    return (text[i + 1 : j], j + 1) if j >= 0 else None


def _boxes(text: str) -> list[tuple[str, int, int]]:
    """Closed boxes from the end: (content, start of the command, end), last first."""
    found = []
    pos = len(text)
    for _ in range(_MAX_BOX_CANDIDATES):
        idx, cmd = max((text.rfind(c, 0, pos), c) for c in _BOX_COMMANDS)
        if idx < 0:
            break
        box = _read_box(text, idx + len(cmd))
        if box is not None:
            found.append((box[0].strip(), idx, box[1]))
            if len(found) > 8:
                break
        pos = idx
    return found


# What may stand between two boxes that are one answer: nothing, or a few words with a
# separator ("\\boxed{1} and \\boxed{2}", "\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1,
# 1)}").
_BETWEEN_NOISE = re.compile(
    r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}|\\q?quad|\\[,;!\s()\[\]]|[$.]"
)
_SEPARATOR = re.compile(r"(?:^|[^A-Za-z])(?:and|or|et|ou)(?:$|[^A-Za-z])|[,;和或]")
_TEXT_GROUP_CONTENT = re.compile(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}")


_SEPARATOR_WORDS = {"and", "or", "et", "ou"}


def _joins(between: str) -> bool:
    """Whether two boxes with ``between`` between them are one answer.

    Nothing but a separator, in plain text at most one other word ("\\boxed{1} papers and
    \\boxed{2} bins"), any words in ``\\text{}`` ("\\text{ for part (a) and }"); "and and or
    thus but" is a sentence, not a separator (lighteval's and math-verify's suites).
    """
    if len(between) > 70 or "\n\n" in between:
        return False
    texts = " ".join(m.group(1) for m in _TEXT_GROUP_CONTENT.finditer(between))
    plain = _BETWEEN_NOISE.sub(" ", _TEXT_GROUP_CONTENT.sub(" , " if texts else " ", between))
    if not (plain + texts).strip():
        return True
    others = [w for w in re.findall(r"[A-Za-z]+", plain) if w.lower() not in _SEPARATOR_WORDS]
    return len(others) <= 1 and bool(_SEPARATOR.search(plain + " " + texts))


def last_boxed(text: str) -> str | None:
    """The content of the last closed ``\\boxed{}``/``\\fbox{}``; adjacent boxes as one list."""
    boxes = _boxes(text)
    if not boxes:
        return None
    items = [boxes[0][0]]
    # each box with the one before it: the offset lists are one apart by design
    for (content, _, end), (_, later_start, _) in zip(boxes[1:], boxes, strict=False):
        if not _joins(text[end:later_start]):
            break
        if content not in items:
            items.append(content)
    items = [i for i in reversed(items) if i]
    return ", ".join(items) if items else None


#: A math segment of a text: ``$$...$$``, ``$...$``, ``\\(...\\)`` or ``\\[...\\]`` (public: the
#: verifier reads a reference sentence's formulas with it).
MATH_SEGMENT = re.compile(
    # Inline math ($...$, \\(...\\)) stays on one line, as math-verify reads it; display math may
    # not.
    r"\$\$(.+?)\$\$|(?<![\\$])\$((?:\\\$|[^$\n])+?)(?<!\\)\$|\\\(([^\n]+?)\\\)|\\\[(.+?)\\\]",
    re.DOTALL,
)
# Two plain words (outside \text{} labels such as units) mean prose, not a bare answer.
_WORD = re.compile(r"(?<![\\A-Za-z{])[A-Za-z]{2,}(?![A-Za-z])")
# Letters of scripts written without spaces (CJK, kana, hangul): such a line is prose.
_PROSE_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_LABEL = re.compile(r"^[A-Za-zÀ-ÿ]{2,}\s*:\s*\S")
_TEXT_GROUP = re.compile(r"\\(?:text|mbox|textbf|mathrm)\s*\{[^{}]*\}")
# A number: thousands groups ("12,340", "12 340"), decimals, a slash fraction. Not the "2" of
# "x2" or "\frac12": a letter or backslash before it makes it part of something else.
_NUMBER = re.compile(
    r"[-\u2212]?\\[dtc]?frac\{\d+(?:\.\d+)?\}\{\d+(?:\.\d+)?\}"
    r"|(?<![A-Za-z_\\\d.,{])[-\u2212]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?: \d{3})+(?![\d.,])"
    r"|\d+,\d{2}(?![\d,])|\d+)(?:\.\d+)?(?:/\d+(?:\.\d+)?)?"
)


def _final_answer_pattern(languages: tuple[str, ...]) -> re.Pattern[str]:
    words = [_ANSWER_WORDS[lang][0] for lang in languages]
    return re.compile(
        rf"(?:{'|'.join(words)})(?:\s*(?:is|est|是|为)\s*[:：]?|\s*(?:\*\*)?\s*[:：])\s*"
        r"(?:(?:the\s+)?final\s+answer\s+is\s*:?)?[\s*]*",
        re.IGNORECASE,
    )


def _answer_phrase_pattern(languages: tuple[str, ...]) -> re.Pattern[str]:
    words = [_ANSWER_WORDS[lang][1] for lang in languages]
    return re.compile(
        r"(?:\bthe\s+(?:correct\s+)?answer\s+(?:is|would\s+be|should\s+be)\s*:?"
        r"|\br[ée]ponse\s+(?:est|sera)\s*:?"
        rf"|(?:{'|'.join(words)})\s*(?:\*\*)?\s*(?:是|为|[:：])|(?<![A-Za-z])answer\s*(?=\\[(\[]|\$)"
        r"|####)[ \t*]*",  # not past a line break: the answer may be the block under it
        re.IGNORECASE,
    )


_FINAL = {langs: _final_answer_pattern(langs) for langs in [DEFAULT_CONFIG.languages]}
_PHRASE = {langs: _answer_phrase_pattern(langs) for langs in [DEFAULT_CONFIG.languages]}


def _compiled(table: dict, make, languages: tuple[str, ...]) -> re.Pattern[str]:
    if languages not in table:
        table[languages] = make(languages)
    return table[languages]


_HOPE = re.compile(r"\.?\s*I\s+hope\s+it\s+is\s+correct.*$", re.IGNORECASE | re.DOTALL)


def _answer_after(rest: str, config: ExtractionConfig) -> str | None:
    """The answer that opens ``rest`` (the text after an answer phrase)."""
    rest = _HOPE.sub("", rest, count=1)
    boxed = last_boxed(rest[:2000]) if config.boxed else None
    if boxed:
        return boxed
    on_next_line = "\n" in rest[: len(rest) - len(rest.lstrip())]
    rest = re.sub(r"^\s*(?:\\\"|[\"'`])*\s*", "", rest)  # a quoted answer: \"$12$\"
    spans = _span_run(rest)
    if spans:
        return spans
    stripped = rest.lstrip()
    line = stripped.split("\n", 1)[0].strip()
    if on_next_line and not _NUMBER.search(line):
        # "Answer:\n\nRemaining = total - spent\nRemaining = 100 - 30\nRemaining = 70": the
        # block under the phrase; its last number.
        block = stripped.split("\n\n", 1)[0]
        last = _last_match(_NUMBER, MATH_SEGMENT.sub(_blank, block))
        return last.group(0).replace("\u2212", "-") if last else number_words(block)
    math = MATH_SEGMENT.search(line[:3])
    if math:
        return next(g for g in math.groups() if g is not None).strip() or None
    line = re.split(r"(?<!\d)\.(?:\s|$)|\.\s|。|(?<=\d)\.$", line, maxsplit=1)[0]
    line = line.strip().strip("*").strip().rstrip(".!;,").strip()
    if not line or is_bare_answer(line):
        return line or None
    # A sentence ("The volume of $ABCD$ is 120", "Janeth aura encore 220 $ à payer d'ici 12
    # mois"): its first number, else its last math span.
    plain = MATH_SEGMENT.sub(_blank, line)
    stated = number_words(plain) if _RESTATED.search(plain) else None
    if stated is not None and "," not in stated:
        # "4 squared which is sixteen": the value its calculation is restated as (math-9)
        return stated
    chain = _CHAIN.search(plain)
    if chain:  # "100 + 18 = 28 pairs": the value the calculation reaches
        return chain.group(1)
    number = _NUMBER.search(plain)
    if number:
        return number.group(0).replace("\u2212", "-")
    return number_words(plain) or _last_span_or_number(line, config).answer or line


_UNITS_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS_WORDS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES_WORDS = {"hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9}
_NUMBER_WORD = "|".join([*_UNITS_WORDS, *_TENS_WORDS, *_SCALES_WORDS])
# A number in words that ends a sentence after "is"/"are"/"=" ("... per week by the cows is
# Three hundred sixty-four thousand."): the sentence's value.
_WORDS_AT_END = re.compile(
    rf"(?:\b(?:is|are|was|were|be|equals?)\s+|=\s*)((?:(?:{_NUMBER_WORD})(?:[\s-]+(?:and\s+)?)?)+)"
    r"[\s.!]*$",
    re.IGNORECASE,
)


def _below_hundred(words: list[str], i: int) -> tuple[int, int] | None:
    """A number under a hundred at ``words[i]`` ("seven", "twenty one", "forty-two"): its
    value and the index after it."""
    if i < len(words) and words[i] in _UNITS_WORDS:
        return _UNITS_WORDS.index(words[i]), i + 1
    if i < len(words) and words[i] in _TENS_WORDS:
        value = 10 * (_TENS_WORDS.index(words[i]) + 2)
        if i + 1 < len(words) and words[i + 1] in _UNITS_WORDS[1:10]:
            return value + _UNITS_WORDS.index(words[i + 1]), i + 2
        return value, i + 1
    return None


def _below_thousand(words: list[str], i: int) -> tuple[int, int] | None:
    """A number under a thousand ("three hundred and five", "sixty-four")."""
    if i + 1 < len(words) and words[i] in _UNITS_WORDS[1:10] and words[i + 1] == "hundred":
        value, i = 100 * _UNITS_WORDS.index(words[i]), i + 2
        and_ = i < len(words) and words[i] == "and"
        rest = _below_hundred(words, i + 1 if and_ else i)
        if rest is not None and rest[0] > 0:
            return value + rest[0], rest[1]
        return value, i
    return _below_hundred(words, i)


def _number(words: list[str], i: int) -> tuple[int, int] | None:
    """One complete number in words: groups under a thousand, each times a falling scale
    ("twenty one thousand five hundred", "one million and six"); "and" only after a scale."""
    total, last_scale = 0, None
    while True:
        group = _below_thousand(words, i)
        if group is None:
            return (total, i) if last_scale is not None else None
        value, j = group
        scale = _SCALES_WORDS.get(words[j]) if j < len(words) else None
        if value == 0 or scale is None or scale < 1000 or (last_scale and scale >= last_scale):
            return total + value, j
        total, last_scale, i = total + value * scale, scale, j + 1
        if i < len(words) and words[i] == "and":
            nxt = _below_hundred(words, i + 1)
            if nxt is None or nxt[0] == 0:
                return total, i
            return total + nxt[0], nxt[1]


# A calculation restated at a sentence's end in words ("4 squared which is sixteen").
_RESTATED = re.compile(
    rf"\b(?:which|that)\s+(?:is|equals)\s+(?:(?:{_NUMBER_WORD})(?:[\s-]+(?:and\s+)?)?)+[\s.!]*$",
    re.IGNORECASE,
)


def number_words(sentence: str) -> str | None:
    """The number written in English words at the end of ``sentence`` (after "is", "are",
    "="), as digits; None when there is none or the words do not form a number. The words
    follow a number grammar (math-9): "and" joins only after "hundred"/"thousand"; two
    complete numbers in a row ("two and three", "five five") are a list ("2, 3")."""
    m = _WORDS_AT_END.search(sentence.strip()[-300:])
    if not m:
        return None
    words = [w for w in re.split(r"[\s-]+", m.group(1).lower()) if w]
    numbers: list[str] = []
    i = 0
    while i < len(words):
        if numbers and words[i] == "and":
            i += 1
        parsed = _number(words, i)
        if parsed is None:
            return None
        numbers.append(str(parsed[0]))
        i = parsed[1]
    return ", ".join(numbers) if numbers else None


# A calculation in a sentence: numbers and operators, then "=" and one number ("100 + 18 = 28").
_CHAIN = re.compile(
    r"(?<![\w.])-?\d+(?:\.\d+)?(?:\s*[-+*/×x]\s*\d+(?:\.\d+)?)+(?:\s*=\s*[-+*/×x\d.\s]+?)*"
    r"\s*=\s*(-?\d+(?:\.\d+)?)(?![\d.]*\s*[-+*/×x]\s*\d)"
)
_SPAN_SEPARATOR = re.compile(r"\s*(?:,|;|\band\b|\bor\b|\bet\b|\bou\b|或|或者)\s*")
_OR_WORDS = {"or", "ou", "或", "或者"}


def _span_run(rest: str) -> str | None:
    """Math spans that open ``rest``, joined when written as a list ("$12$ and $13$")."""
    items = []
    joiners = []
    pos = 0
    for _ in range(6):
        math = MATH_SEGMENT.match(rest, pos)
        if not math:
            break
        items.append(_span_text(math))
        sep = _SPAN_SEPARATOR.match(rest, math.end())
        if not sep:
            break
        joiners.append(sep.group().strip())
        pos = sep.end()
    items = [i for i in items if i]
    if len(items) > 1 and all(j in _OR_WORDS for j in joiners[: len(items) - 1]):
        # "$x < -2$ or $x > 2$": kept as "or" (a union of relations); other lists as commas
        return " or ".join(items)
    return ", ".join(items) if items else None


# "The answer is 48" states an answer; "We may check our answer: 17*44 = 748" does not.
_STATES = re.compile(r"\b(?:is|est)\b|是|为")


def _short(answer: str | None) -> str | None:
    """``answer`` if it is a short bare value (no relation: not a check such as "a = b")."""
    if not answer or not is_bare_answer(answer) or re.search(r"=|\\equiv|\\approx", answer):
        return None
    return answer


def _blank(m: re.Match) -> str:
    return " " * (m.end() - m.start())


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match | None:
    last = None
    for m in pattern.finditer(text):
        last = m
    return last


# "Largest: 9, Smallest: 2", "p: 3; q: 5": two or more labelled values, each a short math token.
_LABELLED_ITEM = re.compile(r"\s*([A-Za-z][A-Za-z ]{0,24}?)\s*:\s*([^,;:\n]{1,40}?)\s*")


def labelled_items(text: str) -> list[tuple[str, str]] | None:
    """The (label, value) pairs of a one-line list of labelled values ("Largest: 9, Smallest:
    2"), or None. Every value must itself be a bare answer; the labels must differ."""
    s = text.strip().rstrip(".")
    if not s or "\n" in s or len(s) > _MAX_BARE_CHARS:
        return None
    parts = re.split(r"[,;]", s)
    if len(parts) < 2:
        return None
    items = []
    for part in parts:
        m = _LABELLED_ITEM.fullmatch(part)
        if not m or not is_bare_answer(m.group(2)) or not re.search(r"\d", m.group(2)):
            return None
        items.append((m.group(1).strip().lower(), m.group(2)))
    return items if len({label for label, _ in items}) == len(items) else None


# Labels that state an order between their values: a "smallest" value above a "largest" one
# is a wrong answer whatever the order of the list (math-9).
_LOW_LABEL = re.compile(r"(?:min(?:imum|imal)?|smallest|least|lowest|lower)\b")
_HIGH_LABEL = re.compile(r"(?:max(?:imum|imal)?|largest|greatest|highest|biggest|upper)\b")
_SIMPLE_NUMBER = re.compile(r"-?(?:\d+(?:\.\d+)?|\.\d+)")


def labels_contradict(items: list[tuple[str, str]]) -> bool:
    """Whether a value labelled smallest/min/lower is above one labelled largest/max/upper."""
    low = [float(v) for k, v in items if _LOW_LABEL.match(k) and _SIMPLE_NUMBER.fullmatch(v)]
    high = [float(v) for k, v in items if _HIGH_LABEL.match(k) and _SIMPLE_NUMBER.fullmatch(v)]
    return bool(low and high and max(low) > min(high))


def _labelled_values(text: str) -> str | None:
    """The values of a one-line list of labelled values as an ordered tuple in the list's
    order ("Largest: 9, Smallest: 2" -> "(9, 2)", math-9: never an unordered list), the text
    itself when its labels contradict its values ("Smallest: 9, Largest: 2"), or None."""
    items = labelled_items(text)
    if items is None:
        return None
    if labels_contradict(items):
        return text.strip()
    return "(" + ", ".join(v for _, v in items) + ")"


# "x<-\\frac43 或 x>0": a lone 或 ("or") between two formulas is a joiner, not CJK prose.
_LONE_OR = re.compile(r"(?<=[\w}$)\]])\s*或\s*(?=[\w\\$(\[-])")


def math_segment_count(text: str) -> int:
    """How many math segments (dollar-delimited, ``\\(...\\)``, ``\\[...\\]``) ``text`` holds."""
    return len(MATH_SEGMENT.findall(text))


def is_bare_answer(text: str) -> bool:
    """Whether ``text`` reads as a bare answer (short, one line, no prose) and not a response."""
    s = text.strip()
    if not s or len(s) > _MAX_BARE_CHARS or "\n" in s or _PROSE_SCRIPT.search(_LONE_OR.sub(" ", s)):
        return False
    if _LABEL.match(s):  # "Soucis : 2,74 $": a label, then the answer
        return False
    return len(_WORD.findall(_CALL.sub(" ", _TEXT_GROUP.sub(" ", s)))) < 2


# "sqrt(2)", "cos(x)^2", "log(y, 2)": a function called in programming syntax is maths, not a word.
_CALL = re.compile(
    r"(?<![\\A-Za-z])(?:sqrt|abs|exp|log|ln|a?sin|a?cos|a?tan|arc(?:sin|cos|tan)|sec|csc|cosec|"
    r"cot|sinh|cosh|tanh|sech|csch|cosech|coth|factorial|binomial|floor|ceil|ceiling)\s*(?=\()"
    r"|(?<![\\A-Za-z])%?pi(?![A-Za-z])"
)


def _last_span_or_number(text: str, config: ExtractionConfig) -> Extraction:
    # Spans that are prose ("how many $? just about 1$") are not answers; numbers in them are.
    spans = [m for m in MATH_SEGMENT.finditer(text) if config.math_span and _span_is_math(m)]
    span = spans[-1] if spans else None
    number = None
    if config.last_number:
        outside = list(text)
        for m in spans:
            outside[m.start() : m.end()] = " " * (m.end() - m.start())
        number = _last_match(_NUMBER, "".join(outside))
    if span is not None and (number is None or span.end() >= number.end()):
        return Extraction(_span_text(span), "math-span")
    if number is not None:
        return Extraction(number.group(0).replace("\u2212", "-"), "last-number")
    return _NONE


def _span_text(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None).strip()


def _span_is_math(m: re.Match) -> bool:
    inner = _span_text(m)
    return bool(inner) and (len(inner) > _MAX_BARE_CHARS or is_bare_answer(inner) or "\n" in inner)


def _cut_chat_template(text: str, markers: tuple[str, ...]) -> str:
    """The response up to the first chat-template marker after its first words."""
    for marker in markers:
        if marker in text:
            head, _, rest = text.partition(marker)
            if head.strip():
                text = head
            else:  # the response opens with a marker ("<|im_start|>assistant\n...")
                text = re.sub(r"^\s*(?:assistant|user|system)?\s*\n?", "", rest)
                text = _cut_chat_template(text, markers)
    return text


_LETTER_START = re.compile(
    r"^[ \t*#>]*(?:\(([A-Za-z])\)|([A-Za-z])(?=[.):。，、]|[ \t]*$|[\u4e00-\u9fff]))", re.MULTILINE
)
# "A train leaves ...": the article at a sentence start is not the choice A.
_ARTICLE = re.compile(r"(?:^|(?<=[.!?]\s))A(?=\s+[a-z])", re.MULTILINE)
# "not A or B", "can't be A", "non A", "不是 A": the letters named after a negation.
_NEGATION = re.compile(
    r"(?:\b(?:not|never|non|pas|rather\s+than|instead\s+of)\b|n't|不是|而非)\s*(?:be\s+)?"
    r"(?:\(?[A-Z]\)?(?![A-Za-z])\s*(?:,|\bor\b|\band\b|\bnor\b|\bou\b|或|和)?\s*)+"
)


# A letter in a formula is a symbol, not a choice (math-6): an operator after it ("E*2",
# "E \\cdot 2", "A+B", "A^2", "C/2", "B-1", "A_1", "(E)*2"); "C - Carol" (a dash before a word)
# and "C. Carol" still name C. No operator can come before it: the letter opens the answer.
_FORMULA_AFTER = (
    r"(?![A-Za-z0-9_'])(?!\s*(?:[*^/+=<>\u00d7\u00b7\u00f7]|-\s*(?:[0-9(\\{]|[A-Za-z](?![A-Za-z]))"
    r"|\\(?:cdot|times|div|ast|pm|mp|circ|sqrt|frac|le|ge|ne|leq|geq|neq|lt|gt)(?![A-Za-z])))"
)
_ANSWER_LETTER = re.compile(
    rf"^(?:option\s+|choice\s+)?(?:\(([A-Za-z])\)|\(?([A-Za-z])(?!\))){_FORMULA_AFTER}",
    re.IGNORECASE,
)


def _letter_in(answer: str, choices: tuple[str, ...]) -> str | None:
    """The choice letter an anchored answer names ("(C)", "C. Carol", "\\text{(C)}")."""
    s = re.sub(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}", r"\1", answer).strip()
    s = s.strip("$*").strip()
    m = _ANSWER_LETTER.match(s)
    letter = m and (m.group(1) or m.group(2))
    if letter and letter in choices:
        return letter
    return None


_UPRIGHT = re.compile(r"\\(?:mathrm|mathbf|textrm|text|textbf)\s*\{\s*([A-Za-z])\s*\}")


def _mcq_in_prose(text: str, choices: tuple[str, ...]) -> str | None:
    """A letter opening the response or a line, else the last letter that is not negated."""
    keys = "".join(re.escape(c) for c in choices)
    for m in _LETTER_START.finditer(text[:2000]):
        letter = m.group(1) or m.group(2)
        if letter in choices:
            return letter
        break  # only the very first line start counts as "the response opens with"
    unnegated = _NEGATION.sub(lambda m: " " * (m.end() - m.start()), text)
    unnegated = _ARTICLE.sub(" ", unnegated)
    # A letter in a formula ("\\mathrm{E}*2", "2\\mathrm{E}", "E \\cdot 2") is a symbol, not
    # a choice.
    unnegated = _UPRIGHT.sub(r"\1", unnegated.replace("**", " "))
    unnegated = re.sub(r"\\(?:cdot|times)(?![A-Za-z])", "*", unnegated)
    standalone = re.compile(
        rf"(?<![A-Za-z0-9\\*^/_+-])(?<![*^/+]\s)(?:\(([{keys}])\)|\(?([{keys}])(?!\)))"
        r"(?!\s?(?:[*^/+=]|-\s*(?:[0-9(\\{]|[A-Za-z](?![A-Za-z]))))(?![A-Za-z0-9'_])"
    )
    last = _last_match(standalone, unnegated)
    return (last.group(1) or last.group(2)) if last else None


def extract(
    text: Any, config: ExtractionConfig = DEFAULT_CONFIG, *, choice: bool = False
) -> Extraction:
    """The final answer in ``text`` (a response or a bare answer) and the rule that found it.

    ``choice=True`` reads a multiple-choice letter from ``config.choices`` (see the module
    docstring). Non-strings are converted with ``str``; ``None`` gives ``Extraction(None,
    "none")``. Never raises on any string.
    """
    if text is None:
        return _NONE
    if not isinstance(text, str):
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    if config.chat_markers:
        text = _cut_chat_template(text, config.chat_markers)
    tail = text[-_TAIL_CHARS:]
    final = phrase = None
    if config.final_answer:
        final = _last_match(_compiled(_FINAL, _final_answer_pattern, config.languages), tail)
    if config.answer_phrase:
        phrase = _last_match(_compiled(_PHRASE, _answer_phrase_pattern, config.languages), tail)
    rules: list[tuple[str, Any]] = []
    boxes = _boxes(text) if config.boxed else []
    box_end = boxes[0][2] - (len(text) - len(tail)) if boxes else -1
    # A phrase after the last box ("\\boxed{C} ... The answer is 48.", Minerva's "Final Answer:
    # The final answer is $X$.") is the model's last word, when it states a short answer.
    for source, match in (("final-answer", final), ("answer-phrase", phrase)):
        if boxes and match is not None and match.start() >= box_end and _STATES.search(match[0]):
            rules.append((source, lambda m=match: _short(_answer_after(tail[m.end() :], config))))
    if boxes:
        rules.append(("boxed", lambda: last_boxed(text)))
    if final is not None:
        rules.append(("final-answer", lambda: _answer_after(tail[final.end() :], config)))
    if phrase is not None:
        rules.append(("answer-phrase", lambda: _answer_after(tail[phrase.end() :], config)))
    for source, rule in rules:
        answer = rule()
        if not answer:
            continue
        if not choice:
            return Extraction(answer, source)
        letter = _letter_in(answer, config.choices)
        if letter:
            return Extraction(letter, source)
    if choice:
        letter = _mcq_in_prose(tail, config.choices)
        return Extraction(letter, "mcq") if letter else _NONE
    if config.bare and is_bare_answer(text):
        return Extraction(text.strip(), "bare")
    labelled = _labelled_values(text) if config.bare else None
    if labelled is not None:
        return Extraction(labelled, "bare")
    if not config.unfinished_fallback and is_unfinished(text):
        return _NONE  # cut off (max tokens): its last number is a fragment, not an answer
    return _last_span_or_number(tail, config)


_MIN_CUT_CHARS = 300  # a token limit cuts long generations; a short line is an answer as written
# How a finished response ends: a full stop, a closed formula or bracket, markdown emphasis.
_FINISHED_END = re.compile(r"(?:[.!?。！？$)\]}*]|\\\]|\\\))\s*$")


# A "$" that delimits maths, not the currency sign of "$610." or "$16.50 * 3".
_MATH_DOLLAR = re.compile(r"(?<!\\)\$(?!\d[\d,.]*(?:[\s.,;!?)]|$))")


def is_unfinished(text: str) -> bool:
    """Whether a long response was cut off (at its token limit) rather than finished.

    Cut off: it ends on a line break, inside ``$...$`` or an open bracket, or without a
    closing full stop, formula or bracket ("... the number of possible values of", "= 1 -").
    """
    if len(text) < _MIN_CUT_CHARS:
        return False
    if text.endswith("\n") or re.search(r"(?:^|\s|[,(])\$\s*$", text):
        return True  # a line break, or a formula just opened ("to find $")
    last_sentence = re.split(r"(?<=[.!?。])\s", text[-_MIN_CUT_CHARS:])[-1]
    if len(_MATH_DOLLAR.findall(last_sentence)) % 2:
        return True  # inside a formula its last sentence opened ("the identity $\\sqrt[3]{a^2}")
    line = text[-_MIN_CUT_CHARS:].rsplit("\n", 1)[-1]
    opened = sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
    return opened > 0 or not _FINISHED_END.search(line)


def extract_answer(
    text: Any, config: ExtractionConfig | None = None, *, last_number_fallback: bool = True
) -> str | None:
    """Return the final answer written in ``text`` (a response or a bare answer), or None.

    ``config`` chooses the rules (default ``ExtractionConfig()``); ``last_number_fallback=False``
    is a shortcut for ``ExtractionConfig(last_number=False)``.
    """
    config = config or DEFAULT_CONFIG
    if not last_number_fallback and config.last_number:
        config = replace(config, last_number=False)
    return extract(text, config).answer
