"""Model-written bug rewrites (`--rewrite-model`): a model is given one function and asked to give it back
with one subtle bug. The answer becomes a candidate like a procedural mutation (the function's lines
replaced) only when it parses, keeps the function's name, and changes its syntax tree; the tests then decide
whether it is kept. The functions asked about are picked by the seed; the request is made at temperature 0
with the seed, so a deterministic model (a replay cassette, a test model) gives the same candidates again.
"""

from __future__ import annotations

import ast
import random
import textwrap

from agentflow.models.ask import ask, code_block
from agentflow.models.templates import package_templates
from agentflow.pysyntax import parsed
from agentflow.synth.hide import definition_span, indent_of
from agentflow.synth.mutate import Mutation, _functions

PROMPTS = package_templates(__file__)
"""The bug rewriter's prompts (`prompts/*.j2`)."""
_MIN_LINES, _MAX_LINES = 3, 60


def rewrite_targets(texts: dict[str, str]) -> list[tuple[str, str, int, int]]:
    """(path, qualified name, first line, last line) of every function a rewrite may replace, in file order."""
    out = []
    for path in sorted(texts):
        tree = parsed(texts[path])
        if tree is None:
            continue
        for qualname, func in _functions(tree):
            start, end = definition_span(func)
            if _MIN_LINES <= end - start + 1 <= _MAX_LINES:
                out.append((path, qualname, start, end))
    return out


def rewritten(path: str, qualname: str, start: int, end: int, text: str, answer: str) -> Mutation | None:
    """The model's answer as a candidate, or None when it is not a changed version of the same function."""
    code = code_block(answer)
    if not code:
        return None
    lines = text.splitlines()
    new = textwrap.indent(textwrap.dedent(code), indent_of(lines[start - 1])).splitlines()
    answered = parsed(textwrap.dedent(code))
    if answered is None:
        return None
    defs = [n for n in answered.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(defs) != 1 or defs[0].name != qualname.rsplit(".", 1)[-1]:
        return None
    mutation = Mutation(path, start, end, tuple(new), "model-rewrite", qualname, tuple(lines[start - 1 : end]))
    changed = parsed(mutation.apply(text))
    if changed is None:
        return None
    return mutation if ast.dump(changed) != ast.dump(ast.parse(text)) else None


async def model_rewrites(spec: str, texts: dict[str, str], count: int, seed: int) -> list[Mutation]:
    """Up to `count` candidates written by the model `spec` names, for functions the seed picks."""
    from agentflow.models.spec import load_model

    model = load_model(spec)
    targets = rewrite_targets(texts)
    random.Random(seed).shuffle(targets)
    out: list[Mutation] = []
    try:
        for path, qualname, start, end in targets[:count]:
            source = "\n".join(texts[path].splitlines()[start - 1 : end])
            answer = await ask(model, PROMPTS.render("rewrite_task.j2", source=textwrap.dedent(source)),
                               system=PROMPTS.render("rewrite_system.j2"),
                               max_tokens=2048, seed=seed)
            mutation = rewritten(path, qualname, start, end, texts[path], answer.text)
            if mutation is not None:
                out.append(mutation)
    finally:
        await model.aclose()
    return out
