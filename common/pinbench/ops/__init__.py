"""Operations beside the core: pins, cache and downloads, the doctor, containers, clusters, status, export.

May import every other subpackage; nothing in them imports ``pinbench.ops``."""
