import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALL_PCRS,
  formatTpmAddress,
  marshalCommand,
  marshalGetCapability,
  parseTpmAddress,
  SwtpmSocketTransport,
  TPM_ALG,
  TPM_CAP,
  TPM_CC,
  TPM_PT,
  Tpm,
  type TpmDeviceFile,
  TpmDeviceTransport,
  TpmTransportError,
  TpmUsageError,
} from './index.js';
import { type SwtpmInstance, startSwtpm } from './testing/swtpm.js';

let swtpm: SwtpmInstance;
beforeAll(async () => {
  swtpm = await startSwtpm();
});
afterAll(async () => {
  await swtpm?.stop();
});

const getCapability = marshalCommand({
  code: TPM_CC.GetCapability,
  parameters: marshalGetCapability(TPM_CAP.TPM_PROPERTIES, TPM_PT.FAMILY_INDICATOR, 8),
});

/**
 * A fake character device that forwards each written command to swtpm and
 * hands out the response in reads of at most `chunk` bytes, the way a
 * kernel allowing partial reads does. `mangle` alters responses.
 */
function fakeDevice(
  options: { chunk?: number; mangle?: (r: Uint8Array) => Uint8Array; onClose?: () => void } = {},
) {
  const opened: string[] = [];
  const open = async (path: string): Promise<TpmDeviceFile> => {
    opened.push(path);
    const upstream = new SwtpmSocketTransport({ host: swtpm.host, port: swtpm.port });
    let pending: Uint8Array = new Uint8Array();
    return {
      async write(buffer, offset, length) {
        const response = await upstream.send(buffer.subarray(offset, offset + length));
        pending = options.mangle ? options.mangle(response) : response;
        return { bytesWritten: length };
      },
      async read(buffer, offset, length) {
        const n = Math.min(length, options.chunk ?? length, pending.length);
        buffer.set(pending.subarray(0, n), offset);
        pending = pending.subarray(n);
        return { bytesRead: n };
      },
      async close() {
        options.onClose?.();
        await upstream.close();
      },
    };
  };
  return { open, opened };
}

describe('TpmDeviceTransport', () => {
  it('runs commands over a device that returns responses in small partial reads', async () => {
    const dev = fakeDevice({ chunk: 3 });
    const tpm = new Tpm(new TpmDeviceTransport('/dev/tpmrm0', { openDevice: dev.open }));
    try {
      const pcrs = await tpm.readPcrs(TPM_ALG.SHA256);
      expect(pcrs).toHaveLength(ALL_PCRS.length);
      expect(await tpm.getProperty(TPM_PT.PCR_COUNT)).toBe(24);
      expect(dev.opened).toEqual(['/dev/tpmrm0']);
    } finally {
      await tpm.close();
    }
  });

  it('fails on a short response, reopens the device for the next command', async () => {
    let closes = 0;
    let cut = true;
    const dev = fakeDevice({
      mangle: (r) => {
        if (!cut) return r;
        cut = false;
        return r.subarray(0, r.length - 1);
      },
      onClose: () => closes++,
    });
    const t = new TpmDeviceTransport('/dev/tpm0', { openDevice: dev.open });
    await expect(t.send(getCapability)).rejects.toThrow(/returned \d+ bytes, expected \d+/);
    expect(closes).toBe(1);
    const ok = await t.send(getCapability);
    expect(ok.length).toBeGreaterThan(10);
    expect(dev.opened).toHaveLength(2);
    await t.close();
    await expect(t.send(getCapability)).rejects.toThrow(/is closed/);
  });

  it('rejects responses larger than the limit and bytes past the declared size', async () => {
    const small = new TpmDeviceTransport('/dev/tpm0', { openDevice: fakeDevice().open, maxResponseSize: 16 });
    await expect(small.send(getCapability)).rejects.toThrow(/more than the limit of 16/);
    await small.close();
    const extra = new TpmDeviceTransport('/dev/tpm0', {
      openDevice: fakeDevice({ mangle: (r) => new Uint8Array([...r, 0]) }).open,
    });
    await expect(extra.send(getCapability)).rejects.toThrow(/past the response/);
    await extra.close();
    const tiny = new TpmDeviceTransport('/dev/tpm0', {
      openDevice: fakeDevice({
        mangle: (r) => {
          const b = r.slice();
          new DataView(b.buffer).setUint32(2, 4);
          return b;
        },
      }).open,
    });
    await expect(tiny.send(getCapability)).rejects.toThrow(/less than its header/);
    await tiny.close();
  });

  it('reports a device that cannot be opened', async () => {
    const t = new TpmDeviceTransport('/nonexistent/tpmrm0');
    await expect(t.send(getCapability)).rejects.toThrow(/cannot open TPM device \/nonexistent\/tpmrm0/);
    await t.close();
  });
});

