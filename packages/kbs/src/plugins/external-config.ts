// `[[plugins]] name = "external"` (trustee kbs/src/plugins/implementations/external_plugin.rs): gRPC
// backends, each reached under `/kbs/v0/external/<backend name>/...`. The scheme of `endpoint` picks
// the transport: `http://` plaintext, `https://` TLS verified against `ca_cert_path`.
import { ConfigError, type Section } from '@broker/cli';

export interface ExternalBackendConfig {
  /** The first path segment after `/kbs/v0/external/`. */
  readonly name: string;
  /** As written, e.g. `https://127.0.0.1:50052`. */
  readonly endpoint: string;
  /** `host:port`, the gRPC target. */
  readonly target: string;
  /** Set for `https://` endpoints: the PEM file of the CA the plugin's certificate must chain to. */
  readonly caCertPath?: string;
  /** Deadline of each call; absent: DEFAULT_PLUGIN_TIMEOUT_MS (trustee: none). */
  readonly timeoutMs?: number;
}

export interface ExternalPluginConfig {
  readonly backends: readonly ExternalBackendConfig[];
}

/** Backend names are one URL path segment. */
const BACKEND_NAME = /^[A-Za-z0-9._~-]{1,128}$/;
const ENDPOINT = /^(https?):\/\/([^/?#@\s]+?)\/?$/;

function parseBackend(b: Section): ExternalBackendConfig {
  const name = b.string('name');
  if (!BACKEND_NAME.test(name) || name === '.' || name === '..') {
    throw new ConfigError(
      `${b.where} name ${JSON.stringify(name.slice(0, 130))} must be one URL path segment (letters, digits, . _ ~ -)`,
    );
  }
  const endpoint = b.string('endpoint');
  const m = ENDPOINT.exec(endpoint);
  if (m === null) {
    throw new ConfigError(
      `${b.where} Backend '${name}': endpoint must start with \`http://\` or \`https://\` and name only host:port, got ${JSON.stringify(endpoint.slice(0, 200))}`,
    );
  }
  const tls = m[1] === 'https';
  // trustee's older form spells the mode out; when present it must agree with the scheme.
  const mode = b.optString('tls_mode');
  if (mode !== undefined && mode !== 'tls' && mode !== 'insecure') {
    throw new ConfigError(`${b.where} tls_mode: expected "tls" or "insecure", found ${JSON.stringify(mode)}`);
  }
  if (mode !== undefined && (mode === 'tls') !== tls) {
    throw new ConfigError(
      `${b.where} Backend '${name}': ${mode === 'tls' ? 'TLS mode requires https://' : 'insecure mode requires http://'} endpoint, got ${JSON.stringify(endpoint)}`,
    );
  }
  const caCertPath = b.optString('ca_cert_path');
  if (tls && caCertPath === undefined) {
    throw new ConfigError(
      `${b.where} Backend '${name}': \`https://\` endpoint requires \`ca_cert_path\` (PEM file for server certificate verification)`,
    );
  }
  const timeoutMs = b.optInt('timeout_ms', 1, 3_600_000);
  b.finish();
  return {
    name,
    endpoint,
    target: m[2] as string,
    ...(tls && caCertPath !== undefined && { caCertPath }),
    ...(timeoutMs !== undefined && { timeoutMs }),
  };
}

/** The `external` entry of `[[plugins]]` (its `name` already read). */
export function parseExternalPlugin(p: Section): ExternalPluginConfig {
  const backends = p.sectionArray('backends').map(parseBackend);
  p.finish();
  if (backends.length === 0) throw new ConfigError(`${p.where} External plugin configured with no backends`);
  const seen = new Set<string>();
  for (const b of backends) {
    if (seen.has(b.name)) {
      throw new ConfigError(`${p.where} Duplicate backend name '${b.name}' in external plugin config`);
    }
    seen.add(b.name);
  }
  return { backends };
}
