"""What a request asks for: fields of a JSON body or a query string, checked with a clear error.

Every page form posts JSON to the API and every API reads its input through
`Form`, so one set of checks (and one wording of each error) serves both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.client.errors import MessageValidationError
from skiff.common.times import parse_time_ms

_REQUIRED: Any = object()


class Form:
    def __init__(self, fields: Mapping[str, Any]) -> None:
        if not isinstance(fields, Mapping):
            raise MessageValidationError("the request body must be a JSON object")
        self.fields = fields

    def _raw(self, name: str, default: Any) -> Any:
        value = self.fields.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            if default is _REQUIRED:
                raise MessageValidationError(f"give {name}")
            return default
        return value

    def given(self, name: str) -> bool:
        """Whether the request has ``name`` (not blank)."""
        return self._raw(name, None) is not None

    def text(self, name: str, default: Any = _REQUIRED) -> str:
        value = self._raw(name, default)
        return value.strip() if isinstance(value, str) else str(value)

    def integer(self, name: str, default: Any = _REQUIRED, *, low: int, high: int) -> int:
        value = self._raw(name, default)
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise MessageValidationError(f"{name} must be a whole number, not {value!r}") from None
        if not low <= number <= high:
            raise MessageValidationError(f"{name} must be between {low} and {high}, not {number}")
        return number

    def flag(self, name: str) -> bool:
        value = self.fields.get(name)
        return value in (True, "true", "on", "1", 1)

    def time_ms(self, name: str, default: Any = _REQUIRED) -> int:
        """Ms since the epoch, ``now`` or an ISO-8601 time."""
        value = self._raw(name, default)
        if isinstance(value, int):
            return value
        try:
            return parse_time_ms(str(value))
        except ValueError as exc:
            raise MessageValidationError(f"{name}: {exc}") from None
