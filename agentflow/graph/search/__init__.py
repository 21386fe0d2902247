"""Search nodes: settings, the tree of branches, the engine, remote steps, branch workspaces."""
