"""The consuming operations' subscription compiling and its shortcut to a record's properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skiff.broker.operations import Refusal, compile_subscription, properties_of
from skiff.common.errors import DecodeError
from skiff.common.record import pack_host, read_head, read_tail, record_size, write_record
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.codes import ResponseCode

HOSTS = st.sampled_from([pack_host("127.0.0.1", 10911), pack_host("::1", 10911)])


@given(born=HOSTS, store=HOSTS, body=st.binary(max_size=300), topic=st.text(st.characters(
    whitelist_categories=("Lu", "Ll", "Nd")), min_size=1, max_size=40), props=st.binary(max_size=300))
def test_properties_of_finds_what_read_tail_decodes(born: bytes, store: bytes, body: bytes, topic: str,
                                                    props: bytes) -> None:
    size = record_size(len(body), len(topic.encode()), len(props), len(born), len(store))
    buf = bytearray(size)
    v6 = (int(MessageSysFlag.BORNHOST_V6) if len(born) > 8 else 0) | (int(MessageSysFlag.STOREHOST_V6)
                                                                     if len(store) > 8 else 0)
    write_record(buf, 0, 1, 0, 7, 4096, v6, 1, born, 2, store, 0, 0, body, topic.encode(), props)
    record = memoryview(buf)
    assert bytes(properties_of(record)) == read_tail(record, 0, read_head(record)).properties_raw == props
    with pytest.raises(DecodeError):
        properties_of(record[:-1])


def test_compile_subscription_refuses_with_rocketmq_codes() -> None:
    assert compile_subscription("a > 1", "SQL92", True).needs_properties  # type: ignore[union-attr]
    off = compile_subscription("a > 1", "SQL92", False)
    assert isinstance(off, Refusal) and off.code == ResponseCode.SYSTEM_ERROR
    assert "set enablePropertyFilter=true" in off.reason
    bad = compile_subscription("a >", "sql92", True)
    assert isinstance(bad, Refusal) and bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "column 4" in bad.reason
    kind = compile_subscription("*", "CLASS", True)
    assert isinstance(kind, Refusal) and kind.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert not isinstance(compile_subscription("A || B", None, False), Refusal), "tags need no switch"
