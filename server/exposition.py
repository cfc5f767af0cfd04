"""The registry a node's and the directory's ``/metrics`` expose: their own metrics, the
process's (CPU, memory, file descriptors, GC), and no ``*_created`` series.

prometheus_client gives every counter and histogram a ``*_created`` gauge (when it was
made: an OpenMetrics notion that Prometheus' text format has no use for; a third of our
series were these). ``disable_created_metrics()`` switches them off for the whole process,
for whoever collects after it; this registry drops them from its own output instead, so
it holds whatever else imports prometheus_client, and in any order.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.metrics_core import Metric

__all__ = ["Registry"]

_HAS_CREATED = frozenset({"counter", "histogram", "summary", "gaugehistogram"})


class Registry(CollectorRegistry):
    """A registry of one's own with the process collectors and no ``*_created`` series."""

    def __init__(self) -> None:
        super().__init__()
        ProcessCollector(registry=self)  # process_cpu_seconds_total, ..._resident_memory_bytes
        PlatformCollector(registry=self)  # python_info
        GCCollector(registry=self)  # python_gc_*

    def collect(self) -> Iterable[Metric]:
        for family in super().collect():
            if family.type in _HAS_CREATED:
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family
