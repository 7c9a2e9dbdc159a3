"""Linear probes: does a model already hold a task's decision, and does its policy read it out?

A *decision* is a categorical argument of a tool call — a boolean (WeatherRun's ``answer(suitable)``) or an enum
(CliffWalk's ``move(direction)``). Its *context* is what the policy has seen when it is about to write the value:
the turn's prompt, in the rollout's own context mode and template, then the scripted oracle's action up to the
value (``<tool_call>{"name": "answer", "arguments": {"reason": "temp 18.4°C · AQI 55", "suitable": ``). The label
is the oracle's value. Tasks whose answers are free text (SQLLookup's query, CodeSandbox's code) have no such label
and no probe.

:func:`probe` collects the contexts of the train split (fit) and the test split (held out; an env without splits
holds out a quarter of its distinct contexts), reads every layer's hidden state at the last context token (the one
that predicts the value), fits a multinomial logistic regression per layer (L2-regularised, on standardised
features) and reports held-out accuracy per layer beside the policy's own greedy accuracy: which value it gives
the highest log-probability after the same context. A best layer far above the policy means the feature is there
and training has yet to read it out; a best layer at chance means the base lacks it.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from pydantic import BaseModel, ConfigDict, Field

from agentgym.core import task_info
from agentgym.core.data import MAX_FILE_BYTES
from agentgym.core.registration import eval_resets, split_kwargs
from agentgym.trainers.llm.rollout import OracleTeacher, RolloutConfig, Sample, collate, rollout, turn_spans
from agentgym.trainers.models.policy import LLMPolicy

__all__ = [
    "DecisionReplay",
    "DecisionSet",
    "LinearProbe",
    "ProbeReport",
    "decision_contexts",
    "decision_key",
    "fit_probe",
    "hindsight_decisions",
    "hidden_states",
    "policy_choices",
    "probe",
]


@dataclass
class DecisionSet:
    """Decision contexts of one tool argument: ``contexts[i]`` are token ids up to the value, ``continuations[i][k]``
    the ids that write value ``values[k]`` after them, ``labels[i]`` the index of the oracle's value."""

    tool: str
    argument: str
    values: list[Any]
    contexts: list[list[int]]
    continuations: list[list[list[int]]]
    labels: list[int]

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, index: Sequence[int]) -> DecisionSet:
        return DecisionSet(
            self.tool,
            self.argument,
            self.values,
            [self.contexts[i] for i in index],
            [self.continuations[i] for i in index],
            [self.labels[i] for i in index],
        )

    def labelled_samples(self) -> list[Sample]:
        """Each context followed by its labelled value, the value's tokens the policy's (to train toward it)."""
        samples = []
        for context, continuations, label in zip(self.contexts, self.continuations, self.labels, strict=True):
            sample = Sample()
            sample.extend(context, policy=False)
            sample.extend(continuations[label], policy=True)
            samples.append(sample)
        return samples


def decision_key(schemas: Sequence[dict[str, Any]]) -> tuple[str, str, list[Any]] | None:
    """The first categorical argument of a tool list (OpenAI-style schemas): ``(tool, argument, values)`` for a
    boolean (``[False, True]``) or an enum, or None when no tool has one."""
    for schema in schemas:
        function = schema.get("function", schema)
        for name, spec in function.get("parameters", {}).get("properties", {}).items():
            if spec.get("type") == "boolean":
                return function["name"], name, [False, True]
            if isinstance(spec.get("enum"), list) and len(spec["enum"]) >= 2:
                return function["name"], name, list(spec["enum"])
    return None


