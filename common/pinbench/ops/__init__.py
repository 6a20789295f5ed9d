"""Operations beside the core: machine pins, caches and downloads, the doctor, the run's launch and generation,
containers, clusters, status, local pages, export.

May import every other subpackage; nothing in them imports ``pinbench.ops``."""
