"""What a peer can get wrong: one exception per error code sent back to it."""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "FrameTooLarge",
    "InvalidField",
    "MalformedFrame",
    "ProtocolError",
    "UnknownMessageType",
    "VersionMismatch",
]


class ProtocolError(Exception):
    """The peer sent something this protocol does not allow (remote misbehaviour)."""

    code: ClassVar[str] = "protocol_error"


class FrameTooLarge(ProtocolError):
    code = "frame_too_large"


class MalformedFrame(ProtocolError):
    code = "malformed_frame"


class UnknownMessageType(ProtocolError):
    code = "unknown_type"


class InvalidField(ProtocolError):
    code = "invalid_field"


class VersionMismatch(ProtocolError):
    code = "version_mismatch"
