"""Train on agentgym tasks with TRL's ``GRPOTrainer`` (TRL ≥ 1.16): vLLM generation, DeepSpeed/FSDP, multi-GPU.

Three ways in, all built on the same dataset (:func:`make_dataset`: one chat prompt per task instance, with the
``seed`` and ``task_index`` that reset the env to that instance, so that a GRPO group of ``num_generations``
completions plays one and the same task):

``environment_factory`` (:func:`environment_factory`) — TRL runs the agent loop
    The env's tools become methods TRL offers the model through the chat template's ``tools=``; TRL parses each
    tool call from the model's output, calls the method (which steps the gym env with that call), appends the result
    as a ``tool`` message and generates again, masking tool tokens out of the loss. The episode's return (the sum of
    the env's rewards) is the environment's ``get_reward``, logged as ``rewards/<EnvClass>/mean`` (e.g.
    ``rewards/WeatherRunEnv/mean``). Works with TRL's vLLM generation (``use_vllm=True``, server or colocate) and
    with transformers generation. Needs a chat template that TRL can parse tool calls from (Qwen2.5/Qwen3,
    Llama 3.1/3.2, GLM-4, GPT-OSS, Gemma 4, ...: ``trl.chat_template_utils.add_response_schema``); a plain ChatML
    template without ``tools`` support is rejected by TRL at construction.

``rollout_func`` (:class:`AgentGymRollout`) — agentgym runs the agent loop
    agentgym's multi-turn rollout (``agentgym.trainers.llm.rollout``, append mode) plays each prompt's episode with the
    trainer's own model: the model's text goes to the env as it is, through agentgym's tolerant parser (any call
    format, any chat template, including ones without ``tools`` support); the env's observations are appended as
    token ids and masked out of the loss (``env_mask``). The episode's return comes back as the ``env_return`` column,
    which the reward function :func:`env_return` hands to TRL. Sampling uses ``model.generate`` with the trainer's
    generation config (temperature, top-p/k, min-p, repetition penalty, ``generation_kwargs``), each turn stopping
    after ``</tool_call>`` or at end of turn. **It does not use vLLM**: with ``use_vllm=True`` it raises (use
    ``environment_factory`` there). Under DeepSpeed ZeRO-3 keep ``ds3_gather_for_generation=True`` (the default):
    processes play different numbers of turns, and per-forward parameter gathering would then deadlock.

a reward function (:func:`agentgym_reward_func`) — single-turn
    TRL generates one completion per prompt (with vLLM or transformers) and the reward function replays the
    completion's tool calls, as one action, in an env reset to the prompt's task: a plan written without seeing any
    tool result. Works with every TRL generation backend and chat template.

Example (``environment_factory``; the whole script — on CPU add ``use_cpu=True, bf16=False`` to the config, as TRL's
configs default to bf16)::

    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from agentgym.app.integrations.trl import environment_factory, make_dataset

    env_id = "agentgym/WeatherRun-v0"
    model = "Qwen/Qwen2.5-0.5B-Instruct"  # a chat template with tool calling
    trainer = GRPOTrainer(
        model=model,
        args=GRPOConfig(
            output_dir="runs/weatherrun-trl",
            per_device_train_batch_size=8,
            num_generations=8,  # one GRPO group = 8 episodes of one task
            max_completion_length=512,  # all turns of an episode together, tool results included
            max_tool_calling_iterations=8,  # at most this many tool rounds (WeatherRun allows 8 actions)
            learning_rate=1e-6,
            max_steps=200,
            logging_steps=1,
            # use_vllm=True, vllm_mode="colocate",  # on GPUs with vLLM installed
        ),
        processing_class=AutoTokenizer.from_pretrained(model),
        train_dataset=make_dataset(env_id, "train", tools_in_prompt=False),  # the template shows the tools
        environment_factory=environment_factory(env_id, "train"),
    )
    trainer.train()  # logs rewards/WeatherRunEnv/mean, tools/call_frequency, ...

The same with ``rollout_func`` (any chat template; transformers generation)::

    from agentgym.app.integrations.trl import AgentGymRollout, env_return

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[env_return],  # the episode returns the rollout measured
        args=GRPOConfig(output_dir="runs/weatherrun-rollout", num_generations=8, max_completion_length=512),
        train_dataset=make_dataset(env_id, "train"),
        rollout_func=AgentGymRollout(env_id, "train", max_new_tokens=96),  # tokens per turn
    )

Single-turn with a reward function::

    from agentgym.app.integrations.trl import agentgym_reward_func

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[agentgym_reward_func(env_id, "train")],
        args=GRPOConfig(output_dir="runs/weatherrun-1turn", num_generations=8, max_completion_length=256),
        train_dataset=make_dataset(env_id, "train"),
    )

Scale out with ``accelerate launch`` (TRL ships the configs in ``trl/accelerate_configs/``: ``multi_gpu.yaml``,
``zero2.yaml``, ``zero3.yaml``, ``fsdp2.yaml``); every process runs the script above::

    accelerate launch --config_file zero3.yaml --num_processes 8 train.py

vLLM (``pip install vllm``; ``environment_factory`` or the reward function, not ``rollout_func``):
``use_vllm=True, vllm_mode="colocate"`` shares the training GPUs; for ``vllm_mode="server"`` start a server on
separate GPUs first, e.g. ``CUDA_VISIBLE_DEVICES=7 trl vllm-serve --model Qwen/Qwen2.5-0.5B-Instruct``, then
``CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 accelerate launch --config_file zero3.yaml --num_processes 7 train.py``.
Prompts are sharded over processes and the ``num_generations`` copies of one prompt may land on different
processes; each copy resets its own env to the same task (the prompt carries it), so groups stay consistent.

TRL marks ``environment_factory`` and ``rollout_func`` experimental (set ``TRL_EXPERIMENTAL_SILENCE=1`` to silence
its warning); this module is tested against TRL 1.16.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, get_type_hints

try:
    import trl  # noqa: F401  (fail here, with the install hint, when TRL is missing)
    from trl.models.utils import unwrap_model_for_generation
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f'agentgym.app.integrations.trl needs TRL (>= 1.16): pip install "agentgym-suite[trl]" (import failed: {exc})'
    ) from exc

import gymnasium as gym
import torch

from agentgym.core import parts_of, task_info, tools_of
from agentgym.core.episode import append_episodes
from agentgym.core.registration import ENV_IDS, make_env
from agentgym.core.tools import Tool, ToolCall
from agentgym.trainers.models.policy import Generation, LLMPolicy
from agentgym.trainers.run.run_dir import RunDir

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "RESET_KEY",
    "AgentGymEnvironment",
    "AgentGymReward",
    "AgentGymRollout",
    "EnvironmentFactory",
    "agentgym_reward_func",
    "env_return",
    "environment_factory",
    "make_dataset",
]

RESET_KEY = "agentgym_reset"
"""Key, on the user message of a :func:`make_dataset` prompt, holding the JSON of ``env.reset``'s arguments.

