"""Numeracy drills (``tiny_corpus``) and the probes of a base's numeracy (``agentgym.trainers.llm.numeracy``)."""

from __future__ import annotations

import itertools
import operator
import random
import re

import gymnasium as gym

import agentgym  # noqa: F401  (registers the ids)
from agentgym.core.registration import ENV_IDS
from agentgym.envs.weather.dataset import load_snapshot
from agentgym.trainers.llm.numeracy import hidden_rule_probe
from agentgym.trainers.models.policy import LLMPolicy
from agentgym.trainers.models.tiny_corpus import (
    NUMERACY_LEVELS,
    RESERVED_THRESHOLDS,
    CorpusMix,
    chat_documents,
    numeracy_task,
)

COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def test_numeracy_drills_never_mention_a_task_its_tools_or_its_thresholds():
    tool_names = {name for env_id in ENV_IDS for name in gym.make(env_id).unwrapped.tools}
    cities = {record.city for record in load_snapshot()}
    docs = chat_documents(0, CorpusMix(numeracy=1.0))  # every chat a numeracy drill
    text = "\n".join(m["content"] for doc in itertools.islice(docs, 3000) for m in doc)
    words = set(re.findall(r"[\w-]+", text))
    assert "true when" in text and "<tool_call>" in text  # they are drills: stated rules, decided by a call
    assert not tool_names & words, tool_names & words
    assert not [city for city in cities if city in text]
    assert not {"temp", "AQI", "aqi", "city", "weather", "quality", "suitable"} & words
    rng = random.Random(1)
    thresholds = {t for _ in range(3000) for c in numeracy_task(rng).clauses for t in c.thresholds()}
    assert len(thresholds) > 1000 and not thresholds & RESERVED_THRESHOLDS  # WeatherRun's 10, 25 and 100 never


def test_a_numeracy_task_decides_what_its_values_say_and_what_was_asked():
    rng = random.Random(0)
    for level, want in itertools.product(range(NUMERACY_LEVELS), (True, False)):
        for _ in range(200):
            task = numeracy_task(rng, level=level, truth=want)
            held = [
                c.low <= task.values[c.index] <= c.high if c.op == "in" else COMPARE[c.op](task.values[c.index], c.low)
                for c in task.clauses
            ]
            assert task.truth == (any(held) if task.any_of else all(held)) == want, task
            if level == 0:  # whole numbers from 0, one clause
                assert len(task.clauses) == 1 and all(v == int(v) >= 0 for v in task.values)


def test_the_hidden_rule_probe_learns_a_rule_from_reward_alone():
    """From the shipped base, a policy gradient on a never-stated two-quantity rule: from chance to well above it on
    some seed of 3 (seed 0: 49 % → 83–88 % after 40–50 steps; seed 2 collapses to one answer, 47 %: the base brings
    no sense of magnitude, the finding ``benchmarks/README.md`` reports)."""
    curves = []
    for seed in range(3):
        result = hidden_rule_probe(
            LLMPolicy.from_pretrained("tiny"), seed=seed, steps=60, eval_contexts=200, target=None
        )
        curves.append(result.curve)
        if result.curve[0][1] < 0.62 and max(accuracy for _, accuracy in result.curve[1:]) >= 0.75:
            return
    raise AssertionError(f"no seed of 3 learnt the hidden rule: {curves}")
