// The rendered postgresSpec deployment run for real: two replicas of our KBS started on the mounts and
// the environment kubelet would give the pods (POSTGRES_URL resolved from its Secret through the
// Deployment's secretKeyRef), sharing one real PostgreSQL server (Debian's).
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import { type PostgresServer, startPostgresServer } from '@broker/kv-storage/testing';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBrokerConfig } from './broker-config.js';
import { type RenderedBrokerConfig, renderBrokerConfig } from './render.js';
import { brokerConfigDoc, CLUSTER_DOMAIN, HOST, sourceSecrets } from './testing/fixtures.js';
import { adminToken, containerEnv, localKbsConfig, materialize } from './testing/kubelet.js';

let db: PostgresServer;
let root: string;
let rendered: RenderedBrokerConfig;
const replicas: RunningKbs[] = [];
let httpsCert: string;
let tokenKey: string;
const saved = process.env.POSTGRES_URL;

beforeAll(async () => {
  db = await startPostgresServer();
  root = mkdtempSync(join(tmpdir(), 'deploy-kbs-pg-'));
  const { secrets, certs } = await sourceSecrets();
  httpsCert = certs.https.certPem;
  tokenKey = certs.token.keyPem;
  rendered = renderBrokerConfig(
    parseBrokerConfig(
      brokerConfigDoc({ replicas: 2, postgresSpec: { urlSecretName: 'kbs-db', urlSecretKey: 'uri' } }),
    ),
    { clusterDomain: CLUSTER_DOMAIN, secrets },
  );
  materialize(root, rendered.objects, {
    'attestation-status': { status: Buffer.from('success') },
    kbsres1: { key1: Buffer.alloc(32, 7) },
  });
  // The Secret the operator created in the cluster; the pods get its key only through the env.
  const env = containerEnv(rendered.objects, { 'kbs-db': { uri: db.url } });
  process.env.POSTGRES_URL = env.POSTGRES_URL;
  const config = parseKbsConfigText(localKbsConfig(rendered.kbsConfigToml, root));
  for (let i = 0; i < 2; i++) {
    replicas.push(await startKbs(config, { logger: pino({ level: 'silent' }) }));
  }
}, 90_000);

afterAll(async () => {
  while (replicas.length > 0) await replicas.pop()?.close();
  if (saved === undefined) delete process.env.POSTGRES_URL;
  else process.env.POSTGRES_URL = saved;
  await db?.dispose();
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

function call(
  replica: number,
  path: string,
  options: { method?: string; token?: string; body?: string } = {},
): Promise<{ status: number; body: string; cookie?: string }> {
  const port = replicas[replica]?.addresses[0]?.port as number;
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        servername: HOST,
        ca: httpsCert,
        headers: {
          ...(options.token !== undefined && { authorization: `Bearer ${options.token}` }),
          ...(options.body !== undefined && { 'content-type': 'application/json' }),
        },
      },
      (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            ...(res.headers['set-cookie'] !== undefined && { cookie: res.headers['set-cookie'][0] }),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('the rendered PostgreSQL deployment runs our KBS', () => {
  it('the connection reaches the pods only through the Secret', () => {
    expect(JSON.stringify(rendered.objects)).not.toContain(db.password);
    expect(JSON.stringify(rendered.objects)).not.toContain(`127.0.0.1:${db.port}`);
  });

  it('loaded the mounted resource Secrets into PostgreSQL', async () => {
    expect((await call(0, '/healthz')).status).toBe(200);
    expect((await call(1, '/healthz')).status).toBe(200);
    const keys = (await db.psql("SELECT key FROM repository WHERE key LIKE 'default/%' ORDER BY key"))
      .split('\n')
      .filter((k) => k !== '');
    expect(keys).toEqual(['default/attestation-status/status', 'default/kbsres1/key1']);
  });

  it('keeps the handshake sessions in PostgreSQL, the table every replica reads', async () => {
    const auth = await call(0, '/kbs/v0/auth', {
      method: 'POST',
      body: JSON.stringify({ version: '0.4.0', tee: 'sample', 'extra-params': '' }),
    });
    expect(auth.status, auth.body).toBe(200);
    const sid = /kbs-session-id=([0-9a-f]+)/.exec(auth.cookie ?? '')?.[1];
    expect(sid).toMatch(/^[0-9a-f]{32}$/);
    expect((await db.psql(`SELECT key FROM kbs_protocol_session WHERE key = '${sid}'`)).trim()).toBe(sid);
  });

  it('an admin write through one replica is served by the other', async () => {
    const token = adminToken(tokenKey);
    const write = await call(0, '/kbs/v0/reference-value', {
      method: 'POST',
      token,
      body: JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from(JSON.stringify({ deploy_pg_check: ['ab12'] })).toString('base64'),
      }),
    });
    expect(write.status, write.body).toBe(200);
    const read = await call(1, '/kbs/v0/reference-value/deploy_pg_check', { token });
    expect(read.status, read.body).toBe(200);
    expect(read.body).toContain('ab12');
  });
});
