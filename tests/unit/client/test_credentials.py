"""Client credentials: explicit, from a file, from the environment; secrets stay out of reprs and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.client import ClientConfig, Credentials
from skiff.client._impl.config import client_config_for
from skiff.client.credentials import resolve_credentials
from skiff.client.errors import ClientConfigError


def test_repr_hides_the_secret() -> None:
    creds = Credentials("app-user", "s3cret-value")
    assert "s3cret-value" not in repr(creds) and "app-user" in repr(creds)


@pytest.mark.parametrize(("ak", "sk"), [("", "x"), ("x", "")])
def test_empty_keys_are_refused(ak: str, sk: str) -> None:
    with pytest.raises(ClientConfigError):
        Credentials(ak, sk)


def test_from_file_reads_tools_yml_keys(tmp_path: Path) -> None:
    path = tmp_path / "tools.yml"
    path.write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    assert Credentials.from_file(path) == Credentials("rocketmq2", "12345678")


def test_a_bad_file_says_what_is_missing_without_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "tools.yml"
    path.write_text("secretKey: topsecret99\n")
    with pytest.raises(ClientConfigError, match="needs accessKey and secretKey") as info:
        Credentials.from_file(path)
    assert "topsecret99" not in str(info.value)
    with pytest.raises(ClientConfigError, match="credentials file"):
        Credentials.from_file(tmp_path / "absent.yml")


def test_environment_is_read_by_client_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKIFF_ACCESS_KEY", "env-user")
    monkeypatch.setenv("SKIFF_SECRET_KEY", "env-secret")
    assert ClientConfig("127.0.0.1:9876").credentials == Credentials("env-user", "env-secret")
    monkeypatch.delenv("SKIFF_SECRET_KEY")
    with pytest.raises(ClientConfigError, match="SKIFF_SECRET_KEY"):
        ClientConfig("127.0.0.1:9876")


def test_explicit_keys_win_and_half_a_pair_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKIFF_ACCESS_KEY", raising=False)
    monkeypatch.delenv("SKIFF_SECRET_KEY", raising=False)
    monkeypatch.delenv("SKIFF_CREDENTIALS_FILE", raising=False)
    assert resolve_credentials() is None
    assert resolve_credentials("a", "b") == Credentials("a", "b")
    with pytest.raises(ClientConfigError, match="both"):
        resolve_credentials("a", None)


def test_credentials_go_in_one_place() -> None:
    config = ClientConfig("127.0.0.1:9876")
    with pytest.raises(ClientConfigError, match="not both"):
        client_config_for("", "DEFAULT", config, Credentials("a", "b"))
    built = client_config_for("127.0.0.1:9876", "DEFAULT", None, Credentials("a", "b"))
    assert built.credentials == Credentials("a", "b")
