// The agent over a real unix socket, with a real in-process KBS over HTTPS.
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AttesterModule } from '@broker/attester';
import {
  AA_ERROR_PREFIX,
  ATTESTATION_AGENT_SERVICE,
  AttestationAgentClient,
  RuntimeMeasurementResult,
} from '@broker/guest-api';
import { KbsClient, TeeKeyPair } from '@broker/kbs-client';
import { Code, TtrpcError } from '@broker/ttrpc';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_RUNTIME_DATA_BYTES } from './agent.js';
import { type AaConfig, DEFAULT_AA_CONFIG, parseAaConfigText } from './config.js';
import { EVENTLOG_FILE, tcg2AaelEntry } from './eventlog.js';
import { loadInitDataToml } from './initdata.js';
import { type RunningAttestationAgent, type StartOptions, startAttestationAgent } from './start.js';
import { LogCapture, startTestKbs, type TestKbs } from './testing/kbs.js';

let kbs: TestKbs;
const SECRET = Buffer.from('0123456789abcdef0123456789abcdef');

beforeAll(async () => {
  kbs = await startTestKbs();
  await kbs.admin.setResource('default/key/one', SECRET);
});
afterAll(async () => {
  await kbs.close();
});

let dir: string;
let running: RunningAttestationAgent | undefined;
let client: AttestationAgentClient | undefined;
let logs: LogCapture;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-service-'));
  logs = new LogCapture();
});
afterEach(async () => {
  client?.close();
  client = undefined;
  await running?.close();
  running = undefined;
  await rm(dir, { recursive: true, force: true });
});

function kbsConfig(extra = ''): AaConfig {
  return parseAaConfigText(
    `[token_configs.kbs]\nurl = "${kbs.url}"\ncert = '''\n${kbs.certPem}'''\n${extra}`,
  );
}

async function start(overrides: Partial<StartOptions> = {}): Promise<AttestationAgentClient> {
  running = await startAttestationAgent({
    config: kbsConfig(),
    socketPath: join(dir, 'run', 'aa.sock'),
    logger: pino({ level: 'debug' }, logs),
    detect: { env: {} },
    eventlogDir: join(dir, 'eventlog'),
    kbsRetryDelay: async () => {},
    ...overrides,
  });
  client = await AttestationAgentClient.connect(`unix://${running.socketPath}`);
  return client;
}

function jwtClaims(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as Record<
    string,
    unknown
  >;
}

describe('evidence and TEE', () => {
  it('reports the sample TEE and no additional devices', async () => {
    const c = await start();
    expect(await c.getTeeType()).toBe('sample');
    expect(await c.getAdditionalTees()).toEqual([]);
    expect((await c.getAdditionalEvidence(Buffer.from('x'))).length).toBe(0);
  });

  it('binds the runtime data as the report data as it is (no hashing)', async () => {
    const c = await start();
    const data = Buffer.from('any bytes \u0000\u00ff of any length');
    const evidence = JSON.parse(Buffer.from(await c.getEvidence(data)).toString()) as Record<string, unknown>;
    expect(evidence).toEqual({ svn: '1', report_data: data.toString('base64') });
    expect(JSON.parse(Buffer.from(await c.getEvidence(new Uint8Array(0))).toString())).toEqual({
      svn: '1',
      report_data: '',
    });
  });

  it('caps the runtime data', async () => {
    const c = await start();
    await c.getEvidence(Buffer.alloc(MAX_RUNTIME_DATA_BYTES));
    for (const call of [
      () => c.getEvidence(Buffer.alloc(MAX_RUNTIME_DATA_BYTES + 1)),
      () => c.getAdditionalEvidence(Buffer.alloc((4 << 20) - 256)),
    ]) {
      const err = (await call().catch((e: unknown) => e)) as TtrpcError;
      expect(err).toBeInstanceOf(TtrpcError);
      expect(err.code).toBe(Code.INTERNAL);
      expect(err.message).toMatch(
        new RegExp(
          `^\\[ERROR:attestation-agent\\] AA-KBC get evidence failed: runtime data is \\d+ bytes, more than the ${MAX_RUNTIME_DATA_BYTES} accepted$`,
        ),
      );
    }
  });

  it('includes additional devices (sampledevice) in detection order', async () => {
    const c = await start({ detect: { env: { ENABLE_SAMPLE_DEVICE: '1' } } });
    expect(await c.getAdditionalTees()).toEqual(['sampledevice']);
    const map = JSON.parse(Buffer.from(await c.getAdditionalEvidence(Buffer.from('n'))).toString());
    expect(map).toEqual({ sampledevice: { svn: '2', report_data: Buffer.from('n').toString('base64') } });
  });
});

