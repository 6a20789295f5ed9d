"""Tests of the PAI-Bench-C recipe (CPU; GPU-only ones are marked gpu)."""
