"""agentgym with other tools: ``trl`` (the envs in TRL's GRPOTrainer), ``openai_agent`` (an agent behind an
OpenAI-compatible endpoint) and ``flywheel`` (recorded episodes back into training data)."""
