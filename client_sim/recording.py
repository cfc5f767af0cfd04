"""``arena-bots --record DIR``: what every bot was shown, for an audit to check.

One file per bot, ``DIR/bot-0007.jsonl``, one JSON line per snapshot the bot accepted:

    {"bot": 7, "epoch": 3, "tick": 1201, "hash": "9f3c…", "ack": 118, "t": 1764…}

``hash`` is the world digest the snapshot carried (the node's journal has the same one for
the tick it published), ``ack`` the input the snapshot acknowledged, ``t`` the wall clock
at acceptance. Every welcome is a line too (the first, and each one after a reconnect or a
failover: the same ``player`` is a seat resumed, another one a seat lost):

    {"bot": 7, "event": "welcome", "epoch": 3, "player": 12, "ack": 118, "t": 1764…}

and so is every shot the bot fired, with what it drew of its target (``player``: the bot's
slot; ``seq``: the input that fired; ``view_time``: the view time it claimed; ``seen``: the
target's feet where the bot drew them), for ``arena-replay DIR --serve --sightings``:

    {"bot": 7, "event": "sighting", "player": 12, "seq": 345, "view_time": 41.2875,
     "target": 4, "seen": [1.25, -3.5, 0.0], "t": 1764…}
 ``arena-chaos torture`` checks every line against the lineage the surviving
primary continued: a tick a bot was shown and the region then lost is a broken promise.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO

__all__ = ["SnapshotRecorder"]


class SnapshotRecorder:
    """Appends each bot's accepted snapshots to its own file in ``folder``."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self._files: dict[int, IO[str]] = {}

    def accepted(self, bot: int, epoch: int, tick: int, state: bytes, ack: int) -> None:
        self._file(bot).write(
            f'{{"bot":{bot},"epoch":{epoch},"tick":{tick},"hash":"{state.hex()}",'
            f'"ack":{ack},"t":{time.time():.4f}}}\n'
        )

    def welcomed(self, bot: int, epoch: int, player: int, ack: int) -> None:
        self._file(bot).write(
            f'{{"bot":{bot},"event":"welcome","epoch":{epoch},"player":{player},'
            f'"ack":{ack},"t":{time.time():.4f}}}\n'
        )

    def sighted(
        self,
        bot: int,
        player: int,
        seq: int,
        view_time: float,
        target: int,
        seen: tuple[float, float, float],
    ) -> None:
        x, y, z = seen
        self._file(bot).write(
            f'{{"bot":{bot},"event":"sighting","player":{player},"seq":{seq},'
            f'"view_time":{view_time:.6f},"target":{target},'
            f'"seen":[{x:.4f},{y:.4f},{z:.4f}],"t":{time.time():.4f}}}\n'
        )

    def _file(self, bot: int) -> IO[str]:
        handle = self._files.get(bot)
        if handle is None:
            handle = open(self.folder / f"bot-{bot:04d}.jsonl", "a", encoding="utf-8")
            self._files[bot] = handle
        return handle

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
