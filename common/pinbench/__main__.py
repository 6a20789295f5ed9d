"""``python -m pinbench``: the same as the ``pinbench`` console script."""

from pinbench.cli import main

main()
