"""The AEAD on the UDP hot path: ChaCha20-Poly1305 (IETF) from ``cryptography`` against the
same algorithm from libsodium through PyNaCl, sealing and opening datagram-sized payloads
exactly as :class:`shared.datagram.sealing.PacketKey` does (a 12-byte nonce from the 64-bit
sequence, the 9-byte clear header as associated data). Also what the channel costs around
it: one 600-byte payload through ``Channel.send`` + ``datagrams`` and ``Channel.receive``.

The two libraries compute the same function, so the bench first checks that they give the
same bytes for the same key, nonce and data, and that each refuses a tampered datagram; a
run that fails those checks, or times too few operations to mean anything, reports nothing
and exits 1. Each figure is the median of ``--repeats`` timed runs of ``--iterations``
operations, the libraries interleaved so that both see the same machine.

    python bench/aead.py [--iterations 20000] [--repeats 5] [--json bench/results/aead.json]
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from nacl import bindings
from nacl.exceptions import CryptoError

from bench.report import Start, add_json_option, emit
from shared.commandline import OneLineParser
from shared.datagram import Channel, Lane

SIZES = (100, 600, 1000, 1200)
HEADER = bytes(9)
#: Below these, timer resolution and loop overhead dominate: the run is refused.
MIN_ITERATIONS = 1000
MIN_REPEATS = 3
MIN_WINDOW_S = 0.002


class InvalidRun(Exception):
    """The run cannot support a figure (what failed is the message)."""


def log(line: str) -> None:
    print(f"bench/aead: {line}", file=sys.stderr, flush=True)


def _nonce(sequence: int) -> bytes:
    return bytes(4) + sequence.to_bytes(8, "little")


def libraries(key: bytes) -> dict[str, tuple[Callable[..., bytes], Callable[..., bytes]]]:
    """Per library: seal(sequence, plaintext) and open(sequence, sealed), as the channel calls."""
    aead = ChaCha20Poly1305(key)
    encrypt = bindings.crypto_aead_chacha20poly1305_ietf_encrypt
    decrypt = bindings.crypto_aead_chacha20poly1305_ietf_decrypt
    return {
        "cryptography": (
            lambda seq, data: aead.encrypt(_nonce(seq), data, HEADER),
            lambda seq, data: aead.decrypt(_nonce(seq), data, HEADER),
        ),
        "pynacl": (
            lambda seq, data: encrypt(data, HEADER, _nonce(seq), key),
            lambda seq, data: decrypt(data, HEADER, _nonce(seq), key),
        ),
    }


def check_agreement(key: bytes) -> None:
    """Both give the same bytes, open each other's, and refuse a flipped bit."""
    libs = libraries(key)
    plain = os.urandom(1000)
    sealed = {name: seal(7, plain) for name, (seal, _) in libs.items()}
    if sealed["cryptography"] != sealed["pynacl"]:
        raise InvalidRun("the libraries disagree on the same input: not the same algorithm")
    for name, (_, open_) in libs.items():
        if open_(7, sealed["cryptography"]) != plain:
            raise InvalidRun(f"{name} does not open what was sealed")
        tampered = bytearray(sealed[name])
        tampered[3] ^= 1
        try:
            open_(7, bytes(tampered))
        except (InvalidTag, CryptoError):
            continue
        raise InvalidRun(f"{name} opened a tampered datagram")


def time_loop(operation: Callable[[int, bytes], bytes], items: list[bytes]) -> float:
    """Seconds for ``operation`` over every item (sequence = index)."""
    started = time.perf_counter()
    for sequence, item in enumerate(items):
        operation(sequence, item)
    return time.perf_counter() - started


