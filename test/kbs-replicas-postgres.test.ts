// Three KBS processes over HTTPS on one real PostgreSQL server (Debian's), in trustee's tables, sharing
// the token-signing key: any replica finishes a handshake another began, an admin write through one is
// served by the others at their next request (they read the shared store on every use: no timer, no
// stale cache), reference values registered on one appraise guests on the others, and a database restart
// loses nothing while the requests made during it fail cleanly and succeed again once it is back. The
// KBS runs from a bundle of the current source (the same code as dist/bin/kbs).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type PostgresServer, startPostgresServer } from '@broker/kv-storage/testing';
import { jweDecrypt } from '@broker/protocol';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Guest,
  type HttpResult,
  prepareReplicas,
  type ReplicaSet,
  sampleGuest,
} from './helpers/replicas.js';
import { SAMPLE_REFERENCE_VALUES } from './helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-replicas-pg-'));
const ERR = 'https://github.com/confidential-containers/kbs/errors/';
let db: PostgresServer;
let set: ReplicaSet;
let urls: string[];
let bundle: string;
let storageBackend: string;

async function mustAdmin(replica: number, ...args: string[]): Promise<string> {
  const r = await set.admin(set.replicas[replica]!, ...args);
  if (r.code !== 0)
    throw new Error(`kbs-client ${args.join(' ')} failed (${r.code}):\n${r.stderr}${r.stdout}`);
  return r.stdout;
}

function plaintext(guest: Guest, r: HttpResult): string {
  expect(r.status, r.body).toBe(200);
  return Buffer.from(jweDecrypt(JSON.parse(r.body), guest.key.privateKey)).toString();
}

function errorType(r: HttpResult): string {
  return (JSON.parse(r.body) as { type: string }).type.slice(ERR.length);
}

async function putResource(replica: number, path: string, value: string | Buffer): Promise<void> {
  const file = join(dir, `res-${randomBytes(4).toString('hex')}`);
  writeFileSync(file, value);
  await mustAdmin(replica, 'set-resource', '--path', path, '--resource-file', file);
}

async function tokenFrom(guest: Guest, url: string): Promise<string> {
  const auth = await guest.auth(url);
  const attest = await guest.attest(url, auth.cookie, auth.nonce);
  expect(attest.status, attest.body).toBe(200);
  return (JSON.parse(attest.body) as { token: string }).token;
}

beforeAll(async () => {
  db = await startPostgresServer();
  const entry = join(dir, 'kbs-entry.ts');
  writeFileSync(
    entry,
    `import { main } from ${JSON.stringify(resolve(import.meta.dirname, '../packages/kbs/src/cli.ts'))};
process.exitCode = await main(process.argv.slice(2));
`,
  );
  bundle = join(dir, 'kbs.mjs');
  await build({
    entryPoints: [entry],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    logLevel: 'silent',
    banner: {
      js: "import { createRequire as brokerCreateRequire } from 'node:module'; const require = brokerCreateRequire(import.meta.url);",
    },
  });
  storageBackend = `[storage_backend]
storage_type = "Postgres"

[storage_backend.backends.postgres]
host = "127.0.0.1"
port = ${db.port}
username = "postgres"
password = "${db.password}"
db = "postgres"
`;
  set = await prepareReplicas(dir, '', 3, {
    storage: { sessionStorageType: 'Postgres', storageBackend },
    kbsCommand: { file: process.execPath, args: [bundle] },
  });
  await Promise.all(set.replicas.map((r) => r.start()));
  urls = set.replicas.map((r) => r.url);
  await mustAdmin(0, 'set-resource-policy', '--allow-all');
}, 240_000);

