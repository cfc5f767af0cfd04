"""What a peer can get wrong: one exception per error code sent back to it.

Each is a :class:`shared.schema.MessageError`, the error of every message family; the field
validators raise :class:`shared.schema.InvalidField`, which the protocol's decoders answer
as this module's :class:`InvalidField` (:func:`as_protocol_error`)."""

from __future__ import annotations

from shared import schema
from shared.schema import MessageError

__all__ = [
    "FrameTooLarge",
    "InvalidField",
    "MalformedFrame",
    "ProtocolError",
    "UnknownMessageType",
    "VersionMismatch",
    "as_protocol_error",
]


class ProtocolError(MessageError):
    """The peer sent something this protocol does not allow (remote misbehaviour)."""

    code = "protocol_error"


class FrameTooLarge(ProtocolError):
    code = "frame_too_large"


class MalformedFrame(ProtocolError):
    code = "malformed_frame"


class UnknownMessageType(ProtocolError):
    code = "unknown_type"


class InvalidField(ProtocolError, schema.InvalidField):
    code = "invalid_field"


class VersionMismatch(ProtocolError):
    code = "version_mismatch"


def as_protocol_error(error: schema.InvalidField, prefix: str = "") -> InvalidField:
    """A shared validator's refusal as the protocol's ``invalid_field`` (``prefix`` names
    the message it was in)."""
    if isinstance(error, InvalidField) and not prefix:
        return error
    return InvalidField(f"{prefix}{error}")
