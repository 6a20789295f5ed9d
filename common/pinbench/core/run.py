"""One run of a recipe, from its configuration to its scorecard: the protocol every recipe shares.

A recipe's ``run(run)`` reads as its benchmark's procedure (prepare, generate, score, finish); the ``Run`` it is
handed owns everything around those steps:

* resume: a per-sample step (``score``, ``compute``) stores each outcome as soon as it exists
  (``pinbench.core.runner``) and computes only what is not validly stored, in this run directory or, computed
  from the same inputs and code in another one, the sample cache (``pinbench.core.sample_cache``);
* shards: with ``--shard I/N`` a step computes shard I's samples; the first call that needs every task's record
  (``score``, ``gather``, ``store``) ends such a run right there, its samples stored and counted, and the merge
  (an unsharded run over the same directory) writes the scorecard;
* ``--skip-scoring`` / ``--skip-generation``: the steps of that part compute nothing and read what is stored;
* ``--fixture``: the recipe's small data, built once in the run directory (``fixture``);
* timings (``with run.step("score"):``) and the end: ``finish`` writes ``samples.jsonl`` (exactly the records
  aggregated), the scorecard, its diff against the recipe's reference, the failures and the report.

A finish whose scorecard would be computed from exactly what the existing one was (records, configuration,
declaration, reference, code: ``computed_from``) keeps that scorecard and its report; the diff is always given
afresh. A rerun of a finished directory whose inputs, code and options are those its finish recorded answers before
the recipe's code runs (``execute``; ``pinbench.core.rerun``). The exit code is the diff's when a reference exists
for the checkpoint and mode, else 0 for a complete run and 2 for a partial or failed one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from binascii import hexlify
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple, Protocol, TypeVar

from pinbench.core import rerun
from pinbench.core.config import Implementation, RecipeError, RunConfig, Shard, fetch_context, fetching_with
from pinbench.core.derived import DERIVED_PATH, DerivedRecord, write_derived
from pinbench.core.files import counted, first_names, write_if_changed
from pinbench.core.fixture_data import FIXTURE_DIR
from pinbench.core.generation import Generated, Generator, Request, generation_differences
from pinbench.core.inputs import InputDigests, input_digests
from pinbench.core.jsonfields import JsonObject
from pinbench.core.memory import release_free_memory
from pinbench.core.provenance import (
    collect_provenance,
    installed_versions,
    redact,
    to_jsonable,
)
from pinbench.core.recipe import Recipe, library_digest
from pinbench.core.reference import (
    EXIT_INCOMPLETE,
    DiffResult,
    Reference,
    input_hashes,
    judge,
    keeps_inputs,
    load_reference,
)
from pinbench.core.rundir import aside_names
from pinbench.core.runner import (
    BatchFn,
    NeverComputed,
    Pending,
    Reason,
    RunSummary,
    SampleFn,
    SampleRecord,
    StepLog,
    Validator,
    error_line,
    holds_records,
    input_hash,
    lost_text,
    merge_samples,
    missing_error,
    pending_tasks,
    recomputed_text,
    run_samples,
    stand_in,
    write_records,
)
from pinbench.core.sample_cache import MIN_SECONDS, SampleCache, cache_dir, prune, size_bound
from pinbench.core.scorecard import (
    DEFAULT_SAMPLES_PATH,
    NEVER_COMPUTED,
    MetricSpec,
    Scorecard,
    ScorecardError,
    build_scorecard,
    is_stand_in,
    load_scorecard,
    missing_reason,
    write_scorecard,
)
from pinbench.core.shard_manifest import renew_manifest
from pinbench.core.store import SAMPLES_DIR, log_name, read_store, seal, settle
from pinbench.core.task import Task

T = TypeVar("T")
ROLLOUTS = "rollouts"       # a generating run's rollouts, in the layout its recipe scores
GENERATION = "generation"   # its requests, the files they name, and the generation step's records
FAILURES_FILE = "failures.tsv"
REPORT = PurePosixPath("report", "index.html")
FAILURES_SHOWN = 5
REASONS_SHOWN = 3
REASON_CHARS = 200   # of a failed sample's reason shown, alone or by by_reason
_WORD = re.compile(r"[^\s:;,'\"()/.]*[/.][^\s:;,'\"()]*")   # a word of a reason that may name a file: a / or a .
_FILE_EXTENSIONS = {"mp4", "avi", "mov", "mkv", "webm", "gif", "png", "jpg", "jpeg", "json", "jsonl", "yaml", "yml",
                    "npy", "npz", "pt", "pth", "safetensors", "txt", "tsv", "csv", "h5", "tmp"}
PARTS = ("generation", "scoring")
# the implementation of every generation record (``Run.implementation``): no recipe code, only the image
GENERATION_VERSION, GENERATION_CODE = "generation", "request and generator signature"


class Figure(NamedTuple):
    """A PNG for the report: for the run, or for one sample (the report shows failures, the worst and best few)."""

    title: str
    png: Path
    caption: str
    sample_id: str | None = None


@dataclass
class RunOutcome:
    """What a run produced; ``exit_code`` is non-zero for failures, partial runs and diff FAILs."""

    scorecard_path: Path | None
    exit_code: int
    diff: DiffResult | None = None
    report_path: Path | None = None
    message: str = ""


class Reporter(Protocol):
    """Writes a run's report (``pinbench.results``, above the core, provides it)."""

    def __call__(self, scorecard: Path, out_dir: Path, *, reference: Reference | None,
                 samples: Sequence[SampleRecord | DerivedRecord], figures: Sequence[Figure], title: str) -> Path: ...


class Generation(Protocol):
    """The generation step a run is given (``pinbench.ops.generation``)."""

    def generate(self, run: Run, requests: Sequence[Request], folder: str,
                 default: Callable[[], Generator] | None) -> Path: ...


class RunStops(BaseException):
    """The run ends before its finish: one shard of many has stored its samples, or generation alone was asked for.

    A BaseException, so that a recipe's ``except Exception`` never swallows it."""

    def __init__(self, summary: RunSummary | None, why: str) -> None:
        super().__init__(why)
        self.summary, self.why = summary, why


