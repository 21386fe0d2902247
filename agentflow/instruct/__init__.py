"""The instruction-following task kind (layer 5): prompts with verifiable constraints (`data/instructions.jsonl`),
their programmatic checkers (`checks.py`, grading only), and the `instruct.*` node types of the decrim and
plangen workflows (`nodes.py`)."""
