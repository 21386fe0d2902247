"""A task's sandbox lives as long as the task may: a slow task is not cut off by the sandbox's own clock."""

from agentflow.repair.config import (
    GRADE_MARGIN_S,
    REPAIR_SANDBOX_LIFETIME_S,
    load_repair_config,
    task_sandbox_config,
)
from agentflow.sandbox.config import SandboxConfig


def test_the_repair_sandbox_outlives_the_sandbox_default():
    cfg = load_repair_config()
    assert task_sandbox_config(cfg).sandbox_timeout_s == REPAIR_SANDBOX_LIFETIME_S
    assert REPAIR_SANDBOX_LIFETIME_S > SandboxConfig().sandbox_timeout_s


def test_a_longer_task_wall_time_stretches_the_sandbox_life():
    cfg = load_repair_config(["limits.wall_time_s=20000"])
    assert task_sandbox_config(cfg).sandbox_timeout_s == 20000 + GRADE_MARGIN_S
    # the other sandbox settings are kept
    assert task_sandbox_config(cfg).network == cfg.sandbox.network


def test_a_set_sandbox_life_is_kept_when_it_is_long_enough():
    cfg = load_repair_config(["sandbox.sandbox_timeout_s=900"])
    assert task_sandbox_config(cfg).sandbox_timeout_s == 900
    cfg = load_repair_config(["sandbox.sandbox_timeout_s=900", "limits.wall_time_s=200"])
    assert task_sandbox_config(cfg).sandbox_timeout_s == 900
