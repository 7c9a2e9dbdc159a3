"""The ``agentgym`` command: list envs, train, evaluate, and run the demo."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
from pydantic import ValidationError

from agentgym.trainers import TRAINERS, TrainerSpec

__all__ = ["main"]

BUDGET_FLAGS = ("episodes", "timesteps", "steps", "rounds", "tasks")
"""The training-length flags; each sets the config field (or, for the classic learners, the budget) of its name."""

RENAMED_FLAGS = {("dpo", "steps"): "rounds", ("reward-model", "episodes"): "tasks"}
"""Old meanings kept for one version: ``train dpo --steps N`` set ``rounds``, ``train reward-model --episodes N``
set ``tasks``; each prints a deprecation note."""


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"is_slippery\": true}'")
    return value


def _check_env_kwargs(env_id: str, kwargs: dict[str, Any] | None, where: str = "--env-kwargs") -> None:
    """A keyword the env does not take is the user's mistake: a one-line ``ValueError`` naming it and what the env
    takes (``gym.make`` would raise a ``TypeError``, which :func:`main` leaves to show real bugs' tracebacks)."""
    if not kwargs:
        return
    try:
        creator = gym.spec(env_id).entry_point
    except gym.error.Error:
        return  # an unknown id: gym.make says so itself
    if isinstance(creator, str):
        creator = gym.envs.registration.load_env_creator(creator)
    params = {**inspect.signature(creator).parameters, **inspect.signature(gym.make).parameters}
    if any(p.kind is p.VAR_KEYWORD for name, p in params.items() if name != "kwargs"):
        return
    if unknown := [k for k in kwargs if k not in params or k in ("id", "kwargs")]:
        takes = ", ".join(inspect.signature(creator).parameters)
        raise ValueError(f"{env_id}: unexpected keyword argument {unknown[0]!r} in {where} (it takes {takes})")


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


def _budget_settings(spec: TrainerSpec, args: argparse.Namespace, fields: set[str]) -> dict[str, int]:
    """The budget flags given, as ``{field: value}``: a flag sets the field of its own name. A flag the trainer
    has no field for is a one-line error; a renamed one still works, with a note."""
    values = {}
    for flag in BUDGET_FLAGS:
        if (n := getattr(args, flag)) is None:
            continue
        field = flag
        if (spec.name, flag) in RENAMED_FLAGS:
            field = RENAMED_FLAGS[spec.name, flag]
            note = f"agentgym: train {spec.name} --{flag} is deprecated: it sets {field}; use --{field}"
            print(note, file=sys.stderr)
        if field not in fields:
            usable = ", ".join(f"--{f}" for f in BUDGET_FLAGS if f in fields) or "--set"
            raise ValueError(f"--{flag} is not a setting of {spec.name} (its budget flags: {usable})")
        values[field] = n
    return values


def _cmd_train(args: argparse.Namespace) -> int:
    spec = TRAINERS[args.algorithm]
    if spec.llm:
        args.env = args.env or "agentgym/WeatherRun-v0"
        return _cmd_train_llm(spec, args)
    from agentgym.trainers.runs import train

    args.env = args.env or "agentgym/CliffWalk-v0"
    _check_env_kwargs(args.env, args.env_kwargs)
    hyper = {k: v for k in ("alpha", "gamma", "epsilon") if (v := getattr(args, k)) is not None}
    hyper.update(dict(args.set))
    budget = _budget_settings(spec, args, {spec.budget}).get(spec.budget)
    if budget is None:
        budget = 50_000 if spec.budget == "timesteps" else 500
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


def _cmd_train_llm(spec: TrainerSpec, args: argparse.Namespace) -> int:
    from agentgym.app.recipes import tiny_overrides

    trainer_cls, config_cls = spec.load()
    stage = args.algorithm.removeprefix("llm-")
    recipe = args.recipe or ("tiny" if args.model == "tiny" else "default")
    values: dict[str, Any] = tiny_overrides(stage, args.env) if recipe == "tiny" else {"env_id": args.env}
    if args.env_kwargs:
        values["env_kwargs"] = args.env_kwargs
    values.update(_budget_settings(spec, args, set(config_cls.model_fields)))
    for key, value in args.set:
        head, _, tail = key.partition(".")
        if tail:  # nested, e.g. rollout.max_new_tokens=48
            group = values.get(head, {})
            if not isinstance(group, dict):
                raise ValueError(f"--set {key}: {head} is set to {group!r}, not a group of settings")
            values[head] = {**group, tail: value}
        else:
            values[key] = value
    config = config_cls.model_validate({**values, "seed": args.seed})  # fails here, before any model loads
    _check_env_kwargs(config.env_id, config.env_kwargs, "env_kwargs")
    _check_env_kwargs(config.env_id, getattr(config, "eval_env_kwargs", None), "eval_env_kwargs")
    out = Path(args.out)
    if args.resume:
        if not hasattr(trainer_cls, "resume"):
            raise ValueError(f"--resume works for sft, grpo and llm-ppo runs, not {args.algorithm}")
        trainer = trainer_cls.resume(out)
        more = {"steps": config.steps} if spec.budget == "steps" else {}
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

    _check_env_kwargs(args.env, args.env_kwargs)
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
        _check_env_kwargs(args.env, args.env_kwargs)
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
    p.add_argument("algorithm", choices=list(TRAINERS))
    p.add_argument("--env", default=None, help="env id (default CliffWalk-v0; WeatherRun-v0 for language models)")
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON object passed to gym.make")
    p.add_argument(
        "--episodes", type=int, help="episodes played: q-learning, sarsa, reinforce (default 500); sft: demonstrations"
    )
    p.add_argument("--timesteps", type=int, help="training env steps (ppo; default 50000)")
    p.add_argument("--steps", type=int, help="training steps (grpo, llm-ppo)")
    p.add_argument("--rounds", type=int, help="dpo: rounds of fresh pairs (iterative DPO)")
    p.add_argument("--tasks", type=int, help="dpo, reward-model: task instances played for rollout pairs")
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
    """Run the command; an error the user caused (a bad setting, path or env id) is one line on stderr and exit
    status 2. Anything else is a bug and keeps its traceback."""
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"agentgym: invalid setting: {problems}", file=sys.stderr)
    except (ValueError, NotImplementedError, OSError, gym.error.Error) as exc:
        print(f"agentgym: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
