"""The POP receipt handle (extraInfo) codec: both forms round-trip, bad ones are named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.protocol.headers.pop import ORDERLY_REVIVE_QID, ExtraInfo, PopMessageRequestHeader, offset_info

_OFFSETS = st.integers(0, 2**62)


@given(_OFFSETS, _OFFSETS, st.integers(1, 2**40), st.sampled_from([0, 3, ORDERLY_REVIVE_QID]), st.sampled_from([0, 1]),
       st.from_regex(r"[a-zA-Z0-9_-]{1,20}", fullmatch=True), st.integers(0, 1023), _OFFSETS, _OFFSETS)
def test_handles_round_trip_in_both_forms(ck, pop_time, invisible, qid, kind, broker, queue_id, offset, clo):
    handle = ExtraInfo(ck, pop_time, invisible, qid, kind, broker, queue_id, offset, clo)
    assert ExtraInfo.parse(handle.encode_receipt()) == handle
    assert ExtraInfo.parse(handle.encode()) == handle._replace(commit_log_offset=-1)
    assert handle.orderly == (qid == ORDERLY_REVIVE_QID) and handle.visible_at == pop_time + invisible


def test_reference_example_parses():
    handle = ExtraInfo.parse("17 1732400000000 60000 3 0 broker-a 2 17 1048576")
    assert (handle.broker_name, handle.queue_id, handle.queue_offset, handle.commit_log_offset) == (
        "broker-a", 2, 17, 1048576)


@pytest.mark.parametrize(("text", "why"), [
    ("", "fields"), ("1 2 3", "fields"), ("a 2 3 4 0 b 1 2", "numbers"), ("1 2 3 4 7 b 1 2", "topic type"),
    ("1 2 3 4 0  1 2", "broker"),
])
def test_bad_handles_say_what_is_wrong(text: str, why: str):
    with pytest.raises(DecodeError, match=why):
        ExtraInfo.parse(text)


def test_pop_header_reads_what_a_5x_client_sends():
    ext = {"consumerGroup": "G", "topic": "T", "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
           "pollTime": "20000", "bornTime": "1", "initMode": "1", "expType": "TAG", "exp": "*", "order": "false"}
    h = PopMessageRequestHeader.from_ext(ext)
    assert (h.queue_id, h.order, h.attempt_id, h.exp) == (-1, False, None, "*")
    assert offset_info([(0, 1, "5"), (1, 0, "7,8")]) == "0 1 5;1 0 7,8"
