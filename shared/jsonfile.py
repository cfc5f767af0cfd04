"""Reading the project's JSON data files (map, latency matrix) with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["read_json"]


def read_json(path: str | Path, what: str, error: type[ValueError]) -> object:
    """The decoded document at ``path``; ``error`` (one line, naming ``what``) otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{what} {path} is not valid JSON: {exc}") from None
