/**
 * Connection admission for the HTTP server. A plain cap (node's
 * `server.maxConnections`) refuses every new client once slow clients hold
 * all the slots: 1024 connections that trickle their headers locked
 * everyone out until the header timeout fired. Instead, when a cap is
 * passed, the connection that has waited longest *without a request in
 * progress* (still sending its headers, or idle between keep-alive
 * requests) is closed to make room. A connection whose request is being
 * answered is never closed for another.
 *
 * Two caps: one per peer address, lower, so that one peer sheds its own
 * connections before anyone else's; and one in all. Peers on loopback can
 * pick any 127.0.0.0/8 source address, so the per-peer cap slows a local
 * attacker down rather than stopping it; the oldest-idle rule is what keeps
 * well-behaved clients served (a client that sends its request at once is
 * never the oldest idle one, unless a whole table of new connections
 * arrives between its connect and its request).
 */
import type net from 'node:net';

interface Entry {
  readonly socket: net.Socket;
  readonly peer: string;
  /** When the connection last became idle (accepted, or its last reply finished). */
  idleSince: number;
  /** Requests received and not yet answered. */
  inFlight: number;
}

export interface ConnectionCaps {
  /** Most connections in all. */
  readonly maxConnections: number;
  /** Most connections from one peer address. */
  readonly maxConnectionsPerPeer: number;
}

export class ConnectionTable {
  readonly #caps: ConnectionCaps;
  readonly #entries = new Map<net.Socket, Entry>();
  readonly #byPeer = new Map<string, Set<Entry>>();
  readonly #onShed: (peer: string, cap: keyof ConnectionCaps) => void;
  /** A counter, not a clock: only the order of events matters. */
  #tick = 0;

  constructor(caps: ConnectionCaps, onShed: (peer: string, cap: keyof ConnectionCaps) => void = () => {}) {
    this.#caps = caps;
    this.#onShed = onShed;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Takes in a new connection, closing the oldest idle one (maybe this one) when a cap is passed. */
  admit(socket: net.Socket): void {
    const peer = socket.remoteAddress ?? '';
    const entry: Entry = { socket, peer, idleSince: ++this.#tick, inFlight: 0 };
    this.#entries.set(socket, entry);
    let mine = this.#byPeer.get(peer);
    if (mine === undefined) {
      mine = new Set();
      this.#byPeer.set(peer, mine);
    }
    mine.add(entry);
    socket.once('close', () => this.#forget(entry));
    if (mine.size > this.#caps.maxConnectionsPerPeer) this.#shed(mine, 'maxConnectionsPerPeer');
    if (this.#entries.size > this.#caps.maxConnections) this.#shed(this.#entries.values(), 'maxConnections');
  }

  /** A request arrived on `socket` (its headers are complete). */
  requestStarted(socket: net.Socket): void {
    const e = this.#entries.get(socket);
    if (e !== undefined) e.inFlight++;
  }

  /** The reply to a request on `socket` finished or was abandoned. */
  requestEnded(socket: net.Socket): void {
    const e = this.#entries.get(socket);
    if (e === undefined || e.inFlight === 0) return;
    if (--e.inFlight === 0) e.idleSince = ++this.#tick;
  }

  #shed(candidates: Iterable<Entry>, cap: keyof ConnectionCaps): void {
    let oldest: Entry | undefined;
    for (const e of candidates) {
      if (e.inFlight === 0 && (oldest === undefined || e.idleSince < oldest.idleSince)) oldest = e;
    }
    // The new connection is always a candidate, so there is one: when every other connection is
    // being answered, the new one is closed.
    if (oldest === undefined) return;
    this.#forget(oldest);
    oldest.socket.destroy();
    this.#onShed(oldest.peer, cap);
  }

  #forget(entry: Entry): void {
    if (this.#entries.get(entry.socket) !== entry) return;
    this.#entries.delete(entry.socket);
    const mine = this.#byPeer.get(entry.peer);
    mine?.delete(entry);
    if (mine?.size === 0) this.#byPeer.delete(entry.peer);
  }
}
