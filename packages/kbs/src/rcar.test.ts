import type { AttestationService, VerifyRequest } from '@broker/attestation';
import { MemoryStorage } from '@broker/kv-storage';
import { generateTeeKeyPair } from '@broker/protocol';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { KbsMetrics } from './metrics.js';
import type { AttestationEvent, DecisionObserver } from './observer.js';
import { AttestFailed, Rcar } from './rcar.js';
import { SessionStore, sessionIdFromCookieHeader } from './session.js';
import { AUTH_BODY, attestationBody } from './testing/client.js';

const enc = (s: string) => new TextEncoder().encode(s);

/** An attestation service that issues `token`, or refuses every piece of evidence when it is undefined. */
function fakeAttestation(token: string | undefined): AttestationService {
  return {
    async verify(_req: VerifyRequest) {
      if (token === undefined) throw new Error('evidence refused by the policy');
      return token;
    },
    setPolicy: async () => undefined,
    registerReferenceValue: async () => undefined,
    getReferenceValue: async () => undefined,
    signerPublicJwk: undefined,
    close: async () => undefined,
  };
}

function setup(token: string | undefined) {
  const metrics = new KbsMetrics();
  const sessions = new SessionStore({ storage: new MemoryStorage(), lifetimeMs: 60_000, sweepIntervalMs: 0 });
  const events: AttestationEvent[] = [];
  const observer: DecisionObserver = { attestation: (e) => events.push(e), resource: () => undefined };
  const rcar = new Rcar({
    sessions,
    attestation: fakeAttestation(token),
    metrics,
    logger: pino({ level: 'silent' }),
    observer,
  });
  const total = async (name: 'attestationErrors' | 'attestationFailures' | 'attestationRequests') =>
    (await metrics[name].get()).values.reduce((sum, v) => sum + v.value, 0);
  /** A session from /auth: its id and nonce. */
  const auth = async () => {
    const reply = await rcar.auth(enc(AUTH_BODY));
    const id = sessionIdFromCookieHeader(String(reply.headers['set-cookie']).split(';')[0]);
    const { nonce } = JSON.parse(Buffer.from(reply.body).toString()) as { nonce: string };
    return { id: id as string, nonce };
  };
  return { rcar, total, auth, events };
}

describe('RCAR /attest', () => {
  it('counts every refused request once as an error, the nonce mismatch among them, and tells no observer', async () => {
    const { rcar, total, auth, events } = setup('token');
    const key = generateTeeKeyPair();
    const { id, nonce } = await auth();
    const refusals: [string, () => Promise<unknown>][] = [
      ['no cookie', () => rcar.attest(enc(attestationBody(nonce, key)), undefined)],
      ['not an Attestation', () => rcar.attest(enc('{"tee-evidence": 1}'), id)],
      ['unknown session', () => rcar.attest(enc(attestationBody(nonce, key)), 'no-such-session')],
      ['another nonce', () => rcar.attest(enc(attestationBody('b3RoZXI=', key)), id)],
      [
        'additional evidence not JSON',
        () => rcar.attest(enc(attestationBody(nonce, key, undefined, '{')), id),
      ],
      [
        'additional evidence not a map',
        () => rcar.attest(enc(attestationBody(nonce, key, undefined, '[]')), id),
      ],
      [
        'additional evidence of an unknown TEE',
        () => rcar.attest(enc(attestationBody(nonce, key, undefined, '{"nope": {}}')), id),
      ],
    ];
    for (const [i, [what, refused]] of refusals.entries()) {
      await expect(refused(), what).rejects.toBeInstanceOf(AttestFailed);
      expect(await total('attestationErrors'), what).toBe(i + 1);
    }
    expect(await total('attestationRequests')).toBe(refusals.length);
    expect(await total('attestationFailures')).toBe(0);
    expect(events).toEqual([]);
  });

  it('counts refused evidence once as a failure of its TEE, not as an error, and tells the observer why', async () => {
    const { rcar, total, auth, events } = setup(undefined);
    const key = generateTeeKeyPair();
    const { id, nonce } = await auth();
    await expect(rcar.attest(enc(attestationBody(nonce, key)), id, '10.0.0.7')).rejects.toBeInstanceOf(
      AttestFailed,
    );
    expect(await total('attestationFailures')).toBe(1);
    expect(await total('attestationErrors')).toBe(0);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      tee: 'sample',
      sessionId: id,
      source: '10.0.0.7',
      nonce,
      outcome: { error: 'evidence refused by the policy' },
    });
  });

  it('tells the observer of the token it issued, and counts no failure', async () => {
    const { rcar, total, auth, events } = setup('the-ear-token');
    const key = generateTeeKeyPair();
    const { id, nonce } = await auth();
    const reply = await rcar.attest(enc(attestationBody(nonce, key)), id);
    expect(JSON.parse(Buffer.from(reply.body).toString())).toEqual({ token: 'the-ear-token' });
    expect(await total('attestationErrors')).toBe(0);
    expect(await total('attestationFailures')).toBe(0);
    expect(events.map((e) => e.outcome)).toEqual([{ token: 'the-ear-token' }]);
  });
});
