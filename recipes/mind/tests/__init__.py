"""Tests of the MIND recipe (CPU; GPU-only ones are marked gpu)."""
