"""A node's configuration, validated on construction (one line per mistake)."""

from __future__ import annotations

from dataclasses import dataclass, field

from server import limits
from server.coordination.etcd_config import DEFAULT_LEASE_TTL, EtcdAccess
from server.lifecycle import check_label_value, check_sdk_url
from server.replication.commit import LEASE_SHARE
from server.sim.hitreg.backend import BackendName
from server.sim.interest import InterestConfig
from server.sim.lagcomp import LagCompensation
from shared.arena_map import ArenaMap, default_map

__all__ = ["DEFAULT_SNAPSHOT_RATE", "NodeConfig"]

#: Snapshots a second by default (where it divides the tick rate). Measured at 60 Hz with 40
#: bots on the demo's RTT mix, two runs each on a quiet machine: 60, 30 and 20 Hz gave fair
#: agreement 1.0 / 1.0, 1.0 / 0.998 (one shooter_position, as 60 Hz runs have had) and
#: 0.998 / 0.996 (an unexplained disagreement in each, and twice the shots beyond the
#: rewind cap), prediction error 0 at all three, and 611, 329 and 234 kbit/s down per bot:
#: 30 halves the bandwidth at no measurable cost, 20 starts to cost fairness.
DEFAULT_SNAPSHOT_RATE = 30


@dataclass(frozen=True, slots=True)
class NodeConfig:
    region: str = "local"
    node_id: str = "node-1"
    role: str = "primary"
    tick_rate: int = 60
    #: Snapshots a second sent to each player (None: :data:`DEFAULT_SNAPSHOT_RATE` when it
    #: divides the tick rate, else one every tick); it divides the tick rate, and two
    #: snapshot intervals fit in the interpolation cap.
    snapshot_rate: int | None = None
    max_players: int = 300
    history_seconds: float = 1.0
    max_offences: int = 3
    arena: ArenaMap = field(default_factory=default_map)
    hitreg_backend: BackendName = "auto"
    matches: int = 1  # matches this node hosts; a full match opens the next
    lag_compensation: LagCompensation = field(default_factory=LagCompensation)
    #: Which players each client is sent (``--interest``, ``--interest-*``, ``--fog``).
    interest: InterestConfig = field(default_factory=InterestConfig)
    # Failover.
    public_url: str = ""  # this node's base URL as peers and players reach it
    primary_url: str = ""  # a standby's primary at start-up
    peers: tuple[str, ...] = ()  # the other nodes of the region (base URLs)
    cluster_secret: bytes = b""
    coordinator: str = "static"
    #: How etcd is reached (TLS files, user and password: ``--etcd-*``); etcd coordinator only.
    etcd_access: EtcdAccess = field(default_factory=EtcdAccess)
    etcd_lease_ttl: int = (
        DEFAULT_LEASE_TTL  # seconds the leader's etcd lease outlives its last keep-alive
    )
    replication: str = "sync"
    ack_timeout: float = 0.100  # a standby of the commit set slower than this is told it is out
    failover_timeout: float = 0.200  # a primary silent this long is declared dead
    min_standbys: int = 0  # show no tick while fewer standbys than this are in sync
    state_dir: str = ""  # where the static coordinator keeps the epochs used ("": memory only)
    journal: str = ""  # JSON lines of every tick published and every promotion ("": none)
    checkpoint_dir: str = ""  # the primary's checkpoints, to resume from if every node dies
    checkpoint_interval: float = 1.0  # seconds between checkpoints (what a total loss costs)
    record: str = ""  # the match log's directory ("": none; server/net/recording.py)
    record_max_mb: float = 64.0  # a log file's size before the next one is started
    seat_grace: float = 30.0  # a seat whose player is gone waits this long for its token
    token_ttl: float = 600.0  # a session token's life; renewed at half of it while connected
    # Routing.
    directory_url: str = ""  # heartbeat here (URL[,URL...]); admit players with its reservations
    # Admission.
    open_join: bool = False  # with a directory: also seat joins that carry no reservation
    idle_kick: float = 120.0  # a seated player that sends no input this long loses its seat
    max_seats_per_address: int = 0  # seats one peer address may hold (0: no limit)
    #: An address whose connection ended in offences waits this long before its next
    #: upgrade is served, doubled with each further one (0: off, as load tests from one
    #: address need; server/net/sessions.py).
    offender_holdoff: float = 0.0
    handshake_timeout: float = 5.0  # an HTTP request head (the WebSocket upgrade) within this
    view_rate: float = 10.0  # frames a second of the live view (/view); 0: no view
    # TLS (server/net/tls.py).
    tls_cert: str = ""  # listen with TLS with this PEM certificate (chain) ...
    tls_key: str = ""  # ... and its PEM private key; both or neither
    tls_ca: str = ""  # a PEM CA the node's own connections to peers also trust
    # Agones (server/net/agones.py): the SDK server's REST address ("": not under Agones).
    agones_url: str = ""

    @property
    def snapshot_interval(self) -> int:
        """Ticks from one snapshot to the next."""
        rate = self.snapshot_rate
        if rate is None:
            fits = self.tick_rate % DEFAULT_SNAPSHOT_RATE == 0
            rate = DEFAULT_SNAPSHOT_RATE if fits else self.tick_rate
        return self.tick_rate // rate

    def _check_snapshot_rate(self) -> None:
        rate = self.snapshot_rate
        if rate is None:
            return
        divisors = [d for d in range(self.tick_rate, 0, -1) if self.tick_rate % d == 0]
        if type(rate) is not int or rate not in divisors:
            raise ValueError(
                f"the snapshot rate must divide the tick rate ({self.tick_rate}: "
                f"{', '.join(map(str, divisors[:6]))}, ...), not {rate}"
            )
        cap = self.lag_compensation.max_interp_delay
        if 2.0 / rate > cap + 1e-9:
            raise ValueError(
                f"at {rate} snapshots a second two snapshot intervals are "
                f"{2000 / rate:g} ms, more than the interpolation cap ({cap * 1000:g} ms, "
                "--max-interp-ms): clients could not interpolate; raise the cap or the rate"
            )

    def __post_init__(self) -> None:
        limits.TICK_RATE.check(self.tick_rate)
        self._check_snapshot_rate()
        limits.MAX_PLAYERS.check(self.max_players)
        if self.history_seconds <= 0:
            raise ValueError("history must hold a positive number of seconds")
        if self.lag_compensation.max_rewind > self.history_seconds:
            raise ValueError(
                f"the rewind cap ({self.lag_compensation.max_rewind * 1000:g} ms) must fit in "
                f"the history ({self.history_seconds * 1000:g} ms)"
            )
        if self.role not in ("primary", "standby"):
            raise ValueError(f"role must be primary or standby, not {self.role!r}")
        if self.role == "standby" and not self.primary_url:
            raise ValueError("a standby needs --primary URL (the node it follows)")
        limits.MATCHES.check(self.matches)
        if self.replication not in ("sync", "async"):
            raise ValueError("replication must be sync or async")
        if self.ack_timeout <= 0 or self.failover_timeout <= 0:
            raise ValueError("acknowledgement and failover timeouts must be positive")
        if self.ack_timeout >= self.lease:
            raise ValueError(
                f"the acknowledgement bound ({self.ack_timeout * 1000:g} ms) must be below the "
                f"primary's lease, {LEASE_SHARE:g} of the failover timeout "
                f"({self.lease * 1000:g} ms)"
            )
        if not 0 <= self.seat_grace <= 3600:
            raise ValueError("the seat grace must be from 0 to 3600 seconds")
        if not 2 * self.seat_grace < self.token_ttl <= 86400:
            raise ValueError(
                f"the token TTL ({self.token_ttl:g} s) must be over twice the seat grace "
                f"({self.seat_grace:g} s) and at most 86400 s"
            )
        if not 0.05 <= self.checkpoint_interval <= 3600:
            raise ValueError("the checkpoint interval must be from 0.05 to 3600 seconds")
        if not 0.01 <= self.record_max_mb <= 1 << 20:
            raise ValueError("--record-max-mb must be from 0.01 to 1048576")
        if type(self.min_standbys) is not int or not 0 <= self.min_standbys <= 8:
            raise ValueError("min standbys must be a whole number from 0 to 8")
        if not 0 <= self.idle_kick <= 86400:
            raise ValueError("the idle kick must be from 0 (off) to 86400 seconds")
        if type(self.max_seats_per_address) is not int or self.max_seats_per_address < 0:
            raise ValueError("max seats per address must be a whole number >= 0 (0: no limit)")
        if not 0 <= self.offender_holdoff <= 3600:
            raise ValueError("the offender hold-off must be from 0 (off) to 3600 seconds")
        if not 0 < self.handshake_timeout <= 300:
            raise ValueError("the handshake timeout must be over 0 and at most 300 seconds")
        if not 0 <= self.view_rate <= 60:
            raise ValueError("the view rate must be from 0 (no /view) to 60 frames a second")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("give --tls-cert and --tls-key together (or neither)")
        if self.agones_url:
            check_sdk_url(self.agones_url)
            check_label_value("--region", self.region)  # Agones labels the GameServer with it

    @property
    def lease(self) -> float:
        """The longest the primary may show a tick after sending it (a standby's hello may
        ask for less): a standby waits its whole failover timeout after its last
        acknowledgement before it may campaign, so the primary has fallen silent by then."""
        return LEASE_SHARE * self.failover_timeout
