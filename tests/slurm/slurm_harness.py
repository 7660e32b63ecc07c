"""A real single-node Slurm 22.05 (munge, MariaDB, slurmdbd, slurmctld, slurmd)
started under one temporary directory and stopped by pid.

Facts this depends on (see ../shared/reference/SCHEDULERS.md): munge must answer
on the default socket because 22.05's slurmdbd connections ignore
`AuthInfo=socket=`; a count-only gpu GRES needs `File=` character devices
(cloned from /dev/null); every client command needs SLURM_CONF; the image's
policy-rc.d means no daemon is started for us.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
GPUS = 8
CLUSTER = "plens"
NODE = "node1"
ACCOUNTS = ("vision", "speech")
# How slurmctld picks victims: by partition PriorityTier, or by QOS (Preempt
# lists kept in slurmdbd). In qos mode, `high` preempts `low` by requeue and
# `protected` is in nobody's Preempt list, so a job moved there is safe.
PREEMPT_MODES = ("partition_prio", "qos")
QOS_LOW, QOS_PROTECTED, QOS_HIGH = "low", "protected", "high"


class HarnessError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, ok: Callable[[], bool], timeout: float = 60, detail: Callable[[], str] = str) -> None:
    """Poll `ok` until it holds; else fail naming `what`, with `detail()` (what was seen) appended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.2)
    raise HarnessError(f"{what}: not within {timeout:.0f}s{detail()}")


def _wait(what: str, ok: Callable[[], bool], timeout: float, log: Path | None = None) -> None:
    def tail() -> str:
        if log is None or not log.exists():
            return ""
        return "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])

    wait_until(f"{what} coming up", ok, timeout, tail)


