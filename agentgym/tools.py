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
