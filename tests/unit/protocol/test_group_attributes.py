"""RocketMQ 5's group attribute patches: parsed as mqadmin writes them, applied as the broker does."""

from __future__ import annotations

import pytest

from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.group_attributes import apply_patch, parse_changes, patch


def test_mqadmins_form_is_parsed_checked_and_sent_as_a_patch():
    changes = parse_changes("+lite.bind.topic=Orders, +lite.sub.model=exclusive,-lite.sub.wildcard")
    assert changes == {"lite.bind.topic": "Orders", "lite.sub.model": "Exclusive", "lite.sub.wildcard": None}
    assert patch(changes) == {"+lite.bind.topic": "Orders", "+lite.sub.model": "Exclusive", "-lite.sub.wildcard": ""}


@pytest.mark.parametrize("text, why", [
    ("lite.bind.topic=x", r"write \+name=value"), ("+lite.sub.client.quota=-2", "must be -1 or more"),
    ("+lite.sub.wildcard=yes", "must be true or false"), ("+x.y=1", "unknown consumer group attribute 'x.y'"),
    ("+lite.sub.model=A,+lite.sub.model=B", "must be Shared or Exclusive"),
    ("+lite.sub.model=Shared,-lite.sub.model", "changed twice"), ("-lite.nope", "unknown"),
])
def test_bad_changes_are_refused_with_the_reason(text: str, why: str):
    with pytest.raises(BodyError, match=why):
        parse_changes(text)


def test_a_patch_changes_only_what_it_names():
    current = {"lite.bind.topic": "Orders", "+lite.sub.client.quota": "5"}  # a "+" name kept by older Skiff
    assert apply_patch(current, {}) == {"lite.bind.topic": "Orders", "lite.sub.client.quota": "5"}
    assert apply_patch(current, {"-lite.sub.client.quota": "", "lite.sub.wildcard": "TRUE"}) == {
        "lite.bind.topic": "Orders", "lite.sub.wildcard": "true"}
    with pytest.raises(BodyError, match="must be 10 or more"):
        apply_patch(current, {"+lite.sub.client.max.event.cnt": "9"})