``rollout_func`` receives only the prompts (no other dataset column), so the prompt itself says which task it is.
Chat templates ignore keys they do not read."""


# ---------------------------------------------------------------------------------------------- helpers


def _make(env_id: str, split: str | None, env_kwargs: dict[str, Any] | None) -> gym.Env:
    """``make_env``, with errors that name the env id, the split and the kwargs."""
    try:
        gym.spec(env_id)
    except gym.error.Error as exc:
        raise ValueError(f"unknown env id {env_id!r} ({exc}); agentgym's ids: {', '.join(ENV_IDS)}") from None
    if env_kwargs is not None and not isinstance(env_kwargs, dict):
        raise TypeError(f"env_kwargs must be a dict of keyword arguments for {env_id}, got {env_kwargs!r}")
    try:
        return make_env(env_id, split, env_kwargs)
    except (TypeError, ValueError) as exc:  # ValueError includes pydantic's ValidationError (bad reward weights)
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"cannot make {env_id} with split={split!r}, env_kwargs={env_kwargs!r}: {exc}") from exc


def _reset_arguments(seed: Any = None, task_index: Any = None) -> dict[str, Any]:
    """``env.reset`` keyword arguments for a dataset row's ``seed`` and ``task_index`` (None: not given)."""
    reset: dict[str, Any] = {}
    if seed is not None:
        reset["seed"] = int(seed)
    if task_index is not None and int(task_index) >= 0:
        reset["options"] = {"task_index": int(task_index)}
    return reset


