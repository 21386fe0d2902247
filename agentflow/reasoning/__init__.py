"""Model-driven reasoning steps any task kind reuses (layer 4): one model call as a node's step, constraint
extraction, verification against constraints, the value agent, and inference-algorithm selection by UCB.
The inference algorithms themselves (best-of-N, tree-of-thought, REBASE, MCTS) are the graph search's
strategies (`agentflow.graph.search`): a selection names one, a search node runs it over ordinary nodes.

The registered node types are in `agentflow.reasoning.nodes` (`reason.constraints`, `reason.select`,
`reason.verify`, `reason.reward`, `reason.value`); the code-generation and instruction task kinds
(`agentflow.codegen`, `agentflow.instruct`) build their workflows from them.
"""
