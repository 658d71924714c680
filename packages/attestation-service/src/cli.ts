// The attestation service's commands: `grpc-as` and `restful-as` with trustee's command lines (the
// binaries its docker-compose, Helm chart and operator run), and `attestation-service`, both front ends
// in one process.

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
  runCommand,
  UsageError,
  untilStopSignal,
} from '@broker/cli';
import {
  type RvpsClientOptions,
  readPemFile,
  routeGrpcLogs,
  SECURITY_HELP,
  SECURITY_OPTIONS,
  serverSecurity,
} from '@broker/rvps-core';
import { DEFAULT_AS_SOCKET, DEFAULT_RESTFUL_AS_SOCKET, loadAsConfig, parseAsConfig } from './config.js';
import { startAsGrpcServer } from './grpc.js';
import { startAsRestServer } from './rest.js';
import { openAttestationService } from './service.js';

export const AS_VERSION = '0.1.0';

const WRITES =
  'set attestation policies (SetAttestationPolicy, POST /policy) and register reference values (RegisterReferenceValue)';

const GRPC_DESCRIPTION = `attestation.AttestationService (AttestationEvaluate, SetAttestationPolicy, GetAttestationChallenge),
the RVPS service (reference.ReferenceValueProviderService) and grpc.health.v1.Health on one port,
which also answers plain HTTP/1.1 GET /.well-known/jwks.json (the token signer's JWK Set).`;

const REST_ROUTES = `POST /attestation, POST /challenge, POST and GET /policy,
GET /.well-known/jwks.json, GET /healthz`;

const COMMON_HELP = `  -c, --config-file <FILE>  trustee's AS configuration JSON [default: built-in defaults]`;

const TAIL_HELP = `      --rvps-auth-private-key <FILE>  PEM private key: registrations forwarded to a GrpcRemote RVPS
                                  carry an admin JWT it signs (an RVPS with --admin-public-key)
      --rvps-cert-file <FILE>     PEM CA certificates trusted for an https:// GrpcRemote RVPS
                                  [default: the system roots]
      --rvps-client-cert <FILE>   PEM client certificate presented to an https:// GrpcRemote RVPS
      --rvps-client-key <FILE>    its private key (an RVPS with --client-ca)
${SECURITY_HELP}
${LOG_FORMAT_HELP}
  -h, --help                Print help
  -V, --version             Print version
`;

function grpcHelp(name: string): string {
  return `Usage: ${name} [-c FILE] [-s HOST:PORT]${name === 'attestation-service' ? ' [--rest HOST:PORT]' : ''} [OPTIONS]

trustee's gRPC attestation service (grpc-as) on the KBS's built-in one:
${GRPC_DESCRIPTION}${
  name === 'attestation-service' ? `\nWith --rest also trustee's restful-as routes:\n${REST_ROUTES}.` : ''
}
Stops on SIGTERM or SIGINT.

Options:
${COMMON_HELP}
  -s, --socket <ADDRESS>    gRPC listen address, HTTP/2 [default: ${DEFAULT_AS_SOCKET}]
${name === 'attestation-service' ? '      --rest <ADDRESS>      REST listen address, HTTP/1.1 (off unless given)\n' : ''}${TAIL_HELP}`;
}

const RESTFUL_HELP = `Usage: restful-as [-c FILE] [-s HOST:PORT] [-r ORIGIN...] [OPTIONS]

trustee's RESTful attestation service (restful-as) on the KBS's built-in one:
${REST_ROUTES}.
Stops on SIGTERM or SIGINT.

Options:
${COMMON_HELP}
  -s, --socket <ADDRESS>    REST listen address, HTTP/1.1 [default: ${DEFAULT_RESTFUL_AS_SOCKET}]
  -r, --allowed_origin <ORIGIN>  browser origin (http(s)://host[:port]) allowed by CORS; repeatable or
                            comma-separated [default: none]
${TAIL_HELP}`;

type Mode = 'attestation-service' | 'grpc-as' | 'restful-as';

const OPTIONS = {
  'config-file': { type: 'string', short: 'c' },
  socket: { type: 'string', short: 's' },
  rest: { type: 'string' },
  'rvps-auth-private-key': { type: 'string' },
  'rvps-cert-file': { type: 'string' },
  'rvps-client-cert': { type: 'string' },
  'rvps-client-key': { type: 'string' },
  allowed_origin: { type: 'string', short: 'r', multiple: true },
  ...SECURITY_OPTIONS,
  ...LOG_FORMAT_OPTION,
} as const;

function optionsOf(mode: Mode) {
  const { rest, allowed_origin, ...common } = OPTIONS;
  if (mode === 'attestation-service') return { ...common, rest };
  if (mode === 'restful-as') return { ...common, allowed_origin };
  return common;
}

/** How this service presents itself to a GrpcRemote RVPS: TLS trust, client certificate, admin JWT. */
function remoteRvpsOptions(values: {
  'rvps-auth-private-key'?: string | undefined;
  'rvps-cert-file'?: string | undefined;
  'rvps-client-cert'?: string | undefined;
  'rvps-client-key'?: string | undefined;
}): RvpsClientOptions {
  const cert = values['rvps-client-cert'];
  const key = values['rvps-client-key'];
  if ((cert === undefined) !== (key === undefined)) {
    throw new UsageError('--rvps-client-cert and --rvps-client-key go together');
  }
  const authKey = values['rvps-auth-private-key'];
  const pem = authKey === undefined ? undefined : readPemFile(authKey).toString('utf8');
  const ca = values['rvps-cert-file'];
  return {
    ...(ca !== undefined && { caCert: readPemFile(ca) }),
    ...(cert !== undefined &&
      key !== undefined && { clientCert: { certChain: readPemFile(cert), privateKey: readPemFile(key) } }),
    ...(pem !== undefined && { token: () => signAdminToken(pem, { lifetimeSeconds: 300 }) }),
  };
}

function origins(values: readonly string[] | undefined): string[] {
  const list = (values ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
  for (const o of list) {
    if (!/^https?:\/\/[^/\s]+$/.test(o)) {
      throw new UsageError(
        `--allowed_origin ${JSON.stringify(o.slice(0, 100))}: must be http(s)://host[:port]`,
      );
    }
  }
  return list;
}

