"""The repair's node types (`swe.*`, registered by `agentflow.repair.nodes`) and their state."""
