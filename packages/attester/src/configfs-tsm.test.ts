import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigfsTsmResponder, type TsmRequest } from '@broker/mock-tee';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { probeTsmProvider, requestTsmReport, TsmReportDir, TsmReportError } from './configfs-tsm.js';

let root: string;
let responder: ConfigfsTsmResponder | undefined;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'tsm-'));
});
afterEach(async () => {
  responder?.close();
  responder = undefined;
  await rm(root, { recursive: true, force: true });
});

describe('ConfigfsTsmResponder', () => {
  it('answers a request through the attester client and cleans up', async () => {
    const seen: TsmRequest[] = [];
    responder = await ConfigfsTsmResponder.start({
      root,
      provider: 'tdx_guest',
      respond: (req) => {
        seen.push(req);
        return { outblob: Buffer.concat([Buffer.from('quote:'), req.inblob]) };
      },
    });
    const inblob = new Uint8Array(64).fill(7);
    const report = await requestTsmReport({ root, provider: 'tdx_guest', inblob });
    expect(Buffer.from(report.outblob).subarray(0, 6).toString()).toBe('quote:');
    expect(report.outblob.subarray(6)).toEqual(inblob);
    expect(report.generation).toBe(1);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.generation).toBe(1);
    expect(responder.requests).toBe(1);
    const { readdir } = await import('node:fs/promises');
    expect(await readdir(root)).toEqual([]);
  });

  it('passes privlevel and publishes auxblob', async () => {
    responder = await ConfigfsTsmResponder.start({
      root,
      provider: 'sev_guest',
      respond: (req) => ({ outblob: Uint8Array.of(req.privlevel ?? 9), auxblob: Uint8Array.of(1, 2, 3) }),
    });
    const report = await requestTsmReport({
      root,
      provider: 'sev_guest',
      inblob: Uint8Array.of(1),
      privlevel: 2,
      auxblob: true,
    });
    expect(report.outblob).toEqual(Uint8Array.of(2));
    expect(report.auxblob).toEqual(Uint8Array.of(1, 2, 3));
    // privlevel and inblob are two writes: the kernel counts both, so does the mock.
    expect(report.generation).toBe(2);
  });

  it('makes the client refuse another provider', async () => {
    responder = await ConfigfsTsmResponder.start({
      root,
      provider: 'sev_guest',
      respond: () => ({ outblob: Uint8Array.of(1) }),
    });
    await expect(
      requestTsmReport({ root, provider: 'tdx_guest', inblob: Uint8Array.of(1) }),
    ).rejects.toMatchObject({
      code: 'wrong-provider',
    });
    expect(await probeTsmProvider({ root })).toBe('sev_guest');
    expect(responder.requests).toBe(0);
  });

  it('counts a second inblob write, which the client reports as a conflict', async () => {
    responder = await ConfigfsTsmResponder.start({
      root,
      provider: 'tdx_guest',
      respond: (req) => ({ outblob: req.inblob }),
    });
    const dir = await TsmReportDir.create({ root });
    try {
      await dir.expectProvider('tdx_guest');
      await dir.writeInblob(Uint8Array.of(1));
      expect(await dir.readOutblob()).toEqual(Uint8Array.of(1));
      await writeFile(join(dir.path, 'inblob'), Uint8Array.of(2));
      // Wait until the mock has seen the second write.
      for (;;) {
        if ((await readFile(join(dir.path, 'generation'), 'utf8')) === '2\n') break;
        await new Promise((r) => setTimeout(r, 5));
      }
      const err = await dir.readOutblob().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TsmReportError);
      expect((err as TsmReportError).code).toBe('inblob-conflict');
    } finally {
      await dir.close();
    }
  });

  it('fills folders that existed before it started', async () => {
    await mkdir(join(root, 'early'));
    responder = await ConfigfsTsmResponder.start({
      root,
      provider: 'tdx_guest',
      respond: () => ({ outblob: Uint8Array.of(1) }),
    });
    expect(await readFile(join(root, 'early', 'provider'), 'utf8')).toBe('tdx_guest\n');
  });

  it('rejects an invalid provider name', async () => {
    await expect(
      ConfigfsTsmResponder.start({
        root,
        provider: 'bad name\n',
        respond: () => ({ outblob: Uint8Array.of(1) }),
      }),
    ).rejects.toMatchObject({ code: 'USAGE' });
  });
});
