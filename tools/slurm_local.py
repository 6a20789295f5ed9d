"""A throwaway single-node Slurm cluster (munged, slurmctld, slurmd) in a directory of its own.

Why: ``pinbench submit`` is tested against a real Slurm, not a mock of sbatch. This follows the measured
recipe in ../shared/notes/slurm-local.md (Debian's slurm-wlm and munge, as root, no cgroups or systemd):
a fresh munge key and state directory for every start, free ports so that it never meets another cluster
on the machine, ``EnforcePartLimits=ALL`` so an impossible request is refused at submit time, and a
partition time limit so that a too-long ``--time`` is refused too. Used by the tests (``tests/conftest``
fixture ``slurm_cluster``) and by ``tools/bench_slurm.py``.

``start_cluster(root)`` returns once the node is ``idle``; ``cluster.stop()`` cancels what is still queued
and stops the three daemons by the PIDs it started (never by name).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
PARTITION = "debug"
MAX_TIME_MINUTES = 60  # the partition's MaxTime: a job asking for more is refused at submit time


class ClusterError(RuntimeError):
    """The local cluster did not come up; the message ends with the tail of the daemon logs."""


def missing_binaries() -> list[str]:
    """The Slurm and munge programs this machine lacks (empty when a cluster can be started)."""
    return [name for name in BINARIES if shutil.which(name) is None]


@dataclass
class LocalSlurm:
    """A running cluster: its directory, the environment its clients need, the daemons it started."""

    root: Path
    conf: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm clients (sbatch, squeue, ...) and the jobs they submit."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=check, timeout=timeout)

    def queue(self) -> list[str]:
        """Job ids still known to squeue (pending, running or completing)."""
        out = self.run("squeue", "-h", "-r", "-o", "%i", check=False).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def wait_idle_queue(self, timeout: float = 600) -> None:
        """Wait until no job is pending or running."""
        deadline = time.monotonic() + timeout
        while self.queue():
            if time.monotonic() > deadline:
                raise ClusterError(f"jobs still queued after {timeout:.0f}s: {self.queue()}")
            time.sleep(0.25)

    def logs(self, lines: int = 20) -> str:
        """The last lines of every daemon log, for an error message."""
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel every job of this cluster, then stop slurmd, slurmctld and munged by their PIDs."""
        if self.processes.get("slurmctld") and self.processes["slurmctld"].poll() is None:
            self.run("scancel", "--user", str(os.getuid()), check=False)
            try:
                self.wait_idle_queue(timeout=30)
            except (ClusterError, subprocess.SubprocessError):
                pass  # the daemons are stopped below regardless
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_line(slurmd_c: str) -> str:
    """``slurmd -C``'s hardware line as a NodeName line for ``localhost`` (UpTime dropped)."""
    first = slurmd_c.strip().splitlines()[0]
    fields = [f for f in first.split() if not f.startswith(("NodeName=", "UpTime="))]
    return " ".join(["NodeName=localhost", "NodeHostname=localhost", *fields])


def write_conf(root: Path, node: str, *, ctld_port: int, slurmd_port: int, enforce_part_limits: bool = True) -> Path:
    """slurm.conf for a one-node cluster living entirely under ``root``."""
    user = _user_name()
    conf = root / "etc" / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=pinbench-test",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"SlurmUser={user}",
        f"SlurmdUser={user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge/munge.socket.2",
        f"StateSaveLocation={root}/state/ctld",
        f"SlurmdSpoolDir={root}/state/d",
        f"SlurmctldPidFile={root}/state/slurmctld.pid",
        f"SlurmdPidFile={root}/state/slurmd.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        f"EnforcePartLimits={'ALL' if enforce_part_limits else 'NO'}",
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MinJobAge=600",
        node,
        f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime={MAX_TIME_MINUTES} State=UP",
        "",
    ]))
    return conf


def start_cluster(root: Path, *, timeout: float = 60, enforce_part_limits: bool = True) -> LocalSlurm:
    """Start munged, slurmctld and slurmd under ``root`` (a new, empty directory) and wait for ``idle``.

    ``enforce_part_limits=False`` makes a cluster like many real ones: a job over a partition limit is
    accepted and then pends forever instead of being refused by sbatch.
    """
    missing = missing_binaries()
    if missing:
        raise ClusterError(f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)")
    root = root.resolve()
    for sub in ("munge", "etc", "state/ctld", "state/d", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for folder in (root, root / "munge"):
        folder.chmod(0o755)  # munged refuses a socket whose directories are not searchable by all
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    slurmd_c = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    conf = write_conf(root, node_line(slurmd_c), ctld_port=free_port(), slurmd_port=free_port(),
                      enforce_part_limits=enforce_part_limits)
    cluster = LocalSlurm(root=root, conf=conf)
    env = cluster.env
    try:
        socket_path = root / "munge" / "munge.socket.2"
        cluster.processes["munged"] = _spawn(
            ["munged", "-F", f"--socket={socket_path}", f"--key-file={key}", f"--pid-file={root}/munge/munged.pid",
             f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge/munged.seed"], root, env)
        _wait(lambda: socket_path.exists(), timeout, "munged socket", cluster)
        cluster.processes["slurmctld"] = _spawn(["slurmctld", "-D", "-i"], root, env)
        cluster.processes["slurmd"] = _spawn(["slurmd", "-D", "-N", "localhost"], root, env)
        _wait(lambda: _node_state(cluster) == "idle", timeout, "node idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _spawn(argv: list[str], root: Path, env: dict[str, str]) -> subprocess.Popen:
    name = Path(argv[0]).name
    log = (root / "log" / f"{name}.stdout").open("ab")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=root)


def _node_state(cluster: LocalSlurm) -> str:
    try:
        return cluster.run("sinfo", "-h", "-o", "%T", check=False, timeout=10).stdout.strip()
    except subprocess.TimeoutExpired:
        return ""


def _wait(ready, timeout: float, what: str, cluster: LocalSlurm) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        dead = [name for name, p in cluster.processes.items() if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            reason = f"{', '.join(dead)} exited" if dead else f"no {what} after {timeout:.0f}s"
            raise ClusterError(f"local Slurm did not start ({reason}):\n{cluster.logs()}")
        time.sleep(0.2)


def _user_name() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name

