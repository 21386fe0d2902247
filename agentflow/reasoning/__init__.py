"""Model-driven reasoning steps any task kind reuses (layer 4): constraint extraction, verification against
constraints, the value agent and inference-algorithm selection by UCB, as node types (`reason.*`, README.md).
The inference algorithms themselves are the graph search's strategies (`agentflow.graph.search`)."""
