"""The shipped workflows' own node functions (`fn: agentflow.workflows.demo:...`), above the graph layer;
the workflow files themselves are data (`workflows/`, `resources.data_dir`)."""
