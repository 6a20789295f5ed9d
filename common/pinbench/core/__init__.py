"""The recipe contract and the run's data: declarations, options, runner and store, scorecard, reference,
check. Imports nothing outside ``pinbench.core``."""