def decision_contexts(
    policy: LLMPolicy,
    env_id: str,
    config: RolloutConfig,
    *,
    split: str | None = "train",
    env_kwargs: dict[str, Any] | None = None,
    episodes: int | None = None,
    seed: int = 0,
    batch_size: int = 64,
) -> DecisionSet:
    """Play the env's oracle on ``split`` (every task once, or ``episodes`` seeded episodes) with ``config``'s
    context mode and template, and return the contexts of every turn whose action sets the env's decision argument.

    Raises ``ValueError`` when the env's tools have no categorical argument (its decisions carry no label)."""
    kwargs = split_kwargs(env_id, split, env_kwargs)
    first = gym.make(env_id, **kwargs)
    _, info = first.reset(seed=seed)
    key = decision_key(info.get("tools") or [])
    if key is None:
        first.close()
        raise ValueError(
            f"{env_id}'s tools have no boolean or enum argument: its decisions are free text, so a linear probe "
            "has no label to read"
        )
    tool, argument, values = key
    resets = eval_resets(task_info(first).num_tasks, episodes, seed)
    envs = [first] + [gym.make(env_id, **kwargs) for _ in range(min(batch_size, len(resets)) - 1)]
    played = []
    for start in range(0, len(resets), batch_size):
        chunk = resets[start : start + batch_size]
        played += rollout(policy, envs[: len(chunk)], chunk, config, teacher=OracleTeacher())
    for env in envs:
        env.close()
    found = DecisionSet(tool, argument, values, [], [], [])
    for episode in played:
        for prompt, action in zip(_turn_prompts(episode), episode.actions, strict=False):
            point = _split_at_value(policy, action, tool, argument, values)
            if point is not None:
                prefix, continuations, label = point
                found.contexts.append(prompt + prefix)
                found.continuations.append(continuations)
                found.labels.append(label)
    return found


def _turn_prompts(episode: Any) -> list[list[int]]:
    """The ids each turn's action was written after."""
    return [prompt for prompt, _ in _turns(episode)]


def _turns(episode: Any) -> list[tuple[list[int], list[int]]]:
    """``(prompt ids, response ids)`` of every turn: one sample per turn (summary mode) or one transcript whose runs
    of policy tokens are the turns (append mode)."""
    return [
        (sample.input_ids[:start], sample.input_ids[start:end])
        for sample in episode.samples
        for start, end in turn_spans(sample.loss_mask)
    ]


def hindsight_decisions(policy: LLMPolicy, episodes: Sequence[Any], key: tuple[str, str, list[Any]]) -> DecisionSet:
    """The decision each answered episode wrote in its last action, labelled by the outcome: a successful episode's
    value is right; for a boolean decision a failed episode's other value is (the task's verdict is on that value).
    Episodes whose last action does not write the decision as canonical JSON (``"suitable": true``) are left out.
    The contexts are the sampled tokens themselves, never re-tokenised."""
    tool, argument, values = key
    found = DecisionSet(tool, argument, values, [], [], [])
    literals = {json.dumps(v, ensure_ascii=False): v for v in values}
    for episode in episodes:
        turns = _turns(episode)
        if not episode.terminated or not turns or len(turns) != len(episode.actions):
            continue
        prompt, response = turns[-1]
        text = policy.decode(response)
        match = re.search(rf'"{re.escape(argument)}"\s*:\s*', text)
        chosen = next((lit for lit in literals if match and text.startswith(lit, match.end())), None)
        if chosen is None or f'"name": "{tool}"' not in text:
            continue
        if episode.success:
            label = values.index(literals[chosen])
        elif len(values) == 2:
            label = 1 - values.index(literals[chosen])
        else:
            continue
        start = match.end()
        lo, hi = 0, len(response)  # the first token whose text reaches past the value's start
        while lo < hi:
            mid = (lo + hi) // 2
            if len(policy.decode(response[: mid + 1])) > start:
                hi = mid
            else:
                lo = mid + 1
        head = text[len(policy.decode(response[:lo])) : start]
        found.contexts.append(prompt + response[:lo])
        found.continuations.append([policy.encode(head + lit) for lit in literals])
        found.labels.append(label)
    return found


