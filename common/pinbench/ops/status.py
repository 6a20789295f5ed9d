"""``pinbench status <run dir>``: done / failed / pending per shard, the failures' reasons, Slurm's view.

Read from the run directory alone: the shard manifests (``shards/*.json``, which samples each shard
owns, with their input hashes) and the per-sample records (``samples/*.json``). A sample is *done* when
its record is ok for the same input (*partly missing* too when the record names values never computed,
``result["never_computed"]``: PAI-Bench-C's modality no run generated), *failed* when its record failed for the same
input (the reason is the record's one-line error), *missing* when it was never computed (its stored record, or the last
finish's ``samples.jsonl`` record, for the same input is a stand-in, ``is_stand_in``: no shard stored it, or no run
generated its rollout; the reason is the stand-in's), and *pending* otherwise (not started, in flight, lost with a
killed task, or stored for an older input). With a submission on record (``slurm/submissions.jsonl``) and Slurm
reachable, each array task's and each job's Slurm state is shown next to its samples. Shards past the last task
(more shards than tasks) that have not started own nothing: they are one line, not a row each.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pinbench.core.config import Shard
from pinbench.core.files import (
    FileError,
    aligned,
    counted,
    iter_finite_jsonl_file,
    loads_json,
    read_data_file,
    read_json_object,
)
from pinbench.core.provenance import printable
from pinbench.core.run import by_reason
from pinbench.core.rundir import LOCK_DIR, SLURM_DIR, lock_name, not_a_run_directory, process_alive
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import (
    DEFAULT_SAMPLES_PATH,
    NEVER_COMPUTED,
    Scorecard,
    is_stand_in,
    missing_reason,
    samples_text,
)
from pinbench.core.shard_manifest import ShardManifest, read_manifests
from pinbench.core.store import newest_records
from pinbench.ops import slurm
from pinbench.ops.submit import Submission, last_submission, log_name

MAX_LISTED = 20
NOT_ASKED, NOT_REACHABLE = "Slurm not asked", "Slurm not reachable"   # why a submission's Slurm states are missing
_LONGEST_SLEEP_S = 1e9   # 31 years: a finite --poll of 1e10 s or more ended the wait with time.sleep's OverflowError


@dataclass
class ShardStatus:
    index: int
    count: int
    done: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (sample id, reason)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (sample id, why the finish counted it missing)
    partly_missing: list[tuple[str, str]] = field(default_factory=list)  # done, some values never computed: why
    pending: list[str] = field(default_factory=list)
    started: bool = False
    finished_at: str | None = None   # when its manifest says it finished (ISO 8601); None: not finished
    running: bool | None = None   # started, not finished: its process alive (None: on another host, or unknown)
    host: str | None = None   # the other host whose run holds its lock (``running`` None): not checked from here
    slurm: slurm.JobState | None = None
    unheard: str = ""   # why its submitted job's Slurm state is missing (NOT_ASKED, NOT_REACHABLE); "": none missing

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def process(self) -> str:
        """What its process is doing: a shard killed by hand (no Slurm to say so) showed as "started" for ever."""
        if self.finished:
            return "finished"
        if not self.started:   # no manifest of this step: a live lock is a run preparing it or in an earlier step
            # "not started" beside a run on another node that holds it (a lock a job Slurm saw end left: its state)
            if self.host is not None and (self.slurm is None or not self.slurm.ended):
                return f"locked on host {printable(self.host)}"
            return "running" if self.running else self._without_manifest()
        if self.running:
            return "running"
        if self.running is None:   # a lock on another host, not checked from here: Slurm's word that its job ended
            return "stopped" if self.slurm is not None and self.slurm.ended else "started"
        # no live lock here: its job may still run (a lock on a node-local disk, or removed by hand), and Slurm's
        # word says whether it does; "stopped" beside a RUNNING job, or of a job no one asked, said it had ended
        job = self.slurm
        if job is not None and not job.ended and job.state != "UNKNOWN":
            return f"{job.state.lower()} (Slurm)"
        return f"no lock ({self.unheard})" if self.unheard else "stopped"

    def _without_manifest(self) -> str:
        """What Slurm's state says of a shard that wrote no manifest: CameraBench's array has no per-sample step,
        and its COMPLETED tasks read "not started"; a task Slurm no longer lists is not known to be anything."""
        job = self.slurm
        if job is None and self.unheard:   # its job may be running, or preparing it: not known to be "not started"
            return f"no manifest ({self.unheard})"
        if job is None or job.state == "PENDING":
            return "not started"
        if job.never_ran:
            return "cancelled before it started"
        if job.state == "UNKNOWN":
            return "unknown"
        return "ended (no manifest)" if job.ended else "running (no manifest yet)"


@dataclass(frozen=True)
class Writer:
    """The run.lock of a plain run or merge that may still be running, and the host it runs on when that is not
    this one: whether it still runs cannot be checked from here, so it is not said to be running."""

    lock: Path
    host: str | None = None
    pid: int | None = None


@dataclass
class RunStatus:
    out_dir: Path
    submission: Submission | None
    shards: list[ShardStatus]   # the layout's shards that own a task or started (all while no manifest says)
    n_shards: int               # the layout's shard count: the shards not in ``shards`` own no task
    n_tasks: int | None
    jobs: dict[str, list[slurm.JobState]]  # by job id, for every phase of the submission
    slurm_note: str  # why a submission's Slurm states are missing: not asked, or not reachable ("" when shown)
    scorecard: WrittenScorecard | str | None  # str: why scorecard.json is none
    writer: Writer | None = None   # the live plain run or merge that writes the scorecard

    @property
    def counts(self) -> dict[str, int]:
        return {"done": sum(len(s.done) for s in self.shards), "failed": sum(len(s.failed) for s in self.shards),
                "missing": sum(len(s.missing) for s in self.shards),
                "pending": sum(len(s.pending) for s in self.shards)}

    @property
    def live(self) -> bool:
        return _live(self.jobs)

    @property
    def stuck(self) -> list[slurm.JobState]:
        return _stuck(self.jobs)


def _live(jobs: Mapping[str, list[slurm.JobState]]) -> bool:
    """Some job of the submission is still queued or running."""
    return any(not s.ended and s.state != "UNKNOWN" for states in jobs.values() for s in states)


def _stuck(jobs: Mapping[str, list[slurm.JobState]]) -> list[slurm.JobState]:
    """Jobs Slurm holds for a reason that never clears: they would pend forever."""
    return [s for states in jobs.values() for s in states if s.state == "PENDING" and s.reason in slurm.NEVER_STARTS]


def run_status(out_dir: Path, *, ask_slurm: bool = True,
               asked: tuple[dict[str, list[slurm.JobState]], str] | None = None) -> RunStatus:
    """The status of a run directory; ValueError (one line) when it is not one. ``asked``: what Slurm just said of
    the last submission's jobs (``_slurm_states``), taken instead of asking again."""
    out_dir = Path(out_dir)
    read_once = functools.cache(read_manifests)   # the check reads them where nothing else makes it a run directory
    problem = not_a_run_directory(out_dir, read_once)   # a run claimed it (IDENTITY_FILE): before its first manifest
    if problem:
        raise ValueError(problem)
    submission = last_submission(out_dir)
    manifests = read_once(out_dir)
    count = submission.shards if submission else (manifests[-1].count if manifests else 1)
    layout = [m for m in manifests if m.count == count]
    step_dir = layout[-1].path.parent if layout else None  # the step that ran in this layout most recently
    scorecard = _scorecard(out_dir)
    stand_ins = functools.cache(lambda: _stand_ins(out_dir, scorecard))   # read only when a sample is not done
    shards, n_tasks = _shards([m for m in layout if m.path.parent == step_dir], count, stand_ins)
    for shard in shards:   # a plain run holds its lock before its first manifest, a shard still in an earlier step too
        if not shard.finished:
            shard.running, shard.host = _shard_lock(out_dir, shard)
    jobs, note = ({}, "" if ask_slurm or submission is None else f"{NOT_ASKED} (--no-slurm)")
    if ask_slurm and submission is not None:
        jobs, note = asked if asked is not None else _slurm_states(submission)
    for phase in submission.jobs if submission is not None else []:
        if not phase["sharded"]:
            continue
        if phase["job_id"] not in jobs:   # Slurm was not asked, or could not be
            for shard in shards:
                shard.unheard = NOT_REACHABLE if ask_slurm else NOT_ASKED
            continue
        by_task = {s.array_task: s for s in jobs[phase["job_id"]]}
        for shard in shards:
            shard.slurm = by_task.get(shard.index) or slurm.unlisted(phase["job_id"], shard.index)
    return RunStatus(out_dir=out_dir, submission=submission, shards=shards, n_shards=count, n_tasks=n_tasks,
                     jobs=jobs, slurm_note=note, scorecard=scorecard, writer=_writer(out_dir))


