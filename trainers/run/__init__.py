"""What every training run writes: ``run_dir`` (the run directory), ``metrics`` (JSONL, CSV, TensorBoard),
``plotting`` (learning curves) and ``checkpoint`` (resumable LLM checkpoints)."""
