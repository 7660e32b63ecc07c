"""Slurm effector of the cost-aware actions: protect a job from preemption by
moving it into a QOS that no other QOS's Preempt list names (preempt/qos), and
move it back.

What Slurm allows decides what this can do: slurmctld changes a job's QOS only
while the job is pending (for a running one 22.05 answers "Job is no longer
pending execution", even to root, and so does the current source's
_update_job). So a job can be
protected before it starts or while it waits to restart after a requeue (a
repeat victim), and moved back only then or not at all: a protected job that
is running keeps its QOS until it is requeued or ends. The errors say so, and
undo of a job that ended is done.

Job ids are the warehouse's (see sacct.json_job_id): "123", an array task
"123_4", the unsplit pending part of an array "123_[5-9]", a heterogeneous
job's component "123+1". scontrol and squeue take and print them as they are.

Commands run like the collector's (collectors/slurm/__init__.py): the same bin_dir,
SLURM_CONF and time limit from the [slurm] settings, no shell.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from preemptlens import outbound
from preemptlens.collectors.slurm import SlurmSettings, checked_conf, program
from preemptlens.collectors.slurm.policy import cluster_name_from_config
from preemptlens.config import ClusterSettings, Config, section, setting
from preemptlens.errors import ConfigError, SourceError

_QOS_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


@section(
    "slurm_actions",
    "The Slurm action (preempt/qos): protect a costly job by moving it into a QOS that no QOS may preempt. "
    "Commands, SLURM_CONF and time limit are the [slurm] collector's.",
)
@dataclass(frozen=True)
class SlurmActionsSettings:
    protected_qos: str = setting(
        "protected",
        "QOS a protected job is moved into; it must be in no other QOS's Preempt list, and the service's user a "
        "Slurm operator (docs/deploy.md).",
    )
    fallback_qos: str = setting(
        "normal",
        "QOS a job found in protected_qos is returned to when the audit table does not say where it came from "
        "(the process died between moving it and recording that).",
    )

    def __post_init__(self) -> None:
        for key in ("protected_qos", "fallback_qos"):
            name = getattr(self, key)
            if not _QOS_NAME.fullmatch(name):
                raise ConfigError(f"slurm_actions.{key}: {name!r} is not a QOS name",
                                  "name the QOS created with `sacctmgr add qos`")


SETTINGS = SlurmActionsSettings

# Most output read from one command the effector runs (preemptlens.outbound).
_MAX_OUTPUT = 64 * 2**20
# One id as the warehouse names it; anything else is refused before a command runs.
_JOB_ID = re.compile(r"\d+(?:_\d+|_\[[0-9,\-%]+\]|\+\d+)?", re.ASCII)
# squeue states of a job the scheduler still holds (not yet ended).
_LIVE_STATES = "PENDING,RUNNING,SUSPENDED,CONFIGURING,COMPLETING,REQUEUED,RESIZING,STOPPED"
# scontrol's answers for a job that is gone or ended: undo has nothing left to do.
_ENDED = ("invalid job id", "already completing or completed", "job has already finished")
_NOT_PENDING = "no longer pending"


@dataclass(frozen=True)
class QosEffectorOptions:
    """What the effector runs with: its [slurm_actions] section and the [slurm] collector's command settings."""

    protected_qos: str
    bin_dir: str
    slurm_conf: str
    timeout_s: float
    fallback_qos: str


def settings_from(config: Config) -> QosEffectorOptions:
    """What the effector runs with: [slurm_actions], and [slurm] for the commands."""
    own, slurm = config.of(SlurmActionsSettings), config.of(SlurmSettings)
    return QosEffectorOptions(protected_qos=own.protected_qos, bin_dir=slurm.bin_dir, slurm_conf=slurm.slurm_conf,
                               timeout_s=slurm.timeout_s, fallback_qos=own.fallback_qos)


