import enum
from dataclasses import dataclass

import pytest

from skiff.common.config import build_config, camel_to_snake, parse_overrides, parse_properties
from skiff.common.errors import ConfigError
from skiff.common.names import group_error, topic_error


class Mode(enum.Enum):
    ASYNC_FLUSH = 1
    SYNC_FLUSH = 2


@dataclass(frozen=True)
class Cfg:
    ALIASES = {"mapedFileSizeCommitLog": "mapped_file_size_commit_log"}
    listen_port: int = 10911
    store_path_root_dir: str = "/tmp/x"
    flush_disk_type: Mode = Mode.ASYNC_FLUSH
    auto_create_topic_enable: bool = True
    mapped_file_size_commit_log: int = 1 << 30
    disk_ratio: float = 0.75


def test_parse_properties_java_forms():
    text = "# c\n! c\na=1\nb : two\nc three\nd=x\\\n  y\ne=\\u0041\n\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "three", "d": "xy", "e": "A"}


def test_build_config_camel_case_aliases_and_overrides():
    cfg = build_config(
        Cfg,
        {"listenPort": "1234", "flushDiskType": "SYNC_FLUSH", "mapedFileSizeCommitLog": "4096"},
        parse_overrides(["--autoCreateTopicEnable=false", "--diskRatio=0.9"]),
    )
    assert cfg == Cfg(1234, "/tmp/x", Mode.SYNC_FLUSH, False, 4096, 0.9)
    assert camel_to_snake("storePathRootDir") == "store_path_root_dir"


@pytest.mark.parametrize(
    "source, words",
    [
        ({"nope": "1"}, "unknown configuration key 'nope'"),
        ({"listenPort": "abc"}, "listenPort: 'abc' is not a whole number"),
        ({"flushDiskType": "SOMETIMES"}, "ASYNC_FLUSH, SYNC_FLUSH"),
        ({"autoCreateTopicEnable": "maybe"}, "not a boolean"),
    ],
)
def test_build_config_errors_name_the_key(source, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        build_config(Cfg, source)


def test_names():
    assert topic_error("Topic_A-1%|x") is None
    assert "empty" in topic_error("")
    assert "128 characters" in topic_error("a" * 128)
    assert "characters other than" in topic_error("a b")
    assert group_error("G") is None and group_error("g/1")
