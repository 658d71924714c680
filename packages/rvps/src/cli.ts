// `rvps` (trustee's rvps binary) and `rvps-tool` (its client) on the shared command-line layer.
import { readFileSync, statSync } from 'node:fs';
import { openWritesWarning, signAdminToken } from '@broker/auth';
import {
  type CommandIo,
  choice,
  createLogger,
  LOG_FORMAT_HELP,
  LOG_FORMAT_OPTION,
  LOG_FORMATS,
  type LogFormat,
  processIo,
  required,
  runCommand,
  UsageError,
  untilStopSignal,
} from '@broker/cli';
import {
  createRvps,
  DEFAULT_RVPS_ADDRESS,
  DEFAULT_RVPS_CLIENT_ADDRESS,
  DEFAULT_RVPS_CONFIG_PATH,
  loadRvpsConfig,
  MAX_RVPS_MESSAGE_LENGTH,
  openRvpsStorage,
  RvpsClient,
  type RvpsClientOptions,
  RvpsError,
  readPemFile,
  routeGrpcLogs,
  SECURITY_HELP,
  SECURITY_OPTIONS,
  serverSecurity,
  startRvpsServer,
} from '@broker/rvps-core';

export const RVPS_VERSION = '0.1.0';

const RVPS_HELP = `Usage: rvps [-c FILE] [-a HOST:PORT]

trustee's reference value provider service over gRPC (reference.ReferenceValueProviderService):
RegisterReferenceValue stores a message's reference values, QueryReferenceValue reads one back.
Storage as the KBS's: Memory, LocalFs or LocalJson, from the configuration file. Also serves
grpc.health.v1.Health (Kubernetes grpc probes). Stops on SIGTERM or SIGINT.

Options:
  -c, --config <FILE>      trustee's rvps.json (or .toml) [default: ${DEFAULT_RVPS_CONFIG_PATH}; missing = Memory]
  -a, --address <ADDRESS>  Listen address, HTTP/2 (plaintext unless -t/-k) [default: ${DEFAULT_RVPS_ADDRESS}]
${SECURITY_HELP}
${LOG_FORMAT_HELP}
  -h, --help               Print help
  -V, --version            Print version
`;

export function rvpsMain(
  argv: string[],
  io: CommandIo = processIo,
  stop: () => Promise<unknown> = untilStopSignal,
): Promise<number> {
  return runCommand(
    {
      name: 'rvps',
      version: RVPS_VERSION,
      help: RVPS_HELP,
      options: {
        config: { type: 'string', short: 'c' },
        address: { type: 'string', short: 'a' },
        ...SECURITY_OPTIONS,
        ...LOG_FORMAT_OPTION,
      },
    },
    argv,
    async ({ values }) => {
      // As PID 1 a process ignores SIGTERM it has no handler for: listen for it from the start, so a
      // stop asked for while starting takes effect as soon as the service is up.
      const stopping = stop === untilStopSignal ? untilStopSignal() : undefined;
      const format = choice<LogFormat>('log-format', values['log-format'], LOG_FORMATS);
      const security = await serverSecurity(values);
      const logger = createLogger({ name: 'rvps', ...(format !== undefined && { format }) });
      routeGrpcLogs(logger);
      if (!security.auth.enabled)
        logger.warn(openWritesWarning('this RVPS', 'register reference values (RegisterReferenceValue)'));
      const configPath = values.config ?? DEFAULT_RVPS_CONFIG_PATH;
      const config = loadRvpsConfig(configPath);
      for (const w of config.warnings) logger.warn(w);
      const storage = await openRvpsStorage(config, {
        onEvent: (e) => {
          if (e.kind === 'disconnected')
            logger.error({ reason: e.reason }, 'PostgreSQL connection lost: requests fail until it returns');
          else if (e.kind === 'reconnected') logger.info('PostgreSQL connection restored');
        },
      });
      try {
        const address = values.address ?? DEFAULT_RVPS_ADDRESS;
        const server = await startRvpsServer({
          // A store other processes write to (another replica) is read on every query instead of cached.
          rvps: createRvps(storage, storage.isShared?.('reference_value') ? { cacheTtlMs: 0 } : {}),
          address,
          logger,
          auth: security.auth,
          ...(security.tls !== undefined && { tls: security.tls }),
        });
        logger.info(
          {
            address,
            port: server.port,
            storage: config.storageType,
            tls: security.tls !== undefined,
            writes: security.auth.enabled ? security.auth.methods : 'open',
          },
          'rvps listening',
        );
        const signal = await (stopping ?? stop());
        logger.info({ signal }, 'rvps stopping');
        await server.close();
      } finally {
        await storage.close();
      }
      return 0;
    },
    io,
  );
}