describe('SwtpmSocketTransport', () => {
  it('serializes concurrent commands on one connection', async () => {
    const tpm = Tpm.open(swtpm.address);
    try {
      const results = await Promise.all(ALL_PCRS.map((p) => tpm.readPcrs(TPM_ALG.SHA256, [p])));
      const all = await tpm.readPcrs(TPM_ALG.SHA256);
      expect(results.map((r) => r[0])).toEqual(all);
    } finally {
      await tpm.close();
    }
  });

  it('drops the connection after an oversize response and reconnects for the next command', async () => {
    const t = new SwtpmSocketTransport({ host: swtpm.host, port: swtpm.port, maxResponseSize: 12 });
    await expect(t.send(getCapability)).rejects.toThrow(TpmTransportError);
    await expect(t.send(getCapability)).rejects.toThrow(/more than the limit of 12/);
    await t.close();
  });

  it('fails when nothing listens, when the peer hangs up mid-response, and on timeouts', async () => {
    const refused = new SwtpmSocketTransport({ host: '127.0.0.1', port: 1 });
    await expect(refused.send(getCapability)).rejects.toThrow(/cannot connect to swtpm at 127.0.0.1:1/);

    const servers: Server[] = [];
    const listen = (onData: (sock: import('node:net').Socket) => void) =>
      new Promise<number>((resolve) => {
        const server = createServer((sock) => sock.once('data', () => onData(sock)));
        servers.push(server);
        server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
      });
    try {
      const hangup = await listen((sock) => sock.end(Buffer.from([0x80, 0x01, 0, 0, 0, 20, 0, 0])));
      const t1 = new SwtpmSocketTransport({ port: hangup });
      await expect(t1.send(getCapability)).rejects.toThrow(/closed the connection after 8 response bytes/);
      const silent = await listen(() => undefined);
      const t2 = new SwtpmSocketTransport({ port: silent, timeoutMs: 50 });
      await expect(t2.send(getCapability)).rejects.toThrow(/did not answer within 50 ms/);
      await t2.close();
    } finally {
      for (const s of servers) s.close();
    }
  });
});

describe('TPM addresses', () => {
  it('parses device paths and swtpm host:port', () => {
    expect(parseTpmAddress('/dev/tpmrm0')).toEqual({ kind: 'device', path: '/dev/tpmrm0' });
    expect(parseTpmAddress('device:/dev/tpm0')).toEqual({ kind: 'device', path: '/dev/tpm0' });
    expect(parseTpmAddress('swtpm:127.0.0.1:2321')).toEqual({ kind: 'swtpm', host: '127.0.0.1', port: 2321 });
    expect(parseTpmAddress('swtpm:[::1]:2321')).toEqual({ kind: 'swtpm', host: '::1', port: 2321 });
    expect(formatTpmAddress({ kind: 'swtpm', host: '::1', port: 2321 })).toBe('swtpm:[::1]:2321');
    expect(formatTpmAddress(parseTpmAddress('/dev/tpmrm0'))).toBe('device:/dev/tpmrm0');
    for (const bad of [
      '',
      'tpm0',
      'device:dev/tpm0',
      'swtpm:host',
      'swtpm::2321',
      'swtpm:h:0',
      'swtpm:h:99999',
      'swtpm:h:2x',
    ]) {
      expect(() => parseTpmAddress(bad), bad).toThrow(TpmUsageError);
    }
  });
});
