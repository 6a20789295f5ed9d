"""What a run leaves for people: the finish (samples, scorecard, diff, report), comparisons, tables.

Imports ``pinbench.core`` and ``pinbench.media`` only."""
