"""Task environments: which interpreter a task's tests run in (conda, uv, venv or this one), their specs, the
release's eight environments, and the cache that builds each once, saying what and how big first."""
