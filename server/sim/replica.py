"""What a standby copies of each component, declared by the component itself.

A component of a match (the world, combat, the history ring) names its NumPy arrays in
``REPLICATED`` (sent in every record and restored on the standby) or ``DERIVED`` (rebuilt
there, never sent). A test walks each component's arrays and fails on one in neither
list, so a field added to the world cannot silently diverge on standbys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

__all__ = ["ArrayState", "StateMismatch"]


class StateMismatch(ValueError):
    """A state that does not fit the component (other fields or sizes): another version or
    configuration sent it, or it was damaged."""


class ArrayState:
    """A component whose named arrays are its replicated state (a mixin)."""

    #: The arrays a standby copies from the primary's records.
    REPLICATED: ClassVar[tuple[str, ...]] = ()
    #: Arrays rebuilt from the others or from configuration: never sent.
    DERIVED: ClassVar[tuple[str, ...]] = ()

    def array_state(self) -> dict[str, bytes]:
        """Every replicated array, as raw bytes in C order."""
        return {
            name: np.ascontiguousarray(getattr(self, name)).tobytes() for name in self.REPLICATED
        }

    def restore_arrays(self, blobs: Mapping[str, bytes]) -> None:
        """Overwrite the replicated arrays in place (views into them stay valid)."""
        if set(blobs) != set(self.REPLICATED):
            raise StateMismatch(
                f"{type(self).__name__} state names {sorted(blobs)}, not {sorted(self.REPLICATED)}"
            )
        for name in self.REPLICATED:
            target = getattr(self, name)
            values = np.frombuffer(blobs[name], dtype=target.dtype)
            if values.size != target.size:
                raise StateMismatch(f"{type(self).__name__}.{name}: {values.size} values, "
                                    f"{target.size} expected")  # fmt: skip
            target[...] = values.reshape(target.shape)
