"""The recipe contract and the run's data: declarations, options, the run (``Run``), runner and store, scorecard,
reference, check. Imports nothing outside ``pinbench.core``."""
