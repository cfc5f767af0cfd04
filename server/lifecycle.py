"""What a node tells the platform that runs it, and when (sans-I/O).

Two platforms supervise a node from outside: Agones, through its SDK server's REST gateway
(:mod:`server.net.agones`), and systemd, through its notify socket
(:mod:`server.net.sd_notify`). Both want the same few facts: the node is ready, it is
alive, and, for Agones, what it is (labels) and whether it holds a match in play. This
module decides what to send when, as data; the edges only move it. No clock, no socket:
``now`` is a parameter and every call's outcome is fed back.

Liveness (:class:`Pulse`): a primary is alive only while its tick loop runs, so a ping
(Agones ``Health``, systemd ``WATCHDOG=1``) is sent only when ticks ran since the last
one: a stalled tick loop stops the pings and the platform replaces the node. A node that
does not tick (warming up, deciding its role, a standby following its primary) is alive
while the event loop that would send the ping runs.

Agones (:class:`AgonesLifecycle`), after the SDK's contract
(agones.dev/site/docs/guides/client-sdks/rest/, ``sdks/swagger/sdk.swagger.json``):

* ``PUT /metadata/label`` region, role and epoch, whenever one changes (a standby
  promoted, a primary that stepped down), once the node is ready and before it says so,
  so an allocation selecting on them never sees a ready node with stale labels;
* ``PUT /metadata/annotation`` ``url``: where peers reach it (a label cannot hold a URL);
* ``POST /ready`` once warm (kernels loaded) and its role decided, then ``GET /gameserver``
  once, for the log (the GameServer's name and state);
* ``POST /allocate`` when the match starts: the node leads and seats its first player
  (a promoted standby leading a match in play too), so no scale-down takes it away;
* ``POST /shutdown`` when the match ends (an allocated primary's seats are all free
  again, players gone and their grace over) and when the node stops: Agones then deletes
  the pod and its Fleet makes a fresh one;
* ``POST /health`` on :class:`Pulse`, during the warm-up too (the GameServer's
  ``initialDelaySeconds`` does not know how long a cold compile takes).

A call the sidecar did not answer (it may start after the node, the SDK says) is tried
again, with exponential backoff and jitter; one it refused (4xx: our mistake) is logged by
the edge and not repeated.
"""

from __future__ import annotations

import enum
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_SDK_URL",
    "HEALTH_INTERVAL_S",
    "SDK_PORT_ENV",
    "STOPPING_STATUS",
    "Action",
    "AgonesLifecycle",
    "NodeView",
    "Outcome",
    "Pulse",
    "SdkCall",
    "check_label_value",
    "check_sdk_url",
    "sdk_url_from_env",
    "systemd_status",
]

#: The environment variable Agones sets in a game server's container: the SDK server's
#: REST port (the docs advise it over a fixed port).
SDK_PORT_ENV = "AGONES_SDK_HTTP_PORT"
#: Where the SDK server's REST gateway listens by default (``sdk-server --http-port``).
DEFAULT_SDK_URL = "http://localhost:9358"
#: Seconds between health pings. deploy/agones/gameserver.yaml's health check fails a
#: GameServer after ``failureThreshold`` (3) periods of ``periodSeconds`` (5 s) without a
#: ping: two pings a period, so one late or lost ping is never a failure.
HEALTH_INTERVAL_S = 2.0
#: systemd's ``STATUS=`` of a stopping node (sent with ``STOPPING=1``).
STOPPING_STATUS = "stopping: telling players"
#: The first retry of a call the sidecar did not answer, and the longest wait between two.
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 8.0

# Kubernetes label values: at most 63 characters, alphanumerics and -_. inside
# (k8s.io/apimachinery/pkg/util/validation, IsValidLabelValue).
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def check_label_value(what: str, value: str) -> str:
    """``value`` if Kubernetes takes it as a label value; ValueError (one line) if not."""
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} cannot be an Agones label: at most 63 letters, digits, "
            "'-', '_' or '.', beginning and ending with a letter or digit"
        )
    return value


def check_sdk_url(url: str) -> str:
    """``url`` if it can be the SDK server's REST gateway (``http://HOST:PORT``);
    ValueError (one line) if not."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ValueError(
            f"--agones-url {url!r} is not the SDK server's REST address: give "
            "http://HOST:PORT (default http://localhost:$AGONES_SDK_HTTP_PORT)"
        )
    return url.rstrip("/")


def sdk_url_from_env(environ: Mapping[str, str]) -> str:
    """The REST gateway Agones set up for this container, else the default one."""
    port = environ.get(SDK_PORT_ENV, "").strip()
    return f"http://localhost:{port}" if port else DEFAULT_SDK_URL


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the platforms are told about, read from the node at one moment."""

    #: ``warming_up``, ``starting`` (role not decided), ``ready`` or ``stopping``.
    status: str
    #: ``starting``, ``primary`` or ``standby``.
    role: str
    epoch: int
    #: Seats taken in the node's matches (players away within their grace included).
    players: int
    #: Ticks the tick loop has run, ever: a primary's evidence that it is alive.
    ticks: int

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def stopping(self) -> bool:
        return self.status == "stopping"

    @property
    def leading(self) -> bool:
        return self.role == "primary"


