"""The layer contract (README "Layout"): core ← tasks, core ← learners, everything ← applications.

Every import in every module counts, at the top of the file or inside a function, relative or absolute,
and so does ``importlib.import_module`` / ``__import__`` with a literal name. Run it alone to see the
contract and each layer's size: ``python -m pytest tests/test_layers.py -v -s``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {"agentgym": ROOT / "agentgym", "agentgym.envs": ROOT / "envs", "agentgym.trainers": ROOT / "trainers"}

LAYERS = {
    "core": {"agentgym", "agentgym.core"},
    "tasks": {"agentgym.envs"},
    "learners": {"agentgym.trainers"},
    "applications": {"agentgym.app"},
}
"""A module belongs to the layer that names it or the package above it."""

ALLOWED = {"core": {"core"}, "tasks": {"core", "tasks"}, "learners": {"core", "learners"}, "applications": set(LAYERS)}
"""Which layers each layer may import: tasks and learners know only the core and never each other."""


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if not name.startswith(("agentgym.envs", "agentgym.trainers")) or package != "agentgym":
                found[name] = path
    return found


def layer(module: str) -> str:
    for name, members in LAYERS.items():
        if any(module == m or (m != "agentgym" and module.startswith(m + ".")) for m in members):
            return name
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to the README's layout)")


def imported(module: str, path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every agentgym module ``path`` imports, anywhere in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *filter(None, [base])])
            # `from agentgym import wrappers` imports the module agentgym.core.wrappers
            names += [(node.lineno, f"{base}.{a.name}" if f"{base}.{a.name}" in ALL else base) for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.append((node.lineno, node.args[0].value))
    return [(line, name) for line, name in names if name == "agentgym" or name.startswith("agentgym.")]


ALL = modules()


def test_every_module_is_in_a_layer():
    assert {m: layer(m) for m in ALL}


def test_the_folders_show_the_layers():
    """agentgym/ holds the core's package beside the applications' and nothing else; the learners and the
    applications are split by kind (issue 46)."""
    top = {p.name for p in PACKAGE_DIRS["agentgym"].iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert top == {"__init__.py", "core", "app"}
    kinds = {p.name for p in PACKAGE_DIRS["agentgym.trainers"].iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert kinds == {"classic", "llm", "models", "run"}
    apps = {p.name for p in (PACKAGE_DIRS["agentgym"] / "app").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert apps == {"serving", "evaluation", "integrations"}


@pytest.mark.parametrize("module", sorted(ALL))
def test_imports_respect_the_layers(module):
    mine = layer(module)
    wrong = [
        f"{ALL[module].relative_to(ROOT)}:{line} imports {name} ({layer(name)})"
        for line, name in imported(module, ALL[module])
        if layer(name) not in ALLOWED[mine]
    ]
    assert not wrong, f"{module} ({mine}) may import only {sorted(ALLOWED[mine])}:\n" + "\n".join(wrong)


def test_the_checker_sees_imports_inside_functions(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "def f():\n    from agentgym.trainers.llm.grpo import GRPO\n"
        "def g():\n    import importlib\n    return importlib.import_module('agentgym.app.demo')\n"
        "from . import sandbox\n"
    )
    found = imported("agentgym.envs.sneaky", sneaky)
    assert sorted(name for _, name in found) == [
        "agentgym.app.demo",
        "agentgym.envs.sandbox",
        "agentgym.trainers.llm.grpo",
    ]
    assert {layer(name) for _, name in found} == {"learners", "applications", "tasks"}


def test_the_old_import_paths_are_gone():
    """The modules that left the core are found at their new paths only (0.x: no shims)."""
    import importlib

    old_paths = ("agentgym.llm", "agentgym.sandbox", "agentgym.demo", "agentgym.integrations", "agentgym.cli")
    old_paths += ("agentgym.parser", "agentgym.episode", "agentgym.app.trl", "agentgym.trainers.grpo")
    for old in old_paths:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_print_the_contract(capsys):
    """Not an assertion about code: the contract and the lines per layer, for ``-s`` runs and the README."""
    lines = {name: 0 for name in LAYERS}
    for module, path in ALL.items():
        lines[layer(module)] += len(path.read_text(encoding="utf-8").splitlines())
    with capsys.disabled():
        for name in LAYERS:
            print(f"\n  {name:12s} {lines[name]:6d} lines  may import: {', '.join(sorted(ALLOWED[name]))}", end="")
        print()
    assert all(lines.values())
