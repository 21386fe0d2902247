"""Task synthesis: SWE-bench-format tasks from a repository and its own test suite (`agentflow tasks synth`)."""