class Run:
    """One run: its recipe, configuration and timings, and the steps every recipe shares (module docstring)."""

    def __init__(self, recipe: Recipe, cfg: RunConfig, *, report: Reporter | None = None,
                 generation: Generation | None = None, note: str | None = None) -> None:
        self.recipe, self.cfg = recipe, cfg
        self.timings: dict[str, float] = {}
        self.generation: Generated | None = None   # what generated the rollouts (set by the generation step)
        self.generation_failures: dict[str, str] = {}    # sample -> why its rollout was not made
        self.never_generated: dict[str, str] = {}   # sample -> why it counts missing (set by the generation step)
        self._report, self._generation = report, generation
        self._inputs: dict[str, str] | None = None   # the input paths' fingerprints when ``execute`` began
        # a note on the run's options (a likely typo of a checkpoint when the doctor was skipped): said once the
        # recipe's preparation is done (a step past "prepare", or the finish), or with a failure that is not the
        # recipe's own refusal of the name (``refuses_name``), which is then the one line
        self._note = note
        # one sample cache object per step (folder, part): ``compute`` takes the records ``pending`` found there
        self._caches: dict[tuple[str, str], SampleCache] = {}

    @property
    def out_dir(self) -> Path:
        return self.cfg.out_dir

    @property
    def options(self) -> Any:
        """The recipe's typed option values (``-o``, environment, defaults): one attribute per declared option."""
        return self.cfg.options

    @property
    def shard(self) -> Shard | None:
        return self.cfg.shard

    @property
    def generates(self) -> bool:
        """Whether the run makes its rollouts with a ``--generator``, rather than scoring the ones it is given."""
        return self.cfg.generator is not None

    @property
    def scores_generated(self) -> bool:
        """Whether the rollouts scored are the generation step's: made now (``--generator``) or, with
        ``--skip-generation``, those an earlier generating run stored in this directory; not given (``-o videos=``)."""
        return self.generates or (self.skips("generation") and self.recipe.requests_entry is not None)

    @property
    def requests_root(self) -> Path:
        """Where the run's generation requests and the files they name go (``pinbench.core.generation.staged``)."""
        return self.out_dir / GENERATION

    def requests(self, root: Path) -> list[Request]:
        """The run's generation requests (the recipe's ``requests:`` entry), the files they name under ``root``;
        RecipeError for a recipe that makes no rollouts."""
        if self.recipe.requests_entry is None:
            raise RecipeError(f"{self.recipe.name} generates no rollouts: it scores what it is given (see its README)")
        return list(self.recipe.load(self.recipe.requests_entry)(self, root))

    # ------------------------------------------------------------------------------------- preparing

    def recorded_path(self, folder: Path) -> str:
        """``folder`` as provenance records it: from the run directory when inside it (the fixture's data, a
        generating run's rollouts), so two runs in two folders do not differ by where they ran
        (``provenance.differences``); else absolute (``RunInputs.recorded`` reads both back)."""
        here, there = self.out_dir.resolve(), folder.resolve()
        return there.relative_to(here).as_posix() if there.is_relative_to(here) else str(there)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time a block as part of step ``name`` (the scorecard's ``timings``; repeated blocks add up)."""
        if name != "prepare":
            self._say_note()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def _say_note(self) -> None:
        if self._note:
            print(self._note, file=sys.stderr, flush=True)
            self._note = None

    def fixture(self, build: Callable[[Path], T]) -> T | None:
        """With ``--fixture``, the recipe's small data, built by ``build`` into the run directory (the builder
        writes it once: ``pinbench.core.fixture_data``); None for a run on real inputs."""
        return build(self.out_dir / FIXTURE_DIR) if self.cfg.fixture else None

    def digests(self) -> AbstractContextManager[InputDigests]:
        """The run directory's input digests (each input file hashed once per directory; ``--verify-inputs``
        hashes every one again)."""
        return input_digests(self.out_dir, verify=self.cfg.verify_inputs)

    # ------------------------------------------------------------------------------------- per-sample steps

    def skips(self, part: str) -> bool:
        """Whether this run computes nothing of ``part`` ("generation" or "scoring": its ``--skip-*`` flag)."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
        return self.cfg.skip_generation if part == "generation" else self.cfg.skip_scoring

    def implementation(self, part: str = "scoring") -> Implementation | None:
        """What a stored record of ``part`` must have been computed by to be reused. Scoring: the recipe's code
        (``cfg.implementation``). Generation: only the image it ran in; a rollout is keyed by its request and by
        the generator's signature (with its module files' SHA-256), which the step's validator checks, so a change
        to the recipe's scoring code does not cost the GPU-days of generating every rollout again."""
        implementation = self.cfg.implementation
        if part != "generation" or implementation is None:
            return self._scoring
        return Implementation(GENERATION_VERSION, GENERATION_CODE, implementation.image)

    @functools.cached_property
    def _scoring(self) -> Implementation | None:
        """``cfg.implementation`` knowing the versions of its ``numerics:`` the run directory's scorecard records,
        so that a record computed with those names what changed ("numpy 1.26.4 -> 2.0.0"), not the new ones alone."""
        implementation = self.cfg.implementation
        if implementation is None or not implementation.versions:
            return implementation
        installed = _earlier_distributions(self.out_dir / "scorecard.json")
        if installed is None:
            return implementation
        names = [line.partition("==")[0] for line in implementation.versions]
        return dataclasses.replace(implementation, earlier=installed_versions(names, installed))

    def compute(self, tasks: Sequence[Task], fn: SampleFn, *, label: str = "score", folder: str = "",
                part: str = "scoring", validate: Validator | None = None, batch_size: int = 1,
                batch_fn: BatchFn | None = None, devices: Sequence[str] = (), progress: bool = True,
                cache: bool | SampleCache = True, min_seconds: float = MIN_SECONDS) -> RunSummary:
        """This shard's records of a per-sample step (every task's when unsharded), stored under ``folder``:
        each pending task computed by ``fn`` (``validate`` accepts its result), the rest reused. With the
        ``--skip-*`` flag of ``part`` nothing is computed (an empty summary: ``gather`` reads what is stored).

        ``devices``: one worker process per device, each a part of this shard; ``fn`` is then called with the
        device, in its worker, to build the per-sample function (so it must be picklable). ``cache=False`` for a
        step whose results name files of this run directory, which another directory would not have, unless
        ``cache`` is a ``SampleCache`` that keeps those files too (the generation step's rollouts). A record that
        took less than ``min_seconds`` is not kept in the cache; 0 for a step whose ``fn`` only assembles what an
        external tool computed for the sample (``pending``): the record is all that tool's cost."""
        if self.skips(part):
            return RunSummary(n_total=0, n_done=0, n_reused=0, n_failed=0)
        if part == "scoring" and (self.generation_failures or self.never_generated) and not devices:
            fn = _NotGenerated(fn, self.generation_failures, self.never_generated)
        out = self.out_dir / folder
        samples = (cache if isinstance(cache, SampleCache) else self.sample_cache(folder, part, min_seconds) if cache
                   else None)
        kept = 0 if samples is None else samples.stored
        if devices and self.shard is None:  # its workers are parts of it, each settling only its own log
            for line in settle(out / SAMPLES_DIR, read_store(out / SAMPLES_DIR), own=log_name(None), every_log=True):
                print(f"{label}: {line}", flush=True)
        if devices:
            summary = _in_workers(tasks, fn, out, self.shard, list(devices), label=label, validate=validate,
                                  implementation=self.implementation(part), cache=samples)
        else:
            summary = run_samples(tasks, fn, out, shard=self.shard, implementation=self.implementation(part),
                                  validate=validate, step=label, batch_size=batch_size, batch_fn=batch_fn,
                                  progress=progress, cache=samples)
        # device workers store into their own copies of ``samples``: this one's count stays 0
        if samples is not None:
            self._bound(samples, samples.stored > kept or bool(devices and summary.n_done))
        return summary

    @staticmethod
    def _bound(samples: SampleCache, stored: bool) -> None:
        """Prune the sample cache to its bound once a step ``stored`` something there."""
        if not stored:
            return
        pruned = prune(samples.root, size_bound())
        if pruned.unlisted:
            print(f"sample cache: {pruned.unlisted}; not pruned to its bound", file=sys.stderr, flush=True)
        if pruned.unentered:
            print(f"sample cache: {pruned.unentered_line()}", file=sys.stderr, flush=True)

    def gather(self, tasks: Sequence[Task], summary: RunSummary | None = None, *, folder: str = "",
               validate: Validator | None = None, requests: Mapping[str, Sequence[str]] | None = None
               ) -> list[SampleRecord]:
        """Every task's record in task order, a task no process stored failed as missing (never dropped): from
        ``summary`` when it covers them, else from every shard's store under ``folder``; a failed one whose rollouts no
        run generated (``never_generated``; ``requests``: ``store``'s) as missing too. In one shard of many the run
        ends here: what follows needs the other shards' records (the merge's)."""
        if self.shard is not None:
            raise RunStops(summary, "the scorecard is written by the merge (an unsharded run over this directory)")
        if summary is not None and summary.covers(tasks):
            records = list(summary.records.values())
        else:
            records = merge_samples([self.out_dir / folder], tasks, implementation=self.cfg.implementation,
                                    validate=validate)
        never = {r.sample_id: why for r in records if not r.ok
                 for why in [self._never_generated(r.sample_id, requests)] if why is not None}
        return [stand_in(r.sample_id, r.input_hash, r.implementation, [never[r.sample_id]])
                if r.sample_id in never else r for r in records]

    def _never_generated(self, sample_id: str, requests: Mapping[str, Sequence[str]] | None) -> str | None:
        """Why no run generated any rollout of a sample (its requests ``requests[sample_id]``, else the request of its
        own id), or None when one was."""
        ids = requests.get(sample_id, ()) if requests is not None else (sample_id,)
        why = [self.never_generated.get(i) for i in ids]
        return "; ".join(dict.fromkeys(w for w in why if w)) if why and all(why) else None

    def score(self, tasks: Sequence[Task], fn: SampleFn, **step: Any) -> list[SampleRecord]:
        """``compute`` then ``gather``: every task's record (``step``: ``compute``'s keywords)."""
        return self.gather(tasks, self.compute(tasks, fn, **step), folder=step.get("folder", ""),
                           validate=step.get("validate"))

    def pending(self, tasks: Sequence[Task], *, folder: str = "", part: str = "scoring",
                validate: Validator | None = None, cache: bool = True) -> Pending:
        """What an external tool must still compute for this shard (and for any shard): the tasks without a
        reusable record under ``folder`` nor in the step's sample cache (``cache=False``: a step that consults its
        own, the generation's); nothing with the ``--skip-*`` flag of ``part``. The step's ``compute`` then takes
        the cached records this call read (``SampleCache.record_of``'s ``hold``), and its ``min_seconds=0`` keeps
        them all there."""
        if self.skips(part):
            return Pending([], [], {})
        return pending_tasks(self.out_dir / folder, tasks, shard=self.shard, implementation=self.implementation(part),
                             validate=validate, cache=self.sample_cache(folder, part) if cache else None)

    def store(self, tasks: Sequence[Task], results: Mapping[str, Mapping[str, Any] | BaseException], *,
              folder: str = "", label: str = "results", requests: Mapping[str, Sequence[str]] | None = None,
              pending: Pending | None = None, seconds: Mapping[str, float] | None = None) -> list[SampleRecord]:
        """Store results an external tool computed (ok, or an exception saying why the sample failed) for this
        shard's tasks, keeping a stored record that says the same, then ``gather`` every task's record. ``seconds``:
        the tool's time for each sample, which its record carries (0 where not given).

        ``pending``: what ``pending`` found for ``tasks`` before the tool ran: a task without a result whose record
        this directory holds (``kept``) keeps it; a task whose record only the sample cache held (``cached``: not
        sent to the tool) takes that record, with the seconds it took where it was computed; and every new ok record
        is kept there (``min_seconds=0``: the record is all the tool's cost), so another run directory sends the tool
        none of them.

        ``requests``: each sample's generation requests, where they are not the one of its own id (PAI-Bench-C's
        task: one per modality). A sample none of whose rollouts any run generated (``never_generated``) is stored as
        the stand-in ``gather`` makes of it, whatever the tool said of it (its values are of no rollout): the store
        alone then says it counts missing (``pinbench status`` while no ``samples.jsonl`` says so), not failed."""
        cache = None if pending is None else self.sample_cache(folder, min_seconds=0)
        cached = {task.sample_id for task in pending.cached} if pending is not None else set()
        kept = pending.kept if pending is not None else {}
        log = self.log(tasks, folder=folder, label=label)
        for task in log.mine:
            sid = task.sample_id
            never = self._never_generated(sid, requests)
            result = results.get(sid, KeyError(f"{sid}: no result"))
            found = cache.record_of(sid, input_hash(task)) if cache is not None and sid in cached else None
            took = (seconds or {}).get(sid, 0.0)
            if sid in kept and sid not in results:   # stored here, not sent to the tool: it stands
                log.keep(kept[sid])
            elif never is not None:
                log.record(sid, None, error=missing_error([never]))
            elif found is not None:
                log.record(sid, found.data["result"], seconds=float(found.data["seconds"]), reused=True)
            elif isinstance(result, BaseException):
                log.record(sid, None, error=error_line(result), seconds=took)
            elif (record := log.record(sid, result, seconds=took, reused=True)).ok and cache is not None:
                cache.put(record.input_hash, record.to_bytes())
        if cache is not None:
            self._bound(cache, cache.stored > 0)
        return self.gather(tasks, log.close(), folder=folder, requests=requests)

    def generate(self, requests: Sequence[Request], *, folder: str = ROLLOUTS,
                 default: Callable[[], Generator] | None = None) -> Path | None:
        """The rollouts of ``requests`` under ``folder`` of the run directory, made by the run's ``--generator``, else
        by the generator ``default`` makes (the recipe's own; made only when there is something to generate), each
        stored as soon as it is checked and reused for the same request and generator
        (``pinbench.core.generation``); with ``--skip-generation``, as an earlier run stored them, each checked against
        its request unless it is the file that run kept. None when there is nothing to generate with (the rollouts
        are given: ``-o videos=``). A shard generates its own; with ``--skip-scoring`` the run ends once they are
        stored."""
        if self._generation is None or not (self.scores_generated or default is not None):
            return None
        return self._generation.generate(self, requests, folder, default)

    def log(self, tasks: Sequence[Task], *, folder: str, label: str) -> StepLog:
        """The record of a step whose work runs outside the run's own loop, in batches an external tool launches
        (``pinbench.core.runner.StepLog``): this shard's tasks, stored under ``folder`` by this run's
        implementation."""
        return StepLog(tasks, self.out_dir / folder, step=label, shard=self.shard,
                       implementation=self.cfg.implementation)

    def stop_after_generation(self, summary: RunSummary | None, problems: Sequence[str] = ()) -> None:
        """End a shard or a ``--skip-scoring`` run once its generation is stored (a shard's generation is never
        scored on its own: the scoring sees every task)."""
        if self.shard is not None or self.cfg.skip_scoring:
            made = summary is None or summary.n_done + summary.n_reused > 0
            # when every rollout failed, "generation stored" read as rollouts kept for a later run to score
            stored = ("generation stored; scoring is a later run's" if made else
                      f"no rollout made: {counted(summary.n_failed + summary.n_missing, 'failure')} stored, "
                      "nothing to score")
            raise RunStops(summary, "; ".join(problems) or stored)

    def sample_cache(self, folder: str, part: str = "scoring", min_seconds: float = MIN_SECONDS
                     ) -> SampleCache | None:
        """The sample cache of the step stored under ``folder``, for records of ``part``'s implementation, keeping
        those that took ``min_seconds`` or more (None: the cache is off, or the run has no implementation to key
        records by). One object per step of the run: what ``pending`` read is what ``compute`` takes (a prune
        between them failed each sample the external tool was not sent) and an unusable entry is named once."""
        root, implementation = cache_dir(self.out_dir), self.implementation(part)
        if root is None or implementation is None:
            return None
        size_bound()   # a bound that is no size stops the run now, not once its samples are computed
        samples = self._caches.setdefault((folder, part),
                                          SampleCache(root, f"{self.recipe.name}/{folder}", implementation))
        samples.min_seconds = min_seconds
        return samples

    # ------------------------------------------------------------------------------------- the end

    def execute(self, entry: Callable[[Run], RunOutcome]) -> RunOutcome:
        """``entry(self)``, the recipe's procedure; a run that stops early (``RunStops``) says so and exits 0 when
        every sample it stored is ok, else 2."""
        answered = self._answer_unchanged()
        if answered is not None:
            return answered
        # what the path options name, as the run finds it before reading it (the finish records it: rerun)
        self._inputs = rerun.fingerprints(rerun.input_paths(self.recipe, self.cfg)) if rerun.applies(self.cfg) else None
        try:
            return entry(self)
        except Exception as error:
            if not refuses_name(str(error), self.cfg.checkpoint):
                self._say_note()
            raise
        except RunStops as stop:
            summary = stop.summary or RunSummary(n_total=0, n_done=0, n_reused=0, n_failed=0)
            failed = summary.failed_ids
            who = f"shard {self.shard} of {self.recipe.name}" if self.shard is not None else self.recipe.name
            message = (f"{who}: {counted(summary.n_total, 'sample')}: {summary.n_done} done, "
                       f"{summary.n_reused} reused, {lost_text(summary.n_failed, summary.n_missing)}"
                       + (f" ({', '.join(failed[:5])}{', ...' if len(failed) > 5 else ''})" if failed else "")
                       + f"; {stop.why}")
            print(message, flush=True)
            for line in _stopped_failures(summary):
                print(line, flush=True)
            code = EXIT_INCOMPLETE if failed else 0
            print(f"result: {'INCOMPLETE' if failed else 'STOPPED'} (exit {code}): stopped before the diff", flush=True)
            return RunOutcome(scorecard_path=None, exit_code=code, message=message)

    def finish(self, metrics: Sequence[MetricSpec], records: Sequence[SampleRecord], *,
               derived: Sequence[DerivedRecord] | Callable[[], Sequence[DerivedRecord]] = (),
               figures: Sequence[Figure] | Callable[[], Sequence[Figure]] = (),
               pins: JsonObject | None = None, seeds: JsonObject | None = None,
               extra: JsonObject | None = None, provenance: JsonObject | None = None) -> RunOutcome:
        """Write ``samples.jsonl``, the scorecard over ``records`` (one per task: ``gather``'s), its diff and report.

        ``derived``: records computed from many samples (``pinbench.core.derived``), counted apart, never as
        samples. ``figures``: PNGs for the report. Both may be functions, called only when the scorecard is
        computed. ``extra`` is what the scorecard says beyond its numbers, ``provenance`` where the inputs came
        from (beside ``pins`` and ``seeds``)."""
        self._say_note()
        recipe, cfg = self.recipe, self.cfg
        described = [spec.with_info(recipe.metric_info(spec.name)) for spec in metrics]
        stores, moved = seal(self.out_dir, {record.raw_digest(): record for record in records})
        for line in moved:  # what no run reads, moved aside: the scorecard pins a store every line of which is read
            print(f"{recipe.name}: {line}", flush=True)
        ref_path = self._reference_path()
        generation = self.generation.to_json() if self.generation else None
        computed_from = _computed_from(recipe, cfg, records, described, ref_path,
                                       {"pins": pins, "seeds": seeds, "extra": extra, "provenance": provenance,
                                        "generation": generation})
        scorecard_path = self.out_dir / "scorecard.json"
        report_path = self.out_dir / REPORT
        card = _unchanged(scorecard_path, report_path, computed_from)
        kept = card is not None
        earlier = None if kept else _earlier(scorecard_path)
        aside: list[str] = []
        if card is not None:
            print(f"{recipe.name}: nothing changed since the scorecard of {card.provenance['timestamp']}: "
                  "scorecard and report kept", flush=True)
            _confirm_scorecard(scorecard_path)
            if not holds_records(self.out_dir / card.samples.path, records):  # edited or removed since: put back
                write_records(records, self.out_dir / card.samples.path)
            if card.store != stores:  # lines moved aside since, or the scorecard of a version that pinned none
                card = dataclasses.replace(card, store=stores)
                write_scorecard(card, scorecard_path)
        else:
            derived = list(derived() if callable(derived) else derived)
            release_free_memory()   # what computing the derived records freed (pinbench.core.memory)
            card = build_scorecard(
                recipe=recipe.name, recipe_version=recipe.version, checkpoint=cfg.checkpoint, mode=cfg.mode,
                metrics=described, records=records, n_expected=len(records),
                provenance=collect_provenance(pins=dict(pins or {}), seeds=dict(seeds or {}),
                                              extra={**(provenance or {}),
                                                     **({"generation": generation} if generation else {})}),
                config=cfg.to_json(), timings=dict(self.timings), extra=dict(extra) if extra else None,
                derived=derived)
            card = dataclasses.replace(card, computed_from=computed_from, store=stores)
            why = _why_aside(earlier, card) if earlier is not None else None
            if earlier is not None and why is not None:
                aside = _keep_aside(self.out_dir, earlier, card, why)
            write_records(records, self.out_dir / card.samples.path)
            if card.derived is not None:
                write_derived(derived, self.out_dir / card.derived.path)
            else:
                (self.out_dir / DERIVED_PATH).unlink(missing_ok=True)  # an earlier version's, which no scorecard names
            write_scorecard(card, scorecard_path)
            for record in records:   # their results' JSON: written, hashed, and not read again (the report's peak)
                record.forget_texts()

        for line in aside:   # above the verdict: the run's last line is its result
            print(f"{recipe.name}: {line}", flush=True)
        reference, outcome = self._verdict(card, ref_path, records)
        if not kept and self._report is not None:
            report_path = self._report(scorecard_path, self.out_dir / REPORT.parent, reference=reference,
                                       samples=[*records, *derived],
                                       figures=list(figures() if callable(figures) else figures),
                                       title=f"{recipe.name} {recipe.version}: {cfg.checkpoint} ({cfg.mode})")
        complete = card.status == "complete" and card.samples.n_failed == card.samples.n_missing == 0
        rerun.write(self.out_dir, rerun.manifest_of(recipe, cfg, self._inputs)
                    if complete and self._inputs is not None else None)  # last: it holds the state of every file
        return dataclasses.replace(outcome, report_path=report_path if report_path.is_file() else None)

    def _reference_path(self) -> Path | None:
        """The reference this run is judged against (``Recipe.applicable_reference``: check, diff and the view ask
        it too)."""
        return self.recipe.applicable_reference(self.cfg.checkpoint, self.cfg.mode, self._generator)

    @property
    def _generator(self) -> str | None:
        made = self.generation.generator if self.generation else None   # with --skip-generation: an earlier run's
        return self.cfg.generator or made

    def _verdict(self, card: Scorecard, ref_path: Path | None,
                 records: Sequence[SampleRecord]) -> tuple[Reference | None, RunOutcome]:
        """The diff of a scorecard against the reference at ``ref_path`` (its results when there is none), written
        to ``diff.txt`` and printed, with the failures (``summarize_failures``)."""
        recipe, cfg = self.recipe, self.cfg
        reference = load_reference(ref_path, recipe=recipe) if ref_path is not None else None
        judged = judge(card, reference if reference is not None else
                       recipe.no_reference(cfg.checkpoint, cfg.mode, self._generator),
                       input_hashes(records) if reference is not None and keeps_inputs(reference) else None)
        write_if_changed(self.out_dir / "diff.txt", judged.message + "\n")
        # the failed samples above the verdict: the last line says the result and the exit code, diffed or not
        print(judged.body, flush=True)
        for line in summarize_failures(card, self.out_dir, records):
            print(line, flush=True)
        print(judged.last, flush=True)
        return reference, RunOutcome(scorecard_path=self.out_dir / "scorecard.json", exit_code=judged.exit_code,
                                     diff=judged.diff, message=judged.message)

    def _answer_unchanged(self) -> RunOutcome | None:
        """A finished run directory whose inputs, code and options are as its finish recorded them
        (``pinbench.core.rerun``): its scorecard and diff, the invocation recorded, nothing computed or read again."""
        manifest = rerun.unchanged(self.recipe, self.cfg)
        card = _unchanged(self.out_dir / "scorecard.json", self.out_dir / REPORT, None) if manifest else None
        if manifest is None or card is None:
            return None
        print(f"{self.recipe.name}: nothing changed since the scorecard of {card.provenance['timestamp']} (inputs, "
              f"code and options as {rerun.RERUN_FILE} records them): scorecard and report kept", flush=True)
        for relative in manifest.manifests:
            renew_manifest(self.out_dir / relative)
        outcome = self._verdict(card, self._reference_path(), ())[1]   # kept only when complete: none failed
        return dataclasses.replace(outcome, report_path=self.out_dir / REPORT)