class Pulse:
    """Whether a liveness ping is due (see the module): every ``interval`` seconds, and for
    a primary only when its tick loop ran since the last ping. ``stalled`` says whether
    the last ping due was withheld for a stalled tick loop."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.stalled = False
        self._sent_at: float | None = None
        self._ticks = -1

    def due(self, now: float, view: NodeView) -> bool:
        if self._sent_at is not None and now - self._sent_at < self.interval:
            return False
        self.stalled = view.leading and view.ticks == self._ticks
        return not self.stalled

    def sent(self, now: float, view: NodeView) -> None:
        self._sent_at = now
        self._ticks = view.ticks


class Action(enum.Enum):
    """The SDK server's REST calls the node makes: (method, path)."""

    READY = ("POST", "/ready")
    HEALTH = ("POST", "/health")
    ALLOCATE = ("POST", "/allocate")
    SHUTDOWN = ("POST", "/shutdown")
    GAMESERVER = ("GET", "/gameserver")
    LABEL = ("PUT", "/metadata/label")
    ANNOTATION = ("PUT", "/metadata/annotation")

    @property
    def method(self) -> str:
        return self.value[0]

    @property
    def path(self) -> str:
        return self.value[1]


@dataclass(frozen=True, slots=True)
class SdkCall:
    """One REST call: a metadata call carries a key and a value (``sdkKeyValue``), the
    lifecycle calls an empty object (``sdkEmpty``), ``GET /gameserver`` nothing."""

    action: Action
    key: str = ""
    value: str = ""
    #: Why (for the log): ``match_start``, ``match_end`` or ``stopping``; else "".
    reason: str = ""

    @property
    def body(self) -> dict[str, str] | None:
        if self.action is Action.GAMESERVER:
            return None
        if self.action in (Action.LABEL, Action.ANNOTATION):
            return {"key": self.key, "value": self.value}
        return {}


class Outcome(enum.Enum):
    """How a call went: answered (2xx), refused (4xx: the call was wrong, do not repeat
    it) or not answered (no sidecar yet, 5xx, a timeout: try again later)."""

    OK = "ok"
    REFUSED = "refused"
    UNANSWERED = "unanswered"


class AgonesLifecycle:
    """The calls due to the SDK server (see the module): :meth:`poll` what to send now,
    in order, and feed each outcome back to :meth:`answered` before polling again."""

    def __init__(
        self,
        region: str,
        url: str,
        health_interval: float = HEALTH_INTERVAL_S,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.region = region
        self.url = url
        self.pulse = Pulse(health_interval)
        self.jitter = jitter
        self.labels: dict[str, str] = {}  # as the sidecar acknowledged them
        self.annotated = False
        self.readied = False
        self.described = False
        self.allocated = False
        #: Set once ``Shutdown`` was answered or refused: nothing more is sent.
        self.finished = False
        self._retry_at = 0.0
        self._backoff = RETRY_FIRST_S

    def poll(self, now: float, view: NodeView) -> list[SdkCall]:
        """The calls to make now, in order (none while backing off after a failure)."""
        if self.finished or now < self._retry_at:
            return []
        if view.stopping:
            return [SdkCall(Action.SHUTDOWN, reason="stopping")]
        calls: list[SdkCall] = []
        if self.pulse.due(now, view):  # first: the one call with a deadline
            self.pulse.sent(now, view)
            calls.append(SdkCall(Action.HEALTH))
        if view.ready:
            wanted = {"region": self.region, "role": view.role, "epoch": str(view.epoch)}
            calls += [
                SdkCall(Action.LABEL, key, value)
                for key, value in wanted.items()
                if self.labels.get(key) != value
            ]
            if not self.annotated:
                calls.append(SdkCall(Action.ANNOTATION, "url", self.url))
            if not self.readied:
                calls.append(SdkCall(Action.READY))
            elif not self.described:
                calls.append(SdkCall(Action.GAMESERVER))
            if self.readied and view.leading:
                if not self.allocated and view.players > 0:
                    calls.append(SdkCall(Action.ALLOCATE, reason="match_start"))
                elif self.allocated and view.players == 0:
                    calls.append(SdkCall(Action.SHUTDOWN, reason="match_end"))
        return calls

    def farewell(self) -> list[SdkCall]:
        """What to send as the node stops, backoff or not: ``Shutdown``, unless sent."""
        return [] if self.finished else [SdkCall(Action.SHUTDOWN, reason="stopping")]

    def answered(self, call: SdkCall, outcome: Outcome, now: float) -> None:
        """Note how ``call`` went: done (answered or refused), or to try again after the
        backoff (not answered)."""
        if outcome is Outcome.UNANSWERED:
            self._retry_at = now + self._backoff * (0.5 + 0.5 * self.jitter())
            self._backoff = min(2 * self._backoff, RETRY_MAX_S)
            return
        self._backoff = RETRY_FIRST_S
        action = call.action
        if action is Action.LABEL:
            self.labels[call.key] = call.value
        elif action is Action.ANNOTATION:
            self.annotated = True
        elif action is Action.READY:
            self.readied = True
        elif action is Action.GAMESERVER:
            self.described = True
        elif action is Action.ALLOCATE:
            self.allocated = True
        elif action is Action.SHUTDOWN:
            self.finished = True

    @property
    def retry_at(self) -> float:
        """When calls may be made again after one was not answered."""
        return self._retry_at


def systemd_status(view: NodeView) -> str:
    """The node's state in a line for systemd's ``STATUS=`` (``systemctl status``)."""
    if view.status == "warming_up":
        return "warming up the kernels"
    if view.status == "starting":
        return "deciding its role"
    if view.stopping:
        return STOPPING_STATUS
    return f"{view.role} at epoch {view.epoch}, {view.players} players"
