"""Suite-wide set-up."""

from __future__ import annotations

import os
import signal
import tempfile

# A test run started in the background by a shell without job control (`cmd &`, nohup, some CI runners)
# inherits SIGINT as ignored, and so would every process it starts: the Ctrl-C tests could then not
# interrupt their subprocesses. Give SIGINT its normal meaning again; exec'd children inherit the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The run key that signs run records (agentflow/runrecord.py) lives in the user's config folder: every test, and
# every process a test starts with this environment, uses a fresh one instead of the real home's.
if "AGENTFLOW_CONFIG_DIR" not in os.environ:
    os.environ["AGENTFLOW_CONFIG_DIR"] = tempfile.mkdtemp(prefix="agentflow-test-config-")