afterAll(async () => {
  await set?.stopAll();
  await db?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('KBS replicas on one PostgreSQL database, real processes', () => {
  it("auth on one replica, attest on another, resource on a third; the state is in trustee's tables", async () => {
    await putResource(0, 'default/app/key', 'across replicas');
    const guest = sampleGuest(set.ca);
    const auth = await guest.auth(urls[0]!);
    expect(auth.status, auth.body).toBe(200);
    const attest = await guest.attest(urls[1]!, auth.cookie, auth.nonce);
    expect(attest.status, attest.body).toBe(200);
    const { token } = JSON.parse(attest.body) as { token: string };
    expect(plaintext(guest, await guest.resource(urls[2]!, 'default/app/key', { cookie: auth.cookie }))).toBe(
      'across replicas',
    );
    for (const url of urls) {
      expect(plaintext(guest, await guest.resource(url, 'default/app/key', { token }))).toBe(
        'across replicas',
      );
    }
    expect(
      await db.psql("SELECT convert_from(value, 'UTF8') FROM repository WHERE key = 'default/app/key'"),
    ).toBe('across replicas\n');
    expect(await db.psql("SELECT count(*) FROM kbs WHERE key = 'resource-policy.rego'")).toBe('1\n');
    const sid = /=([^;]+)/.exec(auth.cookie)?.[1] ?? '';
    expect(
      await db.psql(`SELECT count(*) FROM kbs_protocol_session WHERE key = '${sid.replace(/'/g, '')}'`),
    ).toBe('1\n');
  });

  it('serves an admin write through one replica at the next request on the others', async () => {
    const guest = sampleGuest(set.ca);
    const token = await tokenFrom(guest, urls[2]!);
    const timings: number[] = [];
    for (let i = 0; i < 6; i++) {
      const value = `v${i}`;
      await putResource(i % 3, 'default/app/changing', value);
      const written = performance.now();
      // The very next request on each of the other replicas sees the new value.
      for (const r of [0, 1, 2].filter((x) => x !== i % 3)) {
        expect(plaintext(guest, await guest.resource(urls[r]!, 'default/app/changing', { token }))).toBe(
          value,
        );
      }
      timings.push(performance.now() - written);
    }
    console.log(
      `write through one replica, then the next request on each of the two others: ${timings.map((t) => t.toFixed(1)).join(', ')} ms (both reads)`,
    );

    await mustAdmin(1, 'set-resource-policy', '--deny-all');
    const denied = await guest.resource(urls[0]!, 'default/app/changing', { token });
    expect(denied.status).toBe(401);
    expect(errorType(denied)).toBe('PolicyDeny');
    await mustAdmin(2, 'set-resource-policy', '--allow-all');
    expect(plaintext(guest, await guest.resource(urls[1]!, 'default/app/changing', { token }))).toBe('v5');
    await mustAdmin(0, 'delete-resource', '--path', 'default/app/changing');
    const gone = await guest.resource(urls[2]!, 'default/app/changing', { token });
    expect(gone.status).toBe(401);
  });

  it('guests round-robin across the replicas while a resource and the policy rotate through one and another is killed: every answer is an old or a new value', async () => {
    const path = 'default/app/rotating';
    const written = ['r0'];
    await putResource(0, path, 'r0');
    const policyV2 = join(dir, 'allow-v2.rego');
    writeFileSync(policyV2, 'package policy\n\ndefault allow := true\n\n# second version\n');
    let next = 0;
    let retries = 0;
    const down = new Set<number>();
    /** One step on the next replica in turn; a replica that cannot be reached is skipped (the client retries). */
    const step = async <T>(f: (url: string) => Promise<T>): Promise<T> => {
      for (let attempt = 0; attempt < urls.length * 2; attempt++) {
        const i = next++ % urls.length;
        try {
          return await f(urls[i]!);
        } catch {
          retries++;
          down.add(i);
        }
      }
      throw new Error('no replica answered');
    };
    let writing = true;
    const seen: string[] = [];
    const guestLoop = async () => {
      while (writing) {
        const guest = sampleGuest(set.ca);
        const auth = await step((u) => guest.auth(u));
        expect(auth.status, auth.body).toBe(200);
        const attest = await step((u) => guest.attest(u, auth.cookie, auth.nonce));
        expect(attest.status, attest.body).toBe(200);
        const res = await step((u) => guest.resource(u, path, { cookie: auth.cookie }));
        seen.push(plaintext(guest, res));
      }
    };
    const writer = async () => {
      try {
        for (let k = 1; k <= 8; k++) {
          written.push(`r${k}`);
          await putResource(0, path, `r${k}`);
          // Both policy versions allow: a fetch never fails because of the rotation, whichever it met.
          if (k % 2 === 1) await mustAdmin(0, 'set-resource-policy', '--policy-file', policyV2);
          else await mustAdmin(0, 'set-resource-policy', '--allow-all');
          if (k === 3) await set.replicas[2]!.stop('SIGKILL');
        }
      } finally {
        writing = false;
      }
    };
    await Promise.all([writer(), guestLoop(), guestLoop(), guestLoop()]);
    console.log(
      `rotation under load: ${seen.length} fetches across the replicas, ${retries} steps retried on another replica after the kill`,
    );
    expect(seen.length).toBeGreaterThan(8);
    for (const value of seen) expect(written).toContain(value);
    expect(seen).toContain('r8');
    expect(down.has(2)).toBe(true);
    expect([...down]).toEqual([2]);
    await set.replicas[2]!.start();
    await mustAdmin(0, 'set-resource-policy', '--allow-all');
    const guest = sampleGuest(set.ca);
    expect(
      plaintext(guest, await guest.resource(urls[2]!, path, { token: await tokenFrom(guest, urls[2]!) })),
    ).toBe('r8');
  }, 240_000);

  it('uses reference values registered on one replica in the appraisals of the others', async () => {
    await mustAdmin(0, 'set-resource-policy', '--affirming');
    try {
      await putResource(0, 'default/app/gated', 'affirmed');
      const tryFetch = async (attestOn: string, fetchOn: string) => {
        const guest = sampleGuest(set.ca);
        const auth = await guest.auth(attestOn);
        const attest = await guest.attest(attestOn, auth.cookie, auth.nonce);
        expect(attest.status, attest.body).toBe(200);
        return { guest, r: await guest.resource(fetchOn, 'default/app/gated', { cookie: auth.cookie }) };
      };
      const before = await tryFetch(urls[1]!, urls[2]!);
      expect(errorType(before.r)).toBe('PolicyDeny');
      for (const args of SAMPLE_REFERENCE_VALUES) await mustAdmin(2, 'set-sample-reference-value', ...args);
      const after = await tryFetch(urls[1]!, urls[0]!);
      expect(plaintext(after.guest, after.r)).toBe('affirmed');
      expect(await db.psql("SELECT count(*) FROM reference_value WHERE key = 'launch_digest'")).toBe('1\n');
    } finally {
      await mustAdmin(0, 'set-resource-policy', '--allow-all');
    }
  });

  it("runs worker_count = 2 processes of one KBS on the database, each finishing the others' handshakes", async () => {
    await putResource(0, 'default/app/workers', 'from the workers');
    const workers = await prepareReplicas(join(dir, 'workers'), '', 1, {
      workerCount: 2,
      storage: { sessionStorageType: 'Postgres', storageBackend },
      kbsCommand: { file: process.execPath, args: [bundle] },
    });
    const w = workers.replicas[0]!;
    await w.start();
    try {
      const guest = sampleGuest(workers.ca);
      // Connections go to the workers in turn: each step may reach the other worker.
      for (let i = 0; i < 6; i++) {
        const auth = await guest.auth(w.url);
        expect(auth.status, auth.body).toBe(200);
        const attest = await guest.attest(w.url, auth.cookie, auth.nonce);
        expect(attest.status, attest.body).toBe(200);
        const res = await guest.resource(w.url, 'default/app/workers', { cookie: auth.cookie });
        expect(res.status, res.body).toBe(200);
      }
      expect(w.process?.output()).toMatch(/worker processes share the sockets/);
    } finally {
      await workers.stopAll();
    }
  });

  it('loses nothing when the database crashes and restarts; requests during the outage fail cleanly', async () => {
    const secret = randomBytes(32);
    await putResource(2, 'default/app/persisted', secret);
    const guest = sampleGuest(set.ca);
    const open = await guest.auth(urls[0]!);
    expect(open.status).toBe(200);

    await db.stop('SIGKILL');
    try {
      // Every replica answers, with a KBS error and 401: no connection reset, no 5xx, no release.
      const attest = await guest.attest(urls[1]!, open.cookie, open.nonce);
      expect(attest.status).toBe(401);
      expect(errorType(attest)).toBe('AttestationError');
      const auth = await guest.auth(urls[2]!);
      expect(auth.status).toBe(401);
      const res = await guest.resource(urls[0]!, 'default/app/persisted', { cookie: open.cookie });
      expect(res.status).toBe(401);
    } finally {
      // After SIGKILL the server's children may linger a moment; PostgreSQL recovers its log at start.
      await db.start();
    }
    const restarted = performance.now();
    let value: Buffer | undefined;
    for (let attempt = 0; value === undefined; attempt++) {
      expect(attempt).toBeLessThan(500);
      const url = urls[attempt % urls.length]!;
      const auth = await guest.auth(url);
      if (auth.status !== 200) {
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      const attest = await guest.attest(urls[(attempt + 1) % urls.length]!, auth.cookie, auth.nonce);
      if (attest.status !== 200) continue;
      const res = await guest.resource(urls[(attempt + 2) % urls.length]!, 'default/app/persisted', {
        cookie: auth.cookie,
      });
      if (res.status === 200) value = Buffer.from(jweDecrypt(JSON.parse(res.body), guest.key.privateKey));
    }
    console.log(
      `database restarted after a crash: a full handshake and fetch across the replicas succeeded ${(performance.now() - restarted).toFixed(0)} ms after it was up`,
    );
    expect(value).toEqual(secret);
    const token = await tokenFrom(guest, urls[1]!);
    for (const url of urls) {
      expect(plaintext(guest, await guest.resource(url, 'default/app/key', { token }))).toBe(
        'across replicas',
      );
    }
  });
});
