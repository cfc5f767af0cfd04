// N Colyseus clients in one Node process (bench/peers): each joins the room, sends one
// input per tick at 60 Hz (move x/y, yaw, pitch, buttons, seq) and counts the raw WebSocket
// messages it receives. --decode all: every client decodes every patch (colyseus.js's
// default); --decode one: client 0 decodes (proving the state arrives), the others count
// the bytes and drop the patch, so the process can keep up at large N.
//
//   node clients.js --url ws://127.0.0.1:PORT --room ID --count N [--decode one|all]
//
// stdout, one JSON object a line: {"event":"ready",...} once every client joined (or
// failed), then {"event":"mark",...} with running totals each time "mark" arrives on stdin;
// run.py takes deltas. It ends on stdin's EOF or SIGTERM with a final {"event":"end",...}.
"use strict";

const readline = require("node:readline");
const { performance } = require("node:perf_hooks");
const { Client } = require("colyseus.js");

const TICK_MS = 1000 / 60;
const ROOM_STATE_PATCH = 15; // colyseus.js Protocol.ROOM_STATE_PATCH
const JOINS_AT_ONCE = 20;

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

const url = option("--url", "");
const roomId = option("--room", "");
const count = Number(option("--count", "10"));
const decode = option("--decode", "one");
if (!url || !roomId || !(count >= 1) || !["one", "all"].includes(decode)) {
  process.stderr.write("clients.js: need --url URL --room ID --count N [--decode one|all]\n");
  process.exit(2);
}

const totals = { ticks: 0, ticksSkipped: 0, bytesDown: 0, messagesDown: 0, patches: 0, inputs: 0 };
const clients = []; // {room, angle, seq, decodes}
let failed = 0;
let decodedPlayers = null; // what client 0 last saw in its decoded state

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

function marks(event) {
  const cpu = process.cpuUsage();
  return {
    event,
    t: performance.now() / 1000,
    cpu_s: (cpu.user + cpu.system) / 1e6,
    connected: clients.filter((c) => c.open).length,
    ticks: totals.ticks,
    ticks_skipped: totals.ticksSkipped,
    bytes_down: totals.bytesDown,
    messages_down: totals.messagesDown,
    patches: totals.patches,
    inputs_sent: totals.inputs,
    decoded_players: decodedPlayers,
  };
}

async function join(index) {
  const client = new Client(url);
  const room = await client.joinById(roomId);
  const entry = { room, angle: Math.random() * 2 * Math.PI, seq: 0, open: true };
  entry.decodes = decode === "all" || index === 0;
  const ws = room.connection.transport.ws;
  const onmessage = ws.onmessage; // the room's own handler (decodes patches)
  ws.onmessage = (event) => {
    const data = event.data; // an ArrayBuffer (binaryType 'arraybuffer')
    totals.bytesDown += data.byteLength;
    totals.messagesDown += 1;
    const patch = new Uint8Array(data, 0, 1)[0] === ROOM_STATE_PATCH;
    if (patch) totals.patches += 1;
    if (!patch || entry.decodes) onmessage(event);
  };
  if (index === 0) {
    room.onStateChange((state) => {
      decodedPlayers = state.players ? state.players.size : null;
    });
  }
  room.onLeave(() => {
    entry.open = false;
  });
  clients.push(entry);
}

function tick() {
  for (const entry of clients) {
    if (!entry.open) continue;
    // A wander: the heading turns a little every tick, so most fields change each tick.
    entry.angle += (Math.random() - 0.5) * 0.3;
    entry.seq += 1;
    const pitch = Math.sin(entry.seq / 30) * 0.3;
    entry.room.send("i", [Math.cos(entry.angle), Math.sin(entry.angle), entry.angle, pitch, 0, entry.seq]);
    totals.inputs += 1;
  }
  totals.ticks += 1;
}

function runTicks() {
  // A drift-free 60 Hz schedule; a tick later than one period is skipped, not run twice,
  // so a process that cannot keep up shows it in its tick rate.
  let next = performance.now() + TICK_MS;
  const step = () => {
    const now = performance.now();
    if (now - next >= TICK_MS) {
      const behind = Math.floor((now - next) / TICK_MS);
      totals.ticksSkipped += behind;
      next += behind * TICK_MS;
    }
    tick();
    next += TICK_MS;
    setTimeout(step, Math.max(0, next - performance.now()));
  };
  setTimeout(step, TICK_MS);
}

function finish() {
  emit(marks("end"));
  for (const entry of clients) {
    try {
      entry.room.connection.close();
    } catch {
      // already closed
    }
  }
  setTimeout(() => process.exit(0), 200);
}

async function main() {
  for (let start = 0; start < count; start += JOINS_AT_ONCE) {
    const batch = [];
    for (let i = start; i < Math.min(count, start + JOINS_AT_ONCE); i++) {
      batch.push(
        join(i).catch((error) => {
          failed += 1;
          process.stderr.write(`clients.js: client ${i} could not join: ${error.message || error}\n`);
        }),
      );
    }
    await Promise.all(batch);
  }
  runTicks();
  emit({ ...marks("ready"), failed, decode });
  const lines = readline.createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    if (line.trim() === "mark") emit(marks("mark"));
  });
  lines.on("close", finish);
  process.once("SIGTERM", finish);
}

main().catch((error) => {
  process.stderr.write(`clients.js: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
