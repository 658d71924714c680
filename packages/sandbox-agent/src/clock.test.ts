// SetGuestDateTime with a fake `date` first on PATH, so the host's clock is never set: the arguments
// `date` gets, the refused requests (which never run it), a `date` that fails or is missing, and the
// RPC through the agent's ttrpc service with its log line.
import { chmod, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AGENT_METHODS } from '@broker/agent-policy';
import { Code, TtrpcClient, TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkDateTime, dateArguments, MAX_SEC, MIN_SEC, setGuestDateTime } from './clock.js';
import { InvalidRequest, RuntimeFailed } from './errors.js';
import { codec } from './proto.js';
import { type RunningAgent, startSandboxAgent } from './server.js';
import { AGENT_SERVICE } from './service.js';
import { tempDir } from './testing/index.js';

// Records its arguments (one a line) in $FAKE_DATE_LOG; with $FAKE_DATE_FAIL set it fails as date does
// without CAP_SYS_TIME.
const FAKE_DATE = `#!/bin/sh
printf '%s\\n' "$@" >"$FAKE_DATE_LOG"
if [ -n "$FAKE_DATE_FAIL" ]; then
  echo "date: cannot set date: Operation not permitted" >&2
  exit 1
fi
echo "Tue Dec  2 04:00:00 UTC 2026"
`;

