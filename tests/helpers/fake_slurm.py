"""Test double: fake ``sbatch``, ``scontrol`` and ``scancel`` programs, for the paths a real cluster rarely takes.

The real single-node Slurm (test_slurm_cluster.py) refuses impossible requests at submit time. What it cannot
easily be made to do is accept the array and then refuse the finish job, or hold a job for a reason that never
clears; these fakes do, so the roll-back code is tested too. Every call is appended to ``calls.log``, and the
environment of sbatch's latest call written to ``sbatch.env``.

Controlled by environment variables: ``FAKE_SBATCH_REFUSE_AT`` (the n-th real submission is refused),
``FAKE_STATE`` and ``FAKE_REASON`` (what scontrol reports for every job).
"""

from __future__ import annotations

from pathlib import Path

SBATCH = """#!/bin/bash
echo "sbatch $*" >> "{log}"
env > "{env}"
for arg in "$@"; do [ "$arg" = --test-only ] && exit 0; done
n=$(( $(cat "{counter}" 2>/dev/null || echo 0) + 1 )); echo $n > "{counter}"
if [ "$n" = "${{FAKE_SBATCH_REFUSE_AT:-0}}" ]; then
  echo "sbatch: error: Batch job submission failed: Requested node configuration is not available" >&2; exit 1
fi
echo $((100 + n))
"""
SCONTROL = """#!/bin/bash
echo "scontrol $*" >> "{log}"
id="${{@: -1}}"
echo "JobId=$id JobName=x JobState=${{FAKE_STATE:-PENDING}} Reason=${{FAKE_REASON:-None}} ExitCode=0:0 NodeList="
"""
SCANCEL = """#!/bin/bash
echo "scancel $*" >> "{log}"
"""


def install_fake_slurm(folder: Path) -> Path:
    """Write the three programs into ``folder`` (put it first on PATH); returns the call log's path."""
    folder.mkdir(parents=True, exist_ok=True)
    log, counter = folder / "calls.log", folder / "count"
    for name, text in (("sbatch", SBATCH), ("scontrol", SCONTROL), ("scancel", SCANCEL)):
        path = folder / name
        path.write_text(text.format(log=log, counter=counter, env=folder / "sbatch.env"))
        path.chmod(0o755)
    return log
