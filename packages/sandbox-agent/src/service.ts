/**
 * `grpc.AgentService` and `grpc.Health` on a ttrpc server. All 42 RPCs of kata's agent.proto are
 * registered; those this agent does not implement answer UNIMPLEMENTED naming the RPC.
 */
import { AGENT_METHODS, AGENT_SERVICE, HEALTH_SERVICE } from '@broker/agent-policy';
import type { CallContext, TtrpcServer, UnaryHandler } from '@broker/ttrpc';
import type { SandboxAgent } from './agent.js';
import { UnimplementedRpc } from './errors.js';
import { codec, type Decoded } from './proto.js';

export { AGENT_SERVICE, HEALTH_SERVICE };

/** The agent's version, as grpc.Health/Version reports it. */
export const AGENT_VERSION = '0.1.0';

type Handler = (req: Decoded, ctx: CallContext) => Promise<Decoded>;

const EMPTY: Decoded = {};

/** A handler answering google.protobuf.Empty once `run` is done. */
function empty(run: (req: Decoded, ctx: CallContext) => Promise<void>): Handler {
  return async (req, ctx) => {
    await run(req, ctx);
    return EMPTY;
  };
}

function handlers(agent: SandboxAgent): Record<string, Handler> {
  return {
    CreateSandbox: empty(async (req, ctx) => agent.createSandbox(req, ctx.signal)),
    DestroySandbox: empty(async () => agent.destroySandbox()),
    CreateContainer: empty(async (req, ctx) => agent.createContainer(req, ctx.signal)),
    StartContainer: empty(async (req) => agent.startContainer(req)),
    RemoveContainer: empty(async (req) => agent.removeContainer(req)),
    ExecProcess: empty(async (req) => agent.execProcess(req)),
    SignalProcess: empty(async (req) => agent.signalProcess(req)),
    WaitProcess: async (req, ctx) => ({ status: await agent.waitProcess(req, ctx.signal) }),
    ReadStdout: async (req, ctx) => ({ data: await agent.readStream(req, 'stdout', ctx.signal) }),
    ReadStderr: async (req, ctx) => ({ data: await agent.readStream(req, 'stderr', ctx.signal) }),
    WriteStdin: async (req) => ({ len: await agent.writeStdin(req) }),
    CloseStdin: empty(async (req) => agent.closeStdin(req)),
    TtyWinResize: empty(async (req) => agent.ttyWinResize(req)),
    CopyFile: empty(async (req) => agent.copyFile(req)),
    UpdateContainer: empty(async (req) => agent.updateContainer(req)),
    StatsContainer: async (req) => agent.statsContainer(req),
    GetOOMEvent: async (_req, ctx) => ({ container_id: await agent.oomEvent(ctx.signal) }),
    GetVolumeStats: async (req) => agent.volumeStats(req),
    PauseContainer: empty(async (req) => agent.pauseContainer(req)),
    ResumeContainer: empty(async (req) => agent.resumeContainer(req)),
    GetGuestDetails: async (req) => agent.guestDetails(req, AGENT_VERSION),
    ListInterfaces: async () => ({ Interfaces: await agent.network.listInterfaces() }),
    UpdateInterface: async (req) => agent.network.updateInterface(req.interface ?? null),
    ListRoutes: async () => ({ Routes: await agent.network.listRoutes() }),
    UpdateRoutes: async (req) => ({ Routes: await agent.network.updateRoutes(req.routes?.Routes ?? []) }),
    OnlineCPUMem: empty(async (req) => agent.onlineCpuMem(req)),
    SetGuestDateTime: empty(async (req) => agent.setGuestDateTime(req)),
    AddARPNeighbors: empty(async (req) => agent.network.addArpNeighbors(req.neighbors?.ARPNeighbors ?? [])),
  };
}

/** The response message of each implemented RPC that does not answer google.protobuf.Empty. */
export const RESPONSES: Readonly<Record<string, string>> = {
  WaitProcess: 'WaitProcessResponse',
  ReadStdout: 'ReadStreamResponse',
  ReadStderr: 'ReadStreamResponse',
  WriteStdin: 'WriteStreamResponse',
  GetGuestDetails: 'GuestDetailsResponse',
  StatsContainer: 'StatsContainerResponse',
  GetOOMEvent: 'OOMEvent',
  GetVolumeStats: 'VolumeStatsResponse',
  ListInterfaces: 'Interfaces',
  UpdateInterface: 'types.Interface',
  ListRoutes: 'Routes',
  UpdateRoutes: 'Routes',
};

/** The RPCs this agent implements, sorted. */
export const IMPLEMENTED_RPCS: readonly string[] = Object.freeze(
  Object.keys(handlers({} as SandboxAgent)).sort(),
);

/** The RPCs of kata's agent.proto this agent answers UNIMPLEMENTED, sorted. */
export const UNIMPLEMENTED_RPCS: readonly string[] = Object.freeze(
  Object.keys(AGENT_METHODS)
    .filter((m) => !IMPLEMENTED_RPCS.includes(m))
    .sort(),
);

/** Registers grpc.AgentService (all its RPCs) and grpc.Health on `server`. */
export function registerAgentService(server: TtrpcServer, agent: SandboxAgent): void {
  const implemented = handlers(agent);
  const methods: Record<string, UnaryHandler> = {};
  for (const [rpc, requestType] of Object.entries(AGENT_METHODS)) {
    const handler = implemented[rpc];
    if (!handler) {
      methods[rpc] = async () => {
        throw new UnimplementedRpc(rpc);
      };
      continue;
    }
    const request = codec(requestType);
    const response = codec(RESPONSES[rpc] ?? 'Empty');
    methods[rpc] = async (bytes, ctx) => response.encode(await handler(request.decode(bytes), ctx));
  }
  server.register(AGENT_SERVICE, methods);
  const check = codec('CheckRequest');
  const health = codec('HealthCheckResponse');
  const version = codec('VersionCheckResponse');
  server.register(HEALTH_SERVICE, {
    Check: async (bytes) => {
      check.decode(bytes);
      return health.encode({ status: 1 });
    },
    Version: async (bytes) => {
      check.decode(bytes);
      return version.encode({ grpc_version: AGENT_VERSION, agent_version: AGENT_VERSION });
    },
  });
}
