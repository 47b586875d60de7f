"""Hypothesis strategies of stored-record runs as a broker answers a pull: IPv4 and IPv6
hosts, empty and compressed bodies, odd property strings (not UTF-8, repeated names, pairs
without a value). Shared by the columnar decoder's tests and its compiled kernel's twin test."""

from __future__ import annotations

import zlib

from hypothesis import strategies as st

from skiff.common.message import MessageQueue
from skiff.common.record import pack_host, record_size, write_record
from skiff.common.sysflag import MessageSysFlag

MQ = MessageQueue("Orders", "broker-a", 3)
hosts = st.sampled_from([("127.0.0.1", 10911), ("10.1.2.3", 5555), ("::1", 10911)])
word = st.text(alphabet=st.sampled_from("abK\x01\x02é _"), max_size=6)
pair = st.one_of(
    # every name the compiled kernel sorts out by itself (skiff.columnar.schema.HIDDEN_PROPERTIES
    # and the three columns), so the comparison with the Python reference covers each
    st.tuples(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT", "MIN_OFFSET", "MAX_OFFSET", "n", "a"]), word),
    st.tuples(word, word),
)


@st.composite
def properties(draw: st.DrawFn) -> bytes:
    """A properties string as a producer writes it, or as a foreign writer might (any bytes)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=30))
    many = draw(st.integers(0, 19)) == 0  # past the compiled kernel's 32 pairs a message
    text = "".join(f"{k}\x01{v}\x02" for k, v in draw(st.lists(pair, min_size=30 if many else 0,
                                                                 max_size=40 if many else 6)))
    return text.encode()


@st.composite
def records(draw: st.DrawFn) -> list[bytes]:
    """A run of up to six records of one queue, as `skiff.common.record` lays them out."""
    out = []
    for offset in range(draw(st.integers(0, 6))):
        body = draw(st.binary(max_size=40))
        sys_flag = 0
        if draw(st.booleans()):
            body, sys_flag = zlib.compress(body), int(MessageSysFlag.COMPRESSED)
        props = draw(properties())
        born, store = pack_host(*draw(hosts)), pack_host(*draw(hosts))
        topic = MQ.topic.encode()
        raw = bytearray(record_size(len(body), len(topic), len(props), len(born), len(store)))
        write_record(raw, 0, queue_id=MQ.queue_id, flag=1, queue_offset=100 + offset, physical_offset=9000 + offset,
                     sys_flag=sys_flag, born_timestamp=1_700_000_000_000 + offset, born_host=born,
                     store_timestamp=1_700_000_000_500 - offset, store_host=store,
                     reconsume_times=draw(st.integers(0, 3)), prepared_transaction_offset=0, body=body,
                     topic=topic, properties=props)
        out.append(bytes(raw))
    return out
