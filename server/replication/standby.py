"""Where a standby stands with the primary it follows, as a table (sans-I/O).

Only a standby that holds every tick the region has shown may be promoted (*eligible*).
It learns so from its primary (``InSync``), loses it when the primary starts it afresh
(``StandbyWelcome``), says it lags (``OutOfSync``) or a record does not follow on what it
holds (a gap, a hash that differs). Then it asks for the full state and skips tick
records until that arrives. Only an eligible standby is promoted. A node that led and
stepped down holds every tick it showed, unless a successor exists.

=============  ==================  =============
from           event               to
=============  ==================  =============
catching_up    welcomed            catching_up
catching_up    told_in_sync        in_sync
catching_up    told_out_of_sync    resyncing
catching_up    gap                 resyncing
catching_up    applied_tick        catching_up
catching_up    applied_full_state  catching_up
in_sync        welcomed            catching_up
in_sync        told_in_sync        in_sync
in_sync        told_out_of_sync    resyncing
in_sync        gap                 resyncing
in_sync        applied_tick        in_sync
in_sync        applied_full_state  in_sync
resyncing      welcomed            resyncing
resyncing      told_in_sync        resyncing  (a tick record or two late: ignored)
resyncing      told_out_of_sync    resyncing
resyncing      gap                 resyncing
resyncing      applied_full_state  catching_up
in_sync        promoted            catching_up  (a primary now: eligible again only
                                                 through ``InSync``)
any            led_to_the_end      in_sync
any            superseded          catching_up
=============  ==================  =============

A tick record applied while resyncing is a bug (the follower skips them), and so is the
promotion of a standby that is not in sync.
"""

from __future__ import annotations

import enum

from server.transitions import Machine

__all__ = ["STANDBY", "StandbyEvent", "StandbySync", "standby_sync"]


class StandbySync(enum.Enum):
    #: Following, not (yet) told it holds every tick: not eligible.
    CATCHING_UP = "catching_up"
    #: Told ``InSync`` by its primary (or led and stepped down with no successor): eligible.
    IN_SYNC = "in_sync"
    #: Asked for the full state: tick records are skipped until it arrives.
    RESYNCING = "resyncing"

    @property
    def eligible(self) -> bool:
        return self is StandbySync.IN_SYNC


class StandbyEvent(enum.Enum):
    WELCOMED = "welcomed"
    TOLD_IN_SYNC = "told_in_sync"
    TOLD_OUT_OF_SYNC = "told_out_of_sync"
    GAP = "gap"
    APPLIED_TICK = "applied_tick"
    APPLIED_FULL_STATE = "applied_full_state"
    PROMOTED = "promoted"
    #: It led and stepped down with no higher epoch known.
    LED_TO_THE_END = "led_to_the_end"
    #: It led and stepped down, and a higher epoch exists.
    SUPERSEDED = "superseded"


_C, _I, _R = StandbySync.CATCHING_UP, StandbySync.IN_SYNC, StandbySync.RESYNCING
_E = StandbyEvent

STANDBY: dict[tuple[StandbySync, StandbyEvent], StandbySync] = {
    (_C, _E.WELCOMED): _C,
    (_C, _E.TOLD_IN_SYNC): _I,
    (_C, _E.TOLD_OUT_OF_SYNC): _R,
    (_C, _E.GAP): _R,
    (_C, _E.APPLIED_TICK): _C,
    (_C, _E.APPLIED_FULL_STATE): _C,
    (_I, _E.WELCOMED): _C,
    (_I, _E.TOLD_IN_SYNC): _I,
    (_I, _E.TOLD_OUT_OF_SYNC): _R,
    (_I, _E.GAP): _R,
    (_I, _E.APPLIED_TICK): _I,
    (_I, _E.APPLIED_FULL_STATE): _I,
    (_R, _E.WELCOMED): _R,
    (_R, _E.TOLD_IN_SYNC): _R,
    (_R, _E.TOLD_OUT_OF_SYNC): _R,
    (_R, _E.GAP): _R,
    (_R, _E.APPLIED_FULL_STATE): _C,
    (_I, _E.PROMOTED): _C,
    **{(state, _E.LED_TO_THE_END): _I for state in StandbySync},
    **{(state, _E.SUPERSEDED): _C for state in StandbySync},
}


def standby_sync() -> Machine[StandbySync, StandbyEvent]:
    """A standby's standing, before it follows anyone: not eligible."""
    return Machine("standby", STANDBY, StandbySync.CATCHING_UP)
