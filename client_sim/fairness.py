"""Why a shot's two verdicts differ: the causes the report counts (sans-I/O).

Every finished shot carries what the shooter saw (its claim, its eye, its verdict) and what
the server's ``shot`` event said (the view time it judged, whether it took the claim, the
eye it fired from, the damage dealt). A shot *disagrees* when the two verdicts name
different victims, or when the server's hit did nothing the shooter was shown (its victim
was already dead). Each disagreement has one cause, the first that applies:

* ``shooter_dead``: the server refused the shot, its shooter was dead at the view time;
  or it took the shot as a trade (the shooter was killed before the input that fired was
  applied, but fired in a view older than its death), and fired it from where the
  shooter fell, away from where the bot, not yet told, had moved on;
* ``beyond_cap``: the claim was older than the rewind cap;
* ``victim_already_dead``: an earlier shot in the server's story had killed the victim;
* ``victim_not_shown``: the server's victim was not among the players the bot drew
  (interest management did not send it; the shot's ray went on to it), or, for a
  projectile, was left out of one of the snapshots the bot flew it through;
* ``claim_clamped``: the claim lay outside what the bot could have seen, by the server's
  measurement of its link, and was judged at another time;
* ``shooter_position``: the server fired from an eye more than 1 mm away from the bot's;
* ``unexplained``: none of these, a bug somewhere.

The first four are the game's rules deciding, not unfairness: ``fair_agreement`` leaves
out the shots they decided.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from client_sim.marksman import ShotRecord
from shared.protocol import ENTITY_FLAG_ALIVE

__all__ = [
    "CAUSES",
    "RULE_CAUSES",
    "disagreement",
    "disputed_shot",
    "rule_outcome",
    "shot_detail",
]

CAUSES = (
    "claim_clamped",
    "beyond_cap",
    "shooter_dead",
    "victim_already_dead",
    "victim_not_shown",
    "shooter_position",
    "unexplained",
)
RULE_CAUSES = ("shooter_dead", "beyond_cap", "victim_already_dead", "victim_not_shown")
POSITION_TOLERANCE_M = 1e-3


def rule_outcome(record: ShotRecord) -> str | None:
    """The rule that decided this judged shot, None when the geometry alone did."""
    if record.server_result == "rejected" or (record.server_traded and _moved_on(record)):
        return "shooter_dead"
    if record.server_judged == "capped":
        return "beyond_cap"
    if record.server_result == "hit" and record.server_damage == 0:
        return "victim_already_dead"
    if (
        record.server_result == "hit"
        and record.drawn is not None
        and record.server_victim not in record.drawn
    ):
        return "victim_not_shown"
    return None


def disagreement(record: ShotRecord) -> str | None:
    """The cause of this judged shot's disagreement (one of :data:`CAUSES`), or None when
    shooter and server agree."""
    rule = rule_outcome(record)
    if record.agrees and rule != "victim_already_dead":
        return None
    if rule is not None:
        return rule
    if record.server_judged == "clamped":
        return "claim_clamped"
    if _moved_on(record):
        return "shooter_position"
    return "unexplained"


def _moved_on(record: ShotRecord) -> bool:
    """Whether the server fired from an eye away from the bot's."""
    if record.eye is None or record.server_origin is None:
        return False
    return math.dist(record.eye, record.server_origin) > POSITION_TOLERANCE_M


def shot_detail(record: ShotRecord) -> dict[str, Any]:
    """A judged shot's two verdicts and what each was based on, as plain JSON: what the
    report lists for each unexplained disagreement, so that one can be looked into."""

    def point(p: tuple[float, float, float] | None) -> list[float] | None:
        return None if p is None else [round(float(v), 4) for v in p]

    return {
        "seq": record.seq,
        "weapon": record.weapon,
        "client_victim": record.client_victim,
        "client_hitbox": record.client_hitbox,
        "server_result": record.server_result,
        "server_victim": record.server_victim,
        "server_damage": record.server_damage,
        "server_judged": record.server_judged,
        "view_time": round(record.view_time, 6),
        "server_view_time": round(record.server_view_time, 6),
        "eye": point(record.eye),
        "server_origin": point(record.server_origin),
        "drawn": None if record.drawn is None else sorted(record.drawn),
        "rtt_ms": round(record.rtt_ms, 2),
        "server_rtt_ms": round(record.server_rtt_ms, 2),
        # A projectile: the snapshots the bot flew it through, and in how many of them
        # each verdict's victim was drawn (interest management may have left one out).
        "frames": len(record.track_frames),
        "frames_with_client_victim": _frames_with(record, record.client_victim),
        "frames_with_server_victim": _frames_with(record, record.server_victim),
        # ... when (ms after the view time), and each victim in each: alive (A), dead
        # (D) or not drawn (-), as the bot's flight saw them.
        "frame_ms": [round((t - record.view_time) * 1e3, 1) for t in record.track_times],
        "client_victim_frames": _states(record, record.client_victim),
        "server_victim_frames": _states(record, record.server_victim),
    }


def disputed_shot(record: ShotRecord, cause: str) -> dict[str, Any]:
    """A shot whose two verdicts differ, as the report lists it: the tick the server judged
    it at and its shooter's slot (what ``arena-replay`` finds it by in a match log), both
    verdicts, the cause and both round trips."""
    return {
        "tick": record.server_tick,
        "shooter": record.shooter,
        "seq": record.seq,
        "victim": {"client": record.client_victim, "server": record.server_victim},
        "verdict": {
            "client": "hit" if record.client_hit else "miss",
            "server": record.server_result,
        },
        "server_damage": record.server_damage,
        "cause": cause,
        "rtt_ms": {
            "client": round(record.rtt_ms, 2),
            "server": None if math.isnan(record.server_rtt_ms) else round(record.server_rtt_ms, 2),
        },
    }


def _frames_with(record: ShotRecord, player: int) -> int:
    if player < 0:
        return 0
    return sum(bool(np.any(frame["id"] == player)) for frame in record.track_frames)


def _states(record: ShotRecord, player: int) -> str:
    if player < 0:
        return ""
    states = []
    for frame in record.track_frames:
        rows = frame[frame["id"] == player]
        if not len(rows):
            states.append("-")
        else:
            states.append("A" if rows["flags"][0] & ENTITY_FLAG_ALIVE else "D")
    return "".join(states)
