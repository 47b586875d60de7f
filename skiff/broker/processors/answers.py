"""How the remoting door answers an operation's outcome: a refusal as its code and reason,
anything else as the JSON body (or an empty SUCCESS), one way for every admin processor."""

from __future__ import annotations

from skiff.broker.operations import Refusal
from skiff.protocol.bodies.base import JsonBody
from skiff.protocol.command import RemotingCommand


def answer(req: RemotingCommand, outcome: JsonBody | Refusal | None) -> RemotingCommand:
    """The response to ``req``: the refusal's code and reason, the body's JSON, or SUCCESS."""
    if isinstance(outcome, Refusal):
        return req.response(outcome.code, outcome.reason)
    return req.response() if outcome is None else req.response(body=outcome.to_json())
