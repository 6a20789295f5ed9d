"""pinbench: pinned, reproducible recipes for video-generation and world-model benchmarks."""

__version__ = "0.1.0"
