"""Which rule does a WeatherRun policy follow? Its greedy decisions on the 100 frozen test days, by clause.

For each model: accuracy, the share of "suitable" answers in each cell of (temperature in 10–25 °C) ×
(AQI < 100), and how often its answers agree with the full rule and with partial ones (AQI only, temperature
only, one bound of the interval and AQI, always yes / no). A policy stuck on a partial rule agrees with it
more than with the full rule.

    python benchmarks/weather_clauses.py runs/grpo/final [runs/grpo/checkpoints/step-000050 ...]
"""

from __future__ import annotations

import argparse
import collections
import re

import torch

from agentgym.app.recipes import TINY
from agentgym.trainers.llm.probe import decision_contexts, policy_choices
from agentgym.trainers.llm.rollout import RolloutConfig
from agentgym.trainers.models.policy import LLMPolicy

RULES = {
    "full": lambda t, a: 10 <= t <= 25 and a < 100,
    "AQI only": lambda t, a: a < 100,
    "temperature only": lambda t, a: 10 <= t <= 25,
    "≥ 10 °C and AQI": lambda t, a: t >= 10 and a < 100,
    "≤ 25 °C and AQI": lambda t, a: t <= 25 and a < 100,
    "always yes": lambda t, a: True,
    "always no": lambda t, a: False,
}


def clauses(path: str) -> None:
    policy = LLMPolicy.from_pretrained(path)
    test = decision_contexts(policy, "agentgym/WeatherRun-v0", RolloutConfig(**TINY["grpo"]["rollout"]), split="test")
    said = [test.values[c] is True for c in policy_choices(policy, test).tolist()]
    cells: collections.Counter = collections.Counter()
    agree: collections.Counter = collections.Counter()
    wrong = []
    for context, yes in zip(test.contexts, said, strict=True):
        t, a = re.findall(r"temp (-?[\d.]+)°C · AQI (\d+)", policy.tokenizer.decode(context))[-1]
        t, a = float(t), int(a)
        cells[(10 <= t <= 25, a < 100, yes)] += 1
        agree.update(name for name, rule in RULES.items() if rule(t, a) == yes)
        if RULES["full"](t, a) != yes:
            wrong.append((t, a, yes))
    n = len(said)
    print(f"{path}: accuracy {agree['full'] / n:.0%} on {n} test days")
    for t_ok in (True, False):
        for a_ok in (True, False):
            yes, days = cells[(t_ok, a_ok, True)], cells[(t_ok, a_ok, True)] + cells[(t_ok, a_ok, False)]
            print(f"  temperature ok {t_ok!s:5}  AQI ok {a_ok!s:5}: says suitable on {yes} of {days}")
    print("  agrees with: " + ", ".join(f"{name} {agree[name] / n:.0%}" for name in RULES))
    near = sum(min(abs(t - 10), abs(t - 25)) <= 2 or abs(a - 100) <= 10 for t, a, _ in wrong)
    print(f"  {len(wrong)} wrong, {near} of them within 2 °C or 10 AQI of a threshold:")
    print("    " + ", ".join(f"{t:g} °C AQI {a} said {'yes' if yes else 'no'}" for t, a, yes in sorted(wrong)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="model directories (a run's final/ or checkpoints/step-N)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for path in args.models:
        clauses(path)


if __name__ == "__main__":
    main()
