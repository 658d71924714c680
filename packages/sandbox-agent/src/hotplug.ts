/**
 * OnlineCPUMem, as kata's agent does it after the hypervisor hot-plugs CPUs or memory: offline CPUs
 * (`/sys/devices/system/cpu/cpuN/online` reading 0) are brought online until the request's number is
 * reached, looking again every 50 ms for up to 5 s while the new CPUs appear; unless `cpu_only`, every
 * offline memory block (`/sys/devices/system/memory/memoryN/online`) is brought online too.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidRequest, RuntimeFailed } from './errors.js';
import type { Decoded } from './proto.js';

const ATTEMPTS = 100;
const PAUSE_MS = 50;
/** More than a guest has: a larger request is refused before sysfs is touched. */
const MAX_CPUS = 4096;

/** Brings offline entries named `<prefix><number>` under `dir` online, at most `max`; the count done. */
async function online(dir: string, prefix: string, max: number): Promise<number> {
  const names = await readdir(dir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return [] as string[];
    throw e;
  });
  const pattern = new RegExp(`^${prefix}[0-9]+$`);
  let done = 0;
  for (const name of names
    .filter((n) => pattern.test(n))
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))) {
    if (done >= max) break;
    const file = join(dir, name, 'online');
    const state = await readFile(file, 'utf8').catch(() => undefined); // cpu0 often has no switch
    if (state?.trim() !== '0') continue;
    await writeFile(file, '1');
    done++;
  }
  return done;
}

export async function onlineCpuMem(sysfs: string, req: Decoded): Promise<void> {
  const wanted = Number(req.nb_cpus ?? 0);
  if (!Number.isInteger(wanted) || wanted < 0 || wanted > MAX_CPUS)
    throw new InvalidRequest(`invalid number of CPUs ${wanted}`);
  if (wanted > 0) {
    let done = 0;
    for (let attempt = 0; done < wanted; attempt++) {
      if (attempt === ATTEMPTS)
        throw new RuntimeFailed(`brought ${done} of ${wanted} CPU(s) online; no other CPU is offline`);
      if (attempt > 0) await sleep(PAUSE_MS);
      done += await online(join(sysfs, 'devices/system/cpu'), 'cpu', wanted - done);
    }
  }
  if (!req.cpu_only) await online(join(sysfs, 'devices/system/memory'), 'memory', Number.POSITIVE_INFINITY);
}
