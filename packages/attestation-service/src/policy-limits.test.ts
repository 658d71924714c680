// The attestation service's policies under the evaluation limits: POST /policy refuses, with 400 naming
// why, a policy without trust_claims or one that exceeds a limit on the representative evidence, and an
// evaluation that exceeds a limit fails that attestation while the service keeps answering.
import { createLogger } from '@broker/cli';
import { attestation } from '@broker/trustee-protos';
import { credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAsConfig } from './config.js';
import { startAsGrpcServer } from './grpc.js';
import { type RunningRestServer, startAsRestServer } from './rest.js';
import { type OpenedAttestationService, openAttestationService } from './service.js';
import { sampleEvidenceRequest } from './testing/index.js';

const silent = createLogger({
  name: 'attestation-service',
  env: { RUST_LOG: 'off' },
  format: 'json',
  destination: { write() {} },
});

const BOMB_SET = `pad := sprintf("%08192d", [0])
bomb := {s | some i in numbers.range(1, 1000000); s := sprintf("%d%s", [i, pad])}`;

describe('attestation service policy limits (REST)', () => {
  let opened: OpenedAttestationService;
  let server: RunningRestServer;
  let base: string;
  beforeAll(async () => {
    opened = await openAttestationService(parseAsConfig({}), silent);
    server = await startAsRestServer(opened, '127.0.0.1:0');
    base = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.close();
    await opened.close();
  });

  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const setPolicy = (id: string, text: string) =>
    post('/policy', { policy_id: id, policy: Buffer.from(text).toString('base64url') });
  const listed = async () =>
    ((await (await fetch(`${base}/policy`)).json()) as { 'policy-id': string }[]).map((p) => p['policy-id']);

  it('refuses with 400 a policy without trust_claims, or one over the memory limit, and stores neither', async () => {
    const missing = await setPolicy('empty_cpu', 'package policy\nx := 1\n');
    expect(missing.status).toBe(400);
    expect(await missing.text()).toMatch(/no `trust_claims` rule/);
    const bomb = await setPolicy(
      'bomb_cpu',
      `package policy\n${BOMB_SET}\ntrust_claims := {"executables": count(bomb)}\n`,
    );
    expect(bomb.status).toBe(400);
    expect(await bomb.text()).toMatch(/limit of policy evaluation \(memory\)/);
    expect(await listed()).not.toContain('empty_cpu');
    expect(await listed()).not.toContain('bomb_cpu');
  });

  it('fails an attestation whose policy exceeds a limit on its evidence, and keeps answering', async () => {
    // Over the limit only for svn 7: the representative evidence passes.
    const text = `package policy\n${BOMB_SET}\ndefault executables := 3\nexecutables := count(bomb) if input.sample.svn == "7"\ntrust_claims := {"executables": executables}\n`;
    expect((await setPolicy('late_cpu', text)).status).toBe(200);
    const attest = (svn: string) => {
      const g = sampleEvidenceRequest({ nonce: `n${svn}` }, svn);
      return post('/attestation', {
        verification_requests: [
          { tee: 'sample', evidence: g.evidence, runtime_data: { structured: { nonce: `n${svn}` } } },
        ],
        policy_ids: ['late'],
      });
    };
    const over = await attest('7');
    expect(over.status).toBe(500);
    expect(await over.text()).toMatch(/memory limit/);
    const again = await attest('1');
    expect(again.status).toBe(500);
    expect(await again.text()).toMatch(/not evaluated again until it changes/);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });
});

describe('attestation service policy limits (gRPC)', () => {
  it('SetAttestationPolicy refuses a policy over the memory limit or without trust_claims, naming why', async () => {
    const opened = await openAttestationService(parseAsConfig({}), silent);
    const server = await startAsGrpcServer({
      service: opened.service,
      rvps: opened.rvps,
      address: '127.0.0.1:0',
    });
    const client = new attestation.AttestationServiceClient(
      `127.0.0.1:${server.port}`,
      credentials.createInsecure(),
    );
    try {
      const set = (text: string) =>
        new Promise<ServiceError | null>((resolve) =>
          client.setAttestationPolicy(
            { policyId: 'x_cpu', policy: Buffer.from(text).toString('base64url') },
            new Metadata(),
            { deadline: Date.now() + 30_000 },
            (e) => resolve(e),
          ),
        );
      const bomb = await set(`package policy\n${BOMB_SET}\ntrust_claims := {"executables": count(bomb)}\n`);
      expect(bomb?.code).toBe(status.ABORTED);
      expect(bomb?.details).toMatch(/Set Attestation Policy Failed: .*limit of policy evaluation \(memory\)/);
      const missing = await set('package policy\nx := 1\n');
      expect(missing?.details).toMatch(/no `trust_claims` rule/);
      expect(await set('package policy\ntrust_claims := {"executables": 2}\n')).toBeNull();
    } finally {
      client.close();
      await server.close();
      await opened.close();
    }
  });
});
