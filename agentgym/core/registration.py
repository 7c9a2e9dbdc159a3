"""The ``agentgym/*`` environment ids (each task folder declares its own), their splits, and which episodes an
evaluation of one plays."""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any

import gymnasium as gym

__all__ = [
    "CLIENT_IDS",  # noqa: F822 (module __getattr__)
    "DEFAULT_EPISODES",
    "ENV_IDS",  # noqa: F822
    "TASK_PACKAGE",
    "declared_ids",
    "declared_recipes",
    "describe",
    "eval_kwargs",
    "eval_reset",
    "eval_resets",
    "lazy_exports",
    "make_env",
    "register_envs",
    "resolve_env_id",
    "split_kwargs",
]

DEFAULT_EPISODES = 100
"""Episodes an evaluation plays on an env without a fixed task list (its seeds draw the tasks): seeds ``seed`` to
``seed + 99``, what the leaderboard plays. 100 episodes make a 95 % CI of a success rate at most ±10 points wide; a
grid episode takes milliseconds, so they cost well under a second for the built-in agents."""

TASK_PACKAGE = "agentgym.envs"
"""The package whose subpackages are agentgym's tasks: each declares its ids in ``ENV_SPECS``."""


def _task_folders(package: str) -> list[Any]:
    """The ``__init__`` modules of ``package``'s subpackages (its task folders), in folder order."""
    root = importlib.import_module(package)
    return [
        importlib.import_module(f"{package}.{found.name}")
        for found in pkgutil.iter_modules(root.__path__)
        if found.ispkg
    ]


@functools.cache
def declared_ids(package: str = TASK_PACKAGE) -> tuple[dict[str, dict], dict[str, dict]]:
    """The ids that ``package``'s task folders declare, ``(tasks, clients)``: every subpackage's ``ENV_SPECS``
    (id → ``gym.register`` arguments: ``entry_point``, ``max_episode_steps``, ``kwargs``), in folder order, and
    ``package``'s own ``CLIENT_SPECS`` (ids that play a task served elsewhere, kept out of the task suite). Only the
    folders' ``__init__`` modules are imported, so a task's code loads when its env is first made.
    ``ValueError`` if two folders declare one id."""
    tasks: dict[str, dict] = {}
    owner: dict[str, str] = {}
    for module in _task_folders(package):
        for env_id, spec in getattr(module, "ENV_SPECS", {}).items():
            if env_id in tasks:
                raise ValueError(f"{env_id!r} is declared by both {owner[env_id]} and {module.__name__}")
            tasks[env_id], owner[env_id] = dict(spec), module.__name__
    return tasks, dict(getattr(importlib.import_module(package), "CLIENT_SPECS", {}))


@functools.cache
def declared_recipes(package: str = TASK_PACKAGE) -> dict[str, dict[str, dict[str, Any]]]:
    """The training recipes that ``package``'s task folders declare: each folder's ``recipes`` module, where it has
    one, holds ``RECIPES`` (env id → stage → config overrides, for ids of that folder's ``ENV_SPECS``). The core
    reads no setting in them; :mod:`agentgym.app.recipes` merges them with the learners' defaults.
    ``ValueError`` for a recipe of an id its folder does not declare."""
    recipes: dict[str, dict[str, dict[str, Any]]] = {}
    for module in _task_folders(package):
        if importlib.util.find_spec(f"{module.__name__}.recipes") is None:
            continue
        declared = importlib.import_module(f"{module.__name__}.recipes").RECIPES
        for env_id, stages in declared.items():
            if env_id not in getattr(module, "ENV_SPECS", {}):
                raise ValueError(
                    f"{module.__name__}.recipes has a recipe for {env_id!r}, which the folder does not declare"
                )
            recipes[env_id] = {stage: dict(overrides) for stage, overrides in stages.items()}
    return recipes


def __getattr__(name: str) -> dict[str, dict]:
    if name == "ENV_IDS":  # the task suite that evals and tests iterate
        return declared_ids()[0]
    if name == "CLIENT_IDS":  # ids that are no task of their own (a remote env's client)
        return declared_ids()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_envs(package: str = TASK_PACKAGE) -> None:
    """Register every id that ``package``'s task folders declare (:func:`declared_ids`) with Gymnasium
    (idempotent). A project of its own tasks calls it with its package's name."""
    tasks, clients = declared_ids(package)
    for env_id, spec in {**tasks, **clients}.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, **spec)


