"""Search over rollouts: best-of-N and MCTS (concurrent expansions), verifiers, pass@k.

Generic over small protocols (`Policy`, `Workspace`, `Verifier`), so any agent, graph or simulated policy
can be searched. Imports nothing heavy.
"""

from agentflow.search.best_of_n import BestOfN, BestOfNConfig
from agentflow.search.chat_policy import ChatPolicy
from agentflow.search.mcts import MCTS, MCTSConfig
from agentflow.search.node import GraphRolloutPolicy, SearchNode, search_node
from agentflow.search.passk import pass_at_k, pass_at_ks
from agentflow.search.protocols import (
    Policy,
    RolloutContext,
    StepPolicy,
    Verifier,
    VerifyContext,
    Workspace,
    WorkspacePool,
)
from agentflow.search.report import select
from agentflow.search.simulated import SimulatedAnswerPolicy, SimulatedPolicy
from agentflow.search.tree import tree_from_events
from agentflow.search.types import (
    Action,
    Candidate,
    NodeState,
    SearchResult,
    SearchUsage,
    TreeNode,
    Verification,
)
from agentflow.search.verifiers import (
    CompositeVerifier,
    CriticVerifier,
    FunctionVerifier,
    Judgement,
    TestVerifier,
    VoteVerifier,
)

__all__ = [
    "MCTS", "Action", "BestOfN", "BestOfNConfig", "Candidate", "ChatPolicy", "CompositeVerifier", "CriticVerifier",
    "FunctionVerifier", "GraphRolloutPolicy", "Judgement", "MCTSConfig", "NodeState", "Policy", "RolloutContext",
    "SearchNode", "SearchResult", "SearchUsage", "SimulatedAnswerPolicy", "SimulatedPolicy", "StepPolicy",
    "TestVerifier", "TreeNode", "Verification", "Verifier", "VerifyContext", "VoteVerifier", "Workspace",
    "WorkspacePool", "pass_at_k", "pass_at_ks", "search_node", "select", "tree_from_events",
]
