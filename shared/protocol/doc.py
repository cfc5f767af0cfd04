"""The protocol document's tables and its JSON copy, generated from the definition.

``python -m shared.protocol.doc --write`` rewrites every table of ``docs/protocol.md``
that sits between a pair of marker comments::

    <!-- generated: NAME -->
    ...
    <!-- end generated: NAME -->

and writes ``docs/protocol.json`` (:func:`shared.protocol.spec.wire_spec`, for client
writers); ``--check`` changes nothing and exits 1 when either is stale. The prose around
the tables is written by hand; the tables are never edited by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from shared.protocol.spec import wire_spec

__all__ = ["MARKER", "main", "render_doc", "render_json", "tables"]

_ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = _ROOT / "docs" / "protocol.md"
JSON_PATH = _ROOT / "docs" / "protocol.json"
MARKER = re.compile(
    r"(<!-- generated: (?P<name>[\w:-]+) -->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)",
    re.DOTALL,
)
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _number(value: float) -> str:
    """A bound as the document writes it: 2⁵³, 2³²−1, 10⁶, −1, 0.1."""
    sign = "−" if value < 0 else ""
    size = abs(value)
    if float(size).is_integer():
        whole = int(size)
        for power in range(20, 64):
            if whole == 2**power:
                return f"{sign}2{str(power).translate(_SUPERSCRIPT)}"
            if whole == 2**power - 1:
                return f"{sign}2{str(power).translate(_SUPERSCRIPT)}−1"
        for power in range(4, 16):
            if whole == 10**power:
                return f"{sign}10{str(power).translate(_SUPERSCRIPT)}"
        return f"{sign}{whole}"
    return f"{sign}{size:g}"


def _bounds(spec: dict[str, Any]) -> str:
    low: float | None = spec.get("min")
    high: float | None = spec.get("max")
    if spec["type"].startswith("float"):
        if low is None and high is None:
            return "finite"
        if high is None and low is not None:
            return f"≥ {_number(low)}"
        if low is not None and high is not None and low == -high:
            return f"within ±{_number(high)}"
    if low is None or high is None:
        return ""
    return f"{_number(low)} – {_number(high)}"


def _type(spec: dict[str, Any]) -> str:
    kind = spec["type"]
    names = {"event[]": "[event]", "map[]": "[map]", "str[]": "[str]"}
    if kind in names:
        text = names[kind]
    elif kind.endswith("[]"):
        text = f"[{kind[:-2]} × {spec['length']}]"
    else:
        text = kind
    return f"{text} or nil" if spec.get("nullable") else text


def _range(spec: dict[str, Any]) -> str:
    if "choices" in spec:
        return " / ".join(f"`{choice}`" for choice in spec["choices"])
    if "max_chars" in spec:
        return f"≤ {spec['max_chars']} chars"
    bounds = _bounds(spec)
    return f"each {bounds}" if bounds and spec["type"].endswith("[]") else bounds


def _default(spec: dict[str, Any]) -> str:
    if spec["required"]:
        return "required"
    value = spec["default"]
    if spec["type"] == "bin":
        return "empty" if value == "" else f"`{value}` (hex)"
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _message_table(message: dict[str, Any]) -> str:
    return _table(
        ("field", "type", "range", "default", "meaning"),
        [("`type`", "str", f'`"{message["type"]}"`', "required", "")]
        + [
            (f"`{f['name']}`", _type(f), _range(f), _default(f), f["meaning"])
            for f in message["fields"]
        ],
    )


def _step(value: float) -> str:
    for name, exact in (("1/4096", 1 / 4096), ("1/256", 1 / 256), ("1", 1.0)):
        if value == exact:
            return name
    for name, exact in (("2π/65536", 6.283185307179586 / 65536), ("(π/2)/32767", 1.5707963267948966 / 32767)):  # fmt: skip
        if value == exact:
            return name
    return f"{value!r}"


def _origin(value: float) -> str:
    return "−π" if value == -3.141592653589793 else _number(value)


def _entity_tables(entities: dict[str, Any]) -> dict[str, str]:
    example = entities["default_map"]
    fields = _table(
        ("field", "group", "unit", "step", "origin", "zero", "span", "bits", f"bits on `{example['name']}`"),
        [
            (
                f"`{f['name']}`", f["group"], f["unit"], _step(f["step"]),
                f"`bounds_min[{f['axis']}]`" if f["axis"] is not None else _origin(f["origin"]),
                "2^(bits−1)" if f["centred"] else "0",
                f"`bounds_max[{f['axis']}] − bounds_min[{f['axis']}]`" if f["axis"] is not None
                else "" if f["span"] is None else _number(f["span"]),
                "from the span" if f["bits"] is None else f["bits"], bits,
            )
            for f, bits in zip(entities["fields"], example["bits"], strict=True)
        ],
    )  # fmt: skip
    groups = ", ".join(
        f"bit {g['bit']} {g['name']} ({', '.join(f'`{n}`' for n in g['fields'])})"
        for g in entities["groups"]
    )
    kinds = ", ".join(f"{code} {name}" for name, code in entities["kinds"].items())
    header = _table(
        ("part", "bits", "meaning"),
        [
            ("`id`", entities["id_bits"], "the player's id"),
            ("`kind`", entities["kind_bits"], kinds),
            ("full: the fields", "their widths", "every field in record order, each at its width"),
            ("delta: `mask`", entities["mask_bits"], f"the groups that changed: {groups}"),
            (
                "delta: per field of each changed group, in record order",
                f"{entities['class_bits']} + payload",
                "its class (below), then the class's payload",
            ),
            ("gone", "0", "nothing more: forget the player"),
        ],
    )
    classes = _table(
        ("class", "name", "payload bits", "meaning"),
        [
            (c["code"], c["name"], "the field's width" if c["payload_bits"] is None else c["payload_bits"], c["meaning"])
            for c in entities["classes"]
        ],
    )  # fmt: skip
    sizes = _table(
        ("on `" + example["name"] + "`", "bytes"),
        [
            ("a full record", example["full_record_bytes"]),
            ("the longest record (a delta of every field at full width)", example["max_record_bytes"]),
            ("a gone record", (entities["id_bits"] + entities["kind_bits"] + 7) // 8),
        ],
    )  # fmt: skip
    return {
        "entity-fields": fields,
        "entity-records": header,
        "entity-classes": classes,
        "entity-sizes": sizes,
    }


def _layout_table(rows: list[dict[str, Any]], start: int = 0) -> str:
    """Fields in order with their offsets (``…`` once a field of no fixed size has passed),
    and which are sealed where some are."""
    sealing = any(row.get("sealed") for row in rows)
    out = []
    offset: int | None = start
    for row in rows:
        size = row["bytes"]
        cells = ["…" if offset is None else offset, "" if size is None else size,
                 f"`{row['name']}`", row["type"]]  # fmt: skip
        if sealing:
            cells.append("sealed" if row.get("sealed") else "")
        out.append((*cells, row["meaning"]))
        offset = None if offset is None or size is None else offset + size
    head = ("offset", "bytes", "field", "type", *(("sealed",) if sealing else ()), "meaning")
    return _table(head, out)


def _hex_start(text: str, shown: int = 40) -> str:
    """Hex in full up to ``shown`` bytes, else its start."""
    return f"`{text}`" if len(text) <= 2 * shown else f"`{text[:48]}…`"


def _sequence(value: int) -> str:
    return "2⁶⁴−1" if value == 2**64 - 1 else _number(value)


def _record_summary(record: dict[str, Any]) -> str:
    fields = ", ".join(f"{k} {v}" for k, v in record.items() if k not in ("record", "data"))
    return f"{record['record']} ({fields}; {len(record['data']) // 2} bytes)"


def _datagram_tables(udp: dict[str, Any]) -> dict[str, str]:
    def constant(c: dict[str, Any]) -> str:
        if c["name"] == "PROTOCOL_ID":
            return f"`{c['value']:#x}`"
        return _sequence(c["value"]) if isinstance(c["value"], int) else f"{c['value']:g}"

    out = {
        "udp-constants": _table(
            ("constant", "value", "meaning"),
            [(f"`{c['name']}`", constant(c), c["meaning"]) for c in udp["constants"]],
        ),
        "udp-kinds": _table(
            ("kind", "name", "bytes", "who sends it, and why"),
            [(k["code"], k["name"], "up to `MAX_PAYLOAD`" if k["bytes"] is None else k["bytes"], k["meaning"])
             for k in udp["kinds"]],
        ),
        "udp-ack": _layout_table(udp["ack"]),
        "udp-records": _table(
            ("tag", "record", "header after the tag", "what it carries"),
            [(r["tag"], r["name"], ", ".join(f"`{f['name']}` {f['type']}" for f in r["fields"]), r["meaning"])
             for r in udp["records"]],
        ),
        "udp-record-fields": _table(
            ("record", "field", "type", "meaning"),
            [(r["name"], f"`{f['name']}`", f["type"], f["meaning"]) for r in udp["records"] for f in r["fields"]],
        ),
        "udp-lanes": _table(
            ("lane", "records", "client → node", "node → client", "what it promises"),
            [(lane["lane"], lane["records"],
              ", ".join(f"`{m}`" for m in lane["client_messages"]) or "—",
              ", ".join(f"`{m}`" for m in lane["server_messages"]) or "—", lane["meaning"])
             for lane in udp["lanes"]],
        ),
        "udp-token-json": _table(
            ("field", "type", "meaning"),
            [(f"`{f['name']}`", f["type"], f["meaning"]) for f in udp["token_json"]],
        ),
        "udp-challenge-token": _layout_table(udp["challenge_token"]["layout"])
        + "\nIts plaintext:\n\n" + _layout_table(udp["challenge_token"]["plaintext"]),
        "udp-refusals": _table(
            ("cause", "checked by", "meaning"),
            [(f"`{r['cause']}`", "every peer" if r["by"] == "protocol" else "a node", r["meaning"])
             for r in udp["refusals"]],
        ),
    }  # fmt: skip
    private = udp["private_token"]
    out["udp-private-token"] = (
        _layout_table(private["layout"])
        + "\nAssociated data (not sent):\n\n"
        + _layout_table(private["associated_data"])
        + f"\nPlaintext ({private['plaintext_size']} bytes), its fixed part:\n\n"
        + _layout_table(private["plaintext"])
        + "\nthen each address:\n\n"
        + _layout_table(private["address"], 0)
        + "\nthen the user data:\n\n"
        + _layout_table(private["user_data"], 0)
    )
    for name, rows in udp["packets"].items():
        out[f"udp-packet:{name}"] = _layout_table(rows)
    examples = udp["examples"]
    out["udp-example-keys"] = _table(
        ("value", "hex"),
        [(f"`{name}`", f"`{examples[name]}`") for name in (
            "client_to_server_session_key", "server_to_client_session_key", "connection_id",
            "client_to_server_key", "server_to_client_key", "challenge_token")]
        + [(f"`{name}` ({len(examples[name]) // 2} bytes)", _hex_start(examples[name])) for name in ("challenge", "response")],
    )  # fmt: skip
    out["udp-examples"] = _table(
        ("from", "what", "kind, sequence", "bytes", "ack, ack_bits", "records", "datagram (hex)"),
        [(d["from"], d["what"], f"{d['kind']} {d['sequence']}", d["bytes"],
          "" if "ack" not in d else f"{_sequence(d['ack'])}, {d['ack_bits']:#b}",
          "; ".join(_record_summary(r) for r in d.get("records", [])) or "none", _hex_start(d["hex"]))
         for d in examples["datagrams"]],
    )  # fmt: skip
    return out


def tables(spec: dict[str, Any]) -> dict[str, str]:
    """Every generated table of the document, by marker name."""
    out: dict[str, str] = {}
    for message in spec["client_messages"] + spec["server_messages"]:
        out[f"message:{message['type']}"] = _message_table(message)
    out["event-kinds"] = _table(
        ("kind", "fields", "when"),
        [
            (f"`{e['kind']}`", ", ".join(f"`{f['name']}`" for f in e["fields"]), e["when"])
            for e in spec["events"]
        ],
    )
    out["event-fields"] = _table(
        ("kind", "field", "type", "range", "default", "meaning"),
        [
            (f"`{e['kind']}`", f"`{f['name']}`", _type(f), _range(f), _default(f), f["meaning"])
            for e in spec["events"]
            for f in e["fields"]
        ],
    )
    out.update(_entity_tables(spec["entities"]))
    out["entity-examples"] = _table(
        ("record (on `" + spec["entities"]["default_map"]["name"] + "`)", "bytes (hex)", "values (held before it)"),
        [
            (e["what"], f"`{e['hex']}`",
             " ".join(map(str, e.get("values", []))) + (f" ({' '.join(map(str, e['held']))})" if "held" in e else ""))
            for e in spec["record_examples"]
        ],
    )  # fmt: skip
    out.update(_datagram_tables(spec["datagram"]))
    framing = spec["framing"]
    out["limits"] = _table(
        ("limit", "value"),
        [
            ("protocol version (`join.v`, `welcome.v`)", spec["protocol_version"]),
            ("a client's frame, most bytes", framing["max_client_frame_bytes"]),
            ("a server's frame, most bytes (the reference decoder's)", framing["max_server_frame_bytes"]),
            ("keys in a map, most", framing["max_map_keys"]),
            ("elements in an array, most", framing["max_array_len"]),
        ],
    )  # fmt: skip
    return out


def render_doc(text: str, generated: dict[str, str]) -> str:
    """``text`` with every marked table replaced; ValueError for a marker of no table or a
    table with no marker."""
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in generated:
            raise ValueError(f"docs/protocol.md marks a table {name!r} that is not generated")
        seen.add(name)
        return match.group(1) + generated[name] + match.group(4)

    result = MARKER.sub(replace, text)
    missing = sorted(generated.keys() - seen)
    if missing:
        raise ValueError(f"docs/protocol.md has no markers for the tables {', '.join(missing)}")
    return result


def render_json(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=1, ensure_ascii=False) + "\n"


def _stale(path: Path, render: Callable[[str], str]) -> bool:
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    return render(current) != current


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.protocol.doc",
        description="Regenerate (or check) the tables of docs/protocol.md and docs/protocol.json "
        "from the protocol's definition in shared/protocol/.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite both files")
    action.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when either file is stale"
    )
    parser.add_argument("--doc", type=Path, default=DOC_PATH, help="default: %(default)s")
    parser.add_argument("--json", type=Path, default=JSON_PATH, help="default: %(default)s")
    args = parser.parse_args(argv)
    spec = wire_spec()
    generated = tables(spec)
    renders: dict[Path, Callable[[str], str]] = {
        args.doc: lambda text: render_doc(text, generated),
        args.json: lambda _: render_json(spec),
    }
    try:
        if not args.doc.exists():
            raise ValueError(f"{args.doc}: no such file")
        if args.check:
            stale = [path for path, render in renders.items() if _stale(path, render)]
            for path in stale:
                print(f"{path} is stale: run python -m shared.protocol.doc --write")
            return 1 if stale else 0
        for path, render in renders.items():
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            path.write_text(render(current), encoding="utf-8")
            print(f"wrote {path}")
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