describe('GetToken("kbs")', () => {
  it('returns a token and a PKCS#8 EC key that decrypts a resource from the KBS', async () => {
    const c = await start();
    const reply = await c.getKbsToken();
    expect(reply.token.split('.')).toHaveLength(3);
    expect(reply.tee_keypair).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const key = TeeKeyPair.fromPem(reply.tee_keypair);
    expect(key.publicJwk).toMatchObject({ kty: 'EC', crv: 'P-256' });
    // The CDH's use: passport mode, the token as Bearer, the resource JWE decrypted with the key.
    const cdh = new KbsClient({ url: kbs.url, certPem: kbs.certPem, token: reply.token, teeKeyPair: key });
    try {
      expect(await cdh.getResource('kbs:///default/key/one')).toEqual(SECRET);
    } finally {
      cdh.close();
    }
  });

  it('returns a PKCS#1 RSA key when tee_key_algorithm is RSA-OAEP-256', async () => {
    const c = await start({ config: kbsConfig('tee_key_algorithm = "RSA-OAEP-256"\n') });
    const reply = await c.getKbsToken();
    expect(reply.tee_keypair).toMatch(/^-----BEGIN RSA PRIVATE KEY-----\n/);
    const cdh = new KbsClient({
      url: kbs.url,
      certPem: kbs.certPem,
      token: reply.token,
      teeKeyPair: TeeKeyPair.fromPem(reply.tee_keypair),
    });
    try {
      expect(await cdh.getResource('default/key/one')).toEqual(SECRET);
    } finally {
      cdh.close();
    }
  });

  it('attests afresh with a new key on every call (no caching in the agent)', async () => {
    const c = await start();
    const a = await c.getKbsToken();
    const b = await c.getKbsToken();
    expect(a.tee_keypair).not.toBe(b.tee_keypair);
    expect(a.token).not.toBe(b.token);
  });

  it('sends the --initdata-toml document to the KBS, which puts its digest in the token', async () => {
    const toml =
      'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"policy.rego" = "package agent_policy"\n';
    const path = join(dir, 'initdata.toml');
    await writeFile(path, toml);
    const initData = await loadInitDataToml(path);
    const c = await start({ initData });
    expect(running?.initDataBinding).toBe('unsupported');
    const claims = JSON.stringify(jwtClaims((await c.getKbsToken()).token));
    expect(claims).toContain(`"init_data":"${createHash('sha256').update(toml).digest('base64')}"`);
    expect(claims).toContain('"init_data_claims":{"policy.rego":"package agent_policy"}');
  });

  it('never logs the token or the key', async () => {
    const c = await start();
    const reply = await c.getKbsToken();
    expect(logs.messages()).toContain('AA (ttrpc): token issued');
    expect(logs.text).not.toContain(reply.token.split('.')[2]);
    expect(logs.text).not.toContain('PRIVATE KEY');
  });

  it('fails with the upstream prefix when no KBS is configured', async () => {
    const c = await start({ config: DEFAULT_AA_CONFIG });
    await expect(c.getToken('kbs')).rejects.toMatchObject({
      code: Code.INTERNAL,
      message: `${AA_ERROR_PREFIX}AA-KBC get token failed: kbs token config not configured in config file`,
    });
  });

  it('fails in bounded time, naming the cause, when the KBS is down', async () => {
    const down = http.createServer();
    await new Promise<void>((r) => down.listen(0, '127.0.0.1', r));
    const port = (down.address() as AddressInfo).port;
    await new Promise<void>((r) => down.close(() => r()));
    const c = await start({
      config: parseAaConfigText(`[token_configs.kbs]\nurl = "http://127.0.0.1:${port}"\n`),
    });
    const err = (await c.getToken('kbs').catch((e: unknown) => e)) as TtrpcError;
    expect(err.code).toBe(Code.INTERNAL);
    expect(err.message).toMatch(
      /^\[ERROR:attestation-agent\] AA-KBC get token failed: Unable to get token\. RCAR handshake retried 5 times/,
    );
  });

  it('rejects a KBS whose certificate is not the configured one', async () => {
    const c = await start({ config: parseAaConfigText(`[token_configs.kbs]\nurl = "${kbs.url}"\n`) });
    await expect(c.getToken('kbs')).rejects.toMatchObject({ code: Code.INTERNAL });
  });
});