def _writer(out_dir: Path) -> Writer | None:
    """The run.lock of a plain run or merge that may still be running (alive, or on another host): between its
    last finished step and its scorecard it was told to run again."""
    lock = out_dir / LOCK_DIR / f"{lock_name(None)}.lock"
    holder = read_json_object(lock) if os.path.lexists(lock) else None
    if holder is None or (alive := process_alive(holder)) is False:
        return None
    if alive:
        return Writer(lock)
    pid = holder.get("pid")
    return Writer(lock, host=_host(holder),
                  pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None)


def _shard_lock(out_dir: Path, shard: ShardStatus) -> tuple[bool | None, str | None]:
    """Whether the process holding the shard's lock still runs (False without a lock: its process has ended; None
    when it cannot be told), and the other host that holds it, if one does. Shard 0 of 1 is an unsharded run's
    too, which holds ``run.lock``: without it every live plain run showed "stopped"."""
    names = [lock_name(Shard(shard.index, shard.count)), *([lock_name(None)] if shard.count == 1 else [])]
    holders = [read_json_object(lock) for name in names if os.path.lexists(lock := out_dir / LOCK_DIR / f"{name}.lock")]
    alive = [None if holder is None else process_alive(holder) for holder in holders]   # None: names no holder
    hosts = [_host(holder) for holder, live in zip(holders, alive, strict=True)
             if holder is not None and live is None]
    if True in alive:
        return True, None
    return (None, hosts[0] if hosts else None) if None in alive else (False, None)


