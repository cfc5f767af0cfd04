"""A node's journal: a JSON line per tick published, per promotion and per checkpoint resume.

What ``arena-chaos torture`` audits: every tick a client accepted must be in the lineage
the surviving primary continued, with the same world hash. The journal says what each node
showed and when, so the audit does not have to trust the nodes' own accounting:

    {"node": "a", "epoch": 3, "tick": 1200, "hash": "9f…", "synced": true, "t": 1764…}
    {"event": "promoted", "node": "b", "epoch": 4, "from_epoch": 3, "from_tick": 1203,
     "hash": "41…", "t": …}
    {"event": "resumed", "node": "a", "epoch": 5, "from_epoch": 4, "from_tick": 1800, …}

``hash`` is the world's state digest the snapshot carries (per match, joined with ``/``;
a promotion's or a resume's is the world it took over, at ``from_tick``);
``synced`` says whether a standby held the tick when it was shown; ``t`` is the wall clock.
Lines are flushed as written, so a killed node's journal ends with its last tick.
"""

from __future__ import annotations

import json
import time
from typing import IO

from shared import protocol

__all__ = ["Journal"]


class Journal:
    """Appends to ``path``; an empty path writes nothing."""

    def __init__(self, path: str, node: str) -> None:
        self.node = node
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None

    def published(self, epoch: int, tick: int, state_hashes: list[str], synced: bool) -> None:
        if self._file is None:
            return
        digest = "/".join(protocol.state_digest(h).hex() for h in state_hashes)
        self._write(
            {"node": self.node, "epoch": epoch, "tick": tick, "hash": digest, "synced": synced}
        )

    def promoted(
        self, epoch: int, from_epoch: int, from_tick: int, state_hashes: list[str]
    ) -> None:
        """``state_hashes``: the world this node holds at ``from_tick``, the tick its
        predecessor may have shown and been killed before it could note it."""
        self._took_over("promoted", epoch, from_epoch, from_tick, state_hashes)

    def resumed(self, epoch: int, from_epoch: int, from_tick: int, state_hashes: list[str]) -> None:
        """A match resumed from the checkpoint of ``from_epoch`` at ``from_tick`` (the
        ticks its region showed after that tick are gone)."""
        self._took_over("resumed", epoch, from_epoch, from_tick, state_hashes)

    def _took_over(
        self, event: str, epoch: int, from_epoch: int, from_tick: int, state_hashes: list[str]
    ) -> None:
        if self._file is None:
            return
        self._write(
            {
                "event": event,
                "node": self.node,
                "epoch": epoch,
                "from_epoch": from_epoch,
                "from_tick": from_tick,
                "hash": "/".join(protocol.state_digest(h).hex() for h in state_hashes),
            }
        )

    def _write(self, entry: dict[str, object]) -> None:
        if self._file is not None:
            entry["t"] = round(time.time(), 4)
            self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
