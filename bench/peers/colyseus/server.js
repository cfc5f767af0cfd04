// The Colyseus peer of bench/peers: one room holding the players' state as a Schema,
// ticking at 60 Hz (setSimulationInterval) and patching at 60 Hz (patchRate), inputs
// applied in the tick. It times its own tick + patch and serves the figures at
// GET /stats (?reset=1 starts a new window), and prints them as one JSON line on SIGTERM.
//
//   node server.js [--port 0] [--max-clients 1000]
//
// Prints {"event":"listening","url":"ws://127.0.0.1:PORT"} on stdout once the room exists
// (the line launch/supervisor.py waits for); /stats names the room to join.
"use strict";

const http = require("node:http");
const { performance } = require("node:perf_hooks");
const { Server, Room, matchMaker } = require("@colyseus/core");
const { WebSocketTransport } = require("@colyseus/ws-transport");
const { Schema, MapSchema, defineTypes } = require("@colyseus/schema");

const TICK_MS = 1000 / 60;
const ARENA_HALF_M = 30; // a 60 x 60 m arena, centred on 0
const SPEED_MPS = 6;

class Player extends Schema {
  constructor() {
    super();
    this.x = 0;
    this.y = 0;
    this.z = 0;
    this.vx = 0;
    this.vy = 0;
    this.vz = 0;
    this.yaw = 0;
    this.pitch = 0;
    this.health = 100;
    this.ack = 0; // the last input applied for this client
  }
}
defineTypes(Player, {
  x: "float32",
  y: "float32",
  z: "float32",
  vx: "float32",
  vy: "float32",
  vz: "float32",
  yaw: "float32",
  pitch: "float32",
  health: "uint8",
  ack: "uint32",
});

class State extends Schema {
  constructor() {
    super();
    this.players = new MapSchema();
  }
}
defineTypes(State, { players: { map: Player } });

// Durations (ms) of the window so far; a window is short (seconds), so they are kept whole.
const stats = { ticks: 0, tickPlusPatchMs: [], patchMs: [], startedAt: performance.now() };
let room = null;

function percentile(values, q) {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((q / 100) * sorted.length) - 1));
  return Number(sorted[rank].toFixed(4));
}

function snapshotStats() {
  return {
    event: "stats",
    server: "colyseus",
    room: room ? room.roomId : null,
    players: room ? room.state.players.size : 0,
    ticks: stats.ticks,
    seconds: Number(((performance.now() - stats.startedAt) / 1000).toFixed(3)),
    tick_ms_p50: percentile(stats.tickPlusPatchMs, 50),
    tick_ms_p99: percentile(stats.tickPlusPatchMs, 99),
    patch_ms_p99: percentile(stats.patchMs, 99),
  };
}

function resetStats() {
  stats.ticks = 0;
  stats.tickPlusPatchMs = [];
  stats.patchMs = [];
  stats.startedAt = performance.now();
}

class ArenaRoom extends Room {
  onCreate() {
    this.maxClients = 1000; // (raised by --max-clients once created)
    this.setState(new State());
    this.inputs = new Map(); // sessionId -> the latest input not yet applied
    this.pendingTickMs = null; // the last tick's duration, until its patch is timed
    this.onMessage("i", (client, input) => {
      this.inputs.set(client.sessionId, input);
    });
    this.setSimulationInterval((deltaMs) => this.tick(deltaMs), TICK_MS);
    this.setPatchRate(TICK_MS);
  }

  tick(deltaMs) {
    const began = performance.now();
    const dt = deltaMs / 1000;
    for (const [id, input] of this.inputs) {
      const player = this.state.players.get(id);
      if (player === undefined) continue;
      // [move x, move y, yaw, pitch, buttons, seq], as every peer's clients send it
      const [mx, my, yaw, pitch, , seq] = input;
      const length = Math.hypot(mx, my);
      const scale = length > 1 ? 1 / length : 1;
      player.vx = mx * scale * SPEED_MPS;
      player.vy = my * scale * SPEED_MPS;
      player.yaw = yaw;
      player.pitch = pitch;
      player.ack = seq;
    }
    this.inputs.clear();
    this.state.players.forEach((player) => {
      player.x = Math.max(-ARENA_HALF_M, Math.min(ARENA_HALF_M, player.x + player.vx * dt));
      player.y = Math.max(-ARENA_HALF_M, Math.min(ARENA_HALF_M, player.y + player.vy * dt));
      player.z = player.z + player.vz * dt;
    });
    stats.ticks += 1;
    if (this.pendingTickMs !== null) stats.tickPlusPatchMs.push(this.pendingTickMs); // unpatched
    this.pendingTickMs = performance.now() - began;
  }

  broadcastPatch() {
    // Timed with the tick before it: together they are what Arena's tick does.
    const began = performance.now();
    const changed = super.broadcastPatch();
    const patchMs = performance.now() - began;
    stats.patchMs.push(patchMs);
    stats.tickPlusPatchMs.push((this.pendingTickMs ?? 0) + patchMs);
    this.pendingTickMs = null;
    return changed;
  }

  onJoin(client) {
    const player = new Player();
    player.x = (Math.random() * 2 - 1) * ARENA_HALF_M;
    player.y = (Math.random() * 2 - 1) * ARENA_HALF_M;
    this.state.players.set(client.sessionId, player);
  }

  onLeave(client) {
    this.state.players.delete(client.sessionId);
    this.inputs.delete(client.sessionId);
  }
}

function argument(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 && at + 1 < process.argv.length ? Number(process.argv[at + 1]) : fallback;
}

async function main() {
  const port = argument("--port", 0);
  const maxClients = argument("--max-clients", 1000);
  const httpServer = http.createServer((req, res) => {
    if (req.url.startsWith("/stats")) {
      const body = JSON.stringify(snapshotStats());
      if (req.url.includes("reset=1")) resetStats();
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(body);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  // No per-message deflate (the transport's default, stated on purpose): every peer sends
  // its state uncompressed, so bytes and CPU compare.
  const transport = new WebSocketTransport({ server: httpServer, perMessageDeflate: false });
  const gameServer = new Server({ transport, greet: false, gracefullyShutdown: false });
  gameServer.define("arena", ArenaRoom);
  await gameServer.listen(port, "127.0.0.1");
  const created = await matchMaker.createRoom("arena", {});
  room = matchMaker.getLocalRoomById(created.roomId);
  room.maxClients = maxClients;
  room.autoDispose = false;
  const stop = () => {
    process.stdout.write(JSON.stringify(snapshotStats()) + "\n", () => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  process.stdout.write(
    JSON.stringify({ event: "listening", url: `ws://127.0.0.1:${httpServer.address().port}` }) +
      "\n",
  );
}

main().catch((error) => {
  process.stderr.write(`colyseus server: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
