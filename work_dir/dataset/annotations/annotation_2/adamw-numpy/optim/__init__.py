"""Optimisers and learning-rate schedules for numpy models."""
