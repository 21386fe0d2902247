"""Commands over SWE tasks: repair, bench, eval, tasks."""
