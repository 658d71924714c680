// dist/bin/kbs started on trustee's and trustee-operator's own configuration files (test/vectors), each
// followed by a sample-TEE handshake with dist/bin/kbs-client. The test rewrites only what cannot be
// kept on a test machine, in a temporary copy: the listen address, and absolute file paths, which move
// under the test's folder (the files they name are generated there). Relative paths (trustee's
// `./work/...`) stay as written and the KBS runs in that folder.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { binary, freePort, type Running, runToEnd, start, waitForListen } from './helpers/process.js';
import { makeKbsKeyFiles, SAMPLE_REFERENCE_VALUES } from './helpers/stack.js';
import { listenOn, relocate } from './helpers/upstream-config.js';

const root = mkdtempSync(join(tmpdir(), 'broker-upstream-configs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Writes a key file set's files where a configuration names them. */
function place(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(from, to);
}

interface Started {
  readonly url: string;
  readonly certFile?: string;
  readonly kbs: Running;
}

async function startOn(
  name: string,
  text: string,
  prepare: (dir: string, keys: ReturnType<typeof makeKbsKeyFiles>) => { https: boolean },
  env: NodeJS.ProcessEnv = {},
): Promise<Started> {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const keys = makeKbsKeyFiles(dir);
  const { https } = prepare(dir, keys);
  const port = await freePort();
  const configPath = join(dir, 'kbs-config.toml');
  writeFileSync(configPath, relocate(listenOn(text, port), dir));
  const kbs = start(binary('kbs'), ['--config-file', configPath], {
    cwd: dir,
    env: { ...process.env, ...env },
  });
  await waitForListen({ port }, kbs);
  return {
    url: `${https ? 'https' : 'http'}://127.0.0.1:${port}`,
    ...(https && { certFile: keys.tls.certPath }),
    kbs,
  };
}

/** A sample-TEE handshake through kbs-client; returns the EAR token's claims. */
async function handshake(s: Started): Promise<Record<string, unknown>> {
  const r = await runToEnd(binary('kbs-client'), [
    '--url',
    s.url,
    ...(s.certFile !== undefined ? ['--cert-file', s.certFile] : []),
    'attest',
  ]);
  expect(r.code, `${r.stderr}\n${s.kbs.output()}`).toBe(0);
  const payload = r.stdout.trim().split('.')[1] as string;
  return JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
}

const cpu0 = (claims: Record<string, unknown>) =>
  (claims.submods as Record<string, Record<string, unknown>>).cpu0 as Record<string, unknown>;

const running: Running[] = [];
afterAll(async () => {
  for (const k of running) await k.stop();
});

async function run(
  name: string,
  file: string,
  prepare: Parameters<typeof startOn>[2],
  env?: NodeJS.ProcessEnv,
): Promise<{ started: Started; claims: Record<string, unknown> }> {
  const started = await startOn(name, readFileSync(vector(file), 'utf8'), prepare, env);
  running.push(started.kbs);
  const claims = await handshake(started);
  return { started, claims };
}

const plainHttp = () => ({ https: false });

describe('dist/bin/kbs on upstream configuration files, then a sample-TEE handshake', () => {
  it('trustee kbs/config/kbs-config.toml', async () => {
    const { claims } = await run(
      'trustee-kbs-config',
      'trustee/configs/kbs/config/kbs-config.toml',
      plainHttp,
    );
    expect(cpu0(claims)['ear.status']).toBeDefined();
  });

  it('trustee kbs/config/kubernetes/base/kbs-config.toml', async () => {
    const { claims } = await run(
      'trustee-kubernetes-base',
      'trustee/configs/kbs/config/kubernetes/base/kbs-config.toml',
      (dir, keys) => {
        place(keys.adminPub, join(dir, 'kbs', 'kbs.pem'));
        return { https: false };
      },
    );
    expect(cpu0(claims)['ear.status']).toBeDefined();
  });

  it('trustee kbs/test/config/kbs.toml (HTTPS, token signer, tpm_verifier), with RUST_LOG=debug', async () => {
    const { started, claims } = await run(
      'trustee-test-kbs',
      'trustee/configs/kbs/test/config/kbs.toml',
      (dir, keys) => {
        const work = join(dir, 'work');
        place(keys.tls.keyPath, join(work, 'https.key'));
        place(keys.tls.certPath, join(work, 'https.crt'));
        place(keys.tokenCert, join(work, 'ca-cert.pem'));
        place(keys.tokenKey, join(work, 'token.key'));
        place(keys.tokenCert, join(work, 'token-cert-chain.pem'));
        place(keys.adminPub, join(work, 'kbs.pem'));
        return { https: true };
      },
      { RUST_LOG: 'debug' },
    );
    expect(cpu0(claims)['ear.status']).toBeDefined();
    const log = started.kbs.output();
    expect(log).toMatch(/"level":"debug"/);
    expect(log).toContain('tpm_verifier.trusted_ak_keys_dir is a legacy key and is ignored');
  });

  it('trustee kbs/test/config/resource-kbs.toml (no [attestation_service]: the built-in one)', async () => {
    const { claims } = await run(
      'trustee-resource-kbs',
      'trustee/configs/kbs/test/config/resource-kbs.toml',
      (dir, keys) => {
        place(keys.tokenCert, join(dir, 'work', 'ca-cert.pem'));
        place(keys.adminPub, join(dir, 'work', 'kbs.pem'));
        return { https: false };
      },
    );
    expect(cpu0(claims)['ear.status']).toBeDefined();
  });

  it('trustee-operator kbs-config-permissive.toml: reference values from the mounted LocalJson file', async () => {
    // The operator mounts its rvps-reference-values ConfigMap as the RVPS's LocalJson file.
    const values = Object.fromEntries(
      SAMPLE_REFERENCE_VALUES.map(([name, value, ...flags]) => [
        name as string,
        {
          expiration: '2030-01-01T00:00:00Z',
          value: flags.includes('--as-integer') ? Number(value) : [value],
        },
      ]),
    );
    const { started, claims } = await run(
      'operator-permissive',
      'trustee-operator/config/templates/kbs-config-permissive.toml',
      (dir) => {
        const file = join(dir, 'opt/confidential-containers/storage/local_json/reference_value');
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, JSON.stringify(values));
        return { https: false };
      },
    );
    expect(cpu0(claims)['ear.status']).toBe('affirming');
    expect(started.kbs.output()).toContain('worker_count = 4 (trustee: actix worker threads) is not applied');
  });

  it('trustee-operator kbs-config-restricted.toml, rendered for the default profile (HTTPS, signed tokens)', async () => {
    const { started, claims } = await run(
      'operator-restricted',
      'trustee-operator/rendered/kbs-config-restricted.toml',
      (dir, keys) => {
        place(keys.tls.keyPath, join(dir, 'etc/https-key/privateKey'));
        place(keys.tls.certPath, join(dir, 'etc/https-cert/certificate'));
        place(keys.tokenCert, join(dir, 'etc/attestation-cert/token.crt'));
        place(keys.tokenKey, join(dir, 'etc/attestation-key/token.key'));
        return { https: true };
      },
    );
    expect(cpu0(claims)['ear.status']).toBeDefined();
    expect(started.kbs.output()).toContain(
      'unknown key \\"attestation_token_type\\" in [attestation_token] is ignored',
    );
  });
});

describe("trustee-operator's restricted template, rendered", () => {
  // The operator executes it with Go's text/template and, when a TrusteeConfig sets no TLS, the data
  // {TlsProfile: "intermediate"} (internal/controller/tlsconfig.go): the vendored rendering is exactly that.
  it('test/vectors/trustee-operator/rendered is the template executed by Go text/template', async () => {
    const dir = join(root, 'go-template');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'main.go'),
      `package main

import (
	"os"
	"text/template"
)

type KbsConfigTemplateData struct {
	TlsProfile, TlsMinVersion, TlsMaxVersion, TlsCiphers, TlsGroups string
}

func main() {
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	t := template.Must(template.New("kbs-config").Parse(string(b)))
	if err := t.Execute(os.Stdout, &KbsConfigTemplateData{TlsProfile: "intermediate"}); err != nil {
		panic(err)
	}
}
`,
    );
    const r = await runToEnd(
      'go',
      ['run', join(dir, 'main.go'), vector('trustee-operator/config/templates/kbs-config-restricted.toml')],
      { env: { ...process.env, GO111MODULE: 'off', GOCACHE: join(dir, 'gocache'), GOFLAGS: '' } },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      readFileSync(vector('trustee-operator/rendered/kbs-config-restricted.toml'), 'utf8'),
    );
  });
});