def _host(holder: Mapping[str, object]) -> str:
    """The host a lock's holder names (another one's: its process cannot be checked from here)."""
    return str(holder.get("host") or "unknown")


def _shards(manifests: list[ShardManifest], count: int, stand_ins: Callable[[], Mapping[str, SampleRecord]]
            ) -> tuple[list[ShardStatus], int | None]:
    """Per shard of ``count`` that owns a task or has a manifest of its own: its samples by state, judged against its
    own manifest, else the newest one; every shard while no manifest says how many tasks there are. A shard past the
    last task owns none: 6 tasks in 4,000,000 shards were 4,000,000 rows, built and printed in 19-21 s."""
    if not manifests:
        return [ShardStatus(i, count) for i in range(count)], None
    newest = manifests[-1]
    own = {m.index: m for m in manifests}  # later (newer) manifests of a shard win
    for manifest in own.values():   # else the per-shard counts add up to another number of tasks than the run's
        if len(manifest.sample_ids) != len(newest.sample_ids):
            raise ValueError(f"{manifest.path}: lists {counted(len(manifest.sample_ids), 'task')}, {newest.path} "
                             f"{len(newest.sample_ids)}: the shards of one run disagree on its tasks (a manifest "
                             "edited or left from another run); run that shard again")
    shards = [ShardStatus(i, count) for i in sorted({*range(min(count, len(newest.sample_ids))), *own})]
    owned = {shard.index: [(manifest.sample_ids[pos], manifest.input_hashes[pos])
                           for manifest in (own.get(shard.index, newest),) for pos in manifest.owned(shard.index)]
             for shard in shards}
    records = newest_records(newest.samples_dir, {task for tasks in owned.values() for task in tasks},
                             _judged)
    for shard in shards:
        shard.started = shard.index in own
        shard.finished_at = own[shard.index].finished if shard.started else None
        for sid, expected in owned[shard.index]:
            record = records.get((sid, expected))
            # the store's record says so itself (a run storing a never-generated sample), else the finish's stand-in
            if record is not None and record.stand_in:
                never: str | None = record.error or "missing"
            elif record is None or not record.ok:
                stand_in = stand_ins().get(sid)
                never = (stand_in.error or "missing") if stand_in is not None and stand_in.input_hash == expected \
                    else None
            else:
                never = None
            if never is not None and (record is None or not record.ok):
                shard.missing.append((sid, never))   # as the scorecard counts it
            elif record is None:
                shard.pending.append(sid)
            elif record.ok:
                shard.done.append(sid)
                if record.partly:
                    shard.partly_missing.append((sid, record.partly))
            else:
                shard.failed.append((sid, record.error or "failed"))
    return shards, len(newest.sample_ids)


