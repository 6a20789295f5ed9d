"""Tests of the CameraBench recipe (CPU, offline, data written by the tests)."""
