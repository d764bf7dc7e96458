"""Grading one candidate file: a private copy under a sandbox with a scrubbed environment, limits and a
process-group timeout, the pytest guard, and the verdict from the JUnit report and pytest's exit code."""
