"""Slurm through its command-line clients: submit (``sbatch``), ask (``scontrol``, ``sacct``), cancel (``scancel``).

Why the clients and not a library: they are on every login node, speak the cluster's own Slurm version,
and their refusals are what the user would see typing the command; we pass them on as one line.

Job states come from ``scontrol show job`` (the controller's memory: pending, running and recently ended
jobs, until ``MinJobAge``), then from ``sacct`` for older jobs when the cluster keeps accounting.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pinbench.core import processes
from pinbench.core.provenance import KEPT_SECRETS_ENV

TIMEOUT_S = 60
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
                      "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})
# Pending reasons that do not go away by waiting: the job would sit in the queue forever.
NEVER_STARTS = frozenset({"PartitionTimeLimit", "PartitionNodeLimit", "PartitionConfig", "BadConstraints",
                          "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed",
                          "DependencyNeverSatisfied", "QOSMaxWallDurationPerJobLimit", "QOSMaxGRESPerJob",
                          "QOSMaxCpuPerJobLimit", "QOSMaxNodePerJobLimit", "QOSMaxMemoryPerJob"})
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=(\S*)")
_JOB_ID = re.compile(r"^[0-9]+$")


class SlurmError(RuntimeError):
    """Slurm refused or could not be asked; one line."""


@dataclass(frozen=True)
class JobState:
    """One job, or one task of an array job, as Slurm reports it."""

    job_id: str  # the submitted id: "12" for the array, "13" for a single job
    array_task: int | None
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, ... or UNKNOWN
    reason: str = ""
    exit_code: str = ""  # "code:signal"
    node: str = ""

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL

    @property
    def never_ran(self) -> bool:
        """Cancelled while it pended: scontrol gives such a task no node (a pending array task cancelled alone
        leaves no record at all: ``unlisted``)."""
        return self.state == "CANCELLED" and not self.node

    @property
    def exit_status(self) -> int | None:
        """The job script's exit code (None when it has not ended or was killed by a signal)."""
        code, _, signal = self.exit_code.partition(":")
        if not self.ended or not code.isdigit() or signal not in ("", "0"):
            return None
        return int(code)

    def describe(self) -> str:
        text = self.state
        if self.state in ("PENDING", "UNKNOWN") and self.reason and self.reason != "None":
            text += f" ({self.reason})"
        if self.ended and self.exit_code and self.exit_code != "0:0":
            text += f" exit {self.exit_code}"
        if self.node and self.state != "PENDING":
            text += f" on {self.node}"
        return text


def missing_client(names: Iterable[str] = ("sbatch", "scontrol", "scancel")) -> str:
    """Why Slurm cannot be used from here ("" when its clients are on PATH)."""
    missing = [n for n in names if shutil.which(n) is None]
    return f"{', '.join(missing)} not found on PATH (run this on a Slurm login node)" if missing else ""