def measure_aead(iterations: int, repeats: int) -> dict[str, Any]:
    key = os.urandom(32)
    check_agreement(key)
    libs = libraries(key)
    results: dict[str, Any] = {name: {} for name in libs}
    for size in SIZES:
        plain = [os.urandom(size) for _ in range(64)]
        plains = [plain[i % 64] for i in range(iterations)]
        sealed = {
            name: [seal(i, p) for i, p in enumerate(plains)] for name, (seal, _) in libs.items()
        }
        runs: dict[str, dict[str, list[float]]] = {n: {"seal": [], "open": []} for n in libs}
        for _ in range(repeats):
            for name, (seal, open_) in libs.items():  # interleaved: both see the same machine
                for op, function, items in (("seal", seal, plains), ("open", open_, sealed[name])):
                    seconds = time_loop(function, items)
                    if seconds < MIN_WINDOW_S:
                        raise InvalidRun(
                            f"{name} {op} of {size} B ran {seconds * 1e3:.2f} ms: too short to time"
                        )
                    runs[name][op].append(seconds / iterations * 1e6)
        for name in libs:
            results[name][str(size)] = {
                f"{op}_us": round(statistics.median(values), 3) for op, values in runs[name].items()
            } | {
                f"{op}_us_spread": round(max(values) / min(values), 2)
                for op, values in runs[name].items()
            }
        log(
            f"{size} B: "
            + ", ".join(f"{n} seal {results[n][str(size)]['seal_us']} µs" for n in libs)
        )
    return results


def measure_channel(iterations: int, repeats: int) -> dict[str, float]:
    """µs per 600-byte payload: ``send`` + ``datagrams`` on one side, ``receive`` on the other."""
    up, down = os.urandom(32), os.urandom(32)
    payload = os.urandom(600)
    send_us, receive_us = [], []
    for _ in range(repeats):
        sender, receiver = Channel(up, down, 0.0), Channel(down, up, 0.0)
        datagrams: list[bytes] = []
        started = time.perf_counter()
        for number in range(iterations):
            sender.send(payload, Lane.UNRELIABLE)
            datagrams += sender.datagrams(number * 1e-4)
        send_us.append((time.perf_counter() - started) / iterations * 1e6)
        started = time.perf_counter()
        delivered = 0
        for number, datagram in enumerate(datagrams):
            delivered += len(receiver.receive(datagram, number * 1e-4))
        receive_us.append((time.perf_counter() - started) / iterations * 1e6)
        if delivered != iterations or len(datagrams) != iterations:
            raise InvalidRun(f"the channel delivered {delivered} of {iterations} payloads")
    return {
        "send_us": round(statistics.median(send_us), 3),
        "receive_us": round(statistics.median(receive_us), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="bench/aead.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20_000,
                        help=f"operations per timed run (at least {MIN_ITERATIONS})")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=5,
                        help=f"timed runs per figure (at least {MIN_REPEATS})")  # fmt: skip
    add_json_option(parser, "aead")
    args = parser.parse_args(argv)
    if args.iterations < MIN_ITERATIONS:
        parser.error(
            f"--iterations must be at least {MIN_ITERATIONS}: fewer times the timer, not the AEAD"
        )
    if args.repeats < MIN_REPEATS:
        parser.error(f"--repeats must be at least {MIN_REPEATS}: a median needs several runs")
    start = Start.now("aead", "bench/aead.py", argv)
    try:
        aead = measure_aead(args.iterations, args.repeats)
        channel = measure_channel(max(args.iterations // 4, MIN_ITERATIONS), args.repeats)
    except InvalidRun as invalid:
        print(f"bench/aead: invalid run, nothing reported: {invalid}", file=sys.stderr)
        return 1
    faster = min(
        aead, key=lambda name: aead[name]["1000"]["seal_us"] + aead[name]["1000"]["open_us"]
    )
    report = {
        "what": "ChaCha20-Poly1305 (IETF) seal and open per datagram, µs, median of repeats",
        "iterations": args.iterations,
        "repeats": args.repeats,
        "aead": aead,
        "faster_at_1000_B": faster,
        "channel_600_B": channel,
        "versions": {
            "cryptography": metadata.version("cryptography"),
            "pynacl": metadata.version("pynacl"),
            "python": platform.python_version(),
        },
    }
    emit(report, args.json, start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
