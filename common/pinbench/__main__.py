"""``python -m pinbench``, the ``pinbench`` console script and a recipe's ``python -m pinbench_recipes.<recipe>``
(``start``)."""

import sys


def start(recipe: str | None = None) -> None:
    """Import the CLI and run it (``recipe``: with that recipe chosen, ``recipe_main``). Ctrl-C while it imports
    (about 0.15 s) is one line and exit 130, as a later one that finds nothing written, where it was a
    KeyboardInterrupt traceback."""
    try:
        from pinbench.cli import main, recipe_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: nothing was written (pinbench was still starting); run the same command to "
                         "start\n")
        sys.exit(130)
    if recipe is None:
        main()
    else:
        recipe_main(recipe)


if __name__ == "__main__":
    start()
