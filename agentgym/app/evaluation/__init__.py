"""Benchmarking agents: ``runner`` (play an agent on an env and summarise, resumable: ``evaluate_agent``, the
in-memory ``evaluate``, ``evaluate_suite``), ``benchmark`` (a served benchmark that keeps the answer key),
``reports`` (run directories on disk, tables and plots) and ``audit`` (episode logs checked for reward hacks)."""