const TOOL_HELP = `Usage: rvps-tool <COMMAND> [OPTIONS]

A client of trustee's RVPS gRPC service, as trustee's rvps-tool.

Commands:
  register  Register reference values: --path <FILE> (the message JSON) [-a <ADDR>]
  query     Query reference values: --reference-value-id <ID> [-a <ADDR>]

Options:
  -h, --help     Print help
  -V, --version  Print version
`;

const ADDR_HELP = `  -a, --addr <ADDR>  The address of the RVPS, http://HOST:PORT or https://HOST:PORT [default: ${DEFAULT_RVPS_CLIENT_ADDRESS}]
      --cert-file <FILE>    PEM CA certificates trusted for an https:// RVPS [default: the system roots]
      --client-cert <FILE>  PEM client certificate for mutual TLS (needs --client-key)
      --client-key <FILE>   PEM private key of that certificate`;
const AUTH_HELP = `      --auth-private-key <FILE>  PEM private key: sign a short-lived admin JWT (role "admin") and send it as
                                 \`authorization: Bearer\` (for an RVPS started with --admin-public-key)`;

const CLIENT_OPTIONS = {
  addr: { type: 'string', short: 'a' },
  'cert-file': { type: 'string' },
  'client-cert': { type: 'string' },
  'client-key': { type: 'string' },
} as const;

function clientOptions(values: {
  'cert-file'?: string | undefined;
  'client-cert'?: string | undefined;
  'client-key'?: string | undefined;
  'auth-private-key'?: string | undefined;
}): RvpsClientOptions {
  const cert = values['client-cert'];
  const key = values['client-key'];
  if ((cert === undefined) !== (key === undefined)) {
    throw new UsageError('--client-cert and --client-key go together');
  }
  const authKey = values['auth-private-key'];
  const pem = authKey === undefined ? undefined : readPemFile(authKey).toString('utf8');
  return {
    ...(values['cert-file'] !== undefined && { caCert: readPemFile(values['cert-file']) }),
    ...(cert !== undefined &&
      key !== undefined && { clientCert: { certChain: readPemFile(cert), privateKey: readPemFile(key) } }),
    ...(pem !== undefined && { token: () => signAdminToken(pem, { lifetimeSeconds: 300 }) }),
  };
}

function readMessage(path: string): string {
  if (statSync(path).size > MAX_RVPS_MESSAGE_LENGTH) {
    throw new RvpsError('MESSAGE_TOO_LARGE', `${path} is larger than ${MAX_RVPS_MESSAGE_LENGTH} bytes`);
  }
  return readFileSync(path, 'utf8');
}

export function rvpsToolMain(argv: string[], io: CommandIo = processIo): Promise<number> {
  return runCommand(
    { name: 'rvps-tool', version: RVPS_VERSION, help: TOOL_HELP, subcommands: ['register', 'query'] },
    argv,
    ({ command, rest }) =>
      command === 'register'
        ? runCommand(
            {
              name: 'rvps-tool register',
              version: RVPS_VERSION,
              help: `Usage: rvps-tool register --path <FILE> [-a <ADDR>] [--auth-private-key <FILE>]\n\nSends the file's text as the registration message.\n\nOptions:\n${ADDR_HELP}\n${AUTH_HELP}\n  -p, --path <PATH>  The path to the provenance json file\n  -h, --help         Print help\n`,
              options: {
                ...CLIENT_OPTIONS,
                'auth-private-key': { type: 'string' },
                path: { type: 'string', short: 'p' },
              },
            },
            rest,
            async ({ values }) => {
              const message = readMessage(required('path', values.path));
              const client = new RvpsClient(
                values.addr ?? DEFAULT_RVPS_CLIENT_ADDRESS,
                undefined,
                clientOptions(values),
              );
              try {
                await client.register(message);
              } finally {
                client.close();
              }
              io.err('Register provenance succeeded.\n');
              return 0;
            },
            io,
          )
        : runCommand(
            {
              name: 'rvps-tool query',
              version: RVPS_VERSION,
              help: `Usage: rvps-tool query --reference-value-id <ID> [-a <ADDR>]\n\nPrints the stored value's JSON on stdout; nothing when the id is unknown.\n\nOptions:\n${ADDR_HELP}\n  -r, --reference-value-id <ID>  The id of the reference value\n  -h, --help                     Print help\n`,
              options: {
                ...CLIENT_OPTIONS,
                'reference-value-id': { type: 'string', short: 'r' },
              },
            },
            rest,
            async ({ values }) => {
              const id = required('reference-value-id', values['reference-value-id']);
              const client = new RvpsClient(
                values.addr ?? DEFAULT_RVPS_CLIENT_ADDRESS,
                undefined,
                clientOptions(values),
              );
              try {
                const value = await client.query(id);
                if (value === undefined) io.err('No reference values found for the given id\n');
                else io.out(`${value}\n`);
              } finally {
                client.close();
              }
              return 0;
            },
            io,
          ),
    io,
  );
}
