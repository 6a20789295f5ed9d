"""pinbench submit and status against a real single-node Slurm (munged, slurmctld, slurmd started per session).

Fixture runs of two recipes go through the whole path a cluster user takes: ``pinbench submit`` writes and
submits a 3-task array plus the finish job, ``pinbench status --wait`` follows them, and the result is
compared with a plain single-process run of the same fixture: the same scorecard and the same per-sample
values. Then the ways it goes wrong: a task cancelled mid-run and a resubmission, a shard that crashes,
requests the cluster cannot satisfy, a second submission while the first is live.

Skipped (with the reason) only where slurm-wlm or munge is not installed; .ci/run installs them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stopped import stop_pid

from pinbench.core.derived import read_derived
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import load_records, read_merged
from pinbench.core.shard_manifest import read_manifests
from pinbench.core.store import read_store
from pinbench.ops.launch import run_recipe
from pinbench.ops.status import run_status

pytestmark = pytest.mark.slurm
PINBENCH = str(Path(sys.executable).parent / "pinbench")
WAIT_S = 1500


def _pinbench(cluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([PINBENCH, *args], env=cluster.env, capture_output=True, text=True, timeout=timeout)


def _submit(cluster, recipe: str, out: Path, *extra: str, shards: int = 3) -> list[str]:
    """Submit a fixture run of ``shards`` shards (3); the job ids of its phases."""
    proc = _pinbench(cluster, "submit", recipe, "--shards", str(shards), "--fixture", "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    assert f"follow: pinbench status {out} --wait" in proc.stdout
    record = json.loads((out / "slurm" / "submissions.jsonl").read_text().splitlines()[-1])
    ids = [job["job_id"] for job in record["jobs"]]
    for job_id in ids:
        assert f"job {job_id} " in proc.stdout  # the ids are printed
    return ids


def _wait(cluster, out: Path) -> tuple[int, str]:
    proc = _pinbench(cluster, "status", str(out), "--wait", "--poll", "0.5", timeout=WAIT_S)
    assert "Slurm not reachable" not in proc.stdout, proc.stdout + proc.stderr
    return proc.returncode, proc.stdout


@pytest.fixture(scope="module")
def plain_runs(tmp_path_factory) -> dict[str, Path]:
    """Each recipe's fixture, run once in one plain process (no shards, no Slurm): the expected result."""
    runs: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in runs:
            recipe = get_recipe(name)
            out = tmp_path_factory.mktemp(f"plain-{name}")
            outcome = run_recipe(recipe.config(fixture=True, out_dir=out, offline=True))
            assert outcome.exit_code == 0, outcome.message
            runs[name] = out
        return runs[name]

    return get


def _results(out: Path) -> list[tuple[str, str, dict | None]]:
    return [(r.sample_id, r.status, r.result) for r in read_merged(out / "samples.jsonl")]


def _card(out: Path) -> dict:
    card = json.loads((out / "scorecard.json").read_text())
    return {"status": card["status"], "samples": card["samples"], "metrics": card["metrics"],
            "derived": card.get("derived"), "recipe_version": card["recipe_version"], "mode": card["mode"]}


def _records(out: Path) -> dict[str, str]:
    """Each sample's newest stored record, by the digest of its bytes."""
    contents = read_store(out / "samples")
    return {sid: contents.newest(sid).digest for sid in sorted(contents.records)}


# ---------------------------------------------------------------------------------------- the happy path


