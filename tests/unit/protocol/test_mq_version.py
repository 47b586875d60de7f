"""RocketMQ's MQVersion ordinals and names, as the admin tools read them."""

from __future__ import annotations

from skiff.protocol.mq_version import V5_0_0, VERSIONS, version_name, version_ordinal
from skiff.broker.stats import VERSION_DESC
from skiff.protocol.codes import SKIFF_VERSION


def test_the_enum_has_rocketmqs_order_and_landmarks():
    assert (len(VERSIONS), VERSIONS[0], VERSIONS[15], VERSIONS[-1]) == (613, "V3_0_0_SNAPSHOT", "V3_0_0_FINAL",
                                                                        "HIGHER_VERSION")
    assert VERSIONS.index("V3_3_1_SNAPSHOT") == 86 and "V3_3_0" not in VERSIONS
    assert (version_ordinal("4.9.4"), V5_0_0, version_ordinal("5.3.3")) == (401, 413, 479)  # 4.9.4 clients send 401


def test_client_version_texts_map_to_their_ordinal_else_none():
    assert [version_ordinal(t) for t in ("5.1.2", " v5.1.2 ", "5.0.8-SNAPSHOT", "V5_1_2", "v5_5_0")] == [
        437, 437, 428, 437, 513]  # V5_x_y = 413 + 2 * (10x + y), its _SNAPSHOT one less
    assert [version_ordinal(t) for t in ("1.0.8", "6.0.0", "5.1", "", "latest")] == [None] * 5


def test_names_as_getVersionDesc_gives_them():
    assert [version_name(o) for o in (401, 412, 437, 612, 10_000)] == [
        "V4_9_4", "V5_0_0_SNAPSHOT", "V5_1_2", "HIGHER_VERSION", "HIGHER_VERSION"]


def test_skiff_says_the_version_its_broker_calls_itself() -> None:
    """The ordinal in every frame Skiff sends names the version its runtime table shows."""
    assert version_name(SKIFF_VERSION) == VERSION_DESC == "V4_9_7"
