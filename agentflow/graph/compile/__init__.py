"""A spec compiled to LangGraph: node types, agent nodes, the graph build."""
