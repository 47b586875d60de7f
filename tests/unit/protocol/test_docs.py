"""docs/protocol.md names every header class the code map uses and every error class."""

from pathlib import Path

from skiff.protocol import errors
from skiff.protocol.headers.by_code import REQUEST_HEADERS, RESPONSE_HEADERS

DOC = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()


def test_every_mapped_header_is_documented_with_its_code():
    for table in (REQUEST_HEADERS, RESPONSE_HEADERS):
        for code, cls in table.items():
            row = next((line for line in DOC.splitlines() if line.startswith(f"| {int(code)} |")), "")
            assert f".{cls.__name__}`" in row, (code, cls.__name__)


def test_every_error_class_is_documented():
    for code in errors.MAPPED_CODES:
        assert f"| {int(code)} | {code.name} | `{errors.error_class(code).__name__}` |" in DOC