def _run(argv: Sequence[str], timeout: float = TIMEOUT_S,
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``argv``'s outcome; ``env``: variables added to this process's environment for it. Never ``KEPT_SECRETS_ENV``:
    sbatch handed it to each job (``--export=ALL``), whose ``pinbench run`` keeps the same values from its own -g
    options and ``--generator``, so it was one more copy of every secret in the job's recorded environment."""
    inherited = {name: value for name, value in os.environ.items() if name != KEPT_SECRETS_ENV}
    try:
        return processes.run(argv, timeout, env={**inherited, **(env or {})})
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found on PATH (run this on a Slurm login node)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer within {timeout:.0f}s (is slurmctld up?)") from None


def refusal(proc: subprocess.CompletedProcess) -> str:
    """The one line that says why a Slurm client failed: its last error line, without the program prefix."""
    lines = [line.strip() for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "failure" in line.lower()] or lines
    text = errors[-1] if errors else f"exit status {proc.returncode}"
    return re.sub(r"^(sbatch|scontrol|scancel|sacct): (error: )?", "", text)


def sbatch(script: Path, *, dependency: str | None = None, test_only: bool = False,
           env: Mapping[str, str] | None = None) -> str:
    """Submit ``script`` (``--test-only``: only ask whether the cluster could ever run it); the job id. ``env``: added
    to sbatch's environment, which Slurm hands the job (``--export=ALL``, its default)."""
    argv = ["sbatch", "--parsable"]
    argv += [f"--dependency={dependency}"] if dependency else []
    argv += ["--test-only"] if test_only else []
    proc = _run([*argv, str(script)], env=env)
    if proc.returncode != 0:
        raise SlurmError(f"sbatch refused {script}: {refusal(proc)}")
    if test_only:
        return ""
    job_id = proc.stdout.strip().split(";")[0]
    if not _JOB_ID.match(job_id):
        raise SlurmError(f"sbatch {script}: unexpected answer {proc.stdout.strip()!r}, expected a job id")
    return job_id


def scancel(job_ids: Sequence[str]) -> None:
    if job_ids:
        _run(["scancel", *job_ids])


def job_states(job_ids: Sequence[str]) -> dict[str, list[JobState]]:
    """Each submitted job's states (one per array task; an array's pending tasks expanded), by job id.

    A job Slurm no longer knows (ended longer ago than MinJobAge, no accounting) gets one UNKNOWN state.
    SlurmError when the controller cannot be asked at all.
    """
    found: dict[str, list[JobState]] = {}
    for job_id in job_ids:
        proc = _run(["scontrol", "show", "job", "-o", job_id])
        if proc.returncode == 0:
            found[job_id] = [s for line in proc.stdout.splitlines() if line.strip()
                             for s in parse_scontrol(job_id, line)]
        elif "invalid job id" not in (proc.stderr or "").lower():
            raise SlurmError(f"scontrol show job {job_id}: {refusal(proc)}")
    forgotten = [j for j in job_ids if not found.get(j)]
    if forgotten:
        found.update(_from_sacct(forgotten))
    return {j: found.get(j) or [JobState(j, None, "UNKNOWN", "Slurm no longer lists it")] for j in job_ids}


def unlisted(job_id: str, array_task: int) -> JobState:
    """An array task of a job Slurm answered for that its answer leaves out: a pending task cancelled alone drops
    out of the controller's records (scontrol, squeue), and only accounting, where a cluster keeps it, still
    knows it. Its shard's row read "-" beside a "not started" that nothing showed."""
    where = "not in squeue" + ("; no sacct" if shutil.which("sacct") is None else "")
    return JobState(job_id, array_task, "UNKNOWN", where)


def parse_scontrol(job_id: str, line: str) -> list[JobState]:
    """States from one ``scontrol show job -o`` record (a pending array range gives one state per task)."""
    fields: dict[str, str] = {}
    for key, value in _FIELD.findall(line):
        fields.setdefault(key, value)
    state = fields.get("JobState", "UNKNOWN")
    common = {"reason": fields.get("Reason", ""), "exit_code": fields.get("ExitCode", ""),
              "node": fields.get("NodeList", "") if fields.get("NodeList") != "(null)" else ""}
    tasks = fields.get("ArrayTaskId")
    if tasks is None:
        return [JobState(job_id, None, state, **common)]
    return [JobState(job_id, index, state, **common) for index in expand_indices(tasks)]


def expand_indices(text: str) -> list[int]:
    """Slurm's array index expression (``0-2``, ``1,3``, ``0-9:2``, ``0-7%2``) as the list of indices."""
    indices: list[int] = []
    for part in text.split("%")[0].strip("[]").split(","):
        span, _, step = part.partition(":")
        first, _, last = span.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or (step and not step.isdigit()):
            continue
        indices += list(range(int(first), int(last or first) + 1, int(step or 1)))
    return indices


def _from_sacct(job_ids: Sequence[str]) -> dict[str, list[JobState]]:
    """States of jobs the controller forgot, from accounting (empty when the cluster keeps none)."""
    if shutil.which("sacct") is None:
        return {}
    proc = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,ExitCode,Reason,NodeList"])
    if proc.returncode != 0:
        return {}
    found: dict[str, list[JobState]] = {}
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if len(parts) < 5:
            continue
        job, _, task = parts[0].partition("_")
        state = parts[1].split()[0] if parts[1] else "UNKNOWN"
        indices = expand_indices(task) if task else [None]
        found.setdefault(job, []).extend(JobState(job, i, state, parts[3], parts[2], parts[4]) for i in indices)
    return found
