"""pinbench: pinned, reproducible recipes for video-generation and world-model benchmarks."""

__version__ = "0.2.0"  # the package version: pyproject.toml reads it from here
