"""The models the LLM trainers train: ``policy`` (a Hugging Face causal LM as a policy), ``decoding`` (its fast
KV-cache sampler), ``tiny_model`` (the shipped tiny base in ``tiny_base/`` and test models, pretrained on
``tiny_corpus``) and ``smollm2`` (SmolLM2-135M-Instruct offline)."""
