"""What a run leaves for people: the report, comparisons, tables, and what ``pinbench view`` shows.

Imports ``pinbench.core`` and ``pinbench.media`` only."""
