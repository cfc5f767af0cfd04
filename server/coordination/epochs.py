"""The epochs a node has used, kept on disk so that a restart never repeats one.

A fencing epoch is only worth something if it never comes back: a node that restarted and
claimed epoch 1 again would look, to every client and peer, like the rightful primary of a
world that was long replaced. The static coordinator has no shared store to ask, so each
node writes the highest epoch it ever took (or saw) to ``{state_dir}/{region}/{node}.epoch``
before it acts on it: written to a temporary file, flushed to disk, renamed over the old one.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["EpochStore"]


class EpochStore:
    """The highest epoch this node used; an empty ``state_dir`` keeps it in memory only."""

    def __init__(self, state_dir: str, region: str, node_id: str) -> None:
        self.path = Path(state_dir) / region / f"{node_id}.epoch" if state_dir else None
        self._highest = 0

    def load(self) -> int:
        """The highest epoch on record (0 when none); a damaged file is a one-line error."""
        if self.path is None or not self.path.exists():
            return self._highest
        text = self.path.read_text(encoding="ascii", errors="replace").strip()
        if not text.isdigit():
            raise ValueError(f"{self.path} does not hold an epoch ({text[:20]!r}): remove it")
        self._highest = max(self._highest, int(text))
        return self._highest

    def check_writable(self) -> None:
        """Fail now, with one line, rather than at the first promotion."""
        if self.path is None:
            return
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(f"state dir {folder}: cannot create it ({error.strerror})") from None
        if not os.access(folder, os.W_OK):
            raise ValueError(f"state dir {folder}: not writable (--state-dir)")

    def save(self, epoch: int) -> None:
        """Record ``epoch`` (kept only if higher), durably, before the caller uses it."""
        if epoch <= self.load():
            return
        self._highest = epoch
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".tmp{os.getpid()}")
        with open(temporary, "w", encoding="ascii") as handle:
            handle.write(f"{epoch}\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
