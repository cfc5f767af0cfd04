"""The channel counts each redundant payload it repeats in a later datagram (what a bot
reports as ``inputs.resent``), and stops once the peer acknowledged it."""

from __future__ import annotations

from shared.datagram import Lane

from .test_channel import pair


def test_each_repeat_of_an_unacknowledged_input_is_counted_once_per_datagram() -> None:
    client, server = pair()
    for n in range(3):
        client.send(b"input-%d" % n, Lane.REDUNDANT)
    first = client.datagrams(0.0)
    assert len(first) == 1 and client.stats["redundant_resent"] == 0  # all three fresh
    client.send(b"input-3", Lane.REDUNDANT)
    second = client.datagrams(0.01)  # the first datagram was lost: three repeated
    assert client.stats["redundant_resent"] == 3
    delivered = [payload for d in second for _, payload in server.receive(d, 0.02)]
    assert delivered == [b"input-%d" % n for n in range(4)]
    assert server.stats["recovered_by_redundancy"] == 3
    for datagram in server.datagrams(0.03):  # its acknowledgement reaches the client
        client.receive(datagram, 0.04)
    client.send(b"input-4", Lane.REDUNDANT)
    client.datagrams(0.05)
    assert client.stats["redundant_resent"] == 3  # nothing acknowledged is repeated
