"""The Slurm effector checks every QOS it passes to scontrol, the one squeue names on apply and the one the audit
row recorded on undo alike, before any command changes the job. Its commands are scripts in a bin_dir that log
their arguments (the real Slurm's behaviour is tested in test_slurm_actions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from preemptlens.collectors.slurm.actions import QosEffectorOptions, SlurmQosEffector
from preemptlens.errors import SourceError


def effector(tmp_path: Path, squeue_prints: str) -> tuple[SlurmQosEffector, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(mode=0o755, exist_ok=True)
    calls = tmp_path / "calls"
    for tool, prints in (("squeue", squeue_prints), ("scontrol", "")):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho \"{tool} $*\" >> {calls}\nprintf '%s\\n' '{prints}'\n")
        script.chmod(0o755)
    return SlurmQosEffector(QosEffectorOptions("protected", str(bin_dir), "", 5.0, "normal")), calls


def updates(calls: Path) -> list[str]:
    return [line for line in calls.read_text().splitlines() if line.startswith("scontrol")] if calls.exists() else []


@pytest.mark.parametrize("recorded", ["normal high", "normal\nQOS=high", "", "normal;id", "protected"])
def test_undo_refuses_a_recorded_qos_apply_would_refuse(tmp_path: Path, recorded: str) -> None:
    slurm, calls = effector(tmp_path, "123|protected")
    if recorded == "":
        # Nothing recorded: the documented fallback, checked the same way.
        slurm.undo("123", {"qos": recorded})
        assert updates(calls) == ["scontrol update JobId=123 QOS=normal"]
        return
    with pytest.raises(SourceError, match="cannot return job 123") as err:
        slurm.undo("123", {"qos": recorded})
    assert "move it by hand" in err.value.hint or "not a QOS name" in err.value.message
    assert updates(calls) == [], "scontrol ran with a QOS nobody checked"


def test_undo_passes_a_checked_recorded_qos(tmp_path: Path) -> None:
    slurm, calls = effector(tmp_path, "123|protected")
    slurm.undo("123", {"qos": "low-prio.v2"})
    assert updates(calls) == ["scontrol update JobId=123 QOS=low-prio.v2"]


def test_apply_refuses_a_qos_squeue_names_that_is_not_a_qos_name(tmp_path: Path) -> None:
    slurm, calls = effector(tmp_path, "123|low Partition=debug")
    with pytest.raises(SourceError, match="not a QOS name"):
        slurm.apply("123", 1)
    assert updates(calls) == []
