"""Tools: plain Python functions an agent calls by name.

``@tool`` turns a function with type hints and a Google-style docstring into a :class:`Tool`: a
pydantic model that validates (and leniently coerces) the arguments, and an OpenAI-style JSON
schema, which is what chat templates and OpenAI-compatible servers take as ``tools=``::

    @tool
    def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
        '''Current weather for a city.

        Args:
            city: City name, e.g. "Zürich".
            unit: Temperature unit.
        '''

Inside a :class:`~agentgym.core.ToolEnv` subclass, decorate methods instead; ``self`` is not an
argument the agent sees.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, get_type_hints

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

__all__ = ["Tool", "ToolCall", "ToolError", "ToolResult", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool by name, with keyword arguments (as parsed, not yet validated)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments)}

    def to_text(self) -> str:
        """The canonical text of this call: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``."""
        return f"<tool_call>{json.dumps(self.to_dict(), ensure_ascii=False)}</tool_call>"


@dataclass
class ToolResult:
    """What a tool returns to the env: text for the agent, reward components, and whether it ends the episode."""

    output: str
    reward: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    error: bool = False


class ToolError(Exception):
    """Raised by a tool for a problem the agent caused and can fix; its message is shown to the agent."""


_SECTION = re.compile(r"^([A-Z]\w*(?: \w+)?):[ \t]*$", re.M)
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-argument descriptions."""
    if not doc:
        return "", {}
    parts = _SECTION.split(inspect.cleandoc(doc))  # [description, header, body, header, body, ...]
    params: dict[str, str] = {}
    for header, body in zip(parts[1::2], parts[2::2], strict=True):
        if header not in ("Args", "Arguments", "Parameters"):
            continue
        lines = [line for line in body.splitlines() if line.strip()]
        indent = min((len(line) - len(line.lstrip()) for line in lines), default=0)
        current = None
        for line in lines:
            m = _ARG_LINE.match(line) if len(line) - len(line.lstrip()) == indent else None
            if m:
                current = m.group(1)
                params[current] = m.group(2).strip()
            elif current:
                params[current] += " " + line.strip()
    return " ".join(parts[0].split()), params


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's auto-generated ``title`` keys: noise in a prompt."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _type_words(prop: Mapping[str, Any]) -> str:
    """A property's JSON schema in a few words, for error messages and prompts."""
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_type_words(p) for p in prop["anyOf"])
    return str(prop.get("type", "any value"))


_SAMPLE_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_SAMPLE_TRIES = 20  # draws per tool before giving up on a schema whose constraints random values rarely meet


def _bounds(schema: Mapping[str, Any]) -> tuple[float, float]:
    """A number schema's range: its ``minimum``/``maximum`` (an exclusive bound moved in by 1), else 10 wide."""
    low = schema.get("minimum", schema["exclusiveMinimum"] + 1 if "exclusiveMinimum" in schema else None)
    high = schema.get("maximum", schema["exclusiveMaximum"] - 1 if "exclusiveMaximum" in schema else None)
    if low is None:
        low = 0 if high is None else min(0, high - 10)
    return low, low + 10 if high is None else high


def _sample_json(schema: Mapping[str, Any], rng: np.random.Generator, defs: Mapping[str, Any], depth: int = 0) -> Any:
    """A random value of a JSON schema: a choice of ``enum``/``const``/``anyOf``, a bool, an int or number in its
    bounds (0–10 when unbounded), a string of 1–8 letters and digits, an array of up to 3 items, an object with its
    required properties and each optional one half the time (below 6 levels of nesting; deeper, only what is
    required, so a recursive schema ends). Any other shape draws a short string."""
    if "$ref" in schema:
        schema = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    branches = schema.get("anyOf") or schema.get("oneOf")
    kind = schema.get("type")
    if branches or isinstance(kind, list):
        options = branches or [{**schema, "type": k} for k in kind]
        if depth >= 3:  # deep enough: prefer a branch that does not nest further
            options = [o for o in options if o.get("type") not in ("array", "object")] or options
        return _sample_json(options[int(rng.integers(len(options)))], rng, defs, depth + 1)
    if kind == "null":
        return None
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind in ("integer", "number"):
        low, high = _bounds(schema)
        if kind == "integer":
            return int(rng.integers(int(np.ceil(low)), int(np.floor(high)) + 1))
        return round(float(rng.uniform(low, high)), 3)
    if kind == "array":
        low = int(schema.get("minItems", 0))
        high = low if depth >= 6 else max(low, min(int(schema.get("maxItems", low + 3)), low + 3))
        count = int(rng.integers(low, high + 1))
        return [_sample_json(schema.get("items", {}), rng, defs, depth + 1) for _ in range(count)]
    if kind == "object":
        required = set(schema.get("required", []))
        return {
            name: _sample_json(prop, rng, defs, depth + 1)
            for name, prop in schema.get("properties", {}).items()
            if name in required or (depth < 6 and rng.integers(2))
        }
    low = int(schema.get("minLength", 1))
    length = int(rng.integers(low, max(low, min(int(schema.get("maxLength", low + 7)), low + 7)) + 1))
    return "".join(_SAMPLE_ALPHABET[int(k)] for k in rng.integers(len(_SAMPLE_ALPHABET), size=length))


