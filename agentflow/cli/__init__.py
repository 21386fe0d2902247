"""The `agentflow` command line: a thin shell over the library. Each module here with a `register(app)`
function adds its commands; `main.py` discovers them."""