class DecisionReplay:
    """The hindsight-labelled decisions of a run's steps (:func:`hindsight_decisions`), with a buffer of the latest
    ``capacity`` distinct ones (self-imitation, Oh et al. 2018, on the decision token alone).

    :meth:`draw` labels a step's decisions, adds them to the buffer and returns as many drawn uniformly from it, the
    step's own included: the same compute per step, spread over up to ``capacity`` days instead of one step's few.
    A hindsight label is the task's verdict on the day, so it stays right however old the policy that wrote it.
    ``capacity`` 0 returns the step's own decisions. Under several processes each keeps its own buffer of its own
    episodes; a checkpoint holds rank 0's, which every rank of a resumed run starts from.
    """

    FILE = "decision_replay.json"

    def __init__(self, key: tuple[str, str, list[Any]], capacity: int) -> None:
        self.key, self.capacity = key, capacity
        self.entries: dict[tuple[int, ...], tuple[list[int], list[list[int]], int]] = {}  # oldest first

    @classmethod
    def of_env(cls, env: gym.Env, capacity: int) -> DecisionReplay:
        """The replay of ``env``'s decision (:func:`decision_key` of the tools its reset lists); ``ValueError``
        when it has none."""
        _, info = env.reset(seed=0)
        if (key := decision_key(info.get("tools") or [])) is None:
            raise ValueError(
                f"decision_coef needs a boolean or enum tool argument; {env.spec.id if env.spec else env} has none"
            )
        return cls(key, capacity)

    def draw(self, policy: LLMPolicy, episodes: Sequence[Any], generator: torch.Generator) -> DecisionSet:
        """A step's decision batch: its episodes' hindsight decisions, or with a buffer as many drawn from it."""
        found = hindsight_decisions(policy, episodes, self.key)
        if not self.capacity or not len(found):
            return found
        self.add(found)
        return self.sample(len(found), generator)

    def add(self, found: DecisionSet) -> None:
        """Put ``found`` in the buffer as its latest entries, dropping the oldest beyond ``capacity``."""
        for context, continuations, label in zip(found.contexts, found.continuations, found.labels, strict=True):
            key = _replay_key(context, continuations, label)
            self.entries.pop(key, None)  # seen again: now the latest
            self.entries[key] = (context, continuations, label)
        for key in list(self.entries)[: max(0, len(self.entries) - self.capacity)]:
            del self.entries[key]

    def sample(self, n: int, generator: torch.Generator) -> DecisionSet:
        """``n`` distinct entries (all, if fewer), drawn uniformly."""
        entries = list(self.entries.values())
        pick = torch.randperm(len(entries), generator=generator)[:n].tolist()
        drawn = [list(column) for column in zip(*(entries[i] for i in pick), strict=True)] or [[], [], []]
        return DecisionSet(self.key[0], self.key[1], self.key[2], *drawn)

    def save(self, directory: Path) -> None:
        """Write the buffer into a checkpoint ``directory`` (nothing without one)."""
        if self.capacity:
            (directory / self.FILE).write_text(json.dumps([list(entry) for entry in self.entries.values()]))

    def load(self, directory: Path) -> None:
        """Read what :meth:`save` wrote (if it did); ``ValueError`` naming the fault for anything else."""
        file = directory / self.FILE
        if not self.capacity or not file.exists():
            return
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"{file} is over {MAX_FILE_BYTES} bytes: not a decision replay this run wrote")
        entries = json.loads(file.read_text())
        if not isinstance(entries, list) or len(entries) > self.capacity:
            raise ValueError(f"{file} is not a decision replay of at most {self.capacity} entries")
        loaded = {}
        for entry in entries:
            ok = isinstance(entry, list) and len(entry) == 3 and type(entry[2]) is int and isinstance(entry[1], list)
            ids = [entry[0], *entry[1]] if ok else []
            if not ids or not all(isinstance(x, list) and all(type(i) is int for i in x) for x in ids):
                raise ValueError(f"{file}: an entry is not [context ids, value ids per value, label]")
            if not 0 <= entry[2] < len(entry[1]):
                raise ValueError(f"{file}: label {entry[2]} is out of range")
            loaded[_replay_key(*entry)] = (entry[0], entry[1], entry[2])
        self.entries = loaded


def _replay_key(context: list[int], continuations: list[list[int]], label: int) -> tuple[int, ...]:
    """What makes two replayed decisions the same: the context and the labelled value's ids."""
    return (*context, -1, *continuations[label])


