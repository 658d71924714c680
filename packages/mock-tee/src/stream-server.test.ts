import { Socket } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorResponse, TPM_RC_COMMAND_SIZE, TPM_RC_FAILURE, TpmStreamServer } from './stream-server.js';

/** A command of `size` bytes (header included) with code `code`. */
function command(code: number, size = 12): Buffer {
  const b = Buffer.alloc(size);
  b.writeUInt16BE(0x8001, 0);
  b.writeUInt32BE(size, 2);
  b.writeUInt32BE(code, 6);
  return b;
}

/** Sends chunks and collects everything the server sends until it closes or `want` bytes came. */
function exchange(
  port: number,
  chunks: Buffer[],
  want: number,
  endAfter = false,
): Promise<{ data: Buffer; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s = new Socket();
    let data = Buffer.alloc(0);
    let settled = false;
    const done = (closed: boolean) => {
      if (settled) return;
      settled = true;
      s.destroy();
      resolve({ data, closed });
    };
    s.on('data', (c) => {
      data = Buffer.concat([data, c]);
      if (data.length >= want && want > 0) done(false);
    });
    s.on('close', () => done(true));
    s.on('error', reject);
    s.connect(port, '127.0.0.1', () => {
      for (const c of chunks) s.write(c);
      if (endAfter) s.end();
    });
  });
}

describe('TPM stream server framing', () => {
  const seen: number[] = [];
  let server: TpmStreamServer;
  let port: number;

  beforeAll(async () => {
    server = new TpmStreamServer({
      host: '127.0.0.1',
      port: 0,
      controlChannel: true,
      maxCommandSize: 64,
      maxConnections: 4,
      logger: pino({ level: 'silent' }),
      // Echoes the command code back as the response code, or fails on code 0xdead.
      handle: async (cmd) => {
        const code = cmd.readUInt32BE(6);
        seen.push(code);
        if (code === 0xdead) throw new Error('boom');
        return errorResponse(code);
      },
    });
    port = await server.start();
  });
  afterAll(async () => {
    await server.close();
  });

  const rcOf = (b: Buffer, i = 0) => b.readUInt32BE(i * 10 + 6);

  it('answers commands split across writes and several in one write, in order', async () => {
    const one = command(0x101);
    const two = Buffer.concat([command(0x102), command(0x103, 20)]);
    const { data } = await exchange(port, [one.subarray(0, 3), one.subarray(3), two], 30);
    expect([rcOf(data, 0), rcOf(data, 1), rcOf(data, 2)]).toEqual([0x101, 0x102, 0x103]);
  });

  it('answers a handler failure with TPM_RC_FAILURE and keeps serving', async () => {
    const { data } = await exchange(port, [command(0xdead), command(0x104)], 20);
    expect([rcOf(data, 0), rcOf(data, 1)]).toEqual([TPM_RC_FAILURE, 0x104]);
  });

  it('refuses a size below the header and closes', async () => {
    const bad = command(0x1);
    bad.writeUInt32BE(9, 2);
    const { data, closed } = await exchange(port, [bad], 0);
    expect(closed).toBe(true);
    expect(rcOf(data)).toBe(TPM_RC_COMMAND_SIZE);
  });

  it('refuses an oversize command without reading it and closes', async () => {
    const bad = command(0x1);
    bad.writeUInt32BE(0xffffffff, 2);
    const { data, closed } = await exchange(port, [bad], 0);
    expect(closed).toBe(true);
    expect(rcOf(data)).toBe(TPM_RC_COMMAND_SIZE);
  });

  it('drops a truncated command when the client leaves, without answering it', async () => {
    const before = seen.length;
    const { data, closed } = await exchange(port, [command(0x105, 40).subarray(0, 25)], 0, true);
    expect(closed).toBe(true);
    expect(data.length).toBe(0);
    expect(seen.length).toBe(before);
    // Still serving.
    const { data: after } = await exchange(port, [command(0x106)], 10);
    expect(rcOf(after)).toBe(0x106);
  });

  it('closes a connection that floods unanswered input', async () => {
    // Twenty well-formed commands at once: more than two commands' worth of the 64-byte limit queued.
    const { data, closed } = await exchange(port, [Buffer.concat(Array(20).fill(command(0x109)))], 0);
    expect(closed).toBe(true);
    expect(data.length).toBe(0);
  });

  it('handles the swtpm control channel: locality 0 only, nothing else', async () => {
    const ctrl = (b: number[]) => exchange(port + 1, [Buffer.from(b)], 4);
    expect((await ctrl([0, 0, 0, 5, 0])).data.readUInt32BE(0)).toBe(0);
    expect((await ctrl([0, 0, 0, 5, 3])).data.readUInt32BE(0)).toBe(0x3d);
    // CMD_INIT would reset the vTPM under the paravisor.
    const init = await exchange(port + 1, [Buffer.from([0, 0, 0, 2, 0, 0, 0, 0])], 0);
    expect(init.closed).toBe(true);
    expect(init.data.readUInt32BE(0)).toBe(0x0a);
  });

  it('refuses connections over the limit', async () => {
    const held = await Promise.all(
      [0, 1, 2, 3].map(
        () =>
          new Promise<Socket>((resolve) => {
            const s = new Socket();
            s.on('error', () => undefined);
            s.connect(port, '127.0.0.1', () => resolve(s));
          }),
      ),
    );
    // Give the server the same event-loop turns to register them: one round trip on each.
    await Promise.all(
      held.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.once('data', () => resolve());
            s.write(command(0x107));
          }),
      ),
    );
    const extra = await exchange(port, [command(0x108)], 10);
    expect(extra.closed).toBe(true);
    expect(extra.data.length).toBe(0);
    for (const s of held) s.destroy();
  });
});
