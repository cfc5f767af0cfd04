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
versions never share entries. It keys a kernel by its own source file only, though: an edit
of a helper that another file's kernels inline (``shared/raygeometry.py``,
``shared/sightlines.py``) would leave those kernels stale. So the key here covers every
kernel source (:data:`KERNEL_SOURCES`): when their digest differs from the one this
checkout's cache was filled under, its compiled kernels are forgotten and compile again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = [
    "CACHE_ENV",
    "KERNEL_SOURCES",
    "cache_dir",
    "configure",
    "fallback_reason",
    "kernel_sources_digest",
]

CACHE_ENV = "NUMBA_CACHE_DIR"
#: Every source file the kernels are compiled from (their globals and the helpers they
#: inline included), relative to the checkout's root.
KERNEL_SOURCES = (
    "server/sim/hitreg/cpu.py",
    "server/sim/hitreg/jit.py",
    "server/sim/hitreg/backend.py",
    "server/sim/hitreg/batches.py",
    "server/sim/input_frames.py",
    "server/sim/inputs.py",
    "server/sim/deltas.py",
    "server/sim/interest.py",
    "server/sim/fog/jit.py",
    "server/sim/fog/kernel.py",
    "server/sim/fog/state.py",
    "shared/hitbox.py",
    "shared/kernel_options.py",
    "shared/movement.py",
    "shared/protocol/baselines.py",
    "shared/protocol/between.py",
    "shared/protocol/deltas.py",
    "shared/protocol/fields.py",
    "shared/protocol/inputs.py",
    "shared/protocol/layout.py",
    "shared/protocol/reader.py",
    "shared/protocol/snapshots.py",
    "shared/raygeometry.py",
    "shared/rayhits.py",
    "shared/sightlines.py",
)
_ROOT = Path(__file__).resolve().parents[1]

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
    _forget_stale_kernels(chosen)
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


def kernel_sources_digest() -> str:
    """A digest of every kernel source of this checkout (a missing one counts as empty)."""
    digest = hashlib.sha256()
    for source in KERNEL_SOURCES:
        path = _ROOT / source
        digest.update(source.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"")
    return digest.hexdigest()


def _numba_folders(cache: Path) -> set[Path]:
    """The folders numba files this checkout's kernels in (one per source folder, named
    as numba's ``UserProvidedCacheLocator`` names them: the folder's name and the SHA-1
    of its absolute path)."""
    folders = set()
    for source in KERNEL_SOURCES:
        folder = os.path.dirname(os.path.abspath(_ROOT / source))
        hashed = hashlib.sha1(folder.encode()).hexdigest()
        folders.add(cache / f"{os.path.basename(folder)}_{hashed}")
    return folders


def _forget_stale_kernels(cache: Path) -> None:
    """Remove this checkout's compiled kernels when a kernel source changed since they were
    compiled (a marker file per checkout holds the digest they were compiled under)."""
    checkout = hashlib.sha1(str(_ROOT).encode()).hexdigest()[:16]
    marker = cache / f"arena-sources-{checkout}"
    digest = kernel_sources_digest()
    try:
        if marker.read_text() == digest:
            return
    except OSError:
        pass  # never filled from this checkout, or unreadable: start afresh
    for folder in _numba_folders(cache):
        shutil.rmtree(folder, ignore_errors=True)
    try:
        marker.write_text(digest)
    except OSError:
        pass  # a read-only cache is used as it is