def _split_at_value(
    policy: LLMPolicy, action: str, tool: str, argument: str, values: list[Any]
) -> tuple[list[int], list[list[int]], int] | None:
    """Cut a canonical action at the token where its decision value starts: (prefix ids, ids writing each value
    from there, the action's value index), or None when the action does not set the decision."""
    body = action.removeprefix("<tool_call>").removesuffix("</tool_call>")
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or call.get("name") != tool or argument not in (call.get("arguments") or {}):
        return None
    value = call["arguments"][argument]
    if value not in values:
        return None
    marker = f'"{argument}": '
    start = action.find(marker + json.dumps(value, ensure_ascii=False))
    if start < 0:
        return None
    start += len(marker)
    encoded = policy.tokenizer(action, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
    cut = next(i for i, (_, end) in enumerate(offsets) if end > start)  # the first token that writes the value
    head = action[offsets[cut][0] : start]  # e.g. a space the tokenizer merges into the value's token
    continuations = [policy.encode(head + json.dumps(v, ensure_ascii=False)) for v in values]
    return ids[:cut], continuations, values.index(value)


@torch.inference_mode()
def hidden_states(policy: LLMPolicy, contexts: Sequence[Sequence[int]], *, batch_size: int = 32) -> torch.Tensor:
    """Every layer's hidden state (embeddings first) at each context's last token: ``(layers + 1, N, d)``."""
    model, out = policy.model, []
    for start in range(0, len(contexts), batch_size):
        chunk = contexts[start : start + batch_size]
        batch = collate([Sample(list(c), [0] * len(c), [0.0] * len(c)) for c in chunk], policy.pad_id)
        ids, mask = batch["input_ids"].to(policy.device), batch["attention_mask"].to(policy.device)
        states = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        rows, last = torch.arange(len(chunk), device=ids.device), mask.sum(1) - 1
        out.append(torch.stack([h[rows, last] for h in states]).float().cpu())
    return torch.cat(out, dim=1)


@torch.inference_mode()
def policy_choices(policy: LLMPolicy, decisions: DecisionSet, *, batch_size: int = 32) -> torch.Tensor:
    """The value the policy scores highest (sum of its tokens' log-probs) after each context: ``(N,)`` indices."""
    from agentgym.trainers.models.policy import token_logprobs

    scores = torch.zeros(len(decisions), len(decisions.values))
    for k in range(len(decisions.values)):
        sequences = [
            Sample(list(c) + conts[k], [0] * len(c) + [1] * len(conts[k]), [0.0] * (len(c) + len(conts[k])))
            for c, conts in zip(decisions.contexts, decisions.continuations, strict=True)
        ]
        for start in range(0, len(sequences), batch_size):
            batch = collate(sequences[start : start + batch_size], policy.pad_id)
            ids, mask, written = (
                batch[name].to(policy.device) for name in ("input_ids", "attention_mask", "loss_mask")
            )
            logp, _ = token_logprobs(policy.model, ids, mask, written)
            scores[start : start + len(ids), k] = logp.sum(-1).float().cpu()
    return scores.argmax(-1)


@dataclass
class LinearProbe:
    """A multinomial logistic regression on standardised features: ``predict(x) = argmax((x − μ)/σ · W + b)``."""

    mean: torch.Tensor
    scale: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return ((x.double() - self.mean) / self.scale) @ self.weight + self.bias

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x).argmax(-1)