@dataclass(frozen=True, slots=True)
class _Judged:
    """What status shows of a sample's record: all it keeps of it (the records were held whole, 494 MiB peak RSS
    for a 10x CameraBench run of 112,220 samples)."""

    ok: bool
    stand_in: bool   # ``is_stand_in``: a sample no run generated, stored as such
    error: str | None
    partly: str      # an ok record's values never computed, why ("" for none)


def _judged(data: dict) -> _Judged | None:
    try:
        record = SampleRecord.from_json(data)
    except ValueError:
        return None
    partly = "; ".join(why for key in sorted(_never_computed_keys(record)) if (why := missing_reason(record, key))) \
        if record.ok else ""
    return _Judged(record.ok, is_stand_in(record), record.error, partly)


def _never_computed_keys(record: SampleRecord) -> list[str]:
    """The keys or groups an ok record names in ``result["never_computed"]`` (``scorecard.never_computed``)."""
    named = record.result.get(NEVER_COMPUTED) if isinstance(record.result, Mapping) else None
    return [str(key) for key in named] if isinstance(named, Mapping) else []


def _stand_ins(out_dir: Path, written: WrittenScorecard | str | None) -> dict[str, SampleRecord]:
    """The samples the scorecard counts missing, by id: the stand-ins (``is_stand_in``) of its ``samples.jsonl``.

    Why: a sample no run generated (or no shard stored) has a failed record in the store ('rollout not found'), or
    none; status called it failed where the scorecard and ``pinbench check`` count it missing. Read leniently, as
    the scorecard is: no readable file, no stand-ins."""
    card = written.card if isinstance(written, WrittenScorecard) else None
    path = out_dir / (card.samples.path if card is not None and card.samples.path else DEFAULT_SAMPLES_PATH)
    if not path.is_file():
        return {}
    try:
        records = iter_finite_jsonl_file(path, SampleRecord.from_json, "sample record")
        return {r.sample_id: r for r in records if is_stand_in(r)}
    except (OSError, ValueError):
        return {}


def _slurm_states(submission: Submission) -> tuple[dict[str, list[slurm.JobState]], str]:
    problem = slurm.missing_client(["scontrol"])
    if problem:
        return {}, f"{NOT_REACHABLE}: {problem}"
    try:
        return slurm.job_states(submission.job_ids), ""
    except slurm.SlurmError as exc:
        return {}, f"{NOT_REACHABLE}: {exc}"


@dataclass(frozen=True)
class WrittenScorecard:
    """The run directory's scorecard and when it was written."""

    card: Scorecard
    mtime: float