def answer_unchanged(recipe: Recipe, cfg: RunConfig) -> RunOutcome | None:
    """A run of ``cfg`` answered from its finished run directory's manifest (``pinbench.core.rerun``), in the
    directory claimed for it: its scorecard and diff, before anything (the doctor, the recipe's code) is loaded;
    None when the run would compute or write anything."""
    from pinbench.core.rundir import claim_run_dir

    if rerun.unchanged(recipe, cfg) is None:   # looked at first without the claim: a fresh directory is not made
        return None
    with claim_run_dir(cfg):   # then again, once no other run can change it
        return Run(recipe, cfg)._answer_unchanged()


def refuses_name(error: str, checkpoint: str) -> bool:
    """Whether a failure's text is a recipe's refusal of a checkpoint's name: it names the checkpoint and says what
    was meant (``did_you_mean``). A path that holds the name (a weights folder not found) refuses something else."""
    return f"{checkpoint!r}" in error and "(did you mean " in error


class NotGenerated(Reason):
    """A sample whose rollout its generator did not make as asked: the generation step's reason (``no rollout: ...``,
    or ``invalid rollout: ...`` of a file that is there), not a missing file's."""


class _NotGenerated:
    """A scoring function that fails the samples whose rollouts were not generated, with why, and stores those no run
    generated (``never``) as the stand-ins ``gather`` makes of them, never scored: the store alone then says they
    count missing (``pinbench status`` before the gather writes samples.jsonl), as ``store`` stores them."""

    def __init__(self, fn: SampleFn, failures: Mapping[str, str], never: Mapping[str, str]) -> None:
        self.fn, self.failures, self.never = fn, failures, never

    def __call__(self, task: Task) -> Mapping[str, Any]:
        never = self.never.get(task.sample_id)
        if never is not None:
            raise NeverComputed(never)
        why = self.failures.get(task.sample_id)
        if why is not None:
            raise NotGenerated(why)
        return self.fn(task)


