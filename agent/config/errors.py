"""The one exception of the configuration."""


class ConfigError(Exception):
    """A configuration mistake; the message is one line naming the key (or flag) and the fix."""
