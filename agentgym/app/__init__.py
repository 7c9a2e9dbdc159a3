"""The applications on top of the tasks and the learners: evaluation and reports (``evaluation``,
``reports``, ``openai_agent``), servers (``weather_server``, ``model_server`` on ``http_service``), the
``demo``, the tiny-model ``recipes``, ``audit`` and the TRL integration (``trl``). ``agentgym.cli`` is the
face over them. Each module imports its heavy dependencies only when imported itself."""
