"""Every store outcome has its response: put statuses for sends, get statuses for pulls."""

import pytest

from skiff.broker.processors.pull import _outcome
from skiff.broker.operations import Sent
from skiff.broker.processors.send import STATUS_CODES, put_response
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.store import GetResult, GetStatus, PutResult, PutStatus


def test_every_put_status_has_a_response_code():
    assert set(STATUS_CODES) == set(PutStatus)


@pytest.mark.parametrize(("status", "offset", "expected"), [
    (GetStatus.FOUND, 5, (ResponseCode.SUCCESS, 9)),
    (GetStatus.NO_MATCHED_MESSAGE, 5, (ResponseCode.PULL_RETRY_IMMEDIATELY, 9)),
    (GetStatus.MESSAGE_WAS_REMOVING, 5, (ResponseCode.PULL_RETRY_IMMEDIATELY, 9)),
    (GetStatus.OFFSET_FOUND_NULL, 5, (ResponseCode.PULL_NOT_FOUND, 9)),
    (GetStatus.OFFSET_OVERFLOW_ONE, 5, (ResponseCode.PULL_NOT_FOUND, 9)),
    (GetStatus.OFFSET_OVERFLOW_BADLY, 5, (ResponseCode.PULL_OFFSET_MOVED, 9)),
    (GetStatus.OFFSET_TOO_SMALL, 5, (ResponseCode.PULL_OFFSET_MOVED, 9)),
    (GetStatus.NO_MESSAGE_IN_QUEUE, 0, (ResponseCode.PULL_NOT_FOUND, 0)),
    (GetStatus.NO_MESSAGE_IN_QUEUE, 5, (ResponseCode.PULL_OFFSET_MOVED, 0)),
    (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, (ResponseCode.PULL_NOT_FOUND, 0)),
    (GetStatus.NO_MATCHED_LOGIC_QUEUE, 3, (ResponseCode.PULL_OFFSET_MOVED, 0)),
])
def test_pull_outcomes_follow_rocketmq(status, offset, expected):
    assert _outcome(GetResult(status, 9, 0, 10), offset) == expected


def test_send_results_carry_ids_queue_and_offset_as_strings():
    req = RemotingCommand(code=10, opaque=7)
    ok = put_response(req, Sent(PutResult(PutStatus.PUT_OK, "", 100, ("A" * 32, "B" * 32), 41, 2), 3),
                      {"TRACE_ON": "true"})
    assert (ok.code, ok.opaque, ok.remark) == (ResponseCode.SUCCESS, 7, None)
    assert ok.ext_fields == {"msgId": "A" * 32 + "," + "B" * 32, "queueId": "3", "queueOffset": "41", "TRACE_ON": "true"}
    slow = put_response(req, Sent(PutResult(PutStatus.FLUSH_DISK_TIMEOUT, "no fsync in time", 100, ("A" * 32,), 41, 1), 3))
    assert (slow.code, slow.remark, slow.ext("queueOffset")) == (ResponseCode.FLUSH_DISK_TIMEOUT, "no fsync in time", "41")
    full = put_response(req, Sent(PutResult(PutStatus.DISK_FULL, "the disk is 95.0% full"), 3))
    assert (full.code, full.remark, full.ext_fields) == (ResponseCode.SERVICE_NOT_AVAILABLE, "the disk is 95.0% full", {})
    busy = put_response(req, Sent(PutResult(PutStatus.OS_PAGE_CACHE_BUSY, "the append lock stayed busy"), 3))
    assert (busy.code, busy.remark, busy.ext_fields) == (ResponseCode.SYSTEM_BUSY, "the append lock stayed busy", {})