@pytest.mark.parametrize("recipe", ["dynamic-degree"])   # every recipe's layout: tests/test_fixtures.py, in process
def test_a_three_shard_array_gives_the_plain_runs_scorecard_and_samples(slurm_cluster, plain_runs, tmp_path: Path,
                                                                       recipe: str) -> None:
    """The plain array and finish job on the library's smallest fixture, and on mind's, whose finish job computes a
    derived record from every shard's samples. (Each recipe's own tests prove its shards merge to its plain run.)"""
    plain = plain_runs(recipe)
    out = tmp_path / "run"
    array, finish = _submit(slurm_cluster, recipe, out)
    code, text = _wait(slurm_cluster, out)
    assert code == 0, text
    for i in range(3):
        assert f"{i}/3" in text and "COMPLETED" in text.split(f"\n{i}/3", 1)[1].splitlines()[0]
    assert "finished" in text and "finish " in text
    assert _card(out) == _card(plain)
    assert _results(out) == _results(plain)
    if recipe == "mind":  # its derived WorldFoundry record, computed by the finish job from every shard's records
        def derived(run: Path) -> list[tuple]:  # (the members' input hashes differ: each run has its own fixture)
            return [(r.derived_id, r.status, r.result, r.members, r.n_members_ok) for r in read_derived(
                run / "derived.jsonl")]
        every_sample = sorted(sample_id for sample_id, _, _ in _results(plain))  # the suite is drawn on all of them
        assert derived(out) == derived(plain) and sorted(derived(out)[0][3]) == every_sample
    manifests = [m for m in read_manifests(out) if m.path.parent == out / "shards"]  # the final records' stage
    assert sorted((m.index, m.count) for m in manifests) == [(0, 3), (1, 3), (2, 3)]
    assert all(m.finished and m.slurm["array_job_id"] == array for m in manifests)
    assert {m.slurm["array_task_id"] for m in manifests} == {"0", "1", "2"}
    logs = out / "slurm" / "logs"
    assert sorted(p.name for p in logs.iterdir()) == [f"finish-{finish}.log"] + [f"shards-{array}_{i}.log"
                                                                               for i in range(3)]
    assert "result: PASS (exit 0)" in (logs / f"finish-{finish}.log").read_text()


@pytest.mark.parametrize("recipe", ["paibench-c", "camerabench"])
def test_a_declared_layout_gives_the_plain_runs_scorecard_and_samples(slurm_cluster, plain_runs, tmp_path: Path,
                                                                     recipe: str) -> None:
    """The layouts recipes declare (scale_out): PAI-Bench-C generates in the array and scores in one job over every
    video; CameraBench runs Script 1 in the array and Script 2 in one job. Same result as the plain run."""
    phases = [phase.name for phase in get_recipe(recipe).scale_out]
    plain = plain_runs(recipe)
    out = tmp_path / "run"
    array, last = _submit(slurm_cluster, recipe, out)
    code, text = _wait(slurm_cluster, out)
    assert code == 0, text
    assert _card(out) == _card(plain)
    assert _results(out) == _results(plain)
    logs = sorted(p.name for p in (out / "slurm" / "logs").iterdir())
    assert logs == sorted([f"{phases[0]}-{array}_{i}.log" for i in range(3)] + [f"{phases[1]}-{last}.log"])
    assert "result: PASS (exit 0)" in (out / "slurm" / "logs" / f"{phases[1]}-{last}.log").read_text()
    if recipe == "paibench-c":  # status counts the generation array's videos, (modality, task) by shard
        plain_card = json.loads((plain / "scorecard.json").read_text())
        status = run_status(out, ask_slurm=False)
        assert status.n_tasks == len(plain_card["extra"]["modalities"]) * plain_card["samples"]["n_expected"]
        assert status.counts == {"done": status.n_tasks, "failed": 0, "missing": 0, "pending": 0}
        assert all(shard.finished and shard.done for shard in status.shards) and len(status.shards) == 3


def test_a_two_shard_generation_array_with_a_generator_gives_the_plain_runs_rollouts_and_scores(
        slurm_cluster, tmp_path: Path) -> None:
    """PAI-Bench-C's layout with ``--generator static``: each task of a 2-task array generates its shard of the 16
    requests, then one job scores every rollout. The rollouts (bytes), the generation records and provenance
    (timing aside), the samples and the scorecard are the plain single-process run's."""
    plain = tmp_path / "plain"
    outcome = run_recipe(get_recipe("paibench-c").config(fixture=True, out_dir=plain, offline=True, generator="static",
                                                         env={}))
    assert outcome.exit_code == 0, outcome.message
    out = tmp_path / "run"
    array, score = _submit(slurm_cluster, "paibench-c", out, "--generator", "static", shards=2)
    code, text = _wait(slurm_cluster, out)
    assert code == 0, text
    assert _card(out) == _card(plain) and _results(out) == _results(plain)

    def generated(run: Path) -> dict:
        card = json.loads((run / "scorecard.json").read_text())["provenance"]["extra"]["generation"]
        rollouts = {p.relative_to(run / "rollouts").as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in sorted((run / "rollouts").rglob("*.mp4"))}
        records = {sid: (r.status, r.result) for sid, r in load_records(run / "generation").items()}
        return {"provenance": {**card, "seconds": sorted(card["seconds"])}, "rollouts": rollouts, "records": records}
    assert generated(out) == generated(plain) and len(generated(out)["rollouts"]) == 16
    logs = {p.name for p in (out / "generation" / "samples").glob("*.jsonl")}
    assert logs == {"shard-0-of-2.jsonl", "shard-1-of-2.jsonl"}   # generated by the array, none by the scoring job
    assert [len(p.read_text().splitlines()) for p in sorted((out / "generation" / "samples").glob("*.jsonl"))] == [8, 8]
    assert sorted(p.name for p in (out / "slurm" / "logs").iterdir()) == sorted(
        [f"generate-{array}_{i}.log" for i in range(2)] + [f"score-{score}.log"])