def _scorecard(out_dir: Path) -> WrittenScorecard | str | None:
    """The scorecard as its file stands, read leniently (its types, not the schema's or the counts' rules: a view,
    not a check); None when there is none, else why it is no scorecard (one line naming it). Read only as a regular
    file: a FIFO there hung ``status`` (and ``--wait``), and a file that is no scorecard was shown as none."""
    path = out_dir / "scorecard.json"
    if not (path.exists() or path.is_symlink()):
        return None
    try:
        data = loads_json(read_data_file(path))
        if not isinstance(data, dict):
            raise FileError(path, f"a JSON {type(data).__name__}, not a scorecard")
        return WrittenScorecard(Scorecard.from_json(data), path.stat().st_mtime)
    except FileError as exc:
        return str(exc)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"{path}: not a scorecard ({type(exc).__name__}: {exc})"


# ------------------------------------------------------------------------------------------ rendering


def render(status: RunStatus) -> str:
    """The status as plain text for a terminal or a job log."""
    lines = [f"run        {status.out_dir}"]
    sub = status.submission
    if sub is not None:
        lines.append(f"recipe     {sub.recipe} {sub.recipe_version} ({sub.which}), "
                     f"{counted(sub.shards, 'shard')}, container {sub.container}")
        jobs = ", ".join(f"{j['phase']} = job {j['job_id']}" for j in sub.jobs)
        lines.append(f"submitted  {sub.submitted}: {jobs}")
    tasks = "? tasks" if status.n_tasks is None else counted(status.n_tasks, "task")
    counts = status.counts
    partly = [(s, *row) for s in status.shards for row in s.partly_missing]
    lines.append(f"samples    {tasks}: {counts['done']} done"
                 f"{f' ({len(partly)} partly missing)' if partly else ''}, {counts['failed']} failed, "
                 f"{counts['missing']} missing, {counts['pending']} pending")
    if status.n_tasks is None and status.jobs and not status.live:   # camerabench's array: nothing per sample
        lines.append("           (no shard manifest: every job has ended, and no shard reached a per-sample step)")
    elif status.n_tasks is None:
        lines.append("           (no shard manifest yet: a shard writes one when its per-sample step starts)")
    table = [["shard", "done", "failed", "missing", "pending", "process", "slurm"]]
    for shard in status.shards:
        table.append([f"{shard.index}/{shard.count}", str(len(shard.done)), str(len(shard.failed)),
                      str(len(shard.missing)), str(len(shard.pending)), shard.process,
                      shard.slurm.describe() if shard.slurm else "-"])
    if sub is not None:
        for job in sub.jobs:
            if not job["sharded"] and status.jobs.get(job["job_id"]):
                table.append([job["phase"], "", "", "", "", "", status.jobs[job["job_id"]][0].describe()])
    lines += ["", *aligned(table, rule=False)]
    if status.n_shards > len(status.shards):
        idle = status.n_shards - len(status.shards)
        lines.append(f"{counted(idle, 'other shard')} of {status.n_shards} {'owns' if idle == 1 else 'own'} no task "
                     f"and {'has' if idle == 1 else 'have'} not started")
    if status.slurm_note:   # no job is known live, none known ended either: the run is not said to have stopped
        lines.append(f"{status.slurm_note}; jobs of this run may still be running")
    for job in status.stuck:
        task = "" if job.array_task is None else f"_{job.array_task}"
        lines.append(f"job {job.job_id}{task} will never start ({job.reason}): cancel it (scancel {job.job_id}) and "
                     "submit again with a request the partition allows")
    lines += _failed_jobs(status)
    lines += _listed("failed samples:", [(s, *row) for s in status.shards for row in s.failed])
    lines += _listed("missing samples (never computed; the scorecard counts them missing):",
                     [(s, *row) for s in status.shards for row in s.missing])
    lines += _listed("partly missing samples (done; the scorecard counts these values missing):", partly)
    pending = [f"{sid} (shard {s.index}/{s.count})" for s in status.shards for sid in s.pending]
    if pending:
        shown = ", ".join(pending[:MAX_LISTED]) + (f", ... and {len(pending) - MAX_LISTED} more"
                                                  if len(pending) > MAX_LISTED else "")
        lines += ["", f"pending samples: {shown}"]
    lines += ["", _scorecard_line(status)]
    return "\n".join(lines)


