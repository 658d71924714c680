// trustee's validate_ppcie: twelve devices forming 8 GPUs × 4 switches add a `ppcie` result.
import { describe, expect, it } from 'vitest';
import type { VerifierResult } from '../verifier.js';
import { ppcieResult } from './ppcie.js';

const pdi = (kind: string, i: number) => `${kind}${String(i).padStart(15, '0')}`;
const switches = [0, 1, 2, 3].map((i) => pdi('s', i));
const gpus = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => pdi('g', i));
const UNUSED = '0000000000000000';

function topology(): VerifierResult[] {
  return [
    ...gpus.map((g) => ({
      class: 'gpu' as const,
      claims: { 'x-nvidia-gpu-switch-pdis': [...switches, UNUSED, UNUSED], pdi: g },
    })),
    ...switches.map((s) => ({
      class: 'switch' as const,
      claims: { 'x-nvidia-switch-pdi': s, 'x-nvidia-switch-gpu-pdis': gpus },
    })),
  ];
}

describe('PPCIE topology', () => {
  it('8 GPUs each on 4 switches and 4 switches each on 8 GPUs form one', () => {
    expect(ppcieResult(topology())).toEqual({ claims: { switch_count: 4, gpu_count: 8 }, class: 'ppcie' });
  });

  it('eleven devices, a GPU on three switches, or a switch naming a ninth GPU do not', () => {
    expect(ppcieResult(topology().slice(1))).toBeUndefined();
    const threeLinks = topology();
    threeLinks[0] = { class: 'gpu', claims: { 'x-nvidia-gpu-switch-pdis': switches.slice(0, 3) } };
    expect(ppcieResult(threeLinks)).toBeUndefined();
    const ninth = topology();
    ninth[11] = {
      class: 'switch',
      claims: {
        'x-nvidia-switch-pdi': switches[3],
        'x-nvidia-switch-gpu-pdis': [...gpus.slice(1), pdi('g', 9)],
      },
    };
    expect(ppcieResult(ninth)).toBeUndefined();
  });

  it('local GPU claims (no PDIs) never form one', () => {
    const local = Array.from({ length: 12 }, () => ({ class: 'gpu' as const, claims: { arch: 'Hopper' } }));
    expect(ppcieResult(local)).toBeUndefined();
  });
});
