"""Chat model backends that call a server (OpenAI-compatible, Anthropic, LiteLLM, local)."""
