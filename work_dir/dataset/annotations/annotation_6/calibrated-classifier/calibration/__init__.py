"""Calibration tools for probabilistic classifiers."""