def _stopped_failures(summary: RunSummary) -> list[str]:
    """Up to five of a stopped run's failed samples with their one-line reason (a ``--skip-scoring`` run's
    generation, a shard's samples): a run that stops has no scorecard or failures.tsv to say why they failed."""
    failed = [(sid, redact(" ".join(str(rec.error or "failed").split()))) for sid, rec in summary.records.items()
              if not rec.ok]
    lines = [*by_reason(failed), *(f"  {sid}: {shown_reason(reason)}" for sid, reason in failed[:FAILURES_SHOWN])]
    if len(failed) > FAILURES_SHOWN:
        lines.append(f"  ... and {len(failed) - FAILURES_SHOWN} more")
    return lines


def shown_reason(reason: str) -> str:
    """The ``REASON_CHARS`` of a one-line reason that a run's ending shows, `` ...`` ending one cut there: cut
    silently, a long reason ended mid-sentence (``... as MIND's``) and read as whole."""
    return reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS] + " ..."


def by_reason(failed: Sequence[tuple[str, str]], shown: int = FAILURES_SHOWN) -> list[str]:
    """How many of ``failed`` (sample id, one-line reason) failed for each reason, most first, when there are more
    than the ``shown`` a list names: ten thousand samples missing for one cause read as one line, not as five
    examples and "... and 9,995 more". A reason is read without what names one sample: its id (``<sample>``) and
    any file (``<file>``: a path, or a word with a file extension), and as the ``REASON_CHARS`` shown of it: two
    reasons differing past them would read as one text twice. Only twice that many are read (a stored reason holds
    up to 2,000; read whole, 100,000 of them took 25 s)."""
    if len(failed) <= shown:
        return []
    counts = Counter(shown_reason(_files_as_one(_sample_as_one(sample, reason[:2 * REASON_CHARS])))
                     for sample, reason in failed)
    common = counts.most_common(REASONS_SHOWN)
    lines = [f"  by reason: {n} x {reason}" for reason, n in common]
    if len(counts) > REASONS_SHOWN:
        lines.append(f"  by reason: {counted(len(counts) - REASONS_SHOWN, 'other reason')}, "
                     f"{counted(len(failed) - sum(n for _, n in common), 'sample')}")
    return lines


