"""What the Spark source and sink raise on purpose.

Both derive from Skiff's one error tree, so a job can tell a bad option or
lost data from a Spark or network failure without parsing text; the message
is written for the person who set the options.
"""

from __future__ import annotations

from skiff.common.errors import ConfigError, SkiffError


class SparkOptionError(ConfigError, ValueError):
    """An option of ``format("skiff")`` (or a sink column) is missing or wrong; the message names it."""


class DataLossError(SkiffError):
    """Retention removed messages a query still needed (``failOnDataLoss=true``)."""


class SparkJobError(SkiffError):
    """A Spark job that `skiff export` or `skiff replay` ran failed; the message is Spark's reason."""
