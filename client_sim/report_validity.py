"""Whether a load test measured what it claims: a run its own bot process could not keep up
with is no measurement of the server.

A bot loop that ran 18 times a second instead of 60 sends inputs late, reads snapshots late
and measures its own queueing as RTT (216 ms against a model of 55 ms): its figures describe
the machine, not the game. Bots that left a primary that was still alive (they reconnected
and found the same epoch) turned a slow process into a failover the server never had. Both
make the run ``valid: false`` with the reasons, as the server-load bench does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TICK_RATE_FLOOR", "invalid_reasons"]

#: The share of the target tick rate a bot process must keep for its run to count.
TICK_RATE_FLOOR = 0.95


def invalid_reasons(report: dict[str, Any]) -> list[str]:
    """Why the report's figures are not a measurement (empty: they are)."""
    reasons = []
    process = report["bot_process"]
    target, kept = process.get("target_hz"), process.get("tick_hz")
    if target and kept is not None and kept < TICK_RATE_FLOOR * target:
        reasons.append(
            f"the bot process ran {kept:g} ticks/s of {target} "
            f"({kept / target:.0%}, below {TICK_RATE_FLOOR:.0%}): the machine is too busy "
            "for its bots (fewer bots, more --workers, or a quieter machine)"
        )
    spurious = report["failover"].get("reconnects_without_failover", 0)
    if spurious:
        # A node that skipped ticks stalled: long enough, its bots' probe went unanswered.
        skipped = (report.get("ticks") or {}).get("skipped")
        why = (
            f"the node stalled ({skipped} ticks skipped) past the bots' probe"
            if skipped
            else "a starved bot process"
        )
        reasons.append(
            f"{spurious} bot(s) reconnected without a failover (they left a primary that was "
            f"still serving: {why}, not a lost node)"
        )
    return reasons