def fit_probe(x: torch.Tensor, y: torch.Tensor, *, classes: int, l2: float = 1e-2, steps: int = 200) -> LinearProbe:
    """Fit :class:`LinearProbe` to features ``x`` (N, d) and labels ``y`` (N,) by L-BFGS on the mean cross-entropy
    plus ``l2`` · ‖W‖² (a convex problem: the optimum, not a training run)."""
    x = x.double()
    mean, scale = x.mean(0), x.std(0).clamp_min(1e-6)
    z = (x - mean) / scale
    weight = torch.zeros(x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(z @ weight + bias, y) + l2 * weight.square().sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    return LinearProbe(mean, scale, weight.detach(), bias.detach())


class ProbeReport(BaseModel):
    """What :func:`probe` measured: held-out probe accuracy per layer (embeddings first) beside the policy's."""

    model_config = ConfigDict(extra="forbid")

    env_id: str
    decision: str = Field(description="The tool argument probed, e.g. answer.suitable.")
    values: list[Any]
    train_contexts: int
    test_contexts: int
    majority: float = Field(description="Test accuracy of always giving the train split's most common value.")
    layers: list[float] = Field(description="Held-out accuracy of each layer's probe, embeddings first.")
    best_layer: int
    best: float
    policy: float = Field(description="The policy's greedy accuracy on the same held-out contexts.")
    policy_train: float = Field(description="... and on the train contexts.")

    @property
    def gap(self) -> float:
        """How far the policy is below its best probe layer (what training has yet to read out)."""
        return self.best - self.policy

    def table(self) -> str:
        rows = [
            f"{self.env_id} · decision {self.decision} {self.values} · {self.train_contexts} train / "
            f"{self.test_contexts} held-out contexts · majority {self.majority:.1%}",
            "layer  held-out probe accuracy",
        ]
        rows += [
            f"{'emb' if i == 0 else i:>5}  {acc:6.1%}{'  <- best' if i == self.best_layer else ''}"
            for i, acc in enumerate(self.layers)
        ]
        rows.append(
            f"policy (greedy) {self.policy:.1%} held-out, {self.policy_train:.1%} train; "
            f"gap to the best layer {self.gap:+.1%}"
        )
        return "\n".join(rows)


def split_decisions(
    policy: LLMPolicy,
    env_id: str,
    config: RolloutConfig,
    *,
    env_kwargs: dict[str, Any] | None = None,
    episodes: int | None = None,
    seed: int = 0,
) -> tuple[DecisionSet, DecisionSet]:
    """Train and held-out decision contexts: the env's train and test splits, or, for an env without splits, its
    distinct contexts of ``episodes`` seeded episodes with a random quarter held out."""
    if "split" in split_kwargs(env_id, "train"):
        return (
            decision_contexts(
                policy, env_id, config, split="train", env_kwargs=env_kwargs, episodes=episodes, seed=seed
            ),
            decision_contexts(policy, env_id, config, split="test", env_kwargs=env_kwargs, seed=seed),
        )
    every = decision_contexts(policy, env_id, config, split=None, env_kwargs=env_kwargs, episodes=episodes, seed=seed)
    distinct = list({tuple(c): i for i, c in enumerate(every.contexts)}.values())
    random.Random(seed).shuffle(distinct)
    held = len(distinct) // 4
    return every.subset(sorted(distinct[held:])), every.subset(sorted(distinct[:held]))


def probe(
    policy: LLMPolicy,
    env_id: str,
    config: RolloutConfig,
    *,
    env_kwargs: dict[str, Any] | None = None,
    episodes: int | None = None,
    seed: int = 0,
    l2: float = 1e-2,
    decisions: tuple[DecisionSet, DecisionSet] | None = None,
) -> ProbeReport:
    """Probe every layer of ``policy`` for ``env_id``'s decision (see the module docstring). ``decisions`` reuses
    contexts already collected with :func:`split_decisions` (they depend on the tokenizer and template only)."""
    train, test = decisions or split_decisions(
        policy, env_id, config, env_kwargs=env_kwargs, episodes=episodes, seed=seed
    )
    if not len(train) or not len(test):
        raise ValueError(f"{env_id}: no decision contexts to fit or to test ({len(train)} train, {len(test)} test)")
    classes = len(train.values)
    y_train, y_test = torch.tensor(train.labels), torch.tensor(test.labels)
    h_train, h_test = hidden_states(policy, train.contexts), hidden_states(policy, test.contexts)
    layers = []
    for layer in range(h_train.shape[0]):
        fitted = fit_probe(h_train[layer], y_train, classes=classes, l2=l2)
        layers.append(float((fitted.predict(h_test[layer]) == y_test).double().mean()))
    best = max(range(len(layers)), key=layers.__getitem__)
    majority = int(torch.bincount(y_train, minlength=classes).argmax())
    return ProbeReport(
        env_id=env_id,
        decision=f"{train.tool}.{train.argument}",
        values=train.values,
        train_contexts=len(train),
        test_contexts=len(test),
        majority=float((y_test == majority).double().mean()),
        layers=layers,
        best_layer=best,
        best=layers[best],
        policy=float((policy_choices(policy, test) == y_test).double().mean()),
        policy_train=float((policy_choices(policy, train) == y_train).double().mean()),
    )