def _sample_as_one(sample: str, reason: str) -> str:
    """``reason`` with each whole-word ``sample`` in it read as ``<sample>`` (sample ``a`` leaves ``ValueError``)."""
    if not sample or sample not in reason:
        return reason
    if reason.count(sample) > 4:   # one pass in C (compiled once per id) where a short id recurs
        return re.sub(rf"(?<![^\W]){re.escape(sample)}(?![^\W])", "<sample>", reason)
    parts, done = [], 0
    start = reason.find(sample)
    while start >= 0:
        end = start + len(sample)
        if not (start and _in_word(reason[start - 1]) or end < len(reason) and _in_word(reason[end])):
            parts += [reason[done:start], "<sample>"]
            done = end
        start = reason.find(sample, end)
    return "".join([*parts, reason[done:]])


def _in_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _files_as_one(reason: str) -> str:
    return _WORD.sub(_file_as_one, reason) if "/" in reason or "." in reason else reason


def _file_as_one(word: re.Match[str]) -> str:
    """A word that names a file as ``<file>``: with a file extension, or a path (from ``/``, ``.`` or ``~``, or of
    two ``/`` or more); ``frames/s`` and ``N/A`` stay words."""
    text = word.group()
    is_path = text[:1] in "/.~" and "/" in text or text.count("/") >= 2
    return "<file>" if is_path or "." in text and text.rpartition(".")[2].lower() in _FILE_EXTENSIONS else text


