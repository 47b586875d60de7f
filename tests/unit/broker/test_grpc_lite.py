"""Lite topic names (skiff.broker.grpc.lite): the store topic of a lite topic and back, and the
names the proxy refuses."""

from __future__ import annotations

import pytest

from skiff.broker.grpc.lite import lite_error, lmq_name, parent_and_lite


@pytest.mark.parametrize("parent, lite", [("Orders", "user-42"), ("a|b", "c"), ("%weird|parent", "x_y")])
def test_a_lite_topics_store_topic_gives_back_its_parent_and_name(parent: str, lite: str) -> None:
    assert parent_and_lite(lmq_name(parent, lite)) == (parent, lite)


def test_other_topics_are_not_lite_topics() -> None:
    assert [parent_and_lite(t) for t in ("Orders", "%LMQ%|Orders", "%LMQ%|Orders|", "%RETRY%g")] == [None] * 4


def test_lite_names_are_refused_as_the_proxy_refuses_them() -> None:
    assert lite_error("P", "ok_name-1") is None
    assert "characters" in (lite_error("P", "a|b") or "") and "characters" in (lite_error("P", "") or "")
    assert "64 bytes" in (lite_error("P", "x" * 65) or "")
    assert "127" in (lite_error("P" * 100, "x" * 30) or "")
