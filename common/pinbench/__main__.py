"""``python -m pinbench`` and the ``pinbench`` console script (``start``)."""

import sys


def start() -> None:
    """Import the CLI and run it. Ctrl-C while it imports (about 0.15 s) is one line and exit 130, as a later one that
    finds nothing written, where it was a KeyboardInterrupt traceback."""
    try:
        from pinbench.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: nothing was written (pinbench was still starting); run the same command to "
                         "start\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    start()
