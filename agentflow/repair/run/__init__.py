"""Running repairs: one task (solve), a batch of tasks, remote workers, progress, candidates."""
