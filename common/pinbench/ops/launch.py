"""Running a recipe: its directory claimed, its procedure handed a ``Run``, its generator and its report plugged in.

The protocol is the core's (``pinbench.core.run``); the generator (``pinbench.ops.generation``) and the report
(``pinbench.results.report``) are layers the core may not import, so the ``Run`` is built here with both. Every
caller (``pinbench run`` and ``demo``, a container, the tests) runs a recipe through ``run_recipe``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pinbench.core.config import RunConfig
from pinbench.core.derived import DerivedRecord
from pinbench.core.generation import RequestError
from pinbench.core.provenance import keep_secret_options
from pinbench.core.recipe import get_recipe
from pinbench.core.reference import Reference
from pinbench.core.run import Figure, Run, RunOutcome
from pinbench.core.rundir import Refused, claim_run_dir, discard_refused
from pinbench.core.runner import SampleRecord
from pinbench.ops.generation import DEFAULT_TIMEOUT_S, Generating, GeneratorSpec
from pinbench.ops.network import fetching_as


def run_recipe(cfg: RunConfig, *, note: str | None = None) -> RunOutcome:
    """Run the procedure of ``cfg.recipe`` in ``cfg.out_dir`` once the directory is claimed for this run
    (``pinbench.core.rundir``: one recipe, checkpoint and mode per directory; one live process per shard); ``note``
    said once its preparation is done (``Run``)."""
    recipe = get_recipe(cfg.recipe)
    timeout = cfg.generation_timeout_s if cfg.generation_timeout_s is not None else DEFAULT_TIMEOUT_S
    spec = None if cfg.generator is None else GeneratorSpec(cfg.generator, cfg.generator_options, timeout)
    keep_secret_options(cfg.generator_options, spec and spec.command)
    generation = Generating(spec, recipe, skip_generation=cfg.skip_generation, out_dir=cfg.out_dir)
    # the recipe's code imported when it runs: a rerun may answer without it; its ways on name this run's fetch
    with claim_run_dir(cfg) as claim, fetching_as(recipe, cfg):
        try:
            return Run(recipe, cfg, report=write_run_report, generation=generation, note=note).execute(
                lambda run: recipe.load(recipe.entry)(run))
        except (RequestError, Refused):   # refused before anything ran: nothing of it stays
            discard_refused(claim)
            raise


def write_run_report(scorecard: Path, out_dir: Path, *, reference: Reference | None,
                     samples: Sequence[SampleRecord | DerivedRecord], figures: Sequence[Figure], title: str) -> Path:
    """A run's own report (``pinbench.core.run.Reporter``): its scorecard, reference, records and figures. The
    figures are recorded beside the scorecard (``figures.json``), so ``pinbench report`` of the run writes this
    very page; its title is the run's, from the scorecard."""
    from pinbench.results.report import record_figures, write_report  # numpy, jinja2: not for a rerun's answer

    record_figures(scorecard.parent, figures)
    return write_report([scorecard], out_dir, references={0: reference} if reference is not None else None,
                        samples={0: list(samples)})
