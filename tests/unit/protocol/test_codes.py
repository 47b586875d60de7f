from skiff.protocol.codes import LanguageCode, RequestCode, ResponseCode


def test_codes_have_no_aliases():
    """An IntEnum silently turns a repeated value into an alias; every name must own its value."""
    for enum in (RequestCode, ResponseCode, LanguageCode):
        assert len(enum.__members__) == len(list(enum)), enum


def test_codes_the_cpp_client_depends_on():
    assert (RequestCode.SEND_MESSAGE, RequestCode.PULL_MESSAGE, RequestCode.HEART_BEAT) == (10, 11, 34)
    assert (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.GET_CONSUMER_RUNNING_INFO) == (
        310, 320, 307)
    assert (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED) == (
        19, 20, 21)
    assert (ResponseCode.QUERY_NOT_FOUND, ResponseCode.FLOW_CONTROL) == (22, 215)
