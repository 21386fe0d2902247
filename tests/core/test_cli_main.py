import subprocess
import sys

from agentflow.cli.main import run


def test_version() -> None:
    assert run(["--version"]) == 0


def test_unknown_command_is_one_line_exit_2(capsys) -> None:
    assert run(["no-such-command"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("agentflow: error:")


def test_no_traceback_from_subprocess() -> None:
    proc = subprocess.run([sys.executable, "-m", "agentflow.cli.main", "nope"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
