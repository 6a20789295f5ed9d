"""MIND (CSU-JPG/MIND): memory consistency and action control of world-model rollouts, scored by the
official ``src/process.py`` at a pinned commit, imported into a pinbench scorecard, with a native CPU
cross-check of its pixel metrics. Imports nothing: ``pinbench list`` reads recipes without their code."""
