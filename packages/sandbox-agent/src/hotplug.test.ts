// OnlineCPUMem against a sysfs tree of the test's own: offline CPUs and memory blocks brought online,
// as many CPUs as asked, a CPU that appears late waited for, and refusals.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidRequest, RuntimeFailed } from './errors.js';
import { onlineCpuMem } from './hotplug.js';
import { tempDir } from './testing/index.js';

describe('OnlineCPUMem', () => {
  let sysfs: string;
  let cleanup: () => Promise<void>;
  const cpu = (n: number) => join(sysfs, `devices/system/cpu/cpu${n}/online`);
  const memory = (n: number) => join(sysfs, `devices/system/memory/memory${n}/online`);
  const set = async (file: string, state: string) => {
    await mkdir(join(file, '..'), { recursive: true });
    await writeFile(file, `${state}\n`);
  };
  const state = async (file: string) => (await readFile(file, 'utf8')).trim();

  beforeEach(async () => {
    let dir: string;
    ({ dir, cleanup } = await tempDir());
    sysfs = join(dir, 'sys');
    await mkdir(join(sysfs, 'devices/system/cpu/cpu0'), { recursive: true }); // the boot CPU: no switch
    await mkdir(join(sysfs, 'devices/system/cpu/cpufreq'), { recursive: true });
    for (const [n, s] of [
      [1, '1'],
      [2, '0'],
      [3, '0'],
      [10, '0'],
    ] as const)
      await set(cpu(n), s);
    for (const [n, s] of [
      [0, '1'],
      [1, '0'],
      [2, '0'],
    ] as const)
      await set(memory(n), s);
  });
  afterEach(() => cleanup());

  it('brings as many offline CPUs online as asked, in order, and every offline memory block', async () => {
    await onlineCpuMem(sysfs, { nb_cpus: 2, cpu_only: false });
    expect(await Promise.all([1, 2, 3, 10].map((n) => state(cpu(n))))).toEqual(['1', '1', '1', '0']);
    expect(await Promise.all([0, 1, 2].map((n) => state(memory(n))))).toEqual(['1', '1', '1']);
  });

  it('leaves memory alone when cpu_only, and does nothing for zero CPUs', async () => {
    await onlineCpuMem(sysfs, { nb_cpus: 0, cpu_only: true });
    await onlineCpuMem(sysfs, { nb_cpus: 1, cpu_only: true });
    expect(await Promise.all([2, 3].map((n) => state(cpu(n))))).toEqual(['1', '0']);
    expect(await state(memory(1))).toBe('0');
  });

  it('waits for a hot-plugged CPU that appears after the request', async () => {
    const done = onlineCpuMem(sysfs, { nb_cpus: 4, cpu_only: true });
    setTimeout(() => void set(cpu(11), '0'), 120);
    await done;
    expect(await Promise.all([2, 3, 10, 11].map((n) => state(cpu(n))))).toEqual(['1', '1', '1', '1']);
  });

  it('fails, saying how many it managed, when not enough CPUs are offline; refuses absurd counts', async () => {
    const e = await onlineCpuMem(sysfs, { nb_cpus: 5, cpu_only: true }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RuntimeFailed);
    expect((e as Error).message).toBe('brought 3 of 5 CPU(s) online; no other CPU is offline');
    await expect(onlineCpuMem(sysfs, { nb_cpus: 1_000_000 })).rejects.toBeInstanceOf(InvalidRequest);
  }, 20_000);
});
