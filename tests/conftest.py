"""Suite-wide set-up."""

from __future__ import annotations

import signal

# A test run started in the background by a shell without job control (`cmd &`, nohup, some CI runners)
# inherits SIGINT as ignored, and so would every process it starts: the Ctrl-C tests could then not
# interrupt their subprocesses. Give SIGINT its normal meaning again; exec'd children inherit the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
