// The attester's side of the shim contract, against stand-in programs: hostile answers (wrong
// magic, lengths that do not add up, too much output), exit codes to failure classes, a shim that
// hangs, and where the shim is looked for.
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BROKER_ATTESTER_SHIM_DIR,
  IOCTL_SHIMS,
  IoctlShimError,
  MAX_SHIM_OUTPUT,
  parseShimAnswer,
  runShim,
  SHIM_EXIT,
  shimPath,
  shimRequest,
} from './ioctl-shim.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ioctl-shim-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A stand-in shim: a shell script. */
async function fakeShim(name: string, script: string): Promise<void> {
  const path = join(dir, name);
  await writeFile(path, `#!/bin/sh\n${script}\n`);
  await chmod(path, 0o755);
}

function answer(magic: string, part1: Buffer, part2 = Buffer.alloc(0), flags = 0): Buffer {
  const head = Buffer.alloc(16);
  head.write(magic, 0, 'latin1');
  head.writeUInt32LE(flags, 4);
  head.writeUInt32LE(part1.length, 8);
  head.writeUInt32LE(part2.length, 12);
  return Buffer.concat([head, part1, part2]);
}

const request = shimRequest(1, 0, Buffer.alloc(64, 7));

describe('shim answers', () => {
  it('parses a well-formed answer', () => {
    const a = parseShimAnswer(answer('BSNP', Buffer.from('report'), Buffer.from('certs'), 5), 'BSNP');
    expect([a.flags, a.part1.toString(), a.part2.toString()]).toEqual([5, 'report', 'certs']);
  });

  it('refuses hostile answers', () => {
    const good = answer('BSNP', Buffer.alloc(10), Buffer.alloc(3));
    const cases: [Buffer, RegExp][] = [
      [Buffer.alloc(0), /does not start with BSNP/],
      [good.subarray(0, 15), /does not start with BSNP/],
      [answer('BTDX', Buffer.alloc(1)), /does not start with BSNP/],
      [good.subarray(0, good.length - 1), /announces/],
      [Buffer.concat([good, Buffer.alloc(1)]), /announces/],
      [
        (() => {
          const b = Buffer.from(good);
          b.writeUInt32LE(0xffffffff, 8);
          return b;
        })(),
        /announces/,
      ],
    ];
    for (const [bytes, message] of cases) {
      expect(() => parseShimAnswer(bytes, 'BSNP')).toThrow(message);
    }
  });

  it('builds the 68-byte request', () => {
    expect(request.subarray(0, 4)).toEqual(Buffer.from([1, 1, 0, 0]));
    expect(request.subarray(4)).toEqual(Buffer.alloc(64, 7));
    expect(() => shimRequest(1, 0, Buffer.alloc(63))).toThrow(RangeError);
  });
});

describe('running a shim', () => {
  it('passes the request on stdin and takes the answer only from a clean exit', async () => {
    // Echo the request back as part 1 of an answer.
    await fakeShim(
      'echo-shim',
      `printf 'BSNP\\000\\000\\000\\000\\104\\000\\000\\000\\000\\000\\000\\000'; cat`,
    );
    const a = await runShim('echo-shim', request, 'BSNP', { shimDir: dir });
    expect(a.part1).toEqual(request);
  });

  it('maps exit codes to failure classes with the shim message, and ignores its stdout', async () => {
    for (const [failure, code] of Object.entries(SHIM_EXIT)) {
      await fakeShim(
        'failing-shim',
        `cat >/dev/null; printf 'BSNP partial'; echo "shim: went wrong as ${failure}" >&2; exit ${code}`,
      );
      const err = await runShim('failing-shim', request, 'BSNP', { shimDir: dir }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IoctlShimError);
      expect([(err as IoctlShimError).failure, (err as Error).message]).toEqual([
        failure,
        `shim: went wrong as ${failure}`,
      ]);
    }
    await fakeShim('odd-shim', 'exit 42');
    await expect(runShim('odd-shim', request, 'BSNP', { shimDir: dir })).rejects.toMatchObject({
      failure: 'crashed',
      message: expect.stringMatching(/exit 42/),
    });
    await fakeShim('killed-shim', 'kill -9 $$');
    await expect(runShim('killed-shim', request, 'BSNP', { shimDir: dir })).rejects.toMatchObject({
      failure: 'crashed',
      message: expect.stringMatching(/killed by SIGKILL/),
    });
  });

  it('stops a shim that writes too much or hangs', async () => {
    await fakeShim('chatty-shim', `head -c ${MAX_SHIM_OUTPUT + 1} /dev/zero`);
    await expect(runShim('chatty-shim', request, 'BSNP', { shimDir: dir })).rejects.toMatchObject({
      failure: 'framing',
    });
    await fakeShim('hung-shim', 'exec sleep 30');
    await expect(
      runShim('hung-shim', request, 'BSNP', { shimDir: dir, timeoutMs: 200 }),
    ).rejects.toMatchObject({
      failure: 'timeout',
    });
  });

  it('says where it looked for a missing shim', async () => {
    await writeFile(join(dir, 'not-executable'), '#!/bin/sh\n');
    await expect(runShim('not-executable', request, 'BSNP', { shimDir: dir })).rejects.toMatchObject({
      failure: 'not-found',
      message: expect.stringContaining(join(dir, 'not-executable')),
    });
  });

  it('looks beside the running executable unless told otherwise', () => {
    expect(shimPath('x', { env: {} })).toBe(join(dirname(process.execPath), 'x'));
    expect(shimPath('x', { env: { [BROKER_ATTESTER_SHIM_DIR]: '/opt/shims' } })).toBe('/opt/shims/x');
    // A relative folder is not trusted: the agent's working folder is nobody's promise.
    expect(shimPath('x', { env: { [BROKER_ATTESTER_SHIM_DIR]: 'shims' } })).toBe(
      join(dirname(process.execPath), 'x'),
    );
    expect(shimPath('x', { shimDir: '/a', env: { [BROKER_ATTESTER_SHIM_DIR]: '/b' } })).toBe('/a/x');
  });
});

describe('shipping', () => {
  const repo = join(dirname(fileURLToPath(import.meta.url)), '../../..');

  it('builds and installs in the pod-VM image exactly the shims the attesters run', async () => {
    const { SHIMS } = (await import(join(repo, 'packages/attester/shims/build.mjs'))) as {
      SHIMS: { name: string }[];
    };
    const wanted = Object.values(IOCTL_SHIMS).sort();
    expect(SHIMS.map((s) => s.name).sort()).toEqual(wanted);
    const image = /^SHIMS=\(([^)]*)\)/m.exec(await readFile(join(repo, 'guest-image/build.sh'), 'utf8'));
    expect(image?.[1]?.trim().split(/\s+/).sort()).toEqual(wanted);
  });
});
