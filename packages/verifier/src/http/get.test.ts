// The collateral request observer: which service a URL belongs to, and which answers count as failures.
import { describe, expect, it } from 'vitest';
import {
  type CollateralSource,
  collateralSourceOf,
  type HttpGet,
  HttpGetError,
  observedHttpGet,
} from './get.js';

const OPTIONS = { timeoutMs: 1000, maxBytes: 1024 };

describe('collateralSourceOf', () => {
  it('names the service by the API path, whatever the host', () => {
    expect(
      collateralSourceOf('https://api.trustedservices.intel.com/tdx/certification/v4/tcb?fmspc=00'),
    ).toBe('pcs');
    expect(collateralSourceOf('https://pccs.internal:8081/sgx/certification/v4/pckcrl?ca=platform')).toBe(
      'pcs',
    );
    expect(collateralSourceOf('https://kdsintf.amd.com/vcek/v1/Milan/cert_chain')).toBe('kds');
    expect(collateralSourceOf('http://127.0.0.1:9/vlek/v1/Genoa/crl')).toBe('kds');
    expect(collateralSourceOf('https://example.com/other')).toBe('other');
    expect(collateralSourceOf('not a url')).toBe('other');
  });
});

describe('observedHttpGet', () => {
  const answering =
    (status: number): HttpGet =>
    async (url) => ({ url, status, headers: {}, body: Buffer.alloc(0) });

  it('reports answers other than 200 and requests that fail, and passes both on unchanged', async () => {
    const seen: [CollateralSource, string][] = [];
    const record = (s: CollateralSource, u: string) => void seen.push([s, u]);
    const ok = 'https://kdsintf.amd.com/vcek/v1/Milan/crl';
    const down = 'https://pccs.internal/tdx/certification/v4/qe/identity';
    expect((await observedHttpGet(answering(200), record)(ok, OPTIONS)).status).toBe(200);
    expect((await observedHttpGet(answering(500), record)(down, OPTIONS)).status).toBe(500);
    expect((await observedHttpGet(answering(404), record)(ok, OPTIONS)).status).toBe(404);
    const failing: HttpGet = async (url) => {
      throw new HttpGetError(`GET ${url} failed: connection refused`);
    };
    await expect(observedHttpGet(failing, record)(down, OPTIONS)).rejects.toBeInstanceOf(HttpGetError);
    expect(seen).toEqual([
      ['pcs', down],
      ['kds', ok],
      ['pcs', down],
    ]);
  });

  it('keeps the answer when the observer throws', async () => {
    const get = observedHttpGet(answering(503), () => {
      throw new Error('observer broke');
    });
    expect((await get('https://kdsintf.amd.com/vcek/v1/Milan/crl', OPTIONS)).status).toBe(503);
  });
});