describe('other token types', () => {
  it('answers an unknown type with INTERNAL "Unsupported token type"', async () => {
    const c = await start();
    for (const type of ['', 'KBS', 'foo', 'x'.repeat(10_000)]) {
      const err = (await c.getToken(type).catch((e: unknown) => e)) as TtrpcError;
      expect(err.code).toBe(Code.INTERNAL);
      expect(
        err.message.startsWith(`${AA_ERROR_PREFIX}AA-KBC get token failed: Unsupported token type "`),
      ).toBe(true);
      expect(err.message.length).toBeLessThan(200);
    }
  });

  it('fails coco_as without its config table', async () => {
    const c = await start();
    await expect(c.getToken('coco_as')).rejects.toMatchObject({
      message: `${AA_ERROR_PREFIX}AA-KBC get token failed: coco_as token config not configured in config file`,
    });
  });

  it('gets a coco_as token by POSTing the evidence to {url}/attestation', async () => {
    const seen: { url: string; type: string | undefined; body: string }[] = [];
    let status = 200;
    const as = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          url: req.url ?? '',
          type: req.headers['content-type'],
          body: Buffer.concat(chunks).toString(),
        });
        res.writeHead(status).end(status === 200 ? 'as.token.text' : 'policy "x" denied\n');
      });
    });
    await new Promise<void>((r) => as.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(as.address() as AddressInfo).port}`;
      const c = await start({ config: parseAaConfigText(`[token_configs.coco_as]\nurl = "${url}"\n`) });
      expect(Buffer.from(await c.getToken('coco_as')).toString()).toBe('as.token.text');
      expect(seen[0]?.url).toBe('/attestation');
      expect(seen[0]?.type).toBe('application/json');
      const body = JSON.parse(seen[0]?.body ?? '') as {
        verification_requests: { tee: string; evidence: string }[];
        policy_ids: unknown[];
      };
      expect(body.policy_ids).toEqual([]);
      expect(body.verification_requests).toHaveLength(1);
      expect(body.verification_requests[0]?.tee).toBe('sample');
      const evidence = body.verification_requests[0]?.evidence ?? '';
      expect(evidence).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(JSON.parse(Buffer.from(evidence, 'base64url').toString())).toEqual({
        svn: '1',
        report_data: '',
      });

      status = 403;
      await expect(c.getToken('coco_as')).rejects.toMatchObject({
        code: Code.INTERNAL,
        message: `${AA_ERROR_PREFIX}AA-KBC get token failed: Remote Attestation Failed, AS Response: "policy \\"x\\" denied\\n"`,
      });
    } finally {
      await new Promise<void>((r) => as.close(() => r()));
    }
  });
});

describe('ExtendRuntimeMeasurement', () => {
  const event = {
    domain: 'github.com/confidential-containers',
    operation: 'PullImage',
    content: '{"image":"a", "digest":"b"}',
  };

  it('answers NOT_ENABLED when the event log is off (the default)', async () => {
    const c = await start();
    expect(await c.extendRuntimeMeasurement(event)).toBe(RuntimeMeasurementResult.NOT_ENABLED);
  });

  it('answers NOT_SUPPORTED when the TEE cannot extend (sample)', async () => {
    const c = await start({ config: kbsConfig('[eventlog_config]\nenable_eventlog = true\n') });
    expect(await c.extendRuntimeMeasurement(event)).toBe(RuntimeMeasurementResult.NOT_SUPPORTED);
    expect(logs.text).toContain('cannot extend runtime measurements');
  });

  it('logs and extends on a TEE that can (OK), with init_pcr as the default register', async () => {
    const registers = new Map<number, Buffer>();
    const extended: number[] = [];
    const measuring: AttesterModule = {
      tee: 'tdx',
      detect: async () => ({ detected: true, reason: 'test TEE' }),
      create: () => ({
        tee: 'tdx',
        getEvidence: async () => ({ quote: 'q' }),
        getRuntimeMeasurement: async (pcr: number) => registers.get(pcr) ?? Buffer.alloc(48),
        extendRuntimeMeasurement: async (digest: Uint8Array, pcr: number) => {
          extended.push(pcr);
          registers.set(
            pcr,
            createHash('sha384')
              .update(registers.get(pcr) ?? Buffer.alloc(48))
              .update(digest)
              .digest(),
          );
        },
      }),
    };
    const c = await start({
      config: kbsConfig('[eventlog_config]\nenable_eventlog = true\ninit_pcr = 17\n'),
      detect: { env: {}, modules: [measuring] },
    });
    expect(await c.getTeeType()).toBe('tdx');
    expect(await c.extendRuntimeMeasurement(event)).toBe(RuntimeMeasurementResult.OK);
    expect(await c.extendRuntimeMeasurement({ ...event, registerIndex: 8 })).toBe(
      RuntimeMeasurementResult.OK,
    );
    expect(extended).toEqual([17, 8]);
    const text = `${event.domain} ${event.operation} ${event.content}`;
    expect(await readFile(join(dir, 'eventlog', EVENTLOG_FILE))).toEqual(
      Buffer.concat([tcg2AaelEntry(text, 4, 'sha384').bytes, tcg2AaelEntry(text, 3, 'sha384').bytes]),
    );
    // Hostile input: a newline in the content, a register index no TEE has.
    await expect(c.extendRuntimeMeasurement({ ...event, content: 'a\nb' })).rejects.toMatchObject({
      code: Code.INTERNAL,
      message: `${AA_ERROR_PREFIX}AA extend runtime measurement failed: content contains newline`,
    });
    await expect(
      c.extendRuntimeMeasurement({ ...event, registerIndex: 2n ** 64n - 1n }),
    ).rejects.toMatchObject({
      message: expect.stringMatching(/register index 18446744073709551615 is out of range$/),
    });
    expect(extended).toEqual([17, 8]);
  });
});

describe('BindInitData over ttrpc', () => {
  it('is not served, as upstream ttrpc-aa: binding happens at start-up only', async () => {
    const c = await start();
    await expect(c.bindInitData(Buffer.alloc(32))).rejects.toMatchObject({
      code: Code.NOT_FOUND,
      message: `/${ATTESTATION_AGENT_SERVICE}/BindInitData is not supported`,
    });
  });
});
