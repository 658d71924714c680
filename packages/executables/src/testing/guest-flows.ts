// The pod's three flows against a running guest chain, for the guest benchmark: A (PullImage of an
// unsigned image, refused by the KBS's sigstore policy, then of a signed one), B (the init container's
// GET of a key on :8006) and C (sealed-secret-init replacing a pointer in a /sealed volume), plus
// requests through the agent-policy gate. Everything runs the shipped executables from `bin`.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_SERVICE, encodeRequest, parseJsonExact } from '@broker/agent-policy';
import { DataHubClient } from '@broker/guest-api';
import { buildImage, buildLayer, pushImage, RegistryClient } from '@broker/image';
import { TtrpcClient } from '@broker/ttrpc';

/** Builds a one-layer image holding `files` and pushes it to `host/path:tag` over plain http. */
export async function publishImage(
  domain: string,
  path: string,
  tag: string,
  files: Record<string, string>,
): Promise<string> {
  const layer = await buildLayer(Object.entries(files).map(([name, content]) => ({ name, content })));
  const image = buildImage({ layers: [layer], cmd: ['/bin/sh'] });
  const client = new RegistryClient({ insecure: () => true });
  try {
    return await pushImage(client, { domain, path }, tag, image);
  } finally {
    client.close();
  }
}

/** Flow A: the unsigned image must be refused, the signed one pulled. */
export async function flowA(cdhSock: string, unsigned: string, signed: string, dir: string): Promise<void> {
  const client = await DataHubClient.connect(`unix://${cdhSock}`, { timeoutMs: 120_000 });
  try {
    const refused = await client.pullImage(unsigned, join(dir, 'bundle-unsigned')).then(
      () => false,
      () => true,
    );
    if (!refused) throw new Error(`flow A: ${unsigned} was pulled, but the policy requires a signature`);
    await client.pullImage(signed, join(dir, 'bundle-signed'));
    const hello = readFileSync(join(dir, 'bundle-signed', 'rootfs', 'hello.txt'), 'utf8');
    if (hello !== 'hello') throw new Error('flow A: the pulled rootfs lacks hello.txt');
  } finally {
    client.close();
  }
}

/** Flow C's volume: a pointer sealed to the KBS resource db/password in `dir`/sealed/db-credentials. */
export function sealFlowC(bin: string, keysDir: string, dir: string): void {
  const pointer = execFileSync(
    join(bin, 'secret'),
    [
      'seal',
      '--signing-kid',
      'kbs:///default/signing-key/jwk_public',
      '--signing-jwk-path',
      join(keysDir, 'keys', 'sealed-signing-private.json'),
      'vault',
      '--resource-uri',
      'kbs:///default/db/password',
      '--provider',
      'kbs',
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
  ).trim();
  const volume = join(dir, 'sealed', 'db-credentials');
  mkdirSync(volume, { recursive: true });
  writeFileSync(join(volume, 'password'), pointer);
}

/** Whether flow C's pointer was replaced by the secret. */
export function checkFlowC(dir: string, expected: string): void {
  if (readFileSync(join(dir, 'sealed', 'db-credentials', 'password'), 'utf8') !== expected) {
    throw new Error('flow C: the sealed secret was not replaced');
  }
}

/**
 * Flow C: a pointer sealed with `secret` (signing key under `keysDir/keys`), unsealed in place by
 * `sealed-secret-init` in a volume under `dir/sealed`.
 */
export function flowC(bin: string, keysDir: string, dir: string, cdhSock: string, expected: string): void {
  sealFlowC(bin, keysDir, dir);
  execFileSync(
    join(bin, 'sealed-secret-init'),
    ['--root', join(dir, 'sealed'), '--cdh-socket', `unix://${cdhSock}`],
    { stdio: 'ignore' },
  );
  checkFlowC(dir, expected);
}

/**
 * The kata agent's CreateContainer requests of regorus' `web` suite through the gate (no agent behind
 * it, so allowed ones fail at the forward: the policy is evaluated either way).
 */
export async function gateRequests(port: number, vectors: string): Promise<number> {
  const lines = readFileSync(join(vectors, 'inputs.txt'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const client = await TtrpcClient.connect({ host: '127.0.0.1', port });
  let answered = 0;
  try {
    for (const l of lines) {
      const [ep, input] = parseJsonExact(l.replace('"ep":', '').replace(/,$/, '')) as [
        string,
        Record<string, unknown>,
      ];
      // The suite's first line is a policy switch, not a request.
      if (!ep.endsWith('Request')) continue;
      const bytes = encodeRequest(ep, input).bytes;
      const method = ep.slice(0, -'Request'.length);
      await client.call(AGENT_SERVICE, method, bytes, { timeoutMs: 10_000 }).catch(() => undefined);
      answered++;
    }
  } finally {
    client.close();
  }
  return answered;
}

/** The initdata the pod's guest reads: aa.toml, cdh.toml and the agent policy. */
export function initdataToml(aaToml: string, cdhToml: string, policyRego: string): string {
  const literal = (s: string) => {
    if (s.includes("'''")) throw new Error("initdata value contains '''");
    return `'''\n${s}'''`;
  };
  return `algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = ${literal(aaToml)}\n"cdh.toml" = ${literal(cdhToml)}\n"policy.rego" = ${literal(policyRego)}\n`;
}

/** Spawns a long-running process with its output discarded. */
export function daemon(cmd: string, args: string[], env?: NodeJS.ProcessEnv) {
  return spawn(cmd, args, { stdio: 'ignore', ...(env !== undefined && { env }) });
}
