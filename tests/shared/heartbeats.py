"""A valid heartbeat to start from: the directory's tests change only what they are about."""

from __future__ import annotations

from typing import Any

from shared.directory import Heartbeat


def beat(node_id: str = "eu-1", region: str = "eu", **changes: Any) -> Heartbeat:
    """A primary of one match, empty, room for ten, at ``node_id``'s made-up address."""
    fields: dict[str, Any] = {
        "node_id": node_id,
        "region": region,
        "endpoint": f"ws://{node_id}.test:7777/ws",
        "probe": f"http://{node_id}.test:7777/health",
        "role": "primary",
        "epoch": 1,
        "matches": 1,
        "players": 0,
        "capacity": 10,
    }
    fields.update(changes)
    return Heartbeat(**fields)
