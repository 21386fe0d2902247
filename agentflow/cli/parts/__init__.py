"""Commands over the parts: models, serving, sandboxes, tools, MCP."""