def lazy_exports(names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that imports each of ``names`` (attribute → module) on first use: a task
    folder's ``__init__`` exports its classes without loading them when only its ids are read."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module has no attribute {name!r}")
        return getattr(importlib.import_module(names[name]), name)

    return __getattr__


def resolve_env_id(env_id: str) -> str:
    """The registered id a user meant: ``env_id`` itself if registered, else the one registered id equal to it
    ignoring case, or ``agentgym/<env_id>`` (``Task-v0`` and ``task-v0`` are ``agentgym/Task-v0``). An id close
    to an agentgym one (``agentgym/Task-v9``, ``Tsk``) raises
    ``gymnasium.error.NameNotFound`` naming it; any other id is returned as given, for ``gym.make`` to judge.

    For command lines and configs; ``gym.make`` itself stays Gymnasium's and takes exact ids only.
    """
    if env_id in gym.registry:
        return env_id
    by_lower = {name.lower(): name for name in gym.registry}
    for candidate in (env_id, f"agentgym/{env_id}"):
        if (found := by_lower.get(candidate.lower())) is not None:
            return found
    ours = sorted(name for name in gym.registry if name.startswith("agentgym/"))
    namespace, name, _ = gym.envs.registration.parse_env_id(env_id)
    if namespace is None and any(spec.namespace is None and spec.name == name for spec in gym.registry.values()):
        return env_id  # a Gymnasium name at a version it lacks: gym.make says which versions exist
    shorts = {our.removeprefix("agentgym/").lower(): our for our in ours}
    close = difflib.get_close_matches(env_id.lower().removeprefix("agentgym/"), shorts, n=1, cutoff=0.75)
    if close or namespace == "agentgym":
        hint = f"did you mean {shorts[close[0]]!r}? " if close else ""
        raise gym.error.NameNotFound(f"unknown env id {env_id!r}; {hint}agentgym ids: {', '.join(ours)}")
    return env_id


def describe(env_id: str) -> str:
    """The first line of the env class's docstring."""
    module, _, name = gym.spec(env_id).entry_point.partition(":")
    doc = getattr(importlib.import_module(module), name).__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def split_kwargs(env_id: str, split: str | None, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``env_kwargs`` plus ``split=split`` if the env takes a split and the kwargs do not name one."""
    kwargs = dict(env_kwargs or {})
    if split is None or "split" in kwargs:
        return kwargs
    entry = gym.spec(env_id).entry_point
    creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    if "split" in inspect.signature(creator).parameters:
        kwargs["split"] = split
    return kwargs


def eval_kwargs(env_id: str, split: str | None, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The env kwargs an evaluation of ``split`` makes ``env_id`` with: :func:`split_kwargs`, and an env without
    splits takes ``"test"`` as its one configuration and refuses any other split with a ``ValueError``."""
    kwargs = split_kwargs(env_id, split, env_kwargs)
    if split is not None and split != "test" and "split" not in kwargs:
        raise ValueError(
            f"{env_id} has no splits: its test set is its one configuration over seeded episodes "
            f"(--episodes, default {DEFAULT_EPISODES}); use --split test or no --split, not {split!r}"
        )
    return kwargs


def eval_resets(num_tasks: int | None, episodes: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The ``reset`` arguments of an evaluation's episodes, in order: episode ``i`` is ``reset(seed=seed + i)``.
    With ``episodes=None`` an env with a fixed task list of ``num_tasks`` (:attr:`~agentgym.core.TaskInfo.num_tasks`)
    plays each task once (episode ``i`` is task ``i``) and any other env :data:`DEFAULT_EPISODES` episodes; else
    ``episodes`` episodes whose tasks the seeds draw."""
    if episodes is not None and episodes < 1:
        raise ValueError(f"episodes must be at least 1, got {episodes}")
    if episodes is None and num_tasks:
        return [eval_reset(i, seed, every_task=True) for i in range(num_tasks)]
    return [eval_reset(i, seed) for i in range(episodes or DEFAULT_EPISODES)]


def eval_reset(index: int, seed: int = 0, every_task: bool = False) -> dict[str, Any]:
    """Episode ``index``'s ``reset`` arguments under :func:`eval_resets`' rule (``every_task``: each task played
    once, episode ``i`` being task ``i``); what a resumed run checks its records against."""
    return {"seed": seed + index, **({"options": {"task_index": index}} if every_task else {})}


def make_env(env_id: str, split: str | None = None, env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    """``gym.make(env_id)`` on ``split`` (for envs with splits) with ``env_kwargs``."""
    return gym.make(env_id, **split_kwargs(env_id, split, env_kwargs))
