// The admission rule on its own, with stand-in sockets: which connection makes room, and when none does.
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ConnectionTable } from './connections.js';

class FakeSocket extends EventEmitter {
  destroyed = false;
  constructor(
    readonly remoteAddress: string,
    readonly name: string,
  ) {
    super();
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
}

function table(maxConnections: number, maxConnectionsPerPeer: number) {
  const shed: string[] = [];
  const t = new ConnectionTable({ maxConnections, maxConnectionsPerPeer }, (peer, cap) =>
    shed.push(`${peer}:${cap}`),
  );
  const open = (peer: string, name: string) => {
    const s = new FakeSocket(peer, name);
    t.admit(s as unknown as net.Socket);
    return s;
  };
  const as = (s: FakeSocket) => s as unknown as net.Socket;
  return { t, shed, open, as };
}

describe('ConnectionTable', () => {
  it('closes the connection idle longest when the table is full', () => {
    const { t, open, shed } = table(3, 3);
    const a = open('10.0.0.1', 'a');
    const b = open('10.0.0.2', 'b');
    const c = open('10.0.0.3', 'c');
    const d = open('10.0.0.4', 'd');
    expect([a, b, c, d].map((s) => s.destroyed)).toEqual([true, false, false, false]);
    expect(t.size).toBe(3);
    expect(shed).toEqual(['10.0.0.1:maxConnections']);
  });

  it('counts idleness from the end of the last reply, and never closes one being answered', () => {
    const { t, open, as } = table(3, 3);
    const a = open('10.0.0.1', 'a');
    const b = open('10.0.0.2', 'b');
    const c = open('10.0.0.3', 'c');
    // a is answered and goes back to idle: it is now the most recently idle.
    t.requestStarted(as(a));
    t.requestEnded(as(a));
    // b is being answered.
    t.requestStarted(as(b));
    const d = open('10.0.0.4', 'd');
    expect([a, b, c, d].map((s) => s.destroyed)).toEqual([false, false, true, false]);
    const e = open('10.0.0.5', 'e');
    expect([a, b, d, e].map((s) => s.destroyed)).toEqual([true, false, false, false]);
  });

  it('closes the newcomer when every other connection is being answered', () => {
    const { t, open, as } = table(2, 2);
    const a = open('10.0.0.1', 'a');
    const b = open('10.0.0.2', 'b');
    t.requestStarted(as(a));
    t.requestStarted(as(b));
    const c = open('10.0.0.3', 'c');
    expect([a.destroyed, b.destroyed, c.destroyed]).toEqual([false, false, true]);
    expect(t.size).toBe(2);
  });

  it('makes a peer past its own cap shed its own connections first', () => {
    const { open, shed } = table(100, 2);
    const other = open('10.0.0.9', 'other');
    const mine = [open('10.0.0.1', 'm1'), open('10.0.0.1', 'm2'), open('10.0.0.1', 'm3')];
    expect(other.destroyed).toBe(false);
    expect(mine.map((s) => s.destroyed)).toEqual([true, false, false]);
    expect(shed).toEqual(['10.0.0.1:maxConnectionsPerPeer']);
  });

  it('forgets closed connections', () => {
    const { t, open } = table(2, 2);
    const a = open('10.0.0.1', 'a');
    open('10.0.0.1', 'b');
    a.destroy();
    expect(t.size).toBe(1);
    const c = open('10.0.0.1', 'c');
    expect(c.destroyed).toBe(false);
    expect(t.size).toBe(2);
  });
});
