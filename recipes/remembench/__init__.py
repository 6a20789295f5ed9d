"""pinbench recipe package."""