def _failed_jobs(status: RunStatus) -> list[str]:
    """Each job or array task of the submission that ended other than COMPLETED, with its log: a task failing before
    its first sample (an input its node cannot read) left every count at 0 and nothing said where the reason was.
    One that ran to its end and exited 2 for its failed samples (``_ended_with_failed_samples``) is listed apart:
    "failed jobs" called it crashed beside the ones that were."""
    sub = status.submission
    if sub is None:
        return []
    logs = status.out_dir / SLURM_DIR / "logs"
    crashed, ended = [], []
    for job in sub.jobs:
        for state in sorted(status.jobs.get(job["job_id"], []), key=lambda s: s.array_task or 0):
            if state.ended and state.state != "COMPLETED":
                log = logs / log_name(job["phase"], state.job_id, state.array_task)
                task = "" if state.array_task is None else f"_{state.array_task}"
                where = f"log {log}" if log.is_file() else "no log (it never started)"
                rows = ended if _ended_with_failed_samples(status, job["sharded"], state) else crashed
                rows.append(f"  job {state.job_id}{task} ({job['phase']}) {state.describe()}: {where}")
    return [*_jobs_block("ended with failed samples (the job ran to its end; its failed samples are listed below):",
                         ended),
            *_jobs_block("failed jobs (each log says why):", crashed)]


def _ended_with_failed_samples(status: RunStatus, sharded: bool, state: slurm.JobState) -> bool:
    """Whether a job exited 2 after running to its end with failed samples counted. Exit 2 alone does not say so (a
    bad input's one-line error exits 2 too): what it wrote must, its shard's manifest saying it finished with failed
    samples since the submission, or (the finish job) a scorecard written after the submission counting failed
    samples."""
    if state.exit_status != 2 or status.submission is None:
        return False
    if sharded:   # finished since the submission: a manifest an earlier submission's job finished says nothing of it
        return any(s.index == state.array_task and s.failed and _finished_since(s, status.submission.submitted)
                   for s in status.shards)
    written = status.scorecard
    return isinstance(written, WrittenScorecard) and written.card.samples.n_failed > 0 \
        and written.mtime >= _epoch(status.submission.submitted)


def _finished_since(shard: ShardStatus, submitted: str) -> bool:
    """Whether the shard's manifest says it finished at or after ``submitted`` (a time it does not hold, a manifest
    edited by hand, says not)."""
    try:
        return shard.finished_at is not None and _epoch(shard.finished_at) >= _epoch(submitted)
    except (TypeError, ValueError):
        return False


def _jobs_block(title: str, rows: list[str]) -> list[str]:
    if not rows:
        return []
    more = [f"  ... and {len(rows) - MAX_LISTED} more"] if len(rows) > MAX_LISTED else []
    return ["", title, *rows[:MAX_LISTED], *more]


def _listed(title: str, rows: list[tuple[ShardStatus, str, str]]) -> list[str]:
    """A block of (shard, sample, reason) rows under ``title``: counted by reason when there are more than
    ``MAX_LISTED`` (``by_reason``), then the first ``MAX_LISTED`` of them; none: no block."""
    if not rows:
        return []
    lines = ["", title, *by_reason([(sid, reason) for _, sid, reason in rows], MAX_LISTED),
             *(f"  {sid} (shard {s.index}/{s.count}): {reason}" for s, sid, reason in rows[:MAX_LISTED])]
    return lines + ([f"  ... and {len(rows) - MAX_LISTED} more"] if len(rows) > MAX_LISTED else [])