describe('dist/bin/kbs on the other trustee test_data configurations', () => {
  // All parse; none names token trust material (insecure_header_jwk = false), so trustee's KBS
  // stops at its token verifier, before the admin API, and so does this one, with trustee's message.
  // coco-as-grpc-2.toml names a remote attestation service (coco_as_grpc), which this KBS reaches lazily.
  it.each(['coco-as-builtin-2.toml', 'coco-as-builtin-3.toml', 'coco-as-grpc-2.toml'])(
    "%s: parses, and the start stops at the token verifier as trustee's does",
    async (file) => {
      const dir = join(root, `trustee-${file}`);
      mkdirSync(dir, { recursive: true });
      const configPath = join(dir, 'kbs-config.toml');
      const text = readFileSync(vector(`trustee/configs/kbs/test_data/configs/${file}`), 'utf8');
      writeFileSync(configPath, relocate(listenOn(text, await freePort()), dir));
      const r = await runToEnd(binary('kbs'), ['--config-file', configPath]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('Cannot verify token since no trusted verification materials are provided');
    },
  );
});

describe('dist/bin/kbs on the trustee test_data configurations that name a remote service', () => {
  it.each([
    // Its remote RVPS (GrpcRemote) is read; HTTPS without key and certificate is what stops it.
    ['coco-as-builtin-1.toml', 'private_key and certificate missing'],
    ['intel-ta-3.toml', 'type: "intel_ta" (Intel Trust Authority) is not supported'],
  ])('%s: exit 1 with a clear "not supported" error', async (file, message) => {
    const dir = join(root, `refused-${file}`);
    mkdirSync(dir, { recursive: true });
    const configPath = join(dir, file);
    copyFileSync(vector(`trustee/configs/kbs/test_data/configs/${file}`), configPath);
    const r = await runToEnd(binary('kbs'), ['--config-file', configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(message);
  });
});
