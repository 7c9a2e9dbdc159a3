"""Old import paths of the modules that left the core when the layers were separated.

``import agentgym.llm`` still works: it warns (``DeprecationWarning``) and binds the module at its new
path, ``agentgym.trainers.llm`` (the same object, so patches and ``isinstance`` agree). The old paths
go in the next minor version. This table is the one place where the core names a module above it; it
imports nothing until an old path is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

MOVED = {
    "agentgym.sandbox": "agentgym.envs.sandbox",
    "agentgym.sandbox_inside": "agentgym.envs.sandbox_inside",
    "agentgym.llm": "agentgym.trainers.llm",
    "agentgym.decoding": "agentgym.trainers.decoding",
    "agentgym.tiny_model": "agentgym.trainers.tiny_model",
    "agentgym.tiny_corpus": "agentgym.trainers.tiny_corpus",
    "agentgym.metrics": "agentgym.trainers.metrics",
    "agentgym.plotting": "agentgym.trainers.plotting",
    "agentgym.runs": "agentgym.trainers.runs",
    "agentgym.audit": "agentgym.app.audit",
    "agentgym.demo": "agentgym.app.demo",
    "agentgym.evaluation": "agentgym.app.evaluation",
    "agentgym.http_service": "agentgym.app.http_service",
    "agentgym.model_server": "agentgym.app.model_server",
    "agentgym.openai_agent": "agentgym.app.openai_agent",
    "agentgym.recipes": "agentgym.app.recipes",
    "agentgym.reports": "agentgym.app.reports",
    "agentgym.integrations": "agentgym.app",
    "agentgym.integrations.trl": "agentgym.app.trl",
    "agentgym.envs.weather_server": "agentgym.app.weather_server",
}
"""Old path → new path."""


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old path with the module at its new one (first on ``sys.meta_path``, so the old
    path is never loaded a second time from the new file)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # the import system overwrites __spec__; exec_module puts it back
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
