// Azure sizes of peer-pods-cm (AZURE_INSTANCE_SIZE, AZURE_INSTANCE_SIZES, the spec's CLOUD_INSTANCE_SIZE): only
// confidential VM sizes, so a typo or a non-confidential size
// is caught before the cloud-api-adaptor tries to create a VM that cannot attest.

export type InstanceTee = 'snp' | 'tdx';

export interface InstanceSize {
  /** Azure's spelling, e.g. `Standard_DC4as_v5`. */
  readonly name: string;
  readonly tee: InstanceTee;
  readonly vcpus: number;
}

/** vCPU counts of the DCasv5/DCadsv5 (AMD SEV-SNP) and DCesv5/DCedsv5 (Intel TDX) series. */
export const CONFIDENTIAL_VCPUS = [2, 4, 8, 16, 32, 48, 64, 96] as const;

const SIZE = /^standard_dc(\d{1,3})(a|e)(d?)s_v5$/i;

/** `Standard_DC<n>as_v5` / `…ads_v5` (SNP) or `Standard_DC<n>es_v5` / `…eds_v5` (TDX); undefined otherwise. */
export function parseInstanceSize(s: string): InstanceSize | undefined {
  const m = SIZE.exec(s);
  if (m === null) return undefined;
  const vcpus = Number(m[1]);
  if (!(CONFIDENTIAL_VCPUS as readonly number[]).includes(vcpus) || m[1]?.startsWith('0')) return undefined;
  const family = (m[2] as string).toLowerCase();
  const disk = (m[3] as string).toLowerCase();
  return { name: `Standard_DC${vcpus}${family}${disk}s_v5`, tee: family === 'a' ? 'snp' : 'tdx', vcpus };
}