class SlurmQosEffector:
    """The engine's Effector for Slurm (preemptlens.contract.Effector, structurally)."""

    scheduler = "slurm"

    def __init__(self, settings: QosEffectorOptions) -> None:
        self.s = settings

    @classmethod
    def from_config(cls, config: Config) -> SlurmQosEffector:
        return cls(settings_from(config))

    # -- the contract -----------------------------------------------------------

    def held(self) -> dict[str, int]:
        out = self.command(["squeue", "-h", "-a", "-t", _LIVE_STATES, "-q", self.s.protected_qos, "-o", "%i"],
                        "reading the protected jobs")
        held: dict[str, int] = {}
        for line in (out or "").splitlines():
            job_id = line.strip()
            if not job_id:
                continue
            if not _JOB_ID.fullmatch(job_id):
                raise SourceError(f"slurm: squeue -q {self.s.protected_qos} printed {job_id[:80]!r}, not a job id")
            held[job_id] = 1
        return held

    def apply(self, job_id: str, level: int) -> dict[str, str]:
        _check_id(job_id)
        if level != 1:
            raise ConfigError(f"slurm: job {job_id}: level {level} asked, the QOS action has one level (1)")
        original = self._qos_of(job_id)
        if original is None:
            raise SourceError(f"slurm: cannot protect job {job_id}: Slurm no longer holds it (ended or unknown)")
        _check_qos(original, f"slurm: cannot protect job {job_id}: squeue names its QOS")
        if original == self.s.protected_qos:
            raise SourceError(f"slurm: job {job_id} is already in QOS {original}; its QOS before is not known",
                              "reconcile with held() instead of protecting it again")
        if self._update(job_id, self.s.protected_qos, "protect") is None:
            raise SourceError(f"slurm: cannot protect job {job_id}: it ended")
        # Without AccountingStorageEnforce=qos, slurmctld answers success for a
        # QOS it does not know and leaves the job where it was.
        now = self._qos_of(job_id)
        if now != self.s.protected_qos:
            raise SourceError(f"slurm: protect job {job_id}: scontrol accepted QOS={self.s.protected_qos} but the "
                              f"job's QOS is {now or 'gone'}",
                              f"create the QOS (sacctmgr add qos {self.s.protected_qos}), see docs/deploy.md")
        return {"qos": original}

    def undo(self, job_id: str, detail: dict[str, str]) -> None:
        _check_id(job_id)
        # An empty detail: the move was never recorded (a crash in between), so where it came from is unknown.
        recorded = detail.get("qos") or self.s.fallback_qos
        # What apply recorded is checked again as apply checked it: the audit row is data, not a command.
        _check_qos(recorded, f"slurm: cannot return job {job_id}: its recorded QOS")
        if recorded == self.s.protected_qos:
            raise SourceError(f"slurm: cannot return job {job_id}: its recorded QOS is the protected one "
                              f"({recorded})", f"move it by hand: scontrol update JobId={job_id} QOS=<its QOS>")
        self._update(job_id, recorded, "return")

    # -- commands ---------------------------------------------------------------

    def _qos_of(self, job_id: str) -> str | None:
        """The job's QOS, or None when Slurm no longer holds it."""
        out = self.command(["squeue", "-h", "-a", "-t", _LIVE_STATES, "-j", job_id, "-o", "%i|%q"],
                        f"reading job {job_id}")
        for line in (out or "").splitlines():
            shown, _, qos = line.strip().partition("|")
            if shown == job_id:
                if not qos:
                    raise SourceError(f"slurm: squeue -j {job_id} printed {line.strip()[:80]!r}, no QOS")
                return qos
        return None

    def _update(self, job_id: str, qos: str, what: str) -> str | None:
        """None when the job had ended."""
        return self.command(["scontrol", "update", f"JobId={job_id}", f"QOS={qos}"], f"{what} job {job_id}")

    def command(self, argv: list[str], what: str) -> str | None:
        """The command's output; None when it says the job is gone or ended."""
        exe = program(self.s.bin_dir, argv[0])
        env = dict(os.environ)
        conf = checked_conf(self.s.slurm_conf)
        if conf:
            env["SLURM_CONF"] = conf
        shown = " ".join(argv)
        try:
            # Killed at the time limit; squeue's list of held jobs and scontrol's answers are small.
            done = outbound.run([exe, *argv[1:]], env=env, timeout_s=self.s.timeout_s, limit=_MAX_OUTPUT)
        except FileNotFoundError:
            raise SourceError(f"slurm: {what}: {argv[0]} not found",
                              "install slurm-client, or set slurm.bin_dir") from None
        except subprocess.TimeoutExpired:
            raise SourceError(f"slurm: {what}: `{shown}` did not answer within {self.s.timeout_s:g}s") from None
        except outbound.AnswerTooLarge as exc:
            raise SourceError(f"slurm: {what}: {exc}") from None
        if done.returncode == 0:
            return done.stdout
        text = " ".join((done.stderr or done.stdout).split())[:300]
        lowered = text.lower()
        if any(e in lowered for e in _ENDED):
            return None
        if _NOT_PENDING in lowered:
            raise SourceError(f"slurm: cannot {what}: `{shown}` refused: the job is running, and Slurm changes "
                              f"a job's QOS only while it is pending ({text})",
                              "it can be moved while it waits again (requeued) or is done once it ends")
        raise SourceError(f"slurm: {what}: `{shown}` exited with status {done.returncode}: {text or 'no message'}")


def build_effector(action: str, config: Config) -> tuple[str, SlurmQosEffector]:
    """The effector of `slurm_protect` and its cluster: cluster.name, else the ClusterName Slurm reports."""
    if action != "slurm_protect":
        raise ConfigError(f"slurm: no effector for action {action!r}", "slurm_protect")
    effector = SlurmQosEffector.from_config(config)
    cluster = config.of(ClusterSettings).name
    if not cluster:
        shown = effector.command(["scontrol", "show", "config"], "reading ClusterName")
        cluster = cluster_name_from_config(shown or "")
    if not cluster:
        raise ConfigError("slurm_protect: cluster.name is not set and `scontrol show config` names no ClusterName",
                          "set cluster.name")
    return cluster, effector


def _check_qos(name: object, what: str) -> None:
    """A QOS name as `sacctmgr add qos` makes them; anything else is refused before scontrol sees it."""
    if not isinstance(name, str) or not _QOS_NAME.fullmatch(name):
        raise SourceError(f"{what}, {str(name)[:80]!r}, is not a QOS name",
                          "check the job's QOS in Slurm and the actions table; move the job by hand if needed")


def _check_id(job_id: str) -> None:
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise SourceError(f"slurm: {job_id!r} is not a Slurm job id (123, 123_4, 123_[5-9] or 123+1)")
