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
    if args.algorithm in LLM_TRAINERS:
        args.env = args.env or "agentgym/WeatherRun-v0"
        return _cmd_train_llm(args)
    from agentgym.trainers.runs import train

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


def _resolve_model(spec: str) -> str:
    """``tiny`` is the shipped tiny base model; anything else is a path or hub id."""
    if spec != "tiny":
        return spec
    from agentgym.trainers.tiny_model import base_model_path

    return str(base_model_path())


LLM_TRAINERS = {  # CLI name: (module, trainer, config, the config field --steps/--episodes sets, that flag)
    "sft": ("sft", "SFT", "SFTConfig", "episodes", "episodes"),
    "grpo": ("grpo", "GRPO", "GRPOConfig", "steps", "steps"),
    "llm-ppo": ("llm_ppo", "LLMPPO", "LLMPPOConfig", "steps", "steps"),
    "dpo": ("dpo", "DPO", "DPOConfig", "rounds", "steps"),
    "reward-model": ("reward_model", "RewardModelTrainer", "RewardModelConfig", "tasks", "episodes"),
}


def _cmd_train_llm(args: argparse.Namespace) -> int:
    import importlib

    from agentgym.app.recipes import tiny_overrides

    module, trainer_name, config_name, budget, flag = LLM_TRAINERS[args.algorithm]
    module = importlib.import_module(f"agentgym.trainers.{module}")
    trainer_cls, config_cls = getattr(module, trainer_name), getattr(module, config_name)
    stage = args.algorithm.removeprefix("llm-")
    recipe = args.recipe or ("tiny" if args.model == "tiny" else "default")
    values: dict[str, Any] = tiny_overrides(stage, args.env) if recipe == "tiny" else {"env_id": args.env}
    if args.env_kwargs:
        values["env_kwargs"] = args.env_kwargs
    if (n := getattr(args, flag)) is not None:
        values[budget] = n
    for key, value in args.set:
        head, _, tail = key.partition(".")
        if tail:  # nested, e.g. rollout.max_new_tokens=48
            values[head] = {**values.get(head, {}), tail: value}
        else:
            values[key] = value
    config = config_cls.model_validate({**values, "seed": args.seed})  # fails here, before any model loads
    out = Path(args.out)
    if args.resume:
        if not hasattr(trainer_cls, "resume"):
            raise ValueError(f"--resume works for sft, grpo and llm-ppo runs, not {args.algorithm}")
        trainer = trainer_cls.resume(out)
        more = {"steps": config.steps} if budget == "steps" else {}
        rows = trainer.learn(**more, progress_bar=not args.no_progress)
    else:
        trainer = trainer_cls(_resolve_model(args.model), config, out_dir=out)
        rows = trainer.learn(progress_bar=not args.no_progress)
    last = {k: v for row in rows for k, v in row.items() if k.startswith("eval_")}
    if "eval_accuracy" in last:
        print(f"held-out pairs: accuracy {last['eval_accuracy']:.0%}, margin {last['eval_margin']:.3g}")
    elif "eval_success" in last:
        print(
            f"test split: success {last['eval_success']:.0%}, format compliance {last['eval_format_compliance']:.0%}, "
            f"tool-call validity {last['eval_tool_call_validity']:.0%} ({last['eval_episodes']:g} episodes)"
        )
    print(f"wrote {out}/: config.json metrics.jsonl metrics.csv learning_curve.png final/ (load it with --model)")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from agentgym.app.evaluation import evaluate_agent

    summary = evaluate_agent(
        args.env,
        args.agent,
        episodes=args.episodes,
        seed=args.seed,
        split=args.split,
        env_kwargs=args.env_kwargs,
        out_dir=args.out,
        resume=args.resume,
        concurrency=args.concurrency,
        sampling=args.sampling,
        api_key_env=args.api_key_env,
        progress_bar=not args.no_progress,
    )
    print(summary.model_dump_json(indent=2))
    if args.out:
        print(f"wrote {args.out}/: run.json episodes.jsonl summary.json", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from agentgym.app.reports import compare_runs, markdown_table, plot_success

    runs = compare_runs(args.runs)
    print(markdown_table(runs))
    path = plot_success(runs, args.plot)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    if args.service == "model":
        return _serve_model(args)
    from agentgym.app.weather_server import WeatherServer

    server = WeatherServer(args.snapshot, host=args.host, port=args.port)
    print(f"serving {args.snapshot} at {server.url} (GET /v1/weather, /v1/air-quality; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _serve_model(args: argparse.Namespace) -> int:
    from agentgym.app.model_server import LLMResponder, ModelServer, ScriptedResponder

    if args.scripted:
        if not args.env:
            raise ValueError("--scripted oracle needs --env ID (whose oracle answers)")
        responder: Any = ScriptedResponder(args.env, split=args.split, env_kwargs=args.env_kwargs)
        what = f"{args.env}'s oracle"
    elif args.model:
        responder = LLMResponder.from_pretrained(args.model, max_new_tokens=args.max_new_tokens)
        what = args.model
    else:
        raise ValueError("serve model needs --model PATH_OR_HUB_ID or --scripted oracle --env ID")
    server = ModelServer(responder, host=args.host, port=args.port, latency_ms=args.latency_ms)
    print(f"serving {what} at {server.url} (POST /chat/completions, GET /models; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from agentgym.app.demo import run_demo

    run_demo(args.out, episodes=args.episodes, seed=args.seed, llm_steps=args.llm_steps)
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from agentgym.app.audit import audit_run, format_audit

    report = audit_run(args.run_dir, quantile=args.quantile, top=args.top)
    print(report.model_dump_json(indent=2) if args.json else format_audit(report))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentgym", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list the registered environments").set_defaults(fn=_cmd_list)

    p = sub.add_parser(
        "train",
        help="train Q-learning, SARSA, REINFORCE or PPO (discrete view), or a language model (sft, grpo, llm-ppo, ...)",
    )
    p.add_argument("algorithm", choices=["q-learning", "sarsa", "reinforce", "ppo", *LLM_TRAINERS])
    p.add_argument("--env", default=None, help="env id (default CliffWalk-v0; WeatherRun-v0 for language models)")
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON object passed to gym.make")
    p.add_argument(
        "--episodes",
        type=int,
        help="q-learning, sarsa, reinforce: training episodes (default 500); sft: demos; reward-model: tasks",
    )
    p.add_argument("--timesteps", type=int, default=50_000, help="training env steps (ppo)")
    p.add_argument("--steps", type=int, help="training steps (grpo, llm-ppo; dpo: rounds)")
    p.add_argument(
        "--model", default="tiny", help="LLMs: tiny (the shipped tiny base model), a model directory or a hub id"
    )
    p.add_argument(
        "--recipe", choices=["tiny", "default"], help="LLMs: the tiny-model recipe (default with --model tiny)"
    )
    p.add_argument(
        "--resume", action="store_true", help="sft/grpo/llm-ppo: continue the run in --out from its last checkpoint"
    )
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

    p = sub.add_parser(
        "eval",
        help="benchmark an agent on an environment: episodes.jsonl, summary.json with CIs (prints the summary)",
    )
    p.add_argument("--env", default="agentgym/CliffWalk-v0")
    p.add_argument("--split", help="the env's split (train, test, ...) for envs that have one")
    p.add_argument("--env-kwargs", type=_json_object, default={})
    p.add_argument(
        "--agent",
        required=True,
        help="random | oracle | qtable:PATH | torch:PATH | hf:PATH_OR_HUB_ID | openai:MODEL@BASE_URL",
    )
    p.add_argument("--episodes", type=int, help="default: every task of a fixed task list once, else 10")
    p.add_argument("--seed", type=int, default=0, help="episode i is reset with seed + i")
    p.add_argument("--out", help="run directory: run.json, episodes.jsonl (appended per episode), summary.json")
    p.add_argument("--resume", action="store_true", help="continue the run in --out; finished episodes are skipped")
    p.add_argument("--concurrency", type=int, default=8, help="openai: requests in flight; hf: batch size (default 8)")
    p.add_argument(
        "--sampling",
        type=_json_object,
        default={},
        help='hf/openai settings as JSON, e.g. \'{"temperature": 0, "max_tokens": 256}\' (hf: max_new_tokens, '
        "context, ...)",
    )
    p.add_argument("--api-key-env", help="openai: environment variable holding the API key (default OPENAI_API_KEY)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(fn=_cmd_eval)

    p = sub.add_parser("report", help="compare eval runs: a Markdown table and a success bar chart")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="directories written by agentgym eval --out")
    p.add_argument("--plot", default="report.png", help="where to write the bar chart (default report.png)")
    p.set_defaults(fn=_cmd_report)

    p = sub.add_parser(
        "serve",
        help="serve over HTTP: the weather API (WeatherRun's http backend), or a model as an OpenAI-compatible API",
    )
    p.add_argument("service", choices=["weather", "model"])
    p.add_argument("--snapshot", default=None, help="weather: snapshot JSONL (default: the shipped -v0 table)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", help="model: a from_pretrained directory or hub id")
    p.add_argument("--max-new-tokens", type=int, default=256, help="model: response length when a request sets none")
    p.add_argument("--scripted", choices=["oracle"], help="model: answer with the --env's oracle instead of a model")
    p.add_argument("--env", help="model --scripted: the env whose oracle answers")
    p.add_argument("--split", help="model --scripted: the env's split (the oracle knows its tasks)")
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="model --scripted: JSON for gym.make")
    p.add_argument("--latency-ms", type=float, default=0.0, help="model: answer each request after this long")
    p.set_defaults(fn=_cmd_serve)

    p = sub.add_parser("demo", help="Q-learning vs SARSA on CliffWalk, WeatherRun, and a tiny LLM, with plots")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--episodes", type=int, default=500)
    p.add_argument("--llm-steps", type=int, default=10, help="GRPO steps of the tiny-LLM lesson (0 skips it)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=_cmd_demo)

    p = sub.add_parser(
        "audit", help="reward-hacking audit: the top-reward training episodes that fail the rules or look odd"
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a GRPO/PPO run directory (reads its episodes.jsonl)")
    p.add_argument("--quantile", type=float, default=0.9, help="audit episodes whose reward is at least this quantile")
    p.add_argument("--top", type=int, default=20, help="list at most this many flagged episodes")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=_cmd_audit)
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
