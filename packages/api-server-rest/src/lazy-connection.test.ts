import { Code, TtrpcClosedError, TtrpcConnectError, TtrpcError } from '@broker/ttrpc';
import { describe, expect, it } from 'vitest';
import { BackendError } from './backends.js';
import { describeCallError, LazyConnection } from './lazy-connection.js';

class FakeClient {
  closed = false;
  closeCalls = 0;
  constructor(readonly id: number) {}
  close() {
    this.closed = true;
    this.closeCalls++;
  }
}

function harness(connectPlan: (n: number) => Promise<FakeClient>) {
  const made: FakeClient[] = [];
  let attempts = 0;
  const conn = new LazyConnection<FakeClient>({
    name: 'CDH',
    address: 'unix:///tmp/cdh.sock',
    connect: async () => {
      const c = await connectPlan(attempts++);
      made.push(c);
      return c;
    },
    close: (c) => c.close(),
    isClosed: (c) => c.closed,
  });
  return { conn, made, attempts: () => attempts };
}

const always = () => harness(async (n) => new FakeClient(n));
const retry = { retryInFlight: true };

describe('LazyConnection', () => {
  it('connects on first use only and reuses the connection', async () => {
    const { conn, made, attempts } = always();
    expect(attempts()).toBe(0);
    expect(await conn.call(async (c) => c.id, retry)).toBe(0);
    expect(await conn.call(async (c) => c.id, retry)).toBe(0);
    expect(attempts()).toBe(1);
    expect(made).toHaveLength(1);
  });

  it('shares one connection attempt between concurrent first calls', async () => {
    const { conn, attempts } = always();
    const ids = await Promise.all([1, 2, 3].map(() => conn.call(async (c) => c.id, retry)));
    expect(ids).toEqual([0, 0, 0]);
    expect(attempts()).toBe(1);
  });

  it('reports a failed connection with upstream context plus the cause, and tries again next time', async () => {
    const { conn, attempts } = harness(async (n) => {
      if (n === 0)
        throw new TtrpcConnectError('ttrpc: cannot connect to unix:///tmp/cdh.sock: connect ENOENT');
      return new FakeClient(n);
    });
    const err = await conn.call(async (c) => c.id, retry).catch((e) => e);
    expect(err).toBeInstanceOf(BackendError);
    expect(err.message).toBe(
      'ttrpc connect to CDH addr: unix:///tmp/cdh.sock failed: UNAVAILABLE: ttrpc: cannot connect to unix:///tmp/cdh.sock: connect ENOENT',
    );
    expect(await conn.call(async (c) => c.id, retry)).toBe(1);
    expect(attempts()).toBe(2);
  });

  it('wraps a ttrpc status as "ttrpc request error" and keeps the connection', async () => {
    const { conn, attempts } = always();
    const err = await conn
      .call(async () => {
        throw new TtrpcError(Code.INTERNAL, '[CDH] [ERROR]: get resource failed');
      }, retry)
      .catch((e) => e);
    expect(err).toBeInstanceOf(BackendError);
    expect(err.message).toBe('ttrpc request error: INTERNAL: [CDH] [ERROR]: get resource failed');
    expect(err.cause).toBeInstanceOf(TtrpcError);
    await conn.call(async (c) => c.id, retry);
    expect(attempts()).toBe(1);
  });

  it('reconnects once when the connection is lost during the call', async () => {
    const { conn, made } = always();
    let calls = 0;
    const id = await conn.call(async (c) => {
      calls++;
      if (c.id === 0) throw new TtrpcClosedError('ttrpc: closed: connection reset');
      return c.id;
    }, retry);
    expect([id, calls]).toEqual([1, 2]);
    expect(made[0]?.closeCalls).toBe(1);
  });

  it('gives up after one reconnect', async () => {
    const { conn, attempts } = always();
    const err = await conn
      .call(async () => {
        throw new TtrpcClosedError('ttrpc: closed');
      }, retry)
      .catch((e) => e);
    expect(err.message).toBe('ttrpc request error after reconnect: UNAVAILABLE: ttrpc: closed');
    expect(attempts()).toBe(2);
    // The dead second connection is not reused either.
    expect(await conn.call(async (c) => c.id, retry)).toBe(2);
  });

  it('reports a failed reconnect with upstream wording', async () => {
    const { conn } = harness(async (n) => {
      if (n === 1) throw new TtrpcConnectError('ttrpc: cannot connect: ECONNREFUSED');
      return new FakeClient(n);
    });
    const err = await conn
      .call(async (c) => {
        if (c.id === 0) throw new TtrpcClosedError();
        return c.id;
      }, retry)
      .catch((e) => e);
    expect(err.message).toBe(
      'failed to reconnect to CDH after LocalClosed: UNAVAILABLE: ttrpc: cannot connect: ECONNREFUSED',
    );
  });

  it('does not repeat a non-idempotent call lost in flight, but reconnects for the next one', async () => {
    const { conn } = always();
    let calls = 0;
    const err = await conn
      .call(
        async () => {
          calls++;
          throw new TtrpcClosedError('ttrpc: closed');
        },
        { retryInFlight: false },
      )
      .catch((e) => e);
    expect(err.message).toBe('ttrpc request error: UNAVAILABLE: ttrpc: closed');
    expect(calls).toBe(1);
    expect(await conn.call(async (c) => c.id, { retryInFlight: false })).toBe(1);
  });

  it('replaces a connection known to be closed before sending', async () => {
    const { conn, made } = always();
    await conn.call(async (c) => c.id, retry);
    made[0]!.closed = true;
    const sentOn: number[] = [];
    await conn.call(
      async (c) => {
        sentOn.push(c.id);
        return c.id;
      },
      { retryInFlight: false },
    );
    expect(sentOn).toEqual([1]);
  });

  it('moves concurrent callers of a lost connection to one new connection', async () => {
    const { conn, attempts } = always();
    await conn.call(async (c) => c.id, retry);
    const ids = await Promise.all(
      [1, 2, 3].map(() =>
        conn.call(async (c) => {
          if (c.id === 0) throw new TtrpcClosedError();
          return c.id;
        }, retry),
      ),
    );
    expect(ids).toEqual([1, 1, 1]);
    expect(attempts()).toBe(2);
  });

  it('close() closes the connection and fails later calls', async () => {
    const { conn, made } = always();
    await conn.call(async (c) => c.id, retry);
    await conn.close();
    expect(made[0]?.closed).toBe(true);
    await expect(conn.call(async (c) => c.id, retry)).rejects.toThrow(/shutting down/);
    await conn.close();
  });

  it('close() during a connection attempt closes the late connection', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const { conn, made } = harness(async (n) => {
      await gate;
      return new FakeClient(n);
    });
    const pending = conn.call(async (c) => c.id, retry).catch((e) => e);
    const closing = conn.close();
    release();
    await closing;
    expect((await pending).message).toMatch(/shutting down/);
    expect(made[0]?.closed).toBe(true);
  });
});

describe('describeCallError', () => {
  it('prefixes ttrpc statuses with their code name', () => {
    expect(describeCallError(new TtrpcError(Code.DEADLINE_EXCEEDED, 'context deadline exceeded'))).toBe(
      'DEADLINE_EXCEEDED: context deadline exceeded',
    );
    expect(describeCallError(new Error('x'))).toBe('x');
    expect(describeCallError('y')).toBe('y');
  });
});
