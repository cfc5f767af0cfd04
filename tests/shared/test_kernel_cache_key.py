"""The kernel cache's key covers every kernel source: an edit of a helper that other files'
kernels inline forgets this checkout's compiled kernels, and nothing else does."""

from __future__ import annotations

from pathlib import Path

import pytest
from numba.core.caching import UserProvidedCacheLocator

from shared import jitcache


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the kernel sources, taken for the checkout."""
    root = tmp_path / "clone"
    for source in jitcache.KERNEL_SOURCES:
        (root / source).parent.mkdir(parents=True, exist_ok=True)
        (root / source).write_bytes((jitcache._ROOT / source).read_bytes())
    monkeypatch.setattr(jitcache, "_ROOT", root)
    return root


def compiled(cache: Path) -> list[Path]:
    """A fake compiled kernel in each of the checkout's numba folders."""
    files = []
    for folder in jitcache._numba_folders(cache):
        folder.mkdir(parents=True, exist_ok=True)
        files.append(folder / "kernel.nbi")
        files[-1].write_bytes(b"index")
    return files


def test_every_kernel_source_exists() -> None:
    missing = [s for s in jitcache.KERNEL_SOURCES if not (jitcache._ROOT / s).is_file()]
    assert missing == []


def test_the_folders_are_the_ones_numba_files_kernels_in(clone: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    expected = {
        cache / UserProvidedCacheLocator.get_suitable_cache_subpath(str(clone / source))
        for source in jitcache.KERNEL_SOURCES
    }
    assert jitcache._numba_folders(cache) == expected


def test_an_edit_of_a_shared_helper_forgets_the_compiled_kernels(
    clone: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    jitcache._forget_stale_kernels(cache)  # the first fill from this checkout
    kept = compiled(cache)
    jitcache._forget_stale_kernels(cache)  # nothing changed: the kernels stay
    assert all(path.exists() for path in kept)

    helper = clone / "shared" / "raygeometry.py"
    helper.write_text(helper.read_text() + "\n# an edit\n")
    jitcache._forget_stale_kernels(cache)
    assert not any(path.exists() for path in kept)


def test_another_checkouts_kernels_are_left_alone(clone: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    elsewhere = cache / "shared_0123456789abcdef0123456789abcdef01234567" / "kernel.nbi"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"index")
    jitcache._forget_stale_kernels(cache)
    assert elsewhere.exists()
