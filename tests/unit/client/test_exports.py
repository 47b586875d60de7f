"""`skiff.client` resolves its public names lazily from strings, so a moved class breaks
only the import that names it; every exported name must resolve."""

from __future__ import annotations

import pytest

import skiff.client


@pytest.mark.parametrize("name", skiff.client.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(skiff.client, name) is not None


def test_message_ext_is_the_stored_message() -> None:
    from skiff.common.stored_message import StoredMessage

    assert skiff.client.MessageExt is StoredMessage
