"""Run configuration: one YAML file -> a validated, immutable :class:`RunConfig`.

Keys are the release's hyphenated names plus ours, each declared once in :mod:`agent.config.schema` (its
kind, default, meaning and whether it enters a job's fingerprint); docs/configuration.md and
config/default.yaml are generated from it by ``python scripts/config_docs.py --write``. Any string value may
name environment variables as ``${NAME}``. Every mistake a user can make becomes a one-line
:class:`ConfigError` naming the key as written (or the flag that set it) and the fix.

The release's own ``config/default.yaml`` runs unchanged: an empty string means "not set", a key the file
leaves out takes its declared default, relative paths are relative to the working folder (the repository
root when commands are run as the README shows) and every path error names the folder it was resolved
against. Sweeps: ``model`` and ``guidance-level`` may be lists; models that need different providers are
written as ``models: [{model: ..., api-provider: ..., ...}, ...]``, each entry inheriting the top-level model
keys it omits.
"""
from agent.config.errors import ConfigError
from agent.config.load import load_config
from agent.config.run_config import RunConfig
from agent.config.schema import DEFAULTS, GUIDANCE_TYPES, KEYS, KNOWN_KEYS, PROVIDERS, SETTINGS

__all__ = ["ConfigError", "DEFAULTS", "GUIDANCE_TYPES", "KEYS", "KNOWN_KEYS", "PROVIDERS", "RunConfig", "SETTINGS",
           "load_config"]
