"""Metrics of RECODE-H results. The modules import each other by bare name (notebooks put ``metrics``
on ``sys.path``); the harness imports only :mod:`metrics.junit_outcome`, the stdlib interpretation of a
test result that both sides share."""
