"""A synthetic, task-agnostic chat corpus for pretraining the tiny base model.

Every document is a multi-turn chat with made-up tools, laid out the way :class:`~agentgym.core.ToolEnv`
lays out any observation (the task, a ``Tools:`` list, the call-format instructions, ``State:`` with a
one-line summary; later turns ``Task: … Result: … State: …``). Nothing in it comes from a task: the tools,
their parameters, the quantities, the thresholds, the names and the rules are drawn at random, so the model
learns *skills* that transfer, as a real pretrained model brings them:

- **copying names** it never saw, of one to three words, with accents and hyphens, and codes of random
  characters (every byte of the tokenizer), into tool arguments;
- **reading numbers and comparing them with thresholds** stated in the task (between, below, above, at
  least, at most; integers and decimals, negatives included);
- **multi-turn chat with tool results**: call, read the result, call again, decide;
- **calling made-up tools** with made-up arguments, mostly in the canonical ``<tool_call>`` format and
  otherwise in the other formats the parser accepts (``<|call|>``, a Python call, a JSON object, ReAct).

The mix (:class:`CorpusMix`): most documents *answer from memory* — they call the final tool at once
with a guessed decision — and a minority look things up first and decide from the evidence, writing the
numbers they used before the decision. That is the prior a real base model brings to a tool task: it can
use tools, but mostly answers without them, and reinforcement learning has to make tool use the habit.

:class:`CorpusMix` sets the shares; the shipped base was trained in stages on the mixes in
:data:`agentgym.trainers.models.tiny_model.BASE_STAGES` (mostly made-up tool, parameter and quantity names, lookups
called in the listed order). ``CorpusMix()`` is the corpus of the first base, kept draw for draw.

A test scans every stage's output for every registered task's tool names, every WeatherRun city and the words
of WeatherRun's prompt, and finds none (``tests/test_tiny_base.py``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

from agentgym.core.tools import ToolCall

__all__ = [
    "Clause",
    "CorpusMix",
    "NumeracyTask",
    "chat_documents",
    "made_up_name",
    "numeracy_drill",
    "numeracy_task",
    "render_call",
    "signatures",
]

# Word lists for made-up tools and tasks. They avoid every tool name and topic of the shipped tasks.
_QUANTITIES = [
    ("height", "m"),
    ("weight", "kg"),
    ("price", "EUR"),
    ("speed", "km/h"),
    ("depth", "m"),
    ("length", "cm"),
    ("score", "points"),
    ("load", "%"),
    ("level", "dB"),
    ("pressure", "kPa"),
    ("noise", "dB"),
    ("brightness", "lx"),
    ("salinity", "ppt"),
    ("voltage", "V"),
    ("rating", "stars"),
    ("cost", "USD"),
    ("age", "years"),
    ("distance", "km"),
    ("volume", "L"),
    ("mass", "g"),
    ("width", "mm"),
    ("density", "g/L"),
    ("power", "W"),
    ("grade", "points"),
    ("traffic", "cars/h"),
    ("crowd", "people"),
    ("delay", "min"),
    ("charge", "%"),
    ("acidity", "pH"),
    ("tension", "N"),
    ("flow", "L/min"),
    ("yield", "t/ha"),
    ("demand", "units"),
    ("slope", "°"),
    ("resistance", "Ω"),
    ("thickness", "µm"),
]
_VERBS = ["fetch", "lookup", "read", "check", "measure", "find", "obtain", "inspect", "probe", "scan", "request"]
_SUBJECTS = [
    "item",
    "site",
    "person",
    "station",
    "village",
    "store",
    "bridge",
    "ship",
    "farm",
    "lake",
    "machine",
    "trail",
    "school",
    "garden",
    "venue",
    "name",
    "place",
    "target",
    "unit",
    "location",
]
_FINAL_VERBS = ["decide", "report", "conclude", "verdict", "respond", "reply", "finish", "resolve", "settle"]
_BOOL_PARAMS = ["ok", "fits", "approved", "safe", "good", "valid", "passes", "allowed", "yes"]
_TEXT_PARAMS = ["note", "why", "evidence", "basis", "comment", "because"]

_ONSETS = [
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "j",
    "k",
    "kl",
    "l",
    "m",
    "n",
    "p",
    "pr",
    "r",
    "s",
    "sk",
    "sl",
    "st",
    "t",
    "tr",
    "v",
    "w",
    "z",
    "ch",
    "sh",
    "th",
    "ll",
    "x",
    "q",
    "y",
    "ð",
    "ł",
    "ñ",
    "ç",
    "ž",
    "š",
]
_VOWELS = [
    "a",
    "e",
    "i",
    "o",
    "u",
    "y",
    "ai",
    "ei",
    "ou",
    "ia",
    "ä",
    "ö",
    "ü",
    "é",
    "è",
    "á",
    "í",
    "ó",
    "ú",
    "å",
    "ø",
    "â",
    "ô",
    "ã",
    "ı",
]
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "k", "t", "nd", "rg", "x", "sk", "th", "ng", "z", "ć", "ß"]


_ID_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "pl", "gr", "st", "tr"]


def _identifier(rng: random.Random, words: list[str], mix: CorpusMix | None = None) -> str:
    """A word from ``words`` or, half the time, a made-up one: names the model must read, not remember.

    With ``mix.spelled_ids``, a made-up identifier is as often a run of random letters (:func:`spelled_word`)
    as a pronounceable one, and with ``mix.compound_ids`` two words joined by ``_``, as real tool and
    parameter names often are."""
    if rng.random() < (0.5 if mix is None else mix.word_lists):
        return rng.choice(words)
    return _made_up_identifier(rng, mix)


def _made_up_identifier(rng: random.Random, mix: CorpusMix | None) -> str:
    if mix is None or not (mix.spelled_ids or mix.compound_ids):  # draws nothing more: the first corpus
        return _made_up_word(rng)
    word = spelled_word(rng) if rng.random() < mix.spelled_ids else _made_up_word(rng)
    if rng.random() < mix.compound_ids:
        word += "_" + (spelled_word(rng) if rng.random() < mix.spelled_ids else _made_up_word(rng))
    return word


def _made_up_word(rng: random.Random) -> str:
    return "".join(rng.choice(_ID_ONSETS) + rng.choice("aeiou") for _ in range(rng.randint(1, 3))) + rng.choice("nrstx")


# English letters by how often they occur in text: random spellings with every letter in it, most of them the
# common ones, so every piece of the tokenizer turns up in names (a syllable generator covers only its own).
_LETTER_WEIGHTS = {
    "e": 12.7,
    "t": 9.1,
    "a": 8.2,
    "o": 7.5,
    "i": 7.0,
    "n": 6.7,
    "s": 6.3,
    "h": 6.1,
    "r": 6.0,
    "d": 4.3,
    "l": 4.0,
    "c": 2.8,
    "u": 2.8,
    "m": 2.4,
    "w": 2.4,
    "f": 2.2,
    "g": 2.0,
    "y": 2.0,
    "p": 1.9,
    "b": 1.5,
    "v": 1.0,
    "k": 0.8,
    "j": 0.2,
    "x": 0.2,
    "q": 0.1,
    "z": 0.1,
}
_ACCENTED = {"a": "áàâäãå", "e": "éèêë", "i": "íìîï", "o": "óòôöõø", "u": "úùûü", "c": "çč", "n": "ñń", "s": "šś"}


def spelled_word(rng: random.Random, accents: float = 0.0) -> str:
    """3–10 random letters, drawn by their frequency in English text (``accents``: the share accented)."""
    letters = rng.choices(list(_LETTER_WEIGHTS), weights=list(_LETTER_WEIGHTS.values()), k=rng.randint(3, 10))
    return "".join(rng.choice(_ACCENTED[c]) if c in _ACCENTED and rng.random() < accents else c for c in letters)


def spelled_name(rng: random.Random) -> str:
    """A proper name of 1–3 capitalised :func:`spelled_word` words, sometimes accented or hyphenated."""
    words = [spelled_word(rng, 0.08).capitalize() for _ in range(rng.choices([1, 2, 3], weights=[5, 4, 1])[0])]
    return ("-" if len(words) > 1 and rng.random() < 0.15 else " ").join(words)


_CODE_CHARS = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:#+@%&*!?=~^$;,'()[]{}<>|"
    "°·±µ×÷§¶«»¿¡£€¥©®ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝÞßàáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿąćęłńśźżčďěňřšťůž"
)


def made_up_code(rng: random.Random) -> str:
    """A made-up code of 3–16 characters from a wide alphabet (digits, symbols, accented letters): copying it
    exercises every byte and piece of the tokenizer, so none is left untrained."""
    return "".join(rng.choice(_CODE_CHARS) for _ in range(rng.randint(3, 16)))


def made_up_name(rng: random.Random) -> str:
    """A made-up proper name: 1–3 capitalised words of 1–3 syllables, sometimes accented or hyphenated."""

    def word() -> str:
        text = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(1, 3)))
        return text[:1].upper() + text[1:]

    words = [word() for _ in range(rng.choices([1, 2, 3], weights=[5, 4, 1])[0])]
    if len(words) > 1 and rng.random() < 0.15:
        return "-".join(words)
    if len(words) > 1 and rng.random() < 0.1:
        words[0] = words[0].lower() if len(words[0]) <= 3 else words[0]
    return " ".join(words)


@dataclass(frozen=True)
class CorpusMix:
    """The shares that shape the corpus (and so the base model's habits)."""

    start_lookup: float = 0.08
    """At an episode's first turn, the share of chats that look something up; the rest answer from memory."""
    rule: float = 0.5
    """Share of chats that state the rule, so the decision follows from the numbers (else it is a guess)."""
    multi_turn: float = 0.05
    """Share of chats that run the whole episode with tool results (else one turn, as summary context)."""
    canonical: float = 0.85
    """Share of calls written in the canonical ``<tool_call>`` format (the rest in the other accepted ones)."""
    copy_drill: float = 0.5
    """Share of short copy drills: one lookup tool, a state with one unknown, the call that copies the name.
    Copying is the skill the tasks need most and the slowest to learn inside long chats: with half the corpus
    drills, the name-copy loss after 800 steps was 0.79 nats a token instead of 1.6 (and unseen two-word names
    were copied exactly 52 % of the time instead of almost never)."""
    opaque_tools: float = 0.0
    """Share of lookup tools named with a made-up word instead of their quantity (``fetch_plitox`` for a
    power). The shipped base was built with 0: it then recalls ``verb_quantity`` names from its 38
    quantities and cannot call a tool named otherwise (``get_weather``)."""
    code_share: float = 0.25
    """Share of copy drills whose name is a made-up code (:func:`made_up_code`) instead of a proper name."""
    spelled_names: float = 0.0
    """Share of proper names spelled from random letters (:func:`spelled_name`) instead of syllables."""
    spelled_ids: float = 0.0
    """Share of made-up tool and parameter names spelled from random letters (see :func:`_identifier`)."""
    compound_ids: float = 0.0
    """Share of made-up tool and parameter names of two words joined by ``_``."""
    word_lists: float = 0.5
    """Share of tool and parameter names taken from the corpus's word lists (``fetch``, ``site``, ``decide``); the
    rest are made up, so they can only be copied from the tool list."""
    made_up_quantities: float = 0.0
    """Share of the quantities in a state line named with a made-up word, a clipped one (``hum``) or an upper-case
    acronym (``PKV``) instead of one of the corpus's 36: a state line is then read by its layout, not by its
    words (with only the 36, a base copied no name into a call when the state showed a quantity it never saw)."""
    listed_order: float = 0.0
    """Share of chats that call their lookups in the order the tool list shows them, with the state listing the
    quantities in that order too: a rule that needs no tool name to mean anything (``get_plitox`` before
    ``get_vomra`` because it is listed first)."""
    max_quantities: int = 3
    numeracy: float = 0.0
    """Share of numeracy drills (:func:`numeracy_drill`): made-up quantities at many scales and a stated rule over
    them (ranges, ``<``, ``>``, ``≤``, ``≥``; one to three clauses joined by *and* or *or*), decided right after,
    the numbers shown in the state line or brought by lookups (``agentgym.trainers.llm.numeracy`` probes what a base
    makes of them). No shipped stage uses them yet: continuing the shipped base on them left it at chance
    (``benchmarks/README.md``, "The base brings numbers?")."""


@dataclass
class _Rule:
    quantity: str
    unit: str
    kind: str  # between / below / above / at_least / at_most
    low: float
    high: float
    decimals: int

    def text(self) -> str:
        f = self._fmt
        if self.kind == "between":
            return f"the {self.quantity} is between {f(self.low)} and {f(self.high)} {self.unit} (inclusive)"
        words = {"below": "below", "above": "above", "at_least": "at least", "at_most": "at most"}[self.kind]
        value = self.high if self.kind in ("below", "at_most") else self.low
        return f"the {self.quantity} is {words} {f(value)} {self.unit}"

    def holds(self, x: float) -> bool:
        return {
            "between": self.low <= x <= self.high,
            "below": x < self.high,
            "above": x > self.low,
            "at_least": x >= self.low,
            "at_most": x <= self.high,
        }[self.kind]

    def sample(self, rng: random.Random, want: bool) -> float:
        """A value for which the rule holds (``want``) or not, sometimes right at a bound."""
        span = max(1.0, self.high - self.low)
        for _ in range(100):
            if rng.random() < 0.15:  # bounds are where comparisons go wrong: show them often
                x = rng.choice([self.low, self.high]) + rng.choice([-1, 0, 1]) * 10**-self.decimals
            else:
                x = rng.uniform(self.low - span, self.high + span)
            x = round(x, self.decimals)
            if self.holds(x) == want:
                return x
        return round(self.low if want == self.holds(self.low) else self.high, self.decimals)

    def _fmt(self, v: float) -> str:
        return f"{v:.{self.decimals}f}" if self.decimals else str(int(round(v)))

    fmt = _fmt


def _rule(rng: random.Random, quantity: str, unit: str) -> _Rule:
    decimals = rng.choice([0, 0, 1])
    scale = rng.choice([10, 100, 1000])
    low = rng.randint(-scale // 5, scale // 2)
    high = low + rng.randint(max(1, scale // 20), scale // 2)
    kind = rng.choice(["between", "between", "below", "above", "at_least", "at_most"])
    return _Rule(quantity, unit, kind, float(low), float(high), decimals)


def _python_call(call: ToolCall) -> str:
    args = ", ".join(
        f"{k}={v!r}" if not isinstance(v, str) else f"{k}={json.dumps(v, ensure_ascii=False)}"
        for k, v in call.arguments.items()
    )
    return f"{call.name}({args})"


_FORMATS = {  # the accepted call formats other than the canonical one (agentgym.core.parser reads them all)
    "call_tag": lambda c: f"<|call|>{_python_call(c)}<|/call|>",
    "python": _python_call,
    "json": lambda c: json.dumps(c.to_dict(), ensure_ascii=False),
    "react": lambda c: f"Action: {c.name}\nAction Input: {json.dumps(dict(c.arguments), ensure_ascii=False)}",
}


def render_call(rng: random.Random, call: ToolCall, canonical: float) -> str:
    """``call`` as text: the canonical ``<tool_call>`` JSON with probability ``canonical``, else another
    accepted format (a ``<|call|>`` or bare Python call, a JSON object, ReAct)."""
    if rng.random() < canonical:
        return call.to_text()
    return _FORMATS[rng.choice(sorted(_FORMATS))](call)


def signatures(tools: list[tuple[str, list[str]]]) -> str:
    """The compact tool list a turn shows: ``name(param, param), name(param)``."""
    return ", ".join(f"{name}({', '.join(params)})" for name, params in tools)


def _document(rng: random.Random, mix: CorpusMix) -> list[dict[str, str]]:
    """One chat about a made-up lookup-and-decide task, played from memory or with the tools.

    Each user turn shows the tools (:func:`signatures`), optionally the rule, and the one-line state;
    the assistant answers with one call. With probability ``mix.multi_turn`` the chat runs to the end
    of the episode (tool results come back as ``Result: …`` turns); otherwise it is one turn taken at
    a random point of a lookup episode, the way summary-context training sees it — where the first
    turn answers from memory instead with probability ``1 - mix.start_lookup``.
    """
    n = rng.randint(1, mix.max_quantities)
    picked = [_quantity(rng, mix, q) for q in rng.sample(_QUANTITIES, n)]
    subject = _identifier(rng, _SUBJECTS, mix)
    verb = _identifier(rng, _VERBS, mix)
    lookups = [(f"{verb}_{_suffix(rng, mix, q)}", q, unit) for q, unit in picked]
    rules = [_rule(rng, q, unit) for q, unit in picked]
    final = _identifier(rng, _FINAL_VERBS, mix)
    yes, why = _identifier(rng, _BOOL_PARAMS, mix), _identifier(rng, _TEXT_PARAMS, mix)
    entity = _name(rng, mix)
    truth = rng.random() < 0.5
    fits = [True] * n if truth else [rng.random() < 0.5 for _ in range(n)]
    if not truth:
        fits[rng.randrange(n)] = False
    values = [r.sample(rng, f) for r, f in zip(rules, fits, strict=True)]
    shown = [f"{r.fmt(v)}{'' if rng.random() < 0.3 else ' '}{r.unit}" for r, v in zip(rules, values, strict=True)]

    tools = [(name, [subject]) for name, _, _ in lookups] + [(final, [yes, why])]
    rng.shuffle(tools)
    listed = bool(mix.listed_order) and rng.random() < mix.listed_order  # draws nothing at 0: the first corpus
    if listed:  # lookups, rules and the state's quantities in the tool list's order
        position = {name: k for k, (name, _) in enumerate(tools)}
        ranks = sorted(range(n), key=lambda i: position[lookups[i][0]])
        lookups, rules, shown = ([x[i] for i in ranks] for x in (lookups, rules, shown))
    header = signatures(tools)
    if rng.random() < mix.rule:
        header += f"\n{yes}=true when " + " and ".join(r.text() for r in rules) + "."
        decide = truth
    else:
        decide = rng.random() < 0.5  # no rule in sight: the decision is a guess
    known = [False] * n

    def state() -> str:
        return " · ".join(
            [
                entity,
                *(f"{q} {shown[i] if known[i] else '?'}" for i, (_, q, _) in enumerate(lookups)),
                "decision pending",
            ]
        )

    turns: list[tuple[str, str, str]] = []  # (result of the previous call, state, action): a lookup episode
    result = ""
    order = list(range(n))
    if not listed:
        rng.shuffle(order)
    for i in order:
        name, q, _ = lookups[i]
        turns.append((result, state(), render_call(rng, ToolCall(name, {subject: entity}), mix.canonical)))
        known[i] = True
        result = rng.choice(
            [
                f"{q} of {entity}: {shown[i]}.",
                f"{entity}: {q} {shown[i]}",
                json.dumps({subject: entity, q: shown[i]}, ensure_ascii=False),
            ]
        )
    evidence = " · ".join(f"{q} {shown[i]}" for i, (_, q, _) in enumerate(lookups))
    turns.append((result, state(), render_call(rng, ToolCall(final, {why: evidence, yes: decide}), mix.canonical)))
    from_memory = render_call(rng, ToolCall(final, {yes: rng.random() < 0.5}), mix.canonical)  # no lookup: a guess

    return _chat(rng, mix, header, turns, from_memory)


def _chat(
    rng: random.Random, mix: CorpusMix, header: str, turns: list[tuple[str, str, str]], from_memory: str
) -> list[dict[str, str]]:
    """The messages of a lookup episode's ``turns`` (result, state, action): the whole chat with probability
    ``mix.multi_turn``, else one turn at random; a chat that starts from memory answers with ``from_memory``."""
    if rng.random() < mix.multi_turn:
        if rng.random() >= mix.start_lookup:
            turns = [("", turns[0][1], from_memory)]
        messages = []
        for k, (result, line, action) in enumerate(turns):
            text = f"{header}\n{line}" if k == 0 else f"Result: {result}\n{line}"
            messages += [{"role": "user", "content": text}, {"role": "assistant", "content": action}]
        return messages
    k = rng.randrange(len(turns))
    _, line, action = turns[k]
    if k == 0 and rng.random() >= mix.start_lookup:
        action = from_memory
    return [{"role": "user", "content": f"{header}\n{line}"}, {"role": "assistant", "content": action}]


def _suffix(rng: random.Random, mix: CorpusMix, quantity: str) -> str:
    """A lookup tool's name after its verb: the quantity it returns or, with ``mix.opaque_tools``, a made-up
    word, so the name has to be copied from the tool list rather than recalled from the quantity."""
    if mix.opaque_tools and rng.random() < mix.opaque_tools:  # draws nothing at 0: the shipped corpus is unchanged
        return _made_up_identifier(rng, mix)
    return quantity


_UNITS = sorted({unit for _, unit in _QUANTITIES})


def _quantity(rng: random.Random, mix: CorpusMix, known: tuple[str, str]) -> tuple[str, str]:
    """``known`` (a quantity and its unit) or, with ``mix.made_up_quantities``, a made-up name with a random unit."""
    if not mix.made_up_quantities or rng.random() >= mix.made_up_quantities:  # draws nothing at 0
        return known
    kind = rng.random()
    if kind < 0.4:
        name = _made_up_word(rng)
    elif kind < 0.7:
        name = spelled_word(rng)[: rng.randint(2, 5)]
    else:
        name = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(2, 4)))
    return name, rng.choice(_UNITS)


def _name(rng: random.Random, mix: CorpusMix) -> str:
    """The entity a chat is about: a pronounceable made-up name or, with ``mix.spelled_names``, a spelled one."""
    if mix.spelled_names and rng.random() < mix.spelled_names:
        return spelled_name(rng)
    return made_up_name(rng)


def _copy_drill(rng: random.Random, mix: CorpusMix) -> list[dict[str, str]]:
    """One short chat whose answer copies a name: ``find_depth(site), decide(ok, why)`` / ``Name · depth ? ·
    decision pending`` → ``find_depth(site="Name")``."""
    quantity = _quantity(rng, mix, rng.choice(_QUANTITIES))[0]
    lookup = f"{_identifier(rng, _VERBS, mix)}_{_suffix(rng, mix, quantity)}"
    subject = _identifier(rng, _SUBJECTS, mix)
    final = (
        _identifier(rng, _FINAL_VERBS, mix),
        [_identifier(rng, _BOOL_PARAMS, mix), _identifier(rng, _TEXT_PARAMS, mix)],
    )
    tools = [(lookup, [subject]), final]
    rng.shuffle(tools)
    entity = made_up_code(rng) if rng.random() < mix.code_share else _name(rng, mix)
    user = f"{signatures(tools)}\n{entity} · {quantity} ? · decision pending"
    action = render_call(rng, ToolCall(lookup, {subject: entity}), mix.canonical)
    return [{"role": "user", "content": user}, {"role": "assistant", "content": action}]


def chat_documents(seed: int, mix: CorpusMix | None = None) -> Iterator[list[dict[str, str]]]:
    """An endless, seeded stream of chats (lists of ``{"role", "content"}`` messages)."""
    rng = random.Random(seed)
    mix = mix or CorpusMix()
    while True:
        if mix.numeracy and rng.random() < mix.numeracy:  # draws nothing at 0: earlier stages' corpora unchanged
            yield numeracy_drill(rng, mix)
        else:
            yield _copy_drill(rng, mix) if rng.random() < mix.copy_drill else _document(rng, mix)


# ---------------------------------------------------------------------------------------------- numeracy

RESERVED_THRESHOLDS = frozenset({10.0, 25.0, 100.0})
"""Values never drawn as a threshold: the corpus states no rule with a task's thresholds (WeatherRun's 10, 25, 100)."""

_OPS = {
    "<": ("{q} < {a}{u}", "{q} is below {a}{u}", "{q} is less than {a}{u}", "{q} under {a}{u}"),
    "<=": ("{q} ≤ {a}{u}", "{q} <= {a}{u}", "{q} is at most {a}{u}", "{q} is not above {a}{u}"),
    ">": ("{q} > {a}{u}", "{q} is above {a}{u}", "{q} is more than {a}{u}", "{q} over {a}{u}"),
    ">=": ("{q} ≥ {a}{u}", "{q} >= {a}{u}", "{q} is at least {a}{u}", "{q} is not below {a}{u}"),
    "in": (
        "{a} ≤ {q} ≤ {b}{u}",
        "{q} is between {a} and {b}{u} (inclusive)",
        "{q} in [{a}, {b}]{u}",
        "{q} from {a} to {b}{u}",
    ),
}


@dataclass(frozen=True)
class Clause:
    """One comparison of quantity ``index`` with a threshold (``op`` ``<``, ``<=``, ``>``, ``>=``) or a closed range
    (``in``: ``low ≤ x ≤ high``)."""

    index: int
    op: str
    low: float
    high: float = 0.0

    def holds(self, x: float) -> bool:
        if self.op == "in":
            return self.low <= x <= self.high
        return {"<": x < self.low, "<=": x <= self.low, ">": x > self.low, ">=": x >= self.low}[self.op]

    def thresholds(self) -> tuple[float, ...]:
        return (self.low, self.high) if self.op == "in" else (self.low,)


@dataclass(frozen=True)
class NumeracyTask:
    """Made-up quantities with values, and a rule over them: what a numeracy drill or probe is about."""

    names: tuple[str, ...]
    units: tuple[str, ...]
    ranges: tuple[tuple[float, float, int], ...]
    """Each quantity's range of typical values and its decimals."""
    clauses: tuple[Clause, ...]
    any_of: bool
    """The clauses joined by *or* (else *and*)."""
    values: tuple[float, ...] = ()

    @property
    def truth(self) -> bool:
        held = (c.holds(self.values[c.index]) for c in self.clauses)
        return any(held) if self.any_of else all(held)

    def fmt(self, i: int, x: float) -> str:
        decimals = self.ranges[i][2]
        return f"{x:.{decimals}f}" if decimals else str(int(round(x)))

    def shown(self, i: int, gap: str = " ") -> str:
        """Quantity ``i``'s value with its unit, as a state line or a result shows it."""
        return f"{self.fmt(i, self.values[i])}{gap if self.units[i] else ''}{self.units[i]}"

    def rule_text(self, rng: random.Random) -> str:
        """The rule in words and symbols, phrasing drawn from ``rng``."""
        parts = []
        for c in self.clauses:
            unit = f" {self.units[c.index]}" if self.units[c.index] and rng.random() < 0.5 else ""
            a, b = self.fmt(c.index, c.low), self.fmt(c.index, c.high)
            parts.append(rng.choice(_OPS[c.op]).format(q=self.names[c.index], a=a, b=b, u=unit))
        return (" or " if self.any_of else " and ").join(parts)

    def resample(self, rng: random.Random, truth: bool | None = None, near: float = 0.6) -> NumeracyTask:
        """The same rule with new values: each near one of its thresholds with probability ``near``; ``truth``
        (default: a coin flip) is what the rule decides of them."""
        want = rng.random() < 0.5 if truth is None else truth

        def value(i: int) -> float:
            low, top, d = self.ranges[i]
            bounds = [t for c in self.clauses if c.index == i for t in c.thresholds()]
            if bounds and rng.random() < near:
                return _near(rng, rng.choice(bounds), top - low, d)
            return round(rng.uniform(low - 0.2 * (top - low) * (low < 0), top), d)

        task = self
        for _ in range(200):  # rejection: the asked-for decision
            task = replace(self, values=tuple(value(i) for i in range(len(self.names))))
            if task.truth == want:
                break
        return task


def _scale(rng: random.Random) -> tuple[float, float, int]:
    """A quantity's range and decimals: magnitudes from 1 to 10,000, sometimes below zero."""
    top = 10 ** rng.randint(0, 3) * rng.uniform(1.0, 10.0)
    low = -top * rng.uniform(0.1, 0.6) if rng.random() < 0.3 else 0.0
    decimals = rng.choices([0, 1, 2], weights=[5, 4, 1])[0] if top >= 10 else rng.choice([1, 2])
    return low, top, decimals


def _near(rng: random.Random, x: float, span: float, decimals: int) -> float:
    """A number close to ``x``: a step or two of its last digit, or a few percent of ``span``, away (or ``x``)."""
    if rng.random() < 0.5:
        return round(x + rng.choice([-2, -1, 0, 0, 1, 2]) * 10**-decimals, decimals)
    return round(x + rng.uniform(-0.15, 0.15) * span, decimals)


def _threshold(rng: random.Random, low: float, top: float, decimals: int) -> float:
    while True:
        t = round(rng.uniform(low, top), decimals)
        if t not in RESERVED_THRESHOLDS:
            return t


NUMERACY_LEVELS = 3
"""Numeracy drills come in levels: 0, one quantity compared with one threshold (whole numbers ≥ 0 up to 1,000;
``<``, ``≤``, ``>``, ``≥``; the threshold anywhere); 1, one quantity at any scale (decimals, negatives; ranges too;
a value near a threshold 30 % of the time); 2, one to three quantities joined by *and*/*or*, near a threshold
60 % of the time."""


def numeracy_task(
    rng: random.Random,
    names: list[str] | None = None,
    *,
    level: int = 2,
    ops: list[str] | None = None,
    truth: bool | None = None,
) -> NumeracyTask:
    """A seeded numeracy task of :data:`NUMERACY_LEVELS` ``level``: quantities named ``names`` or made up, a clause
    on each (``ops``, or drawn); ``truth`` (default: a coin flip) is what the rule decides. No threshold is one of
    :data:`RESERVED_THRESHOLDS`."""
    n = len(names) if names else 1 if level < 2 else rng.choices([1, 2, 3], weights=[3, 4, 2])[0]
    names = names or [_made_up_quantity(rng) for _ in range(n)]
    while True:  # a rule that cannot decide as asked (``< 0`` of values from 0 up) is drawn again
        task = _numeracy_rule(rng, names, level, ops).resample(rng, truth, near=(0.0, 0.3, 0.6)[level])
        if truth is None or task.truth == truth:
            return task


def _numeracy_rule(rng: random.Random, names: list[str], level: int, ops: list[str] | None) -> NumeracyTask:
    n = len(names)
    units = tuple("" if rng.random() < 0.3 else rng.choice(_UNITS) for _ in range(n))
    ranges = tuple((0.0, float(10 ** rng.randint(1, 3)), 0) if level == 0 else _scale(rng) for _ in range(n))
    clauses = []
    for i, (low, top, d) in enumerate(ranges):  # one clause per quantity
        op = ops[i] if ops else rng.choice(["<", "<=", ">", ">="] + ["in", "in"] * (level > 0))
        a, b = sorted((_threshold(rng, low, top, d), _threshold(rng, low, top, d)))
        if a == b:
            b = round(b + 10**-d, d)
        clauses.append(Clause(i, op, a, b) if op == "in" else Clause(i, op, a))
    any_of = n > 1 and rng.random() < 0.3
    return NumeracyTask(tuple(names), units, ranges, tuple(clauses), any_of)


def _made_up_quantity(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return _made_up_word(rng)
    if kind < 0.7:
        return spelled_word(rng)[: rng.randint(2, 6)]
    return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(2, 4)))


def numeracy_drill(rng: random.Random, mix: CorpusMix | None = None, level: int | None = None) -> list[dict[str, str]]:
    """A chat that states a rule over made-up quantities and decides it: the values in the state line (decided at
    once, three drills in four), or brought one by one by made-up lookup tools (the whole episode: look up, then
    apply the rule). Tool and parameter names are short (the corpus's words or made-up ones): the drill is about
    the numbers, and short chats make it cheap."""
    mix = mix or CorpusMix()
    task = numeracy_task(rng, level=rng.randrange(NUMERACY_LEVELS) if level is None else level)
    n = len(task.names)
    subject, verb = _identifier(rng, _SUBJECTS), _identifier(rng, _VERBS)
    lookups = [f"{verb}_{q}" for q in task.names]
    final = _identifier(rng, _FINAL_VERBS)
    yes, why = _identifier(rng, _BOOL_PARAMS), _identifier(rng, _TEXT_PARAMS)
    tools = [(name, [subject]) for name in lookups] + [(final, [yes, why])]
    rng.shuffle(tools)
    entity = _made_up_word(rng).capitalize()
    shown = [task.shown(i, "" if rng.random() < 0.3 else " ") for i in range(n)]
    header = f"{signatures(tools)}\n{yes}=true when {task.rule_text(rng)}."
    evidence = " · ".join(f"{q} {shown[i]}" for i, q in enumerate(task.names))
    args = {why: evidence, yes: task.truth} if rng.random() < 0.8 else {yes: task.truth}
    decision = render_call(rng, ToolCall(final, args), mix.canonical)

    def state(known: int) -> str:
        values = (f"{q} {shown[i] if i < known else '?'}" for i, q in enumerate(task.names))
        return " · ".join([entity, *values, "decision pending"])

    if rng.random() < 0.75:  # everything known: decide now
        return [{"role": "user", "content": f"{header}\n{state(n)}"}, {"role": "assistant", "content": decision}]
    messages, result = [], ""
    for i in range(n):  # the numbers arrive through the tools
        text = f"{header}\n{state(0)}" if i == 0 else f"Result: {result}\n{state(i)}"
        call = render_call(rng, ToolCall(lookups[i], {subject: entity}), mix.canonical)
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": call}]
        result = rng.choice([f"{task.names[i]} of {entity}: {shown[i]}.", f"{entity}: {task.names[i]} {shown[i]}"])
    messages += [
        {"role": "user", "content": f"Result: {result}\n{state(n)}"},
        {"role": "assistant", "content": decision},
    ]
    return messages