describe('SetGuestDateTime', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let log: string;
  /** The environment the agent runs `date` in: the fake's directory first on PATH. */
  let env: NodeJS.ProcessEnv;
  const now = BigInt(Math.floor(Date.now() / 1000));
  const recorded = async () =>
    (await readFile(log, 'utf8').catch(() => '')).split('\n').filter((l) => l !== '');

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    await writeFile(join(dir, 'date'), FAKE_DATE);
    await chmod(join(dir, 'date'), 0o755);
    log = join(dir, 'date.log');
    env = { ...process.env, PATH: `${dir}:${process.env.PATH ?? ''}`, FAKE_DATE_LOG: log };
  });
  afterAll(() => cleanup());
  beforeEach(() => rm(log, { force: true }));

  it('writes the time as @SEC.USEC with six digits of microseconds, in UTC', () => {
    expect(dateArguments(1764650000n, 42n)).toEqual(['-u', '-s', '@1764650000.000042']);
    expect(dateArguments(1764650000n, 0n)).toEqual(['-u', '-s', '@1764650000.000000']);
    expect(dateArguments(1764650000n, 999999n)).toEqual(['-u', '-s', '@1764650000.999999']);
  });

  it('takes Sec and Usec as bigints, numbers or decimal strings', () => {
    expect(checkDateTime({ Sec: now, Usec: 5n })).toEqual({ sec: now, usec: 5n });
    expect(checkDateTime({ Sec: Number(now), Usec: 5 })).toEqual({ sec: now, usec: 5n });
    expect(checkDateTime({ Sec: String(now), Usec: '0' })).toEqual({ sec: now, usec: 0n });
    expect(checkDateTime({ Sec: MIN_SEC, Usec: 0n }).sec).toBe(MIN_SEC);
    expect(checkDateTime({ Sec: MAX_SEC - 1n, Usec: 999999n }).sec).toBe(MAX_SEC - 1n);
  });

  it.each([
    [{ Sec: now, Usec: -1n }, /^invalid Usec -1: microseconds must be 0 to 999999$/],
    [{ Sec: now, Usec: 1_000_000n }, /^invalid Usec 1000000: microseconds must be 0 to 999999$/],
    [{ Sec: -1n, Usec: 0n }, /^invalid Sec -1: the time must lie between 2000-01-01 and 2200-01-01/],
    [{ Sec: 0n, Usec: 0n }, /^invalid Sec 0: /],
    [{}, /^invalid Sec 0: /],
    [{ Sec: MIN_SEC - 1n, Usec: 0n }, /^invalid Sec 946684799: /],
    [{ Sec: MAX_SEC, Usec: 0n }, /^invalid Sec 7258118400: /],
    [{ Sec: 2n ** 63n - 1n, Usec: 0n }, /^invalid Sec 9223372036854775807: /],
    [{ Sec: 1.5, Usec: 0n }, /^invalid Sec 1\.5: not a 64-bit integer$/],
    [{ Sec: now, Usec: '1e3' }, /^invalid Usec 1e3: not a 64-bit integer$/],
  ])('refuses %o as InvalidRequest naming the field, without running date', async (req, message) => {
    const e = await setGuestDateTime(req, { env }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidRequest);
    expect((e as InvalidRequest).code).toBe(Code.INVALID_ARGUMENT);
    expect((e as Error).message).toMatch(message);
    expect(await recorded()).toEqual([]);
  });

  it('runs date -u -s @SEC.USEC from PATH and gives the clock before and after', async () => {
    const before = Date.now();
    const change = await setGuestDateTime({ Sec: now, Usec: 7n }, { env });
    expect(await recorded()).toEqual(['-u', '-s', `@${now}.000007`]);
    expect(change.beforeMs).toBeGreaterThanOrEqual(before);
    expect(change.afterMs).toBeGreaterThanOrEqual(change.beforeMs);
  });

  it('fails with RuntimeFailed naming the command and carrying what date said', async () => {
    const e = await setGuestDateTime({ Sec: now, Usec: 0n }, { env: { ...env, FAKE_DATE_FAIL: '1' } }).catch(
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(RuntimeFailed);
    expect((e as RuntimeFailed).code).toBe(Code.INTERNAL);
    expect((e as Error).message).toBe(
      `setting the guest clock with date -u -s @${now}.000000 failed: date: cannot set date: Operation not permitted`,
    );
  });

  it('fails with RuntimeFailed saying date was not found when it is not on PATH', async () => {
    const empty = join(dir, 'empty');
    const e = await setGuestDateTime({ Sec: now, Usec: 0n }, { env: { PATH: empty } }).catch(
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(RuntimeFailed);
    expect((e as Error).message).toBe(
      `setting the guest clock with date -u -s @${now}.000000 failed: date was not found (coreutils' date sets the clock)`,
    );
  });

  describe('through the agent service', () => {
    let running: RunningAgent;
    let client: TtrpcClient;
    const lines: { obj: Record<string, unknown>; msg: string }[] = [];
    const call = async (req: Record<string, unknown>) =>
      client.call(AGENT_SERVICE, 'SetGuestDateTime', codec(AGENT_METHODS.SetGuestDateTime!).encode(req));

    beforeAll(async () => {
      running = await startSandboxAgent({
        listen: [{ path: join(dir, 'agent.sock') }],
        roots: [join(dir, 'kata')],
        stateDir: join(dir, 'state'),
        sharedNamespaces: false,
        clock: { env },
        logger: {
          info: (obj, msg) => void lines.push({ obj: obj as Record<string, unknown>, msg }),
          warn: () => {},
        },
      });
      client = await TtrpcClient.connect({ path: join(dir, 'agent.sock') });
    });
    afterAll(async () => {
      client?.close();
      await running?.close();
    });

    it('sets the clock, answers Empty and logs the clock before and after', async () => {
      const answer = await call({ Sec: now, Usec: 250000n });
      expect(codec('Empty').decode(answer)).toEqual({});
      expect(await recorded()).toEqual(['-u', '-s', `@${now}.250000`]);
      const line = lines.find((l) => l.msg === 'guest clock set');
      expect(line?.obj).toEqual({
        before: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        after: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });
    });

    it('answers INVALID_ARGUMENT naming the field for a bad request', async () => {
      const e = await call({ Sec: now, Usec: -5n }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(TtrpcError);
      expect([(e as TtrpcError).code, (e as TtrpcError).message]).toEqual([
        Code.INVALID_ARGUMENT,
        'invalid Usec -5: microseconds must be 0 to 999999',
      ]);
      expect(await recorded()).toEqual([]);
    });
  });
});
