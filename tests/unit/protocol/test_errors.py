import pytest

from skiff.common.errors import SkiffError
from skiff.protocol import errors
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand


def test_every_error_code_has_its_own_class():
    assert errors.MAPPED_CODES == {c for c in ResponseCode if c != ResponseCode.SUCCESS}
    classes = [errors.error_class(c) for c in errors.MAPPED_CODES]
    assert len(set(classes)) == len(classes)
    for code in errors.MAPPED_CODES:
        exc = errors.error_for(code, "why")
        assert isinstance(exc, errors.ResponseError) and isinstance(exc, SkiffError)
        assert exc.code == code and exc.remark == "why" and ResponseCode(code).name in str(exc)


@pytest.mark.parametrize(
    "code, cls, retriable",
    [
        (ResponseCode.SYSTEM_BUSY, errors.SystemBusyError, True),
        (ResponseCode.SERVICE_NOT_AVAILABLE, errors.ServiceNotAvailableError, True),
        (ResponseCode.FLUSH_DISK_TIMEOUT, errors.FlushDiskTimeoutError, True),
        (ResponseCode.NO_PERMISSION, errors.NoPermissionError, False),
        (ResponseCode.MESSAGE_ILLEGAL, errors.MessageIllegalError, False),
        (ResponseCode.TOPIC_NOT_EXIST, errors.TopicNotExistError, False),
    ],
)
def test_retriable_flags(code, cls, retriable):
    assert errors.error_class(code) is cls and cls.retriable is retriable
    assert (code in errors.RETRIABLE_CODES) is retriable


def test_raise_for_response():
    ok = RemotingCommand(code=ResponseCode.SUCCESS, flag=1)
    assert errors.raise_for_response(ok) is ok
    busy = RemotingCommand(code=ResponseCode.SYSTEM_BUSY, flag=1, remark="[PCBUSY_CLEAN_QUEUE] broker busy")
    with pytest.raises(errors.SystemBusyError, match=r"SYSTEM_BUSY \(2\): \[PCBUSY_CLEAN_QUEUE\] broker busy") as info:
        errors.raise_for_response(busy)
    assert info.value.retriable and info.value.remark.startswith("[PCBUSY")
    not_found = RemotingCommand(code=ResponseCode.QUERY_NOT_FOUND, flag=1)
    assert errors.raise_for_response(not_found, (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)) is not_found
    with pytest.raises(errors.ResponseError, match=r"UNKNOWN \(999\): no remark") as unknown:
        errors.raise_for_response(RemotingCommand(code=999, flag=1))
    assert type(unknown.value) is errors.ResponseError and unknown.value.code == 999 and not unknown.value.retriable


def test_transport_errors_are_retriable():
    timeout = errors.RequestTimeout(11, "127.0.0.1:10911", 3000)
    closed = errors.ConnectionClosed("127.0.0.1:10911", "peer reset")
    assert timeout.retriable and closed.retriable
    assert "no answer in 3000 ms" in str(timeout) and "peer reset" in str(closed)
    assert isinstance(timeout, errors.RemotingError) and not isinstance(timeout, errors.ResponseError)
