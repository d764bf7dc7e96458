"""Minimal numpy building blocks of an on-policy actor-critic learner."""