def test_mind_with_a_generator_generates_in_the_array_and_scores_once_as_the_plain_run(slurm_cluster,
                                                                                       tmp_path: Path) -> None:
    """MIND's generate-then-score layout (scale_out_generator, as PAI-Bench-C's): a 2-task array of the ``replay``
    oracle, then one ``--skip-generation`` job scoring every stored rollout: the plain run's rollouts and scores."""
    options = {"metrics": "lcm", "native": "0"}
    plain = tmp_path / "plain"
    outcome = run_recipe(get_recipe("mind").config(fixture=True, out_dir=plain, offline=True, generator="replay",
                                                   options=options, env={}))
    out = tmp_path / "run"
    array, score = _submit(slurm_cluster, "mind", out, "--generator", "replay",
                           *(f"--option={k}={v}" for k, v in options.items()), shards=2)
    code, text = _wait(slurm_cluster, out)
    assert code == outcome.exit_code, text   # partial in both: the replay's lcm_psnr is +inf, not averaged
    assert _card(out) == _card(plain) and _results(out) == _results(plain)

    def rollouts(run: Path) -> dict[str, str]:
        return {p.relative_to(run / "rollouts").as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted((run / "rollouts").rglob("*.mp4"))}
    assert rollouts(out) == rollouts(plain) and len(rollouts(out)) == 5
    assert {p.name for p in (out / "generation" / "samples").glob("*.jsonl")} == {"shard-0-of-2.jsonl",
                                                                                  "shard-1-of-2.jsonl"}
    assert sorted(p.name for p in (out / "slurm" / "logs").iterdir()) == sorted(
        [f"generate-{array}_{i}.log" for i in range(2)] + [f"score-{score}.log"])


def test_a_resubmitted_generating_run_reuses_every_rollout_and_its_scorecard_counts_for_the_submission(
        slurm_cluster, tmp_path: Path) -> None:
    """PAI-Bench-C's 3-task generation array with ``--generator folder`` over rollouts made before, then the same
    submission again. The shards share the run's digests file and ``generation/checked.txt``: each holds every file
    (every kept rollout) once, and the second submission copies, hashes and checks nothing again. Its score job
    keeps the scorecard (nothing changed), which is then this submission's: status called it "from before the last
    submission" and, once Slurm had forgotten the jobs (MinJobAge), ``status --wait`` exited 2 for it."""
    from pinbench.ops.status import _final_code, render

    made = tmp_path / "made"
    outcome = run_recipe(get_recipe("paibench-c").config(fixture=True, out_dir=made, offline=True, generator="static",
                                                         env={}))
    assert outcome.exit_code == 0, outcome.message
    out = tmp_path / "run"
    extra = ("--generator", "folder", "-g", f"dir={made / 'rollouts'}")
    _submit(slurm_cluster, "paibench-c", out, *extra)
    assert _wait(slurm_cluster, out)[0] == 0
    rollouts = sorted(p.relative_to(out) for p in (out / "rollouts").rglob("*.mp4"))
    digests = json.loads((out / ".pinbench-input-digests.json").read_text())["files"]
    hashed = {hashlib.sha256(str(folder / p).encode()).hexdigest() for p in rollouts for folder in (out, made)}
    assert hashed <= set(digests) and len(rollouts) == 16
    checked = (out / "generation" / "checked.txt").read_text().splitlines()
    assert len(checked) == len({line.split(" ")[1] for line in checked}) == 16   # every kept rollout, once
    shared = [*rollouts, Path(".pinbench-input-digests.json"), Path("generation/checked.txt")]
    kept = {p: (out / p).stat() for p in shared}

    array, _ = _submit(slurm_cluster, "paibench-c", out, *extra)
    code, text = _wait(slurm_cluster, out)
    assert code == 0, text
    assert {p: ((out / p).stat().st_ino, (out / p).stat().st_mtime_ns) for p in kept} == {
        p: (st.st_ino, st.st_mtime_ns) for p, st in kept.items()}   # nothing copied, hashed or checked again
    for i in range(3):
        log = (out / "slurm" / "logs" / f"generate-{array}_{i}.log").read_text()
        assert re.search(r"generate \[shard \d/3\]: (\d+) samples: 0 done, \1 reused, 0 failed", log), log
    assert "from before the last submission" not in text, text
    forgotten = run_status(out, ask_slurm=False)   # as when Slurm no longer knows the jobs
    assert "from before the last submission" not in render(forgotten) and _final_code(forgotten) == 0


