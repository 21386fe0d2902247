"""Running a compiled workflow: the runner, its context, live events, the run ledger, history."""
