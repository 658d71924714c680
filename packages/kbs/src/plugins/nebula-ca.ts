// The `nebula-ca` plugin (trustee nebula_ca.rs, kbs/docs/plugins/nebula_ca.md): a CA for a Nebula overlay
// network that attested nodes join. At start it uses `<work_dir>/ca/ca.{crt,key}`, creating both with
// `nebula-cert ca` when neither exists. `GET /kbs/v0/nebula-ca/credential?name=…&ip=…` (after an
// attestation token and the resource policy) signs a fresh node certificate and key with `nebula-cert
// sign` in a private directory under work_dir, checks it with `nebula-cert verify`, removes the
// directory, and answers trustee's `{"node_crt":[bytes],"node_key":[bytes],"ca_crt":[bytes]}` (serde's
// Vec<u8>), JWE-encrypted to the TEE key. Nothing is kept per request.
import { constants } from 'node:fs';
import { access, mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { KbsServiceError } from '../errors.js';
import { type BuiltinPlugin, type PluginCall, PluginRequestError } from './builtin.js';
import { caArguments, NEBULA_CA_PLUGIN_NAME, type NebulaCaPluginConfig } from './nebula-ca-config.js';
import { NebulaCert } from './nebula-cert.js';
import { parseNebulaCredentialParams, signArguments } from './nebula-params.js';

/** Signing is cheap but spawns processes: more concurrent requests than this are refused. */
export const MAX_CONCURRENT_CREDENTIALS = 4;
/** Nebula certificates and keys are a few hundred bytes (PEM). */
const MAX_PEM_BYTES = 64 * 1024;

async function exists(path: string): Promise<boolean> {
  try {
    await access(path, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

/** Reads a file the tool wrote, refusing one larger than a certificate can be. */
async function readBounded(path: string): Promise<Buffer> {
  const fh = await open(path, 'r');
  try {
    const { size } = await fh.stat();
    if (size > MAX_PEM_BYTES)
      throw new KbsServiceError('NEBULA_CERT_FAILED', `${path} is ${size} bytes, more than ${MAX_PEM_BYTES}`);
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

export interface NebulaCaPluginOptions {
  readonly logger?: Logger;
  /** Deadline of each `nebula-cert` run. */
  readonly toolTimeoutMs?: number;
}

export class NebulaCaPlugin implements BuiltinPlugin {
  readonly name = NEBULA_CA_PLUGIN_NAME;
  private inFlight = 0;

  private constructor(
    private readonly tool: NebulaCert,
    readonly workDir: string,
    readonly caCrt: string,
    private readonly caKey: string,
  ) {}

  /** trustee's NebulaCaPlugin::try_from: the KBS does not start without a usable CA. */
  static async start(
    config: NebulaCaPluginConfig,
    options: NebulaCaPluginOptions = {},
  ): Promise<NebulaCaPlugin> {
    const tool = new NebulaCert(config.nebulaCertBinPath, options.toolTimeoutMs);
    const version = await tool.version();
    const caDir = join(config.workDir, 'ca');
    await mkdir(caDir, { recursive: true, mode: 0o700 });
    const crt = join(caDir, 'ca.crt');
    const key = join(caDir, 'ca.key');
    const [haveCrt, haveKey] = await Promise.all([exists(crt), exists(key)]);
    if (!haveCrt && !haveKey) {
      await tool.run(['ca', ...caArguments(config.ca), '-out-crt', crt, '-out-key', key]);
      options.logger?.info({ crt }, 'self-signed Nebula CA created');
    } else if (!haveCrt || !haveKey) {
      throw new KbsServiceError(
        'PLUGIN_INIT_FAILED',
        `Nebula CA not found: ${haveCrt ? key : crt} is missing beside ${haveCrt ? crt : key}`,
      );
    }
    // A CA the tool cannot read is refused now rather than at the first request.
    await tool.run(['print', '-path', crt]);
    options.logger?.info(
      { crt, key, nebulaCert: config.nebulaCertBinPath, version },
      'Nebula CA plugin ready',
    );
    return new NebulaCaPlugin(tool, config.workDir, crt, key);
  }

  validateAuth(): boolean {
    return false;
  }

  encrypted(): boolean {
    return true;
  }

  async handle(call: PluginCall): Promise<Uint8Array> {
    if (call.path.length !== 1)
      throw new PluginRequestError('Illegal path. Only one path segment is supported');
    if (call.method !== 'GET') throw new PluginRequestError('Illegal HTTP method. Only GET is supported');
    if (call.path[0] !== 'credential') {
      throw new PluginRequestError(`${JSON.stringify((call.path[0] ?? '').slice(0, 64))} not supported`);
    }
    const params = parseNebulaCredentialParams(call.query);
    if (this.inFlight >= MAX_CONCURRENT_CREDENTIALS) {
      throw new PluginRequestError('too many credential requests in progress; retry');
    }
    this.inFlight++;
    try {
      return await this.credential(signArguments(params));
    } finally {
      this.inFlight--;
    }
  }

  private async credential(args: string[]): Promise<Uint8Array> {
    const dir = await mkdtemp(join(this.workDir, 'credential-'));
    try {
      const nodeKey = join(dir, 'node.key');
      const nodeCrt = join(dir, 'node.crt');
      await this.tool.run([
        'sign',
        ...args,
        '-ca-key',
        this.caKey,
        '-ca-crt',
        this.caCrt,
        '-out-key',
        nodeKey,
        '-out-crt',
        nodeCrt,
      ]);
      await this.tool.run(['verify', '-ca', this.caCrt, '-crt', nodeCrt]);
      const [crt, key, ca] = await Promise.all([
        readBounded(nodeCrt),
        readBounded(nodeKey),
        readBounded(this.caCrt),
      ]);
      const out = { node_crt: [...crt], node_key: [...key], ca_crt: [...ca] };
      return new TextEncoder().encode(JSON.stringify(out));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}