@dataclass
class SlurmCluster:
    root: Path
    preempt: str = "partition_prio"
    env: dict[str, str] = field(default_factory=dict)
    pids: list[tuple[str, int]] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    # Preemption settings written into slurm.conf (see `set_policy`): PreemptExemptTime, the low partition's
    # GraceTime.
    exempt_s: int = 0
    low_grace_s: int = 0
    # SlurmdTimeout written into slurm.conf (see `set_slurmd_timeout`); 0 leaves Slurm's default (300 s).
    slurmd_timeout_s: int = 0

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def ctld_log(self) -> Path:
        return self.root / "log" / "slurmctld.log"

    # -- clients ----------------------------------------------------------

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise HarnessError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
        return result

    def sbatch(self, *args: str, script: str) -> str:
        out = self.run("sbatch", "--parsable", *args, "--wrap", script).stdout.strip()
        return out.split(";")[0]

    # -- start / stop -----------------------------------------------------

    def start(self) -> None:
        for sub in ("etc", "log", "run", "state", "spool", "dev", "db", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.ports = {name: _free_port() for name in ("ctld", "slurmd", "dbd", "mysql")}
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "TZ": "UTC"}
        self._start_munge()
        self._start_mariadb()
        self._write_configs()
        self._start_slurmdbd()
        self._start_slurmctld()
        self._start_slurmd()
        self._add_accounts()
        if self.preempt == "qos":
            self._add_qos()

    def use(self, preempt: str) -> None:
        """Run in another preemption mode: only slurmctld and slurmd restart
        (PreemptType is read at start), munge, MariaDB and slurmdbd stay."""
        if preempt not in PREEMPT_MODES:
            raise HarnessError(f"unknown preemption mode {preempt!r}")
        if preempt == self.preempt:
            return
        self._cancel_all()
        self.preempt = preempt
        if preempt == "qos":
            self._add_qos()
        for name in ("slurmd", "slurmctld"):
            for entry in [e for e in self.pids if e[0] == name]:
                _stop(*entry)
                self.pids.remove(entry)
        self._write_configs()
        self._start_slurmctld()
        self._start_slurmd()

    def set_policy(self, exempt_s: int = 0, low_grace_s: int = 0) -> None:
        """Another PreemptExemptTime or low-partition GraceTime: slurm.conf rewritten and re-read by
        `scontrol reconfigure` (no daemon restarts; running jobs are left alone)."""
        self.exempt_s, self.low_grace_s = exempt_s, low_grace_s
        self._write_configs()
        self.run("scontrol", "reconfigure")
        wanted = f"{exempt_s // 3600:02d}:{exempt_s % 3600 // 60:02d}:{exempt_s % 60:02d}"

        def applied() -> bool:
            conf = self.run("scontrol", "show", "config", check=False).stdout
            part = self.run("scontrol", "show", "partition", "low", "-o", check=False).stdout
            return f"PreemptExemptTime       = {wanted}" in conf and f"GraceTime={low_grace_s} " in part

        wait_until("slurmctld re-reading slurm.conf", applied, 30)

    def set_slurmd_timeout(self, seconds: int) -> None:
        """How long slurmctld waits for an unresponsive slurmd before it sets the node DOWN (0: Slurm's default),
        through slurm.conf and `scontrol reconfigure` as `set_policy`."""
        self.slurmd_timeout_s = seconds
        self._write_configs()
        self.run("scontrol", "reconfigure")
        wanted = f"SlurmdTimeout           = {seconds or 300} sec"
        wait_until("slurmctld re-reading slurm.conf",
                   lambda: wanted in self.run("scontrol", "show", "config", check=False).stdout, 30)

    def stop_slurmd(self) -> None:
        """slurmd alone stops, as on a node that dies: its jobs' processes go on, and slurmctld hears nothing
        from the node until slurmd comes back (`start_slurmd`)."""
        for entry in [e for e in self.pids if e[0] == "slurmd"]:
            _stop(*entry)
            self.pids.remove(entry)

    def start_slurmd(self) -> None:
        """slurmd back after `stop_slurmd`; returns once the node is in service again (ReturnToService=2)."""
        self._start_slurmd()

    def _cancel_all(self) -> None:
        jobs = self.run("squeue", "-h", "-o", "%A", check=False).stdout.split()
        if jobs:
            self.run("scancel", *jobs, check=False)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and self.run("squeue", "-h", check=False).stdout.strip():
                time.sleep(0.5)

    def stop(self) -> None:
        # Jobs left running would outlive slurmd as orphaned slurmstepd processes.
        if any(name == "slurmctld" for name, _ in self.pids):
            self._cancel_all()
        for name, pid in reversed(self.pids):
            _stop(name, pid)
        self.pids.clear()

    def _spawn(self, name: str, argv: list[str], log: Path) -> int:
        # Foreground daemons are our children, so their pids are exact and a
        # teardown never has to look processes up by name.
        with log.with_suffix(".out").open("ab") as out:
            proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids.append((name, proc.pid))
        return proc.pid

    def _munge_answers(self) -> bool:
        if not MUNGE_SOCKET.exists():
            return False
        enc = subprocess.run(["munge", "-n", "-S", str(MUNGE_SOCKET)], capture_output=True, check=False)
        if enc.returncode != 0:
            return False
        dec = subprocess.run(["unmunge", "-S", str(MUNGE_SOCKET)], input=enc.stdout,
                             capture_output=True, check=False)
        return dec.returncode == 0

    def _start_munge(self) -> None:
        if self._munge_answers():
            return  # another munged (system or a parallel run) already serves the socket
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            key = self.root / "etc" / "munge.key"
            key.write_bytes(os.urandom(128))
            key.chmod(0o600)
        MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_SOCKET.parent.chmod(0o755)
        log = self.root / "log" / "munged.log"
        self._spawn("munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                               f"--socket={MUNGE_SOCKET}", f"--log-file={log}",
                               f"--pid-file={self.root / 'run' / 'munged.pid'}",
                               f"--seed-file={self.root / 'run' / 'munged.seed'}"], log)
        _wait("munged", self._munge_answers, 15, log)

    def _start_mariadb(self) -> None:
        datadir = self.root / "db"
        log = self.root / "log" / "mariadb.log"
        install = subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            capture_output=True, text=True, check=False,
        )
        if install.returncode != 0:
            raise HarnessError(f"mariadb-install-db failed: {install.stderr[-2000:]}")
        sock = self.root / "run" / "mysql.sock"
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root",
                                 f"--socket={sock}", f"--port={self.ports['mysql']}",
                                 "--bind-address=127.0.0.1", f"--pid-file={self.root / 'run' / 'mysql.pid'}",
                                 "--skip-grant-tables", "--innodb-buffer-pool-size=64M",
                                 f"--log-error={log}"], log)
        _wait("mariadbd", lambda: _port_open(self.ports["mysql"]), 60, log)

    def _write_configs(self) -> None:
        dev = self.root / "dev"
        for i in range(GPUS):
            node = dev / f"nvidia{i}"
            if not node.exists():
                os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
        etc = self.root / "etc"
        host = socket.gethostname().split(".")[0]
        (etc / "gres.conf").write_text(f"AutoDetect=off\nNodeName={NODE} Name=gpu File={dev}/nvidia[0-{GPUS - 1}]\n")
        (self.root / "spool" / NODE).mkdir(parents=True, exist_ok=True)
        low = f"PriorityTier=1 PreemptMode=REQUEUE GraceTime={self.low_grace_s}"
        (etc / "slurm.conf").write_text(f"""\
ClusterName={CLUSTER}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={self.ports['ctld']}
SlurmdPort={self.ports['slurmd']}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=10
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}/%n
SlurmctldPidFile={self.root / 'run' / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'run' / 'slurmd.pid'}
SlurmctldLogFile={self.ctld_log}
SlurmdLogFile={self.root / 'log' / 'slurmd.log'}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
JobRequeue=1
PreemptType=preempt/{self.preempt}
PreemptMode=REQUEUE
PreemptExemptTime={self.exempt_s // 3600:02d}:{self.exempt_s % 3600 // 60:02d}:{self.exempt_s % 60:02d}
GresTypes=gpu
{f"SlurmdTimeout={self.slurmd_timeout_s}" if self.slurmd_timeout_s else ""}
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.ports['dbd']}
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=2
MinJobAge=600
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=16 RealMemory=16000 Gres=gpu:{GPUS} State=UNKNOWN
PartitionName=low Nodes={NODE} Default=YES {low} MaxTime=INFINITE State=UP
PartitionName=high Nodes={NODE} PriorityTier=10 PreemptMode=OFF MaxTime=INFINITE State=UP
""")
        dbd = etc / "slurmdbd.conf"
        dbd.write_text(f"""\
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.ports['dbd']}
SlurmUser=root
DebugLevel=info
LogFile={self.root / 'log' / 'slurmdbd.log'}
PidFile={self.root / 'run' / 'slurmdbd.pid'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.ports['mysql']}
StorageUser=root
StorageLoc=slurm_acct_db
""")
        dbd.chmod(0o600)

    def _start_slurmdbd(self) -> None:
        log = self.root / "log" / "slurmdbd.log"
        self._spawn("slurmdbd", ["slurmdbd", "-D", "-s"], log)
        _wait("slurmdbd", lambda: _port_open(self.ports["dbd"]), 60, log)

    def _start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)], self.ctld_log)
        _wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).returncode == 0, 30, self.ctld_log)

    def _start_slurmd(self) -> None:
        log = self.root / "log" / "slurmd.log"
        self._spawn("slurmd", ["slurmd", "-D", "-N", NODE, "-f", str(self.conf)], log)

        def idle() -> bool:
            states = set(self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split())
            return bool(states) and states <= {"idle", "mixed", "allocated"}

        _wait("slurmd (node idle)", idle, 30, self.ctld_log)

    def _add_accounts(self) -> None:
        def registered() -> bool:
            out = self.run("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster", check=False)
            return CLUSTER in out.stdout.split()

        _wait("cluster registration in slurmdbd", registered, 30, self.root / "log" / "slurmdbd.log")
        for account in ACCOUNTS:
            self.run("sacctmgr", "-i", "add", "account", account, f"cluster={CLUSTER}", check=False)
            self.run("sacctmgr", "-i", "add", "user", "root", f"account={account}", f"cluster={CLUSTER}",
                     check=False)


    def _add_qos(self) -> None:
        """The QOS of qos mode. Jobs may be submitted into low and high;
        protected is left out of the associations, as deploy.md advises: only
        an operator (root here) moves a job there."""
        known = set(self.run("sacctmgr", "-n", "-P", "show", "qos", "format=name").stdout.split())
        for qos in (QOS_LOW, QOS_PROTECTED, QOS_HIGH):
            if qos not in known:
                self.run("sacctmgr", "-i", "add", "qos", qos)
        self.run("sacctmgr", "-i", "modify", "qos", QOS_LOW, "set", "PreemptMode=requeue", check=False)
        self.run("sacctmgr", "-i", "modify", "qos", QOS_HIGH, "set", f"Preempt={QOS_LOW}",
                 check=False)
        self.run("sacctmgr", "-i", "modify", "user", "root", "set",
                 f"qos+={QOS_LOW},{QOS_HIGH}", check=False)


def _stop(name: str, pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _reap(pid, name)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return waited == 0


def _reap(pid: int, name: str) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def tools_missing() -> list[str]:
    return [t for t in ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd",
                        "sacct", "sbatch", "sacctmgr") if shutil.which(t) is None]
