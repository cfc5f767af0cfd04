"""Where numba keeps compiled kernels (the node's, and the bots' snapshot decoder): one
place, however a command is started.

numba writes a kernel's machine code next to its source (``__pycache__``) unless
``NUMBA_CACHE_DIR`` says otherwise. A Makefile that sets the variable and a command started
by hand that does not then use two caches, and the second one compiles everything again
(tens of seconds on a busy machine). So the cache is chosen here, when the ``server`` or
``client_sim`` package is imported and before any kernel module is:

1. ``$NUMBA_CACHE_DIR`` when it is set (operators, CI, systemd's ``CacheDirectory=``);
2. else ``$XDG_CACHE_HOME/arena/numba`` (``~/.cache/arena/numba``), per user;
3. when the chosen folder cannot be written (a read-only home or tree, as under systemd's
   ``ProtectHome=``), a per-user folder in the temporary directory, so the node still
   starts (it compiles once per boot there) and says why in its ``warming_up`` line.

numba files every kernel under the absolute path of its source, so checkouts of different
versions never share entries.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "configure", "fallback_reason"]

CACHE_ENV = "NUMBA_CACHE_DIR"

_chosen: Path | None = None
_fallback_reason: str | None = None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-", delete=True)
        probe.close()
    except OSError:
        return False
    return True


def _default() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "arena" / "numba"


def configure() -> Path:
    """Choose the cache folder (once per process), export it for child processes and tell
    numba, also when numba was imported first. Returns the folder."""
    global _chosen, _fallback_reason
    if _chosen is not None:
        return _chosen
    given = os.environ.get(CACHE_ENV)
    chosen = Path(given) if given else _default()
    if not _writable(chosen):
        _fallback_reason = f"{chosen} is not writable"
        chosen = Path(tempfile.gettempdir()) / f"arena-numba-{os.getuid()}"
        chosen.mkdir(parents=True, exist_ok=True)
    os.environ[CACHE_ENV] = str(chosen)
    if "numba" in sys.modules:  # numba read the environment at import: tell it directly
        from numba.core import config

        setattr(config, "CACHE_DIR", str(chosen))  # noqa: B010 (not in numba's stubs)
    _chosen = chosen
    return chosen


def cache_dir() -> Path:
    """The folder :func:`configure` chose."""
    return configure()


def fallback_reason() -> str | None:
    """Why the folder asked for was not used (None when it was)."""
    configure()
    return _fallback_reason
