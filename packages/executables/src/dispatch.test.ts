// `--together`: several daemons in one process, started in order, stopped together.
import { describe, expect, it, vi } from 'vitest';
import { runTogether, type SharedMain, type StepMain, splitTogether } from './dispatch.js';

/** A daemon stand-in: records its life in `log`, serves until stopped, or ends with `exitWith`. */
function fake(
  name: string,
  log: string[],
  behaviour: { exitWith?: number; throws?: Error; neverReady?: boolean } = {},
): () => Promise<SharedMain> {
  return async () =>
    async (argv, { signal, ready }) => {
      log.push(`${name} start ${argv.join(' ')}`);
      if (behaviour.throws !== undefined) throw behaviour.throws;
      if (behaviour.exitWith !== undefined) {
        log.push(`${name} exit ${behaviour.exitWith}`);
        return behaviour.exitWith;
      }
      if (!behaviour.neverReady) {
        await new Promise((r) => setTimeout(r, 5));
        log.push(`${name} ready`);
        ready();
      }
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      log.push(`${name} stopped`);
      return 0;
    };
}

describe('splitTogether', () => {
  const shareable = ['attestation-agent', 'confidential-data-hub'];

  it('splits the command lines on --and', () => {
    expect(
      splitTogether(
        ['attestation-agent', '-c', 'aa.toml', '--and', 'confidential-data-hub', '-c', 'cdh.toml'],
        shareable,
      ),
    ).toEqual({
      lines: [
        ['attestation-agent', '-c', 'aa.toml'],
        ['confidential-data-hub', '-c', 'cdh.toml'],
      ],
    });
  });

  it('refuses a missing, unknown, unshareable or repeated command', () => {
    expect(splitTogether([], shareable)).toEqual({ error: expect.stringMatching(/command is missing/) });
    expect(splitTogether(['attestation-agent', '--and'], shareable)).toEqual({
      error: expect.stringMatching(/command is missing/),
    });
    expect(splitTogether(['api-server-rest'], shareable)).toEqual({
      error: expect.stringMatching(/'api-server-rest' cannot share a process/),
    });
    expect(splitTogether(['attestation-agent', '--and', 'attestation-agent'], shareable)).toEqual({
      error: expect.stringMatching(/given twice/),
    });
  });
});

describe('runTogether', () => {
  it('starts each command once the one before serves, and stops all when one ends', async () => {
    const log: string[] = [];
    const stopper = new AbortController();
    const shared = {
      a: fake('a', log),
      b: async (): Promise<SharedMain> => async (argv, options) => {
        // b ends by itself (as on a stop signal) once it served a moment.
        const inner = await fake('b', log)();
        setTimeout(() => stopper.abort(), 20);
        return inner(argv, { ...options, signal: AbortSignal.any([options.signal, stopper.signal]) });
      },
    };
    expect(await runTogether('x', shared, ['a', '-1', '--and', 'b', '-2'])).toBe(0);
    expect(log).toEqual(['a start -1', 'a ready', 'b start -2', 'b ready', 'b stopped', 'a stopped']);
  });

  it('does not start the next command when one ends before it serves; its status is the exit status', async () => {
    const log: string[] = [];
    const code = await runTogether('x', { a: fake('a', log, { exitWith: 1 }), b: fake('b', log) }, [
      'a',
      '--and',
      'b',
    ]);
    expect(code).toBe(1);
    expect(log).toEqual(['a start ', 'a exit 1']);
  });

  it('stops the others when a later command fails, and reports that failure', async () => {
    const log: string[] = [];
    const code = await runTogether('x', { a: fake('a', log), b: fake('b', log, { exitWith: 3 }) }, [
      'a',
      '--and',
      'b',
    ]);
    expect(code).toBe(3);
    expect(log).toEqual(['a start ', 'a ready', 'b start ', 'b exit 3', 'a stopped']);
  });

  it('rethrows an error that escaped a command, after stopping the others', async () => {
    const log: string[] = [];
    const boom = new Error('boom');
    await expect(
      runTogether('x', { a: fake('a', log), b: fake('b', log, { throws: boom }) }, ['a', '--and', 'b']),
    ).rejects.toBe(boom);
    expect(log).toEqual(['a start ', 'a ready', 'b start ', 'a stopped']);
  });

  it('runs a one-shot step between daemons: the next starts once it has ended, whatever its status', async () => {
    for (const status of [0, 2]) {
      const log: string[] = [];
      const stopper = new AbortController();
      const step = async (): Promise<StepMain> => async (argv) => {
        log.push(`s start ${argv.join(' ')}`);
        await new Promise((r) => setTimeout(r, 5));
        log.push(`s exit ${status}`);
        return status;
      };
      const b = async (): Promise<SharedMain> => async (argv, options) => {
        const inner = await fake('b', log)();
        setTimeout(() => stopper.abort(), 20);
        return inner(argv, { ...options, signal: AbortSignal.any([options.signal, stopper.signal]) });
      };
      const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
      try {
        const code = await runTogether(
          'x',
          { a: fake('a', log), b },
          ['a', '--and', 's', '-r', '--and', 'b'],
          {
            s: step,
          },
        );
        // The step's failure is reported, not the exit status: the daemons served and stopped cleanly.
        expect(code).toBe(0);
        expect(stderr.mock.calls.map((c) => String(c[0]))).toEqual(
          status === 0 ? [] : ['x: s ended with status 2; going on\n'],
        );
      } finally {
        stderr.mockRestore();
      }
      expect(log).toEqual([
        'a start ',
        'a ready',
        's start -r',
        `s exit ${status}`,
        'b start ',
        'b ready',
        'b stopped',
        'a stopped',
      ]);
    }
  });

  it('refuses a step name that is neither shareable nor a step', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await runTogether('x', { a: fake('a', []) }, ['a', '--and', 's'])).not.toBe(0);
    } finally {
      stderr.mockRestore();
    }
  });
});
