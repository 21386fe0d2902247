"""Checking a candidate: the task's workbench, test targeting, reproductions, the choice."""
