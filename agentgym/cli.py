"""The ``agentgym`` command: list envs, train, evaluate, and run the demo."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
from pydantic import ValidationError

__all__ = ["main"]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"is_slippery\": true}'")
    return value


def _cmd_list(args: argparse.Namespace) -> int:
    from agentgym.registration import ENV_IDS, describe

    width = max(map(len, ENV_IDS))
    for env_id in ENV_IDS:
        print(f"{env_id:<{width}}  {describe(env_id)}")
    return 0


def _setting(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. learning_rate=0.003, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def _cmd_train(args: argparse.Namespace) -> int:
    if args.algorithm in ("sft", "grpo"):
        args.env = args.env or "agentgym/WeatherRun-v0"
        return _cmd_train_llm(args)
    from agentgym.runs import train

    args.env = args.env or "agentgym/CliffWalk-v0"
    hyper = {k: v for k in ("alpha", "gamma", "epsilon") if (v := getattr(args, k)) is not None}
    hyper.update(dict(args.set))
    budget = args.timesteps if args.algorithm == "ppo" else (args.episodes or 500)
    agent, rows = train(
        args.algorithm,
        args.env,
        args.out,
        budget=budget,
        seed=args.seed,
        env_kwargs=args.env_kwargs,
        progress_bar=not args.no_progress,
        **hyper,
    )
    successes = [row["success"] for row in rows[-100:]]
    print(
        f"{len(rows)} episodes; success over the last {len(successes)}: {sum(successes) / max(len(successes), 1):.0%}; "
        f"greedy return from the seed's start: {agent.greedy_return():g}"
    )
    print(f"wrote {args.out}/: config.json metrics.jsonl metrics.csv learning_curve.png and the checkpoint")
    return 0


def _resolve_model(spec: str, out: Path, seed: int) -> str:
    """``tiny`` builds the local tiny model under ``out/tiny``; anything else is a path or hub id."""
    if spec != "tiny":
        return spec
    from agentgym.tiny_model import build_tiny_model

    print(f"building the tiny model and tokenizer in {out / 'tiny'} ...", flush=True)
    return str(build_tiny_model(out / "tiny", seed=seed))


def _cmd_train_llm(args: argparse.Namespace) -> int:
    from agentgym.recipes import tiny_overrides
    from agentgym.trainers.grpo import GRPO, GRPOConfig
    from agentgym.trainers.sft import SFT, SFTConfig

    config_cls = SFTConfig if args.algorithm == "sft" else GRPOConfig
    recipe = args.recipe or ("tiny" if args.model == "tiny" else "default")
    values: dict[str, Any] = tiny_overrides(args.algorithm, args.env) if recipe == "tiny" else {"env_id": args.env}
    if args.env_kwargs:
        values["env_kwargs"] = args.env_kwargs
    budget = "episodes" if args.algorithm == "sft" else "steps"
    if (n := args.episodes if args.algorithm == "sft" else args.steps) is not None:
        values[budget] = n
    for key, value in args.set:
        head, _, tail = key.partition(".")
        if tail:  # nested, e.g. rollout.max_new_tokens=48
            values[head] = {**values.get(head, {}), tail: value}
        else:
            values[key] = value
    config = config_cls.model_validate({**values, "seed": args.seed})  # fails here, before any model loads
    out = Path(args.out)
    if args.algorithm == "grpo" and args.resume:
        trainer = GRPO.resume(out)
        rows = trainer.learn(config.steps, progress_bar=not args.no_progress)
    else:
        model = _resolve_model(args.model, out, args.seed)
        trainer = (SFT if args.algorithm == "sft" else GRPO)(model, config, out_dir=out)
        rows = trainer.learn(progress_bar=not args.no_progress)
    last = {k: v for row in rows for k, v in row.items() if k.startswith("eval_")}
    if last:
        print(
            f"test split: success {last['eval_success']:.0%}, format compliance {last['eval_format_compliance']:.0%}, "
            f"tool-call validity {last['eval_tool_call_validity']:.0%} ({last['eval_episodes']:g} episodes)"
        )
    print(f"wrote {out}/: config.json metrics.jsonl metrics.csv learning_curve.png final/ (load it with --model)")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from agentgym.evaluation import evaluate, make_agent

    env = gym.make(args.env, **args.env_kwargs)
    agent, env = make_agent(args.agent, env, seed=args.seed)
    report = evaluate(agent, env, episodes=args.episodes, seed=args.seed, agent=args.agent)
    text = report.model_dump_json(indent=2)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(text + "\n")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from agentgym.envs.weather_server import WeatherServer

    server = WeatherServer(args.snapshot, host=args.host, port=args.port)
    print(f"serving {args.snapshot} at {server.url} (GET /v1/weather, /v1/air-quality; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from agentgym.demo import run_demo

    run_demo(args.out, episodes=args.episodes, seed=args.seed, llm_steps=args.llm_steps)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentgym", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list the registered environments").set_defaults(fn=_cmd_list)

    p = sub.add_parser(
        "train",
        help="train Q-learning, SARSA, REINFORCE or PPO (discrete view), or a language model with SFT or GRPO",
    )
    p.add_argument("algorithm", choices=["q-learning", "sarsa", "reinforce", "ppo", "sft", "grpo"])
    p.add_argument("--env", default=None, help="env id (default CliffWalk-v0; WeatherRun-v0 for sft/grpo)")
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON object passed to gym.make")
    p.add_argument(
        "--episodes", type=int, help="training episodes (q-learning, sarsa, reinforce: default 500; sft: demos)"
    )
    p.add_argument("--timesteps", type=int, default=50_000, help="training env steps (ppo)")
    p.add_argument("--steps", type=int, help="training steps (grpo)")
    p.add_argument("--model", default="tiny", help="sft/grpo: tiny (built locally), a model directory or a hub id")
    p.add_argument(
        "--recipe", choices=["tiny", "default"], help="sft/grpo settings: tiny-model recipe (default with --model tiny)"
    )
    p.add_argument("--resume", action="store_true", help="grpo: continue the run in --out from its last checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gamma", type=float, help="discount factor")
    p.add_argument("--alpha", type=float, help="tabular learning rate (default 0.1)")
    p.add_argument("--epsilon", type=float, help="tabular exploration rate (default 0.1)")
    p.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any field of the algorithm's config, e.g. --set learning_rate=0.003 (repeatable)",
    )
    p.add_argument("--out", default="runs/train")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(fn=_cmd_train)

    p = sub.add_parser("eval", help="evaluate an agent on an environment")
    p.add_argument("--env", default="agentgym/CliffWalk-v0")
    p.add_argument("--env-kwargs", type=_json_object, default={})
    p.add_argument("--agent", required=True, help="random | oracle | qtable:PATH | torch:PATH")
    p.add_argument("--episodes", type=int, help="default: every task of a fixed task list once, else 10")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="also write DIR/summary.json")
    p.set_defaults(fn=_cmd_eval)

    p = sub.add_parser("serve", help="serve data over HTTP (the weather API WeatherRun's http backend reads)")
    p.add_argument("service", choices=["weather"])
    p.add_argument("--snapshot", default=None, help="snapshot JSONL (default: the shipped -v0 table)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(fn=_cmd_serve)

    p = sub.add_parser("demo", help="Q-learning vs SARSA on CliffWalk, WeatherRun, and a tiny LLM, with plots")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--episodes", type=int, default=500)
    p.add_argument("--llm-steps", type=int, default=10, help="GRPO steps of the tiny-LLM lesson (0 skips it)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"agentgym: invalid setting: {problems}", file=sys.stderr)
    except (ValueError, TypeError, NotImplementedError, OSError, gym.error.Error) as exc:
        print(f"agentgym: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
