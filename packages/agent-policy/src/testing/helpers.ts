/** Test helpers (not exported): temp dirs, a TypeScript stand-in agent, the regorus kata inputs, log capture. */

import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { type CallContext, TtrpcError, TtrpcServer } from '@broker/ttrpc';
import { AGENT_METHODS, AGENT_SERVICE, HEALTH_SERVICE } from '../agent-proto.js';
import { parseJsonExact } from '../cli.js';
import type { GateLogger } from '../gate.js';

export const KATA_FIXTURES = vector('regorus/kata');
export const KATA_POLICIES = vector('kata/policies');

export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'agent-policy-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export interface ReceivedCall {
  readonly service: string;
  readonly method: string;
  readonly payload: Uint8Array;
  readonly metadata: Record<string, readonly string[]>;
  readonly deadline: number | undefined;
}

/** `ReadStreamResponse{data: "stand-in output\n"}`. */
export const STAND_IN_OUTPUT = new Uint8Array([0x0a, 16, ...new TextEncoder().encode('stand-in output\n')]);

/**
 * A stand-in kata agent on @broker/ttrpc that records every call. Empty answers, except ReadStdout and
 * ReadStderr (some output) and `FutureMethod`. Metadata `x-stand-in-sleep-ms` delays the answer and
 * `x-stand-in-fail` (`<code>:<message>`) fails it.
 */
export class TsStandInAgent {
  readonly calls: ReceivedCall[] = [];
  readonly server = new TtrpcServer();

  constructor() {
    const methods: Record<string, (p: Uint8Array, ctx: CallContext) => Promise<Uint8Array>> = {};
    for (const m of [...Object.keys(AGENT_METHODS), 'FutureMethod'])
      methods[m] = (p, ctx) => this.handle(p, ctx);
    this.server.register(AGENT_SERVICE, methods);
    this.server.register(HEALTH_SERVICE, {
      Check: (p, ctx) => this.handle(p, ctx),
      Version: (p, ctx) => this.handle(p, ctx),
    });
  }

  private async handle(payload: Uint8Array, ctx: CallContext): Promise<Uint8Array> {
    this.calls.push({
      service: ctx.service,
      method: ctx.method,
      payload,
      metadata: Object.fromEntries(ctx.metadata),
      deadline: ctx.deadline,
    });
    const sleep = ctx.metadata.get('x-stand-in-sleep-ms')?.[0];
    if (sleep !== undefined) {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, Number(sleep));
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(t);
          reject(ctx.signal.reason);
        });
      });
    }
    const fail = ctx.metadata.get('x-stand-in-fail')?.[0];
    if (fail !== undefined) {
      const [code, ...msg] = fail.split(':');
      throw new TtrpcError(Number(code), msg.join(':'), {
        details: [
          { type_url: 'type.googleapis.com/stand.in.Detail', value: new TextEncoder().encode('detail') },
        ],
      });
    }
    if (ctx.method === 'ReadStdout' || ctx.method === 'ReadStderr') return STAND_IN_OUTPUT;
    if (ctx.method === 'FutureMethod') return new TextEncoder().encode('future');
    if (ctx.service === HEALTH_SERVICE && ctx.method === 'Check') return new Uint8Array([0x08, 0x01]);
    return new Uint8Array(0);
  }

  /** Calls of one method, in arrival order. */
  callsOf(method: string): ReceivedCall[] {
    return this.calls.filter((c) => c.method === method);
  }
}

/** The recorded requests of a regorus kata suite: `["ep":"<Name>",{...}],` per line. */
export function kataRequests(name: string): [string, Record<string, unknown>][] {
  return readFileSync(join(KATA_FIXTURES, name, 'inputs.txt'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const [ep, input] = parseJsonExact(l.replace('"ep":', '').replace(/,$/, '')) as [
        string,
        Record<string, unknown>,
      ];
      return [ep, input];
    });
}

export interface LogLine {
  readonly level: string;
  readonly msg: string;
  readonly obj: Record<string, unknown>;
}

/** A GateLogger that keeps every line, plus their JSON text for "never logged" checks. */
export function captureLogger(): GateLogger & { lines: LogLine[]; text(): string } {
  const lines: LogLine[] = [];
  const at =
    (level: string) =>
    (obj: object, msg: string): void => {
      lines.push({ level, msg, obj: obj as Record<string, unknown> });
    };
  return {
    lines,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    text: () => lines.map((l) => JSON.stringify({ ...l.obj, msg: l.msg })).join('\n'),
  };
}
