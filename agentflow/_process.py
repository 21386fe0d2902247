"""Process helpers shared by the sandbox and serving layers."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