# --------------------------------------------------------------------------------- what goes wrong


def test_a_task_cancelled_mid_run_then_resubmitted_recomputes_only_what_is_missing(slurm_cluster, plain_runs,
                                                                                    tmp_path: Path) -> None:
    plain = plain_runs("remembench")
    out = tmp_path / "run"
    array, _ = _submit(slurm_cluster, "remembench", out)
    owned, done = _stopped_mid_run(out, 0)   # cancelled while it stands still: a loaded machine's shard 0 went on
    slurm_cluster.run("scancel", f"{array}_0")   # to store every sample between a look and the cancel
    code, text = _wait(slurm_cluster, out)
    assert code == 2, text  # the finish job ran after the cancelled task and reported a partial run
    shard0 = text.split("\n0/3", 1)[1].splitlines()[0]
    assert "CANCELLED" in shard0
    card = json.loads((out / "scorecard.json").read_text())
    missing = _missing(out)
    assert card["status"] == "partial" and missing and missing < set(owned), (missing, owned)
    assert done <= set(owned) - missing  # what shard 0 stored before the cancel is kept
    before = _records(out)

    _submit(slurm_cluster, "remembench", out)  # the same command again
    code, text = _wait(slurm_cluster, out)
    assert code == 0, text
    assert _card(out) == _card(plain) and _results(out) == _results(plain)
    after = _records(out)
    assert all(after[name] == before[name] for name in before)  # nothing stored was recomputed or rewritten
    assert sorted(after) == sorted(sid for sid, _, _ in _results(plain))  # none lost


def _missing(out: Path) -> set[str]:
    """The samples a finished merge counts missing (no shard stored them: never computed, never failed), as
    failures.tsv names them with the merge's reason."""
    card = json.loads((out / "scorecard.json").read_text())
    rows = [row.split("\t") for row in (out / "failures.tsv").read_text().splitlines()[1:]]
    missing = {sid for sid, _, reason in rows if reason.startswith("missing: no result from any shard")}
    assert card["samples"]["n_missing"] == len(missing) and card["samples"]["n_failed"] == 0
    assert all(not m["failed"] for m in card["metrics"].values())
    return missing


def _stopped_mid_run(out: Path, index: int, timeout: float = WAIT_S) -> tuple[list[str], set[str]]:
    """Wait until shard ``index`` has stored its first sample (and not all), and leave its processes stopped there:
    its samples and those stored. (scancel sends a step SIGCONT before SIGTERM, so a stopped shard still ends.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = _shard_processes(out, index)
        for pid in pids:
            stop_pid(pid)
        owned, done = _stored(out, index)
        if pids and 0 < len(done) < len(owned):
            return owned, done
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        assert not owned or len(done) < len(owned), "the shard finished before it could be stopped mid-run"
        time.sleep(0.01)
    raise AssertionError(f"shard {index} stored nothing within {timeout}s")


def _stored(out: Path, index: int) -> tuple[list[str], set[str]]:
    """Shard ``index``'s samples (none before its manifest is written) and those stored."""
    manifest = next((m for m in read_manifests(out) if (m.index, m.count) == (index, 3)), None) \
        if (out / "shards").is_dir() else None
    if manifest is None:
        return [], set()
    owned = [manifest.sample_ids[p] for p in manifest.owned()]
    return owned, set(owned) & set(read_store(out / "samples").records)