def _scorecard_line(status: RunStatus) -> str:
    written = status.scorecard
    writer = status.writer
    if written is None and writer is not None and writer.host is not None:
        pid = f" (pid {writer.pid})" if writer.pid is not None else ""
        return (f"scorecard  not written yet: {writer.lock} is held by a run on host {printable(writer.host)}{pid}, "
                "which cannot be checked from here: see there whether it still runs")
    if written is None and writer is not None:
        return f"scorecard  not written yet: the run holding {writer.lock} is still running"
    if written is None:
        stored = status.shards and all(s.finished for s in status.shards) and not status.counts["pending"] \
            and not status.live and not status.slurm_note   # --skip-scoring, or shards: nothing of theirs writes it
        # (Slurm not asked: a finish job may be queued or writing it)
        return "scorecard  not written yet" + (": every shard has finished; the same pinbench run without --shard "
                                               "and --skip-scoring scores what they stored and writes it"
                                               if stored else "")
    if isinstance(written, str):
        return f"scorecard  unreadable: {written}"
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(written.mtime))
    stale = ""
    if status.submission is not None and _epoch(status.submission.submitted) > written.mtime:
        stale = " (from before the last submission)"
    return f"scorecard  {written.card.status}: {samples_text(written.card)}; written {when}{stale}"


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


# -------------------------------------------------------------------------------------------- waiting


def wait(out_dir: Path, *, poll_s: float = 5.0, timeout_s: float | None = None) -> tuple[RunStatus, int]:
    """Poll until no job of the last submission is queued or running; (final status, exit code).

    A job held for a reason that never clears (over a partition limit) ends the wait with exit 2. The exit
    code is otherwise the last phase's (the finish job's, the same codes as ``pinbench run``) when Slurm
    still knows it; otherwise 0 for a complete scorecard written (or kept, its mtime renewed) after the submission,
    else 2.
    """
    if not (isinstance(poll_s, (int, float)) and math.isfinite(poll_s) and poll_s > 0):
        raise ValueError(f"--poll {poll_s}: seconds between looks must be a finite number above 0")
    if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s)
                                      and timeout_s >= 0):
        raise ValueError(f"--timeout {timeout_s}: seconds must be a finite number, 0 or more")
    submission = last_submission(Path(out_dir))
    if submission is None:
        raise ValueError(f"{out_dir}: nothing submitted (no {Path(out_dir) / 'slurm' / 'submissions.jsonl'})")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:   # Slurm alone is asked each look: the samples are read once, at the end (a look read every record)
        asked = _slurm_states(submission)
        jobs, note = asked
        if note:
            raise ValueError(f"{out_dir}: cannot wait: {note}")
        ended, stuck = not _live(jobs), bool(_stuck(jobs))
        if ended or stuck or (deadline is not None and time.monotonic() > deadline):
            break
        time.sleep(min(poll_s, _LONGEST_SLEEP_S))
    status = run_status(out_dir, asked=asked)   # the status of the look that ended the wait, not of one more
    return status, _final_code(status) if ended else 2


def _final_code(status: RunStatus) -> int:
    assert status.submission is not None
    last = status.jobs.get(status.submission.jobs[-1]["job_id"], [])
    code = last[0].exit_status if last else None
    if code is not None:
        return code
    return 0 if _complete(status) else 2


def _complete(status: RunStatus) -> bool:
    """A complete scorecard, written (or kept, its mtime renewed) after the last submission when there is one."""
    written = status.scorecard
    fresh = isinstance(written, WrittenScorecard) and (
        status.submission is None or written.mtime >= _epoch(status.submission.submitted))
    return fresh and written.card.status == "complete"


def exit_code(status: RunStatus) -> int:
    """Plain ``pinbench status``'s exit code: 0 while a job, a shard's process on this host (one run by hand) or the
    writer of the run is live (a progress view) and for a complete scorecard; else 2, the code ``--wait`` gives a run
    that ended without one, so that a CI script gating on it never passes a partial run. Jobs Slurm was not asked of
    (``--no-slurm``) or could not answer for are not known live: 2 for a partial run, whose render says that they may
    still be running."""
    live = status.live or status.writer is not None or any(shard.running for shard in status.shards)
    return 0 if live or _complete(status) else 2
