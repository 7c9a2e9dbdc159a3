"""Train a language model to write code with TRL's ``GRPOTrainer`` on CodeSandbox; the reward is the env's own:
the fraction of the task's hidden unit tests the submitted code passes, run in the sandbox.

agentgym runs the agent loop (``agentgym.app.integrations.trl.AgentGymRollout``: any call format, any chat template): the model
may ``run_python`` and ``run_tests`` on the visible tests before it ``submit``s; the sandbox's replies are masked out
of the loss, and the episode's return reaches TRL as the ``env_return`` reward.

What a tiny CPU model can do here: nothing useful. The shipped ~1 M-parameter base has never seen Python, and
CodeSandbox's tests pass only for a correct function, so its reward stays at 0 and GRPO gets no signal. This task
needs a code model of 0.5 B parameters or more, on a GPU.

GPU recipe (one 24 GB+ GPU; `pip install "agentgym-suite[trl]"`; a 0.5-1.5 B instruct code model such as
``Qwen/Qwen2.5-Coder-1.5B-Instruct``; bf16; CodeSandbox-v1's 184 training problems; test with
``agentgym eval --env CodeSandbox-v1 --split test --agent hf:runs/trl-code``)::

    python examples/trl_codesandbox.py --model Qwen/Qwen2.5-Coder-1.5B-Instruct --steps 300 --bf16 \\
        --learning-rate 1e-6 --generations 8 --batch 8 --out runs/trl-code

Scale out with ``accelerate launch --num_processes N examples/trl_codesandbox.py ...`` (see ``agentgym.app.integrations.trl``).
Run here on 2 CPU cores with the tiny base, 2 steps (tested by ``tests/test_trl_integration.py``; ~1 min)::

    python examples/trl_codesandbox.py --model tiny --steps 2 --out runs/trl-code-tiny
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

ENV = "agentgym/CodeSandbox-v1"


def build_trainer(
    model: str,
    *,
    steps: int,
    out: str,
    generations: int = 4,
    batch: int = 4,
    learning_rate: float = 1e-6,
    bf16: bool = False,
    max_new_tokens: int = 256,
    tasks: int | None = None,
    generation_kwargs: dict[str, Any] | None = None,
) -> Any:
    """A ``trl.GRPOTrainer`` on CodeSandbox's train split: ``batch`` episodes a step (``batch // generations``
    problems, ``generations`` attempts each), up to 4 turns of ``max_new_tokens``, rewarded by the hidden tests."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from agentgym.app.integrations.trl import AgentGymRollout, env_return, make_dataset
    from agentgym.trainers.models.policy import resolve_model_source

    source = resolve_model_source(model)  # "tiny" is the shipped base
    cpu = not torch.cuda.is_available()
    args = GRPOConfig(
        output_dir=out,
        max_steps=steps,
        per_device_train_batch_size=batch,
        num_generations=generations,
        max_completion_length=4 * max_new_tokens,
        learning_rate=learning_rate,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=cpu,
        bf16=bf16 and not cpu,
        seed=0,
        generation_kwargs=generation_kwargs,
    )
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16 if args.bf16 else torch.float32),
        reward_funcs=[env_return],  # the episode's return: the hidden-test pass fraction at submit
        args=args,
        train_dataset=make_dataset(ENV, "train", n=tasks),
        processing_class=AutoTokenizer.from_pretrained(source),
        rollout_func=AgentGymRollout(ENV, "train", max_new_tokens=max_new_tokens, max_turns=4),
    )


def main(argv: Sequence[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a local path, a hub id, or tiny (the shipped base)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", default="runs/trl-code")
    parser.add_argument("--generations", type=int, default=4, help="attempts per problem (the GRPO group)")
    parser.add_argument("--batch", type=int, default=4, help="episodes per step and device")
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="tokens per turn")
    args = parser.parse_args(argv)
    trainer = build_trainer(
        args.model,
        steps=args.steps,
        out=args.out,
        generations=args.generations,
        batch=args.batch,
        learning_rate=args.learning_rate,
        bf16=args.bf16,
        max_new_tokens=args.max_new_tokens,
    )
    trainer.train()
    trainer.save_model(args.out)
    return trainer


if __name__ == "__main__":
    main()
