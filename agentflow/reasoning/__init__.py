"""Model-driven reasoning steps any task kind reuses (layer 4): one model call as a node's step, constraint
extraction, candidate verification against constraints, inference-algorithm selection by UCB, and the
inference algorithms themselves (best-of-N, tree-of-thought, REBASE) over a task kind's generate/score pair.

The registered node types are in `agentflow.reasoning.nodes` (`reason.constraints`, `reason.select`,
`reason.reward`); the code-generation and instruction task kinds (`agentflow.codegen`, `agentflow.instruct`)
build their workflows from them.
"""