function serve(mode: Mode, argv: string[], io: CommandIo, stop: () => Promise<unknown>): Promise<number> {
  return runCommand(
    {
      name: mode,
      version: AS_VERSION,
      help: mode === 'restful-as' ? RESTFUL_HELP : grpcHelp(mode),
      options: optionsOf(mode) as typeof OPTIONS,
    },
    argv,
    async ({ values }) => {
      // As PID 1 a process ignores SIGTERM it has no handler for: listen for it from the start, so a
      // stop asked for while starting takes effect as soon as the service is up.
      const stopping = stop === untilStopSignal ? untilStopSignal() : undefined;
      const format = choice<LogFormat>('log-format', values['log-format'], LOG_FORMATS);
      const allowedOrigins = origins(values.allowed_origin);
      const security = await serverSecurity(values);
      const logger = createLogger({ name: mode, ...(format !== undefined && { format }) });
      routeGrpcLogs(logger);
      const path = values['config-file'];
      const settings = path === undefined ? parseAsConfig({}) : loadAsConfig(path);
      for (const w of settings.warnings) logger.warn(w);
      if (!security.auth.enabled) logger.warn(openWritesWarning('this attestation service', WRITES));
      const tls = security.tls;
      const writes = security.auth.enabled ? security.auth.methods : 'open';
      const remoteRvps = remoteRvpsOptions(values);
      if (Object.keys(remoteRvps).length > 0 && settings.rvps.type !== 'GrpcRemote') {
        logger.warn('the --rvps-* options are not used: rvps_config is not GrpcRemote');
      }
      const opened = await openAttestationService(settings, logger, { remoteRvps });
      try {
        const grpcAddress = mode === 'restful-as' ? undefined : (values.socket ?? DEFAULT_AS_SOCKET);
        const restAddress =
          mode === 'restful-as' ? (values.socket ?? DEFAULT_RESTFUL_AS_SOCKET) : values.rest;
        const server =
          grpcAddress === undefined
            ? undefined
            : await startAsGrpcServer({
                service: opened.service,
                rvps: opened.rvps,
                address: grpcAddress,
                logger,
                auth: security.auth,
                ...(tls !== undefined && { tls }),
              });
        if (server !== undefined) {
          logger.info(
            {
              address: grpcAddress,
              port: server.port,
              rvps: settings.rvps.type,
              tls: tls !== undefined,
              writes,
            },
            'attestation service listening',
          );
        }
        const rest =
          restAddress === undefined
            ? undefined
            : await startAsRestServer(opened, restAddress, logger, tls, {
                auth: security.auth,
                allowedOrigins,
              }).catch(async (e: unknown) => {
                await server?.close();
                throw e;
              });
        if (rest !== undefined) {
          logger.info(
            {
              address: restAddress,
              port: rest.port,
              rvps: settings.rvps.type,
              tls: tls !== undefined,
              writes,
            },
            'REST attestation service listening',
          );
        }
        const signal = await (stopping ?? stop());
        logger.info({ signal }, 'attestation service stopping');
        await rest?.close();
        await server?.close();
      } finally {
        await opened.close();
      }
      return 0;
    },
    io,
  );
}

/** `attestation-service`: the gRPC service (`-s`), and the REST one too with `--rest`. */
export function attestationServiceMain(
  argv: string[],
  io: CommandIo = processIo,
  stop: () => Promise<unknown> = untilStopSignal,
): Promise<number> {
  return serve('attestation-service', argv, io, stop);
}

/** `grpc-as`: trustee's gRPC attestation service command line. */
export function grpcAsMain(
  argv: string[],
  io: CommandIo = processIo,
  stop: () => Promise<unknown> = untilStopSignal,
): Promise<number> {
  return serve('grpc-as', argv, io, stop);
}

/** `restful-as`: trustee's RESTful attestation service command line. */
export function restfulAsMain(
  argv: string[],
  io: CommandIo = processIo,
  stop: () => Promise<unknown> = untilStopSignal,
): Promise<number> {
  return serve('restful-as', argv, io, stop);
}
