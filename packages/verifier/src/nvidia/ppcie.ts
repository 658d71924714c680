// Protected PCIe (PPCIE): eight Hopper GPUs and four NVSwitches attested together. As trustee's
// validate_ppcie, a set of exactly twelve device results whose NRAS claims describe that topology
// (each GPU linked to four switches, each switch to eight GPUs) adds a `ppcie` result; anything
// else adds nothing. Local claims carry no PDIs, so only remote (NRAS) results can form one.
import type { VerifierResult } from '../verifier.js';

const strings = (v: unknown): string[] | undefined =>
  Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;

export function ppcieResult(devices: readonly VerifierResult[]): VerifierResult | undefined {
  if (devices.length !== 12) return undefined;
  const gpuPdis = new Set<string>();
  const switchPdis = new Set<string>();
  for (const d of devices) {
    if (d.class === 'gpu') {
      const links = strings(d.claims['x-nvidia-gpu-switch-pdis']);
      if (links === undefined) return undefined;
      // An all-zero PDI is an unused link.
      const used = links.filter((p) => !p.includes('0000000000000000'));
      if (used.length !== 4) return undefined;
      for (const p of used) switchPdis.add(p);
    } else if (d.class === 'switch') {
      const own = d.claims['x-nvidia-switch-pdi'];
      const links = strings(d.claims['x-nvidia-switch-gpu-pdis']);
      if (typeof own !== 'string' || links === undefined || links.length !== 8) return undefined;
      switchPdis.add(own);
      for (const p of links) gpuPdis.add(p);
    }
  }
  if (gpuPdis.size !== 8 || switchPdis.size !== 4) return undefined;
  return { claims: { switch_count: 4, gpu_count: 8 }, class: 'ppcie' };
}