def summarize_failures(card: Scorecard, out_dir: Path, records: Sequence[SampleRecord] = ()) -> list[str]:
    """Every failed or missing (sample, metric) of a scorecard into ``failures.tsv``, and each failed one of the
    sample ``records`` that no metric names (metric ``-``: every metric of the recipe is derived from samples, as
    CameraBench's splits are); the lines to print: how many samples failed, up to five of them with their one-line
    reason, and where the full list is. Why the records: a run whose metrics are all derived said "failed: 0
    sample(s) and 3 derived record(s)" for 3 failed samples, and its list named none of them. A sample never
    computed (no record, or a merge's stand-in: ``is_stand_in``), or a value of it (``never_computed``), is counted
    missing, apart from the failed ones."""
    rows: list[tuple[str, str, str]] = []
    derived: set[str] = set()   # ids of derived records (a suite's scores), counted apart from the samples
    failed = [r for r in records if not r.ok]
    stand_ins = {r.sample_id: r.error or "" for r in failed if is_stand_in(r)}
    partly = [r for r in records if r.ok and isinstance(r.result, Mapping) and r.result.get(NEVER_COMPUTED)]
    missing = set(stand_ins)
    for name, metric in card.metrics.items():
        never = {} if metric.records == "derived" else {
            r.sample_id: why for r in partly for why in [missing_reason(r, metric.key or name)] if why}
        gone = metric.missing if metric.missing is not None else tuple(never)   # a cohort's names its own
        rows += [(f.sample_id, name, f.error) for f in metric.failed]
        rows += [(sample, name, stand_ins.get(sample) or never.get(sample) or "missing: no record for this sample")
                 for sample in gone]
        missing.update(gone)
        if metric.records == "derived":
            derived.update(f.sample_id for f in metric.failed)
    named = {sample for sample, _, _ in rows} - derived
    rows[:0] = [(r.sample_id, "-", r.error or "failed") for r in failed if r.sample_id not in named]
    path = out_dir / FAILURES_FILE
    if not rows:
        path.unlink(missing_ok=True)
        return []
    clean = [(sample, metric, redact(" ".join(str(reason).split()))) for sample, metric, reason in rows]
    write_if_changed(path, "sample_id\tmetric\treason\n" + "".join("\t".join(row) + "\n" for row in clean))
    first: dict[str, tuple[str, str]] = {}
    for sample, metric, reason in clean:
        first.setdefault(sample, (metric, reason))
    n_derived, n_missing = len(derived & first.keys()), len(missing & first.keys())
    samples = counted(len(first) - n_derived - n_missing, 'sample') + (
        f" and {counted(n_derived, 'derived record')}" if n_derived else "")
    lines = [f"failed: {samples} in {counted(len({m for _, m, _ in clean} - {'-'}), 'metric')}"
             + (f", missing: {counted(n_missing, 'sample')} never computed" if n_missing else "")
             + f"; full list: {path}"]
    lines += by_reason([(sample, reason) for sample, (_, reason) in first.items() if sample not in derived])
    lines += [f"  {sample} ({metric}): {shown_reason(reason)}" for sample, (metric, reason) in list(first.items())[
        :FAILURES_SHOWN]]
    if len(first) > FAILURES_SHOWN:
        lines.append(f"  ... and {len(first) - FAILURES_SHOWN} more")
    return lines