def _shard_processes(out: Path, index: int) -> list[int]:
    """The ``pinbench run ... --out OUT --shard INDEX/3`` processes and their descendants, parents first."""
    found, parents = [], {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            parents[int(proc.name)] = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue   # ended while looked at
        pairs = set(zip(argv, argv[1:], strict=False))
        if (b"--shard", f"{index}/3".encode()) in pairs and (b"--out", str(out).encode()) in pairs:
            found.append(int(proc.name))
    for pid in found:   # grows while it is walked
        found += [child for child, parent in parents.items() if parent == pid and child not in found]
    return found


def test_a_shard_that_crashes_leaves_the_scorecard_partial_naming_the_missing_samples(slurm_cluster, plain_runs,
                                                                                      tmp_path: Path) -> None:
    ids = [sid for sid, _, _ in _results(plain_runs("dynamic-degree"))]
    shard1 = ids[1::3]
    out = tmp_path / "run"
    # A directory where shard 1's log must go: its process dies opening it (a real OSError).
    (out / "samples" / "shard-1-of-3.jsonl").mkdir(parents=True)
    array, finish = _submit(slurm_cluster, "dynamic-degree", out)
    code, text = _wait(slurm_cluster, out)
    assert code == 2, text
    assert "FAILED exit 2:0" in text.split("\n1/3", 1)[1].splitlines()[0]
    assert "FAILED exit 2:0" in text.split("\nfinish", 1)[1].splitlines()[0]  # the merge's exit code
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "partial" and sorted(_missing(out)) == sorted(shard1)  # stand-ins: counted missing
    finish_log = (out / "slurm" / "logs" / f"finish-{finish}.log").read_text()
    assert "partial" in finish_log and "(exit 2)" in finish_log
    assert all(f"{sid} (shard 1/3)" in finish_log for sid in shard1)  # the finish job's log names them


@pytest.mark.parametrize(("args", "reason"), [
    (["--sbatch-arg=--cpus-per-task=64"], "More processors requested than permitted"),
    (["--time", "90"], "Requested time limit is invalid"),
    (["--time", "5", "--finish-time", "90"], "Requested time limit is invalid"),
    (["--partition", "nosuch"], "invalid partition"),
    (["--gpus-per-task", "1"], "Invalid generic resource (gres) specification"),
])
def test_a_request_the_cluster_cannot_satisfy_fails_at_submit_in_one_line(slurm_cluster, tmp_path: Path,
                                                                          args: list[str], reason: str) -> None:
    out = tmp_path / "run"
    proc = _pinbench(slurm_cluster, "submit", "dynamic-degree", "--shards", "3", "--fixture", "--out", str(out),
                     *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: sbatch refused")
    assert reason.lower() in proc.stderr.lower()
    assert not slurm_cluster.queue()  # nothing was left pending
    assert not (out / "slurm" / "submissions.jsonl").exists()


def test_a_second_submission_is_refused_while_the_first_is_live(slurm_cluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    array, finish = _submit(slurm_cluster, "dynamic-degree", out, "--sbatch-arg=--hold")
    try:
        proc = _pinbench(slurm_cluster, "submit", "dynamic-degree", "--shards", "3", "--fixture", "--out", str(out))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1
        assert f"jobs {array}, {finish} of the submission" in proc.stderr and f"scancel {array} {finish}" in proc.stderr
        status = _pinbench(slurm_cluster, "status", str(out))
        assert status.returncode == 0 and "PENDING (JobHeldUser)" in status.stdout
    finally:
        slurm_cluster.run("scancel", array, finish)
        slurm_cluster.wait_idle_queue(timeout=60)


@pytest.mark.parametrize("export", ["ALL", "NONE"])
def test_with_no_container_the_jobs_keep_the_submitting_shells_sample_cache(slurm_cluster, tmp_path: Path,
                                                                             export: str) -> None:
    """The jobs of a ``--container none`` submission keep their records in the folder ``$PINBENCH_SAMPLE_CACHE``
    names, written into the script: they relied on sbatch giving them the submitting shell's environment (its
    default, ``--export=ALL``), and with ``--sbatch-arg=--export=NONE`` kept them in the default folder."""
    out, shared = tmp_path / "run", tmp_path / "shared"
    proc = subprocess.run([PINBENCH, "submit", "dynamic-degree", "--shards", "2", "--fixture", "--out", str(out),
                           f"--sbatch-arg=--export={export}"],
                          env={**slurm_cluster.env, "PINBENCH_SAMPLE_CACHE": str(shared)}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _wait(slurm_cluster, out)[0] == 0
    assert sorted(shared.glob("*/*.jsonl"))   # the jobs' records, kept where the submitting shell said
    assert f"PINBENCH_SAMPLE_CACHE={shared}" in (out / "slurm" / "shards.sbatch").read_text()


@pytest.fixture(scope="module")
def lax_cluster(slurm_cluster):
    """A second cluster like many real ones: EnforcePartLimits=NO, so sbatch accepts jobs it can never run."""
    import shutil
    import tempfile

    from slurm_local import start_cluster

    root = Path(tempfile.mkdtemp(prefix="pinbench-slurm-lax-"))
    cluster = start_cluster(root, enforce_part_limits=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_where_sbatch_accepts_what_can_never_run_submit_still_refuses_it(lax_cluster, tmp_path: Path) -> None:
    args = ["submit", "dynamic-degree", "--shards", "3", "--fixture", "--limit", "1"]
    # more CPUs than any node has: sbatch alone would leave it pending forever; --test-only refuses it
    proc = _pinbench(lax_cluster, *args, "--out", str(tmp_path / "a"), "--sbatch-arg=--cpus-per-task=64")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "sbatch refused" in proc.stderr and "Requested node configuration is not available" in proc.stderr
    assert not lax_cluster.queue()
    # over the partition's time limit: accepted, then held for PartitionTimeLimit; submit cancels both jobs
    proc = _pinbench(lax_cluster, *args, "--out", str(tmp_path / "b"), "--time", "90")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    # (this Slurm names the array's reason PartitionConfig, the finish job's PartitionTimeLimit; neither clears)
    assert re.search(r"would never start: Slurm holds it for Partition(TimeLimit|Config) \(cancelled what was "
                     r"submitted: \d+, \d+\)$", proc.stderr), proc.stderr
    lax_cluster.wait_idle_queue(timeout=60)
    # only the finish job over the limit: it shows when the array has ended, and --wait stops there
    out = tmp_path / "c"
    array, finish = _submit(lax_cluster, "dynamic-degree", out, "--limit", "1", "--time", "5", "--finish-time", "90")
    try:
        code, text = _wait(lax_cluster, out)
        assert code == 2 and f"job {finish} will never start (PartitionTimeLimit)" in text, text
    finally:
        lax_cluster.run("scancel", array, finish)
        lax_cluster.wait_idle_queue(timeout=60)


# The recipe's image as `make build-dynamic-degree` builds it, with this checkout's code copied over (the
# exported recipe), so the jobs run what is tested here in the image's pinned environment.
OVERLAY = """FROM {base}
USER root
RUN rm -rf {site}/pinbench {site}/pinbench_recipes/dynamic_degree
COPY pinbench {site}/pinbench
COPY pinbench_recipes/dynamic_degree {site}/pinbench_recipes/dynamic_degree
USER pinbench
"""


@pytest.mark.docker
def test_docker_on_the_node_runs_the_array_in_the_recipes_image(slurm_cluster, plain_runs, tmp_path: Path) -> None:
    from pinbench.ops.docker_engine import ContainerError, build_image, docker_client
    from pinbench.ops.export import export_recipe

    try:
        engine = docker_client()
    except ContainerError as exc:
        pytest.skip(str(exc))
    recipe = get_recipe("dynamic-degree")
    try:
        engine.images.get(recipe.image)
    except Exception:  # docker.errors.ImageNotFound
        pytest.skip(f"{recipe.image} is not built on this engine (make build-dynamic-degree)")
    context = export_recipe(recipe, tmp_path / "export")
    (context / "Dockerfile.slurm-test").write_text(
        OVERLAY.format(base=recipe.image, site="/opt/venv/lib/python3.11/site-packages"))
    image = build_image(context, "pinbench-test/dynamic-degree-slurm:local", dockerfile="Dockerfile.slurm-test",
                        client=engine, log=lambda line: None)
    try:   # the test's own image goes with it (it was left behind; make docker-smoke fails on one)
        out = tmp_path / "run"
        _submit(slurm_cluster, "dynamic-degree", out, "--container", "docker", "--image", image)
        code, text = _wait(slurm_cluster, out)
        assert code == 0, text
        plain = plain_runs("dynamic-degree")
        assert _card(out) == _card(plain) and _results(out) == _results(plain)
        card = json.loads((out / "scorecard.json").read_text())
        container = card["provenance"]["container"]
        assert container["in_container"] is True and container["image_digest"] == image
        built_on = engine.images.get(recipe.image).attrs["Config"]["Env"]
        assert f"PINBENCH_IMAGE_BASE_IMAGE={container['base_image']['image']}" in built_on  # from the image's ENV
        assert card["config"]["out_dir"] == "/runs/out"  # the merge ran in the container too
    finally:
        engine.images.remove(image, force=True)
