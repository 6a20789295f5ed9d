"""Tests of the dynamic-degree recipe (CPU, offline, data written by the tests)."""
