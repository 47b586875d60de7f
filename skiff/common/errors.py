"""The root of Skiff's one error tree.

Expected outcomes (a full disk, a message too large) are statuses, not
exceptions; exceptions are for bugs, corruption, bad configuration and, on the
client side, failed requests. Client-visible errors derive from `SkiffError`
and carry `retriable` so callers can decide without parsing text.
"""


class SkiffError(Exception):
    """Base class of every error Skiff raises on purpose."""

    retriable: bool = False


class ConfigError(SkiffError):
    """A configuration value or file is wrong; the message names the key."""


class CorruptionError(SkiffError):
    """Stored bytes do not decode: a bug or a damaged file, never user input."""


class DecodeError(SkiffError):
    """Bytes from outside (a frame, a body, a record) do not decode."""
