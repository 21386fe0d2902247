"""Where the fix goes: code windows from the issue, run evidence (spectrum), edit focus."""