class Tool:
    """A callable tool: name, description, argument model and JSON schema.

    Calling a ``Tool`` calls the function; :meth:`validate` checks arguments an agent wrote.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description, param_docs = _parse_docstring(fn.__doc__)
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, include_extras=True)
        params = list(signature.parameters.values())
        self.is_method = bool(params) and params[0].name == "self"
        if self.is_method:
            params = params[1:]
        fields: dict[str, Any] = {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args/**kwargs cannot be described to an agent")
            default = ... if p.default is p.empty else p.default
            fields[p.name] = (hints.get(p.name, Any), Field(default, description=param_docs.get(p.name)))
        self.parameters: tuple[str, ...] = tuple(fields)
        model_name = "".join(part.title() for part in self.name.split("_")) + "Arguments"
        self.arguments_model: type[BaseModel] = create_model(
            model_name,
            __config__=ConfigDict(extra="forbid", coerce_numbers_to_str=True),
            **fields,
        )

    def __repr__(self) -> str:
        return f"Tool({self.signature})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        # Accessed on an instance, a tool method behaves like a bound method.
        return self if obj is None else self.fn.__get__(obj, objtype)

    @cached_property
    def parameters_schema(self) -> dict[str, Any]:
        return _strip_titles(self.arguments_model.model_json_schema())

    @cached_property
    def schema(self) -> dict[str, Any]:
        """OpenAI-style function schema: ``{"type": "function", "function": {name, description, parameters}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters_schema,
            },
        }

    @cached_property
    def signature(self) -> str:
        """A one-line signature for prompts, e.g. ``move(direction: one of "up", "right", ...)``."""
        props = self.parameters_schema.get("properties", {})
        required = set(self.parameters_schema.get("required", []))
        parts = []
        for name in self.parameters:
            part = f"{name}: {_type_words(props.get(name, {}))}"
            if name not in required:
                part += f" = {json.dumps(props.get(name, {}).get('default'), ensure_ascii=False)}"
            parts.append(part)
        return f"{self.name}({', '.join(parts)})"

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments, or :class:`ToolError` naming each bad argument and its type."""
        try:
            model = self.arguments_model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolError(self._explain(exc)) from None
        return {name: getattr(model, name) for name in self.parameters}

    def sample_arguments(self, rng: np.random.Generator) -> dict[str, Any]:
        """Random arguments that pass :meth:`validate`, as JSON values drawn from :attr:`parameters_schema`
        (see :func:`_sample_json`: enum choices, bools, bounded numbers, short strings; optional arguments half the
        time). ``ValueError`` if 20 draws all fail validation (a ``pattern`` or a custom validator random values do
        not meet)."""
        schema = self.parameters_schema
        for _ in range(_SAMPLE_TRIES):
            arguments = _sample_json(schema, rng, schema.get("$defs", {}))
            try:
                self.validate(arguments)
            except ToolError:
                continue
            return arguments
        raise ValueError(f"{self.name}: no valid random arguments in {_SAMPLE_TRIES} draws from its schema")

    def _explain(self, exc: ValidationError) -> str:
        props = self.parameters_schema.get("properties", {})
        problems = []
        for err in exc.errors(include_url=False):
            arg = str(err["loc"][0]) if err["loc"] else "?"
            expected = _type_words(props.get(arg, {}))
            if err["type"] == "missing":
                problems.append(f"missing required argument '{arg}' ({expected})")
            elif err["type"] == "extra_forbidden":
                takes = ", ".join(self.parameters) or "no arguments"
                problems.append(f"unexpected argument '{arg}' ({self.name} takes: {takes})")
            else:
                got = json.dumps(err.get("input"), ensure_ascii=False, default=str)
                if len(got) > 60:
                    got = got[:57] + "..."
                problems.append(f"argument '{arg}' must be {expected}, got {got}")
        return f"{self.name}: " + "; ".join(problems)


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Decorator: make ``fn`` a :class:`Tool` (``@tool`` or ``@tool(name="...")``)."""
    if fn is None:
        return lambda f: Tool(f, name=name)
    return Tool(fn, name=name)
