"""The applications, on top of the tasks and the learners: ``serving`` (the env, MCP, model and weather servers and
the episode viewer), ``evaluation`` (the benchmark runner, its reports and the audit), ``integrations`` (TRL,
OpenAI-compatible agents, the data flywheel), the ``demo``, the tiny-model ``recipes``, and ``cli``, the
``agentgym`` command over them. Each module imports its heavy dependencies only when imported itself."""