def _computed_from(recipe: Recipe, cfg: RunConfig, records: Sequence[SampleRecord], metrics: Sequence[MetricSpec],
                   reference: Path | None, context: Mapping[str, Any]) -> str:
    """SHA-256 of everything a scorecard and its report are computed from, but the clock: the records (by their
    digests: each record's bytes are hashed once), the configuration, the metrics and the declaration, the reference
    that applies, the recipe's code (in ``cfg.implementation``) and the library's (``library_digest``), and what the
    recipe describes."""
    digest = hashlib.sha256()
    parts = [json.dumps(to_jsonable({"config": cfg.to_json(), "n_expected": len(records), "context": context,
                                     "metrics": [spec.__dict__ for spec in metrics], "library": library_digest()}),
                        sort_keys=True, default=str).encode(),
             (recipe.dir / "recipe.yaml").read_bytes(), reference.read_bytes() if reference else b"",
             hexlify(b"".join([record.raw_digest() for record in records]))]   # each digest's hex, joined
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def _earlier_distributions(scorecard: Path) -> list[str] | None:
    """The ``name==version`` of every distribution the run that wrote ``scorecard`` had installed (its
    provenance's ``packages.distributions``), when it is readable and records them."""
    try:
        if not scorecard.is_file():   # nor a FIFO, which a read would wait on for ever
            return None
        found = json.loads(scorecard.read_bytes())["provenance"]["packages"]["distributions"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, list) and all(isinstance(line, str) for line in found) else None


def _earlier(scorecard: Path) -> Scorecard | None:
    """The scorecard a finish is about to replace, when there is a readable one."""
    try:
        return load_scorecard(scorecard) if scorecard.is_file() else None
    except ScorecardError:
        return None


def _why_aside(earlier: Scorecard, card: Scorecard) -> str | None:
    """Why the earlier scorecard is kept rather than replaced, or None: it scored other rollouts (another generator,
    other requests, rollouts given where these are generated), or it was complete and this one's numbers differ
    (code, options, inputs or a --limit changed). Either way it is the one place its numbers are left: its records
    were moved aside or are kept under other inputs. A partial one a rerun completes is replaced as before."""
    if generation_differences([("earlier", Generated.of(earlier.provenance)),
                               ("this run", Generated.of(card.provenance))]):
        return "other rollouts"
    if earlier.status != "complete":
        return None
    changed = [name for name in sorted(earlier.metrics.keys() | card.metrics.keys())
               if _shown_value(earlier, name) != _shown_value(card, name)]
    return f"other numbers: {first_names(changed)}" if changed else None


def _shown_value(card: Scorecard, name: str) -> str | None:
    """A metric's value and how many samples it scored, as compared for ``_why_aside`` (repr: a NaN equals a NaN;
    the count: a value every sample shares is the same mean over fewer); None when the card has none."""
    metric = card.metrics.get(name)
    return None if metric is None else repr((metric.value, metric.n_scored))


ASIDE_SHOWN = 3   # lines of what ran differently, after the line that says where the earlier scorecard went


