"""Fill-in-the-middle prompts: a code model trained to write the code between a prefix and a suffix takes them
in a format of its own special tokens, sent as a raw prompt (`ChatRequest.raw`, a server's `/v1/completions`).
The repository-level form puts other files before the one with the hole (each after a file separator), so the
model reads them as files of the same repository."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FimFormat:
    """One model family's fill-in-the-middle tokens."""

    prefix: str
    suffix: str
    middle: str
    file_sep: str
    """Starts each file of the repository-level form (its path on the same line)."""
    repo_name: str
    """Starts the repository-level form (the repository's name on the same line)."""
    stop: tuple[str, ...]
    """Tokens after which a fill is over (the model starts another file, or pads)."""

    def prompt(self, path: str, before: str, after: str, *, repo: str = "",
               files: Sequence[tuple[str, str]] = ()) -> str:
        """The prompt of the hole between `before` and `after` in file `path`, after the other `files` (path,
        text) of repository `repo`."""
        head = f"{self.repo_name}{repo}\n" if repo else ""
        context = "".join(f"{self.file_sep}{name}\n{text.rstrip()}\n" for name, text in files)
        return (f"{head}{context}{self.file_sep}{path}\n"
                f"{self.prefix}{before}{self.suffix}{after}{self.middle}")


FIM_FORMATS: dict[str, FimFormat] = {
    "qwen2.5-coder": FimFormat("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_sep|>",
                               "<|repo_name|>", ("<|file_sep|>", "<|endoftext|>", "<|fim_pad|>", "<|repo_name|>")),
    "starcoder2": FimFormat("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>", "<repo_name>",
                            ("<file_sep>", "<|endoftext|>", "<fim_pad>", "<repo_name>")),
}
"""Formats by model family, as the families' model cards document them."""


def fim_format(model: str) -> FimFormat | None:
    """The format of the family a model spec or file name names (`local:qwen2.5-coder-1.5b`, a path to
    `Qwen2.5-Coder-7B-Q4.gguf`); None for a model of no known family (a chat model has none)."""
    name = model.lower().replace("_", "-")
    return next((fmt for family, fmt in FIM_FORMATS.items() if family in name), None)
