"""Runs a bug report's example code under a call tracer: written into the task's sandbox and run there by
`agentflow.repair.spectrum` (never imported on the host). Standard library only; works on Python 3.8+.

    python3 _tracer.py SPEC.json

SPEC holds `statements` (run one after another in one namespace; one that raises is reported and the next
still runs, as in a doctest) and `names` (a top-level name the examples use without importing it -> the
module that defines it, imported first). It prints, as its last line, `MARKER` and a JSON object:
`calls` [[file relative to the working directory, qualified name, first line, order of first call, calls]]
for code under the working directory that the
statements call (not what runs while a module is imported), and `errors` (the traceback of each statement that raised).
"""

import importlib
import json
import os
import sys
import traceback

MARKER = "AGENTFLOW_TRACE "
MAX_CALLS = 2000
MAX_ERROR_CHARS = 3000


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    root = os.path.realpath(os.getcwd()) + os.sep
    own = os.path.realpath(os.path.dirname(os.path.abspath(__file__))) + os.sep
    calls = {}
    files = {}

    def relative(filename):
        if filename not in files:
            real = os.path.realpath(filename) if not filename.startswith("<") else ""
            inside = real.startswith(root) and not real.startswith(own) and "site-packages" not in real
            files[filename] = real[len(root):] if inside else None
        return files[filename]

    def importing(frame):
        # a call made while a module body runs (an import, eager or lazy) is not the example's own: the
        # nearest module-level frame up the stack tells which
        caller = frame.f_back
        while caller is not None:
            if caller.f_code.co_name == "<module>":
                return caller.f_code.co_filename != "<issue>"
            caller = caller.f_back
        return True

    def tracer(frame, event, arg):
        code = frame.f_code
        rel = relative(code.co_filename)
        if rel is not None and code.co_name != "<module>" and not importing(frame):
            key = (rel, getattr(code, "co_qualname", code.co_name), code.co_firstlineno)
            seen = calls.get(key)
            if seen is not None:
                seen[1] += 1
            elif len(calls) < MAX_CALLS:
                calls[key] = [len(calls), 1]
        # returns None: calls only, no line events, so the examples run at close to full speed

    namespace = {"__name__": "__main__"}
    errors = []
    sys.settrace(tracer)
    try:
        for name, module in sorted(spec.get("names", {}).items()):
            try:
                namespace[name] = getattr(importlib.import_module(module), name)
            except Exception:  # a name the examples only mention: they will say NameError themselves
                pass
        for statement in spec.get("statements", []):
            try:
                exec(compile(statement, "<issue>", "exec"), namespace)
            except BaseException:
                errors.append(traceback.format_exc()[-MAX_ERROR_CHARS:])
    finally:
        sys.settrace(None)
    rows = [[rel, qualname, line, order, count] for (rel, qualname, line), (order, count) in calls.items()]
    sys.stdout.flush()
    sys.stdout.write("\n" + MARKER + json.dumps({"calls": rows, "errors": errors}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