def _keep_aside(out_dir: Path, earlier: Scorecard, card: Scorecard, why: str) -> list[str]:
    """Move the earlier scorecard and its records files into ``scorecard.aside-<UTC time>/`` (``aside_names``,
    as ``--move-aside`` names a run directory), where ``pinbench compare`` reads them. Why: a rerun with another
    generator, other code or options replaced the scorecard without a word, and the researcher lost the numbers.
    Returns the lines to print: where it went (``why``: ``_why_aside``), then up to ASIDE_SHOWN ways the two runs
    differ."""
    for target in aside_names(out_dir / "scorecard"):   # two such reruns within a second: the next name
        with suppress(FileExistsError):
            target.mkdir()
            break
    else:
        raise RecipeError(f"{out_dir}: the earlier scorecard was not moved aside: every scorecard.aside name is taken")
    for name in ("scorecard.json", card.samples.path, DERIVED_PATH):   # the names this finish writes, never ones
        if (out_dir / name).is_file():                                   # the earlier file says (edited: anywhere)
            os.replace(out_dir / name, target / PurePosixPath(name).name)
    labels = ("earlier", "this run")
    differ = [*generation_differences([(labels[0], Generated.of(earlier.provenance)),
                                       (labels[1], Generated.of(card.provenance))]),
              *earlier.ran_differently(card, labels)]
    return [f"the earlier scorecard (of {earlier.provenance.get('timestamp')}, {why}) moved to {target}; "
            f"to see what changed: pinbench compare {target} {out_dir}",
            *(f"  ran differently: {line}" for line in differ[:ASIDE_SHOWN])]


def _confirm_scorecard(path: Path) -> None:
    """Set a kept scorecard's mtime to now, its bytes as they are: its mtime says when a finish last stood behind it,
    which ``pinbench status`` compares with a submission's time (a resubmission that changed nothing had its scorecard
    called "from before the last submission", and ``status --wait`` exit 2 once Slurm forgot the jobs)."""
    with contextlib.suppress(OSError):   # not ours to touch (read-only, another user's): status calls it older
        os.utime(path)


def _unchanged(scorecard: Path, report: Path, computed_from: str | None) -> Scorecard | None:
    """The existing scorecard when it is valid and was computed from exactly this (any, for None), names the files
    a finish writes (a kept scorecard's records are written back to its ``samples.path``: one edited to name
    samples/run.jsonl or pinbench-run.json had the store or the run's identity overwritten), and its report
    exists."""
    if not (scorecard.is_file() and report.is_file()):
        return None
    try:
        card = load_scorecard(scorecard)
    except ScorecardError:
        return None
    if card.samples.path != DEFAULT_SAMPLES_PATH:
        return None
    return card if computed_from is None or card.computed_from == computed_from else None


# ------------------------------------------------------------------------------------------- workers


def _in_workers(tasks: Sequence[Task], build: Callable[[str], SampleFn], out_dir: Path, shard: Shard | None,
                devices: list[str], *, label: str, validate: Validator | None, implementation: Implementation | None,
                cache: SampleCache | None) -> RunSummary:
    """Part k of this shard on ``devices[k]``, each in its own (spawned) process; the parts' records merged. Each
    is sent the sample cache's records held for its own tasks alone (``SampleCache.part``)."""
    import multiprocessing

    whole, started = shard or Shard(0, 1), time.perf_counter()
    hashes = [] if cache is None else [input_hash(task) for task in tasks]
    shares = [whole.part(k, len(devices)) for k in range(len(devices))]
    jobs = [(list(tasks), build, out_dir, share, device, f"{label} [{device}]", validate, implementation,
             None if cache is None else cache.part(share.select(hashes)), k == 0, fetch_context())
            for k, (share, device) in enumerate(zip(shares, devices, strict=True))]
    with multiprocessing.get_context("spawn").Pool(len(devices), initializer=die_with_parent) as pool:
        parts = pool.map(_worker, jobs)
    records = {sid: record for part in parts for sid, record in part.records.items()}
    mine = whole.select([task.sample_id for task in tasks])
    recomputed: dict[str, int] = {}
    for part in parts:
        for reason, count in part.recomputed.items():
            recomputed[reason] = recomputed.get(reason, 0) + count
    summary = RunSummary(n_total=len(mine), n_done=sum(p.n_done for p in parts),
                         n_reused=sum(p.n_reused for p in parts), n_failed=sum(p.n_failed for p in parts),
                         n_missing=sum(p.n_missing for p in parts),
                         records={sid: records[sid] for sid in mine}, recomputed=recomputed,
                         n_cached=sum(p.n_cached for p in parts))
    # each part says its own counts (the first with its progress); the step's are these, of every device
    from_cache = f" ({summary.n_cached} from the sample cache)" if summary.n_cached else ""   # as one part says it
    said = (f"{label}: {counted(summary.n_total, 'sample')} on {counted(len(devices), 'device')}: "
            f"{summary.n_done} done, {summary.n_reused} reused{from_cache}, "
            f"{lost_text(summary.n_failed, summary.n_missing)} in {time.perf_counter() - started:.1f}s")
    print(said + (f"; {recomputed_text(recomputed)}" if recomputed else ""), file=sys.stderr, flush=True)
    return summary


def die_with_parent(*, group: bool = False, first: Callable[[], None] | None = None) -> None:
    """This process (with ``group``, its whole process group) is killed when the process that started it dies, a
    kill -9 included: a device worker of a killed run must not go on computing, nor a generator keep a GPU busy,
    for a run that is gone (a rerun could otherwise claim the directory while they still write to it). The watch
    blocks every signal: one sent to the process goes to its main thread, whose handler then interrupts what that
    thread waits on (a command guard's SIGTERM taken by the watch left the guard waiting on a stopped command).
    ``first`` runs before that kill: a guard's kill of what it adopted out of its group (the group's kill ended the
    guard)."""
    parent = os.getppid()

    def watch() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        while os.getppid() == parent:
            time.sleep(0.2)
        if first is not None:
            first()
        if group:
            os.killpg(0, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, daemon=True, name="pinbench-orphan-guard").start()


def _worker(job: tuple) -> RunSummary:
    """One device's part, in its spawned process: the fetch that a failed download names is the run's (handed over,
    as a spawned process starts without the run's context; it suggested a bare ``pinbench fetch <recipe>``)."""
    tasks, build, out_dir, part, device, label, validate, implementation, cache, progress, fetch = job
    with fetching_with(fetch):
        return run_samples(tasks, build(device), out_dir, shard=part, implementation=implementation,
                           validate=validate, progress=progress, step=label, cache=cache)
