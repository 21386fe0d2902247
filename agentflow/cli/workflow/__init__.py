"""Commands over workflows: run, graph, view, export."""
