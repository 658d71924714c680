// The attestation agent's `coco_as` token end to end, all real processes in trustee's docker-compose
// shape: rvps, attestation-service (restful-as on --rest, RVPS GrpcRemote), attestation-agent with
// `[token_configs.coco_as] url`, api-server-rest. `GET /aa/token?token_type=coco_as` returns the AS's EAR
// token for evidence sent without runtime data (trustee's ReportData::NotProvided).
import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RVPS_MESSAGE_VERSION } from '@broker/kbs-client';
import { compactVerify, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binary, freePort, type Running, runToEnd, start, waitForListen } from './helpers/process.js';
import { openssl, startApiServerRest } from './helpers/stack.js';

interface Cpu0 {
  readonly 'ear.status': string;
  readonly 'ear.veraison.annotated-evidence': {
    readonly runtime_data_claims: unknown;
    readonly sample: { readonly svn: unknown };
  };
}

describe('attestation agent coco_as token from the REST attestation service', () => {
  const dir = mkdtempSync(join(tmpdir(), 'coco-as-e2e-'));
  const procs: Running[] = [];
  let restPort: number;
  let asRestPort: number;
  let rvpsPort: number;
  let tokenCert: string;

  beforeAll(async () => {
    const tokenKey = join(dir, 'token.key');
    tokenCert = join(dir, 'token-cert-chain.pem');
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', tokenKey);
    openssl(
      'req',
      '-x509',
      '-new',
      '-key',
      tokenKey,
      '-out',
      tokenCert,
      '-days',
      '2',
      '-subj',
      '/CN=as-token',
    );

    rvpsPort = await freePort();
    writeFileSync(
      join(dir, 'rvps.json'),
      JSON.stringify({ storage: { type: 'LocalFs', file_path: join(dir, 'reference_values') } }),
    );
    const rvps = start(binary('rvps'), ['-c', join(dir, 'rvps.json'), '--address', `127.0.0.1:${rvpsPort}`]);
    procs.push(rvps);
    await waitForListen({ port: rvpsPort }, rvps);

    // trustee's kbs/config/docker-compose/as-config.json, with this test's paths and ports.
    writeFileSync(
      join(dir, 'as-config.json'),
      JSON.stringify({
        storage_backend: { storage_type: 'LocalFs', backends: { local_fs: { dir_path: join(dir, 'as') } } },
        rvps_config: { type: 'GrpcRemote', address: `http://127.0.0.1:${rvpsPort}` },
        attestation_token_broker: { duration_min: 5, signer: { key_path: tokenKey, cert_path: tokenCert } },
      }),
    );
    const asPort = await freePort();
    asRestPort = await freePort();
    const as = start(binary('attestation-service'), [
      '--config-file',
      join(dir, 'as-config.json'),
      '--socket',
      `127.0.0.1:${asPort}`,
      '--rest',
      `127.0.0.1:${asRestPort}`,
    ]);
    procs.push(as);
    await waitForListen({ port: asRestPort }, as);

    const aaSock = join(dir, 'aa', 'attestation-agent.sock');
    mkdirSync(join(dir, 'aa'));
    writeFileSync(join(dir, 'aa.toml'), `[token_configs.coco_as]\nurl = "http://127.0.0.1:${asRestPort}"\n`);
    const aa = start(binary('attestation-agent'), [
      '-c',
      join(dir, 'aa.toml'),
      '--attestation_sock',
      `unix://${aaSock}`,
    ]);
    procs.push(aa);
    await waitForListen({ path: aaSock }, aa);
    const started = await startApiServerRest({ aaSock });
    restPort = started.restPort;
    const rest = started.rest;
    procs.push(rest);
    await waitForListen({ port: restPort }, rest);
  });
  afterAll(async () => {
    for (const p of procs.reverse()) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function token(): Promise<{ header: Record<string, unknown>; cpu0: Cpu0 }> {
    const res = await fetch(`http://127.0.0.1:${restPort}/aa/token?token_type=coco_as`, {
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    // Signed by the configured signer: the x5c leaf is our certificate and its key verifies the JWS.
    const header = decodeProtectedHeader(text) as Record<string, unknown>;
    const leaf = new X509Certificate(
      Buffer.from((header.jwk as { x5c: string[] }).x5c[0] as string, 'base64'),
    );
    expect(leaf.raw.equals(new X509Certificate(readFileSync(tokenCert)).raw)).toBe(true);
    const { payload } = await compactVerify(text, leaf.publicKey);
    return { header, cpu0: JSON.parse(Buffer.from(payload).toString('utf8')).submods.cpu0 };
  }

  it('GET /aa/token?token_type=coco_as returns the AS token; the RVPS reference values make it affirming', async () => {
    const submod = (await token()).cpu0;
    expect(submod['ear.veraison.annotated-evidence'].runtime_data_claims).toBeNull();
    expect(submod['ear.veraison.annotated-evidence'].sample.svn).toBeTypeOf('string');
    expect(submod['ear.status']).not.toBe('affirming');

    // The sample TEE's values, registered in the rvps process with rvps-tool.
    const message = join(dir, 'message.json');
    writeFileSync(
      message,
      JSON.stringify({
        version: RVPS_MESSAGE_VERSION,
        type: 'sample',
        payload: Buffer.from(
          JSON.stringify({
            launch_digest: ['abcde'],
            svn: ['1'],
            major_version: 1,
            minimum_minor_version: 4,
          }),
        ).toString('base64'),
      }),
    );
    const reg = await runToEnd(binary('rvps-tool'), [
      'register',
      '--path',
      message,
      '--addr',
      `http://127.0.0.1:${rvpsPort}`,
    ]);
    expect(reg.code, reg.stderr).toBe(0);
    expect((await token()).cpu0['ear.status']).toBe('affirming');
  });

  it('an unknown token type and a coco_as AS that is down fail with the agent error, not a hang', async () => {
    const bad = await fetch(`http://127.0.0.1:${restPort}/aa/token?token_type=nope`);
    expect(bad.status).not.toBe(200);
    const as = procs[1] as Running;
    await as.stop();
    const down = await fetch(`http://127.0.0.1:${restPort}/aa/token?token_type=coco_as`, {
      signal: AbortSignal.timeout(60_000),
    });
    expect(down.status).not.toBe(200);
    expect(await down.text()).toMatch(/attestation service unreachable|coco_as/i);
  });
});
