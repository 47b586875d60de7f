"""Helpers the C++ client scripts share."""


def text(value):
    """The C++ client hands strings back as bytes (or None)."""
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
