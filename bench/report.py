"""How a bench hands over its JSON: on stdout, and also to ``--json PATH`` when given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["emit"]


def emit(report: dict[str, Any], path: str | Path | None) -> None:
    """Print ``report`` as indented JSON, and write the same text to ``path`` (if any)."""
    text = json.dumps(report, indent=2)
    print(text)
    if path:
        Path(path).write_text(text + "\n", encoding="utf-8")
