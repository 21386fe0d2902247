"""A workflow checked before it runs: validation and the static reading of its code."""
