import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import { ALLOW_ALL_RESOURCE_POLICY, KbsAdminClient } from '@broker/kbs-client';
import { makeLoopbackCert } from '@broker/kbs-client/testing';
import pino from 'pino';

export interface TestKbs {
  readonly url: string;
  /** PEM of the KBS certificate (self-signed, SAN 127.0.0.1), or undefined over plain HTTP. */
  readonly certPem: string | undefined;
  readonly admin: KbsAdminClient;
  readonly kbs: RunningKbs;
  close(): Promise<void>;
}

export async function startTestKbs(options: { https?: boolean } = {}): Promise<TestKbs> {
  const https = options.https ?? true;
  const dir = await mkdtemp(join(tmpdir(), 'aa-kbs-'));
  let http = 'sockets = ["127.0.0.1:0"]\ninsecure_http = true\n';
  let certPem: string | undefined;
  if (https) {
    certPem = makeLoopbackCert(dir, 'tls').cert;
    http = `sockets = ["127.0.0.1:0"]\nprivate_key = "${join(dir, 'tls.key')}"\ncertificate = "${join(dir, 'tls.pem')}"\n`;
  }
  const config = parseKbsConfigText(`
[http_server]
${http}
[admin]
authorization_mode = "InsecureAllowAll"
[attestation_token]
insecure_header_jwk = true
[[plugins]]
name = "resource"
type = "LocalFs"
dir_path = "${join(dir, 'repository')}"
`);
  const kbs = await startKbs(config, { logger: pino({ level: 'silent' }) });
  const url = kbs.urls[0] as string;
  const admin = new KbsAdminClient({
    url,
    adminToken: null,
    ...(certPem !== undefined && { certPem }),
    logger: { warn() {} },
  });
  await admin.setResourcePolicy(ALLOW_ALL_RESOURCE_POLICY);
  return {
    url,
    certPem,
    admin,
    kbs,
    async close() {
      await kbs.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A pino destination keeping every line, for assertions on what was (not) logged. */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join('\n');
  }
  messages(): string[] {
    return this.lines.map((l) => (JSON.parse(l) as { msg?: string }).msg ?? '');
  }
}