def _reset_from_prompt(prompt: Any) -> dict[str, Any] | None:
    """The reset arguments a :func:`make_dataset` prompt carries under :data:`RESET_KEY`, or None."""
    if isinstance(prompt, list):
        for message in prompt:
            if isinstance(message, dict) and message.get(RESET_KEY):
                return json.loads(message[RESET_KEY])
    return None


def _reset_of_row(row: dict[str, Any]) -> dict[str, Any]:
    """Reset arguments for a dataset row: its ``seed``/``task_index`` columns, else what its prompt carries."""
    if "seed" in row or "task_index" in row:
        return _reset_arguments(row.get("seed"), row.get("task_index"))
    return _reset_from_prompt(row.get("prompt")) or {}


def _text_of(content: Any) -> str:
    """The text of a message's content (a string, or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _first_message(env: gym.Env, observation: str, tools_in_prompt: bool) -> str:
    """The first user message of an episode: the observation, or (``tools_in_prompt=False``) task + state only."""
    parts = parts_of(env)
    if tools_in_prompt or parts is None:
        return observation
    return replace(parts, tools=None).render()


def _tool_reply(env: gym.Env, observation: str) -> str:
    """What a tool call returns to TRL: the observation without its task line (``Result: ...`` and ``State: ...``,
    after any ``history`` turns), cut where the env cuts its text; the observation itself without parts."""
    parts = parts_of(env)
    if parts is None:
        return observation
    reply = replace(parts, task=None)
    task_line = len(parts.render()) - len(reply.render())
    return reply.render(max(env.unwrapped.max_observation_length - task_line, 64))


def _tool_calls_text(completion: Any) -> str:
    """A completion as one action text: each assistant message's content, and its parsed ``tool_calls`` (if TRL's
    response parser took them out of the content) in the canonical format."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion if isinstance(completion, list) else [completion]:
        if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
            continue
        parts.append(_text_of(message.get("content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, dict) else {}
            arguments = function.get("arguments") or {}
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    arguments = {"arguments": arguments}  # the env's validation will explain what is wrong
            parts.append(ToolCall(str(function.get("name", "")), arguments).to_text())
    return "\n".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------- dataset


def make_dataset(
    env_id: str,
    split: str | None = None,
    n: int | None = None,
    *,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    system_prompt: str | None = None,
    tools_in_prompt: bool = True,
) -> Dataset:
    """A ``datasets.Dataset`` of prompts for ``GRPOTrainer``: one row per task instance of ``env_id``.

    Columns:

    - ``prompt``: chat messages (an optional system message, then one user message holding the env's first
      observation: the task, the tools and the call format, and the state summary). With
      ``tools_in_prompt=False`` the user message holds the task and the state only — use that when the chat template
      shows the tools (``environment_factory`` with a tool-calling template). The user message also carries the
      reset arguments as JSON under :data:`RESET_KEY` (what ``rollout_func`` reads).
    - ``seed`` (int) and ``task_index`` (int, or None for an env that draws its task from the seed): row ``i`` is
      ``env.reset(seed=seed + i, options={"task_index": i % num_tasks})``.

    ``n`` defaults to the number of tasks of the env's split (WeatherRun train: 300), or 100 for an env without a
    task list (CliffWalk). ``split`` and ``env_kwargs`` are as for ``agentgym.core.registration.make_env``; give the
    environment, rollout and reward the same ones.
    """
    from datasets import Dataset

    env = _make(env_id, split, env_kwargs)
    try:
        num_tasks = task_info(env).num_tasks
        count = n if n is not None else num_tasks or 100
        if count < 1:
            raise ValueError(f"n must be at least 1, got {n!r}")
        rows = []
        for i in range(count):
            task_index = i % num_tasks if num_tasks else None
            reset = _reset_arguments(seed + i, task_index)
            observation, _ = env.reset(**reset)
            user = {"role": "user", "content": _first_message(env, observation, tools_in_prompt)}
            user[RESET_KEY] = json.dumps(reset)
            prompt = [{"role": "system", "content": system_prompt, RESET_KEY: None}] if system_prompt else []
            rows.append({"prompt": [*prompt, user], "seed": seed + i, "task_index": task_index})
    finally:
        env.close()
    return Dataset.from_list(rows)


# ---------------------------------------------------------------------------------------------- environment_factory


class AgentGymEnvironment:
    """One agentgym env as a TRL environment (what :func:`environment_factory` builds; one instance per rollout).

    TRL sees ``reset``, ``get_reward`` and one method per tool of the env (same name, arguments, types and
    docstring), and nothing else: every other member is private or not a function. A tool method steps the gym env
    with the canonical call (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``) and returns the env's
    observation without its task line (``Result: ...`` and ``State: ...``); after the episode has ended (a
    terminating tool, or the env's step limit) it returns a notice and steps nothing.

    Attributes (of the current episode): ``env`` (the gym env), ``reset_arguments`` (what ``env.reset`` got),
    ``actions`` (the canonical action texts, in order), ``rewards`` (the env's reward for each), ``terminated``,
    ``truncated``, ``success`` (``info["success"]`` after the last action).
    """

    env_id: ClassVar[str] = ""
    split: ClassVar[str | None] = None
    env_kwargs: ClassVar[dict[str, Any]] = {}
    tools_in_observation: ClassVar[bool] = False

    def __init__(self, env: gym.Env | None = None) -> None:
        self.env = env if env is not None else _make(self.env_id, self.split, self.env_kwargs)
        self.reset_arguments: dict[str, Any] = {}
        self.actions: list[str] = []
        self.rewards: list[float] = []
        self.terminated = False
        self.truncated = False
        self.success = False

    def reset(self, **row: Any) -> str | None:
        """Reset the env to the row's task (``seed``/``task_index`` columns, else the prompt's :data:`RESET_KEY`).

        Returns the first observation to append to the prompt's last message, or None when that message already
        holds the task (a :func:`make_dataset` prompt).
        """
        self.reset_arguments = _reset_of_row(row)
        observation, _ = self.env.reset(**copy.deepcopy(self.reset_arguments))
        self.actions, self.rewards = [], []
        self.terminated = self.truncated = self.success = False
        parts = parts_of(self.env)
        prompt = row.get("prompt")
        last = _text_of(prompt[-1].get("content")) if isinstance(prompt, list) and prompt else ""
        if parts is not None and parts.task is not None and parts.task in last:
            return None
        return _first_message(self.env, observation, self.tools_in_observation)

    def get_reward(self) -> float:
        """The episode's return: the sum of the env's rewards for the tool calls made so far."""
        return float(sum(self.rewards))

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self.terminated or self.truncated:
            return "The episode is over: no tool call is needed any more."
        action = ToolCall(name, arguments).to_text()
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.actions.append(action)
        self.rewards.append(float(reward))
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        self.success = bool(info.get("success", False))
        return _tool_reply(self.env, observation)


def _describable(hint: Any) -> bool:
    """Whether transformers can write ``hint`` as a JSON schema for a chat template's ``tools=``."""
    from transformers.utils import get_json_schema

    def probe(x: Any) -> None:
        """Probe.

        Args:
            x: A value.
        """

    probe.__annotations__ = {"x": hint}
    try:
        get_json_schema(probe)
    except Exception:
        return False
    return True


def _tool_method(tool: Tool) -> Callable[..., str]:
    """A method named like ``tool`` with its signature and a Google-style docstring, which steps the env."""
    name = tool.name

    def method(self: AgentGymEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    declared = inspect.signature(tool.fn).parameters
    hints = get_type_hints(tool.fn)
    props = tool.parameters_schema.get("properties", {})
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    for arg in tool.parameters:
        hint = hints.get(arg, Any)
        annotations[arg] = hint if _describable(hint) else Any  # e.g. SQLLookup's answer(value): any JSON
        default = declared[arg].default if arg in declared else inspect.Parameter.empty
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        parameters.append(inspect.Parameter(arg, kind, default=default, annotation=annotations[arg]))
        description = " ".join(str(props.get(arg, {}).get("description") or f"The {arg} argument.").split())
        lines.append(f"    {arg}: {description}")
    annotations["return"] = str
    method.__name__ = method.__qualname__ = name
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    doc = tool.description or f"Call the {name} tool."
    method.__doc__ = f"{doc}\n\nArgs:\n" + "\n".join(lines) if lines else doc
    return method


class EnvironmentFactory:
    """A zero-argument callable making :class:`AgentGymEnvironment` instances: TRL's ``environment_factory``.

    Build with :func:`environment_factory`. ``environment_class`` is the generated class (named after the env's
    class, e.g. ``WeatherRunEnv``: TRL logs its reward as ``rewards/WeatherRunEnv/mean``); ``instances`` lists
    every environment made so far (TRL makes one per concurrent rollout and reuses them).
    """

    def __init__(
        self,
        env_id: str,
        split: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        *,
        tools_in_observation: bool = False,
    ) -> None:
        probe = _make(env_id, split, env_kwargs)  # a bad id or bad kwargs fail here, not inside TRL
        base = probe.unwrapped
        tools = tools_of(probe)
        if not tools:
            probe.close()
            raise ValueError(f"{env_id} declares no tools (a ToolEnv's @tool methods); TRL would have nothing to call")
        for name in tools:
            if name in ("reset", "get_reward") or name.startswith("_") or not name.isidentifier():
                probe.close()
                raise ValueError(f"{env_id}: tool name {name!r} cannot be a TRL environment method")
        members: dict[str, Any] = {name: _tool_method(t) for name, t in tools.items()}
        members.update(
            env_id=env_id,
            split=split,
            env_kwargs=dict(env_kwargs or {}),
            tools_in_observation=tools_in_observation,
            __module__=__name__,
            __doc__=f"{env_id} as a TRL environment (tools: {', '.join(tools)}). {AgentGymEnvironment.__doc__}",
        )
        self.env_id = env_id
        self.tool_names: tuple[str, ...] = tuple(tools)
        self.environment_class: type[AgentGymEnvironment] = type(type(base).__name__, (AgentGymEnvironment,), members)
        self.instances: list[AgentGymEnvironment] = []
        self._spare: gym.Env | None = probe

    def __call__(self) -> AgentGymEnvironment:
        env, self._spare = self._spare, None
        instance = self.environment_class(env)
        self.instances.append(instance)
        return instance

    def __repr__(self) -> str:
        return f"EnvironmentFactory({self.env_id!r}, tools={list(self.tool_names)})"


def environment_factory(
    env_id: str,
    split: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    *,
    tools_in_observation: bool = False,
) -> EnvironmentFactory:
    """``GRPOTrainer(environment_factory=...)`` for ``gym.make(env_id, **env_kwargs)`` on ``split``.

    Makes one env at once, so an unknown id or bad kwargs raise here (``ValueError``/``TypeError`` naming them).
    Use it with a :func:`make_dataset` dataset of the same env, split and kwargs: each rollout's ``reset`` then plays
    the row's task. ``tools_in_observation``: when ``reset`` supplies the first observation (the prompt does not
    hold the task), include the text tool list and call format too (for templates that do not show tools well).

    The model must write tool calls the chat template's response parser recognises (TRL's
    ``add_response_schema``), e.g. Qwen's ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``, which
    is also agentgym's canonical format. A reply without a tool call ends TRL's loop; it is not sent to the env (so
    no ``invalid_action`` reward for it), and the episode's return is what the tool calls earned.
    """
    return EnvironmentFactory(env_id, split, env_kwargs, tools_in_observation=tools_in_observation)


# ---------------------------------------------------------------------------------------------- rollout_func


@dataclass
class _TrainerSampler(LLMPolicy):
    """An :class:`LLMPolicy` that samples with ``model.generate`` and the trainer's ``GenerationConfig``."""

    generation_config: Any = None

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
        cache: Any = None,
        keys: Any = None,
    ) -> list[Generation]:
        """One continuation per prompt; each stops after a stop token (end of turn, ``</tool_call>``) or at
        ``max_new_tokens``. Sampling settings come from the trainer's config; log-probs are not computed (zeros):
        TRL recomputes them, as it does for its own transformers generation. ``cache`` and ``keys`` (the rollout's
        prefix cache) are ignored: TRL's ``generate`` keeps no cache across calls."""
        config = copy.deepcopy(self.generation_config)
        config.max_new_tokens = max_new_tokens
        config.eos_token_id = list(self._stop_ids)
        config.pad_token_id = self.pad_id
        width = max(map(len, prompts))
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            input_ids[i, width - len(p) :] = torch.tensor(p)
            attention[i, width - len(p) :] = 1
        extra = {"stop_strings": self._stop_texts, "tokenizer": self.tokenizer} if self._stop_texts else {}
        out = self.model.generate(
            input_ids=input_ids.to(self.device),
            attention_mask=attention.to(self.device),
            generation_config=config,
            **extra,
        )
        stops = set(self._stop_ids)
        results = []
        for row in out[:, width:].tolist():
            cut = next((k + 1 for k, t in enumerate(row) if t in stops), None)
            if cut is None and self._stop_texts:
                cut = next(
                    (
                        k + 1
                        for k in range(len(row))
                        if any(
                            self.tokenizer.decode(row[max(0, k - 7) : k + 1], skip_special_tokens=False).endswith(s)
                            for s in self._stop_texts
                        )
                    ),
                    None,
                )
            tokens = row[:cut] if cut is not None else row
            results.append(Generation(tokens, [0.0] * len(tokens), cut is not None))
        return results


class AgentGymRollout:
    """``GRPOTrainer(rollout_func=AgentGymRollout(env_id, ...))``: agentgym's multi-turn rollout inside TRL.

    Called by TRL with the prompts of a generation batch (each already repeated ``num_generations`` times) and the
    trainer. For each prompt it resets an env to the prompt's task (:data:`RESET_KEY`, set by :func:`make_dataset`)
    and plays the episode with ``agentgym.trainers.llm.rollout.rollout`` in append mode: the first observation (with the
    prompt's system message, if any) rendered by the chat template, then the model's action, the env's reply, the
    next action, ... as token ids, never re-tokenised. Returns what TRL expects:

    - ``prompt_ids``: the rendered first turn; ``completion_ids``: everything after it (actions and env replies; an
      end-of-turn token closes an episode the env terminated); ``logprobs``: None (TRL recomputes them, as for its
      own transformers generation); ``env_mask``: 1 on the model's tokens, 0 on the env's (TRL's ``tool_mask``);
    - per completion, forwarded to reward functions: ``env_return`` (the sum of the env's rewards), ``env_success``
      and ``env_turns``. Pass :func:`env_return` as the reward function.

    Budgets: ``max_new_tokens`` per turn; the trainer's ``max_completion_length`` for a whole episode (env tokens
    included; a turn starts only if ``max_new_tokens`` more still fit, measured from the batch's longest prompt);
    ``max_turns`` actions, else the env's own step limit. The user text of the prompt is not used: the episode's own
    first observation is (the same text, for a :func:`make_dataset` prompt with ``tools_in_prompt=True``).

    Every episode played is logged as an :class:`~agentgym.core.episode.EpisodeRecord` (with ``training_step``: the
    trainer's step that played it, and ``training_reward``: its env return) to ``LOG_DIR/episodes.jsonl``, beside a
    ``config.json`` naming the env, as agentgym's own trainers log theirs: so ``agentgym audit LOG_DIR`` and
    ``agentgym data LOG_DIR/episodes.jsonl`` read a TRL run too. ``LOG_DIR`` is ``log_dir``, by default
    ``<trainer's output_dir>/agentgym`` (TRL's own ``config.json`` there is the model's); ``log_episodes=False``
    writes nothing. In a multi-process run each process writes its own episodes, rank ``r > 0`` to
    ``episodes.rank<r>.jsonl``.

    Raises ``ValueError`` with ``use_vllm=True`` (this rollout samples with the training model; use
    :func:`environment_factory` with vLLM) and for a prompt without reset arguments.
    """

    def __init__(
        self,
        env_id: str,
        split: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        *,
        max_new_tokens: int = 64,
        max_turns: int | None = None,
        log_episodes: bool = True,
        log_dir: str | Path | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens!r}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1 or None, got {max_turns!r}")
        self.env_id, self.split, self.env_kwargs = env_id, split, dict(env_kwargs or {})
        self.max_new_tokens, self.max_turns = max_new_tokens, max_turns
        self.log_episodes, self.log_dir = log_episodes, log_dir
        self._envs: list[gym.Env] = [_make(env_id, split, env_kwargs)]  # fails here on a bad id or kwargs

    def _env_pool(self, count: int) -> list[gym.Env]:
        while len(self._envs) < count:
            self._envs.append(_make(self.env_id, self.split, self.env_kwargs))
        return self._envs[:count]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from agentgym.trainers.llm.rollout import RolloutConfig, rollout

        if getattr(trainer, "use_vllm", False):
            raise ValueError(
                "AgentGymRollout samples with the training model (model.generate) and does not use vLLM; with "
                "use_vllm=True use environment_factory(...) (TRL's tool loop runs on vLLM) or agentgym_reward_func"
            )
        resets = []
        for i, prompt in enumerate(prompts):
            reset = _reset_from_prompt(prompt)
            if reset is None:
                raise ValueError(
                    f"prompt {i} carries no {RESET_KEY!r}: build the dataset with "
                    "agentgym.app.integrations.trl.make_dataset, which records each prompt's task"
                )
            resets.append(reset)
        systems = [
            next((_text_of(m.get("content")) for m in p if isinstance(m, dict) and m.get("role") == "system"), None)
            if isinstance(p, list)
            else None
            for p in prompts
        ]
        tokenizer = getattr(trainer, "_tokenizer", None) or getattr(
            trainer.processing_class, "tokenizer", trainer.processing_class
        )
        budget = int(trainer.args.max_completion_length)
        envs = self._env_pool(len(prompts))
        episodes: list[Any] = [None] * len(prompts)
        args = trainer.args
        with ExitStack() as stack:
            model = stack.enter_context(
                unwrap_model_for_generation(
                    trainer.model_wrapped,
                    trainer.accelerator,
                    gather_deepspeed3_params=getattr(args, "ds3_gather_for_generation", True),
                    generation_kwargs=getattr(trainer, "generation_kwargs", None),
                    gradient_checkpointing_kwargs=getattr(args, "gradient_checkpointing_kwargs", None),
                )
            )
            stack.enter_context(torch.no_grad())
            dist = getattr(trainer, "_dist", None)
            summon = getattr(dist, "summon_full_params", None)
            stack.enter_context(summon(trainer.model_wrapped, recurse=False) if summon else nullcontext())
            policy = _TrainerSampler(model, tokenizer, generation_config=trainer.generation_config)
            for system in dict.fromkeys(systems):  # one lock-step rollout per distinct system prompt (usually one)
                idx = [i for i, s in enumerate(systems) if s == system]
                longest = max(len(self._first_ids(policy, envs[i], resets[i], system)) for i in idx)
                config = RolloutConfig(
                    system_prompt=system,
                    max_new_tokens=self.max_new_tokens,
                    max_tokens=max(8, longest + budget),
                    max_turns=self.max_turns,
                    temperature=float(getattr(trainer, "temperature", 1.0)),
                    top_p=float(getattr(trainer, "top_p", 1.0)),
                )
                played = rollout(policy, [envs[i] for i in idx], [copy.deepcopy(resets[i]) for i in idx], config)
                for i, episode in zip(idx, played, strict=True):
                    episodes[i] = episode
        if self.log_episodes:
            self._log(trainer, episodes)
        eos = tokenizer.eos_token_id
        out: dict[str, list[Any]] = {k: [] for k in ("prompt_ids", "completion_ids", "env_mask")}
        for episode in episodes:
            sample = episode.samples[0]
            start = next((k for k, m in enumerate(sample.loss_mask) if m), len(sample.loss_mask))
            completion, mask = list(sample.input_ids[start:]), list(sample.loss_mask[start:])
            if (episode.terminated or not completion) and (not completion or completion[-1] != eos):
                completion.append(eos)  # close the turn: TRL counts a completion without it as clipped
                mask.append(0)
            out["prompt_ids"].append(list(sample.input_ids[:start]))
            out["completion_ids"].append(completion)
            out["env_mask"].append(mask)
        return {
            **out,
            "logprobs": None,
            "env_return": [episode.total_reward for episode in episodes],
            "env_success": [float(episode.success) for episode in episodes],
            "env_turns": [episode.turns for episode in episodes],
        }

    def _log(self, trainer: Any, episodes: list[Any]) -> None:
        """Append the episodes to the run's log (see the class docstring), writing its ``config.json`` once."""
        run = RunDir(self.log_dir if self.log_dir is not None else Path(trainer.args.output_dir) / "agentgym")
        rank = int(getattr(getattr(trainer, "accelerator", None), "process_index", 0) or 0)
        if rank == 0 and not (run.path / "config.json").exists():
            settings = {"env_id": self.env_id, "train_split": self.split, "env_kwargs": self.env_kwargs}
            run.write_config("trl-grpo", config=settings)
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0) + 1
        records = [ep.record(training_step=step, training_reward=ep.total_reward) for ep in episodes]
        append_episodes(run.path / ("episodes.jsonl" if rank == 0 else f"episodes.rank{rank}.jsonl"), records)

    @staticmethod
    def _first_ids(policy: LLMPolicy, env: gym.Env, reset: dict[str, Any], system: str | None) -> list[int]:
        observation, info = env.reset(**copy.deepcopy(reset))
        messages = [{"role": "system", "content": system}] if system else []
        return policy.chat_ids([*messages, {"role": "user", "content": observation}], tools=info.get("tools"))

    def close(self) -> None:
        for env in self._envs:
            env.close()


def env_return(
    completions: list[Any],
    env_return: list[float] | None = None,
    env_success: list[float] | None = None,
    env_turns: list[int] | None = None,
    log_metric: Callable[[str, float], None] | None = None,
    **kwargs: Any,
) -> list[float]:
    """Reward function for :class:`AgentGymRollout`: each completion's episode return, as the rollout measured it.

    TRL logs it as ``rewards/env_return/mean``, and (through ``log_metric``) ``env_success`` (the share of episodes
    the env counts as solved) and ``env_turns`` (actions per episode). Without an ``env_return`` column (no
    ``AgentGymRollout``) it raises.
    """
    if env_return is None:
        raise ValueError("env_return needs rollout_func=AgentGymRollout(...), which supplies the env_return column")
    if len(env_return) != len(completions):
        raise ValueError(f"got {len(env_return)} env returns for {len(completions)} completions")
    if log_metric is not None and env_return:
        if env_success is not None:
            log_metric("env_success", sum(env_success) / len(env_success))
        if env_turns is not None:
            log_metric("env_turns", sum(env_turns) / len(env_turns))
    return [float(r) for r in env_return]


# ---------------------------------------------------------------------------------------------- reward function


class AgentGymReward:
    """A TRL reward function that replays each completion in a fresh episode of the prompt's task.

    For each completion: reset the env with the row's ``seed``/``task_index`` (else the prompt's
    :data:`RESET_KEY`), step it once with the completion's text (its content plus any ``tool_calls`` TRL's response
    parser took out of it, in the canonical format; several calls run in order, as the env runs them), and return
    that step's reward. Logs ``env_success`` (the share of episodes the env counts as solved) through TRL's
    ``log_metric``. Build with :func:`agentgym_reward_func`; TRL names it ``agentgym_reward``.
    """

    def __init__(self, env_id: str, split: str | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        self.__name__ = "agentgym_reward"
        self.env_id = env_id
        self.env = _make(env_id, split, env_kwargs)  # fails here on a bad id or kwargs

    def __call__(
        self,
        completions: Sequence[Any],
        prompts: Sequence[Any] | None = None,
        seed: Sequence[Any] | None = None,
        task_index: Sequence[Any] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        rewards, solved = [], 0
        for i, completion in enumerate(completions):
            if seed is not None or task_index is not None:
                reset = _reset_arguments(seed[i] if seed else None, task_index[i] if task_index else None)
            else:
                reset = _reset_from_prompt(prompts[i] if prompts else None)
                if reset is None:
                    raise ValueError(
                        "no seed/task_index columns and no reset in the prompt: build the dataset with make_dataset"
                    )
            self.env.reset(**reset)
            _, reward, _, _, info = self.env.step(_tool_calls_text(completion))
            rewards.append(float(reward))
            solved += bool(info.get("success", False))
        if log_metric is not None and rewards:
            log_metric("env_success", solved / len(rewards))
        return rewards

    def replay(self, actions: Iterable[str], reset: dict[str, Any]) -> float:
        """The return of ``actions`` (texts, one step each) played from ``env.reset(**reset)``."""
        self.env.reset(**copy.deepcopy(reset))
        total = 0.0
        for action in actions:
            _, reward, terminated, truncated, _ = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return total


def agentgym_reward_func(
    env_id: str, split: str | None = None, env_kwargs: dict[str, Any] | None = None
) -> AgentGymReward:
    """A single-turn reward function for ``GRPOTrainer(reward_funcs=[...])``: see :class:`AgentGymReward`.

    Use it with a :func:`make_dataset` dataset of the same env, split and kwargs. An unknown id or bad kwargs raise
    here.
    """
    return AgentGymReward(env_id, split, env_kwargs)
