import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { attestation, reference } from './index.js';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const committed = join(pkg, 'src', 'generated');

describe('generated code', () => {
  const out = mkdtempSync(join(tmpdir(), 'trustee-protos-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('is what scripts/generate.mjs writes from protos/ (regenerate after changing a proto)', () => {
    execFileSync(process.execPath, [join(pkg, 'scripts', 'generate.mjs'), out], { stdio: 'pipe' });
    const names = readdirSync(out).sort();
    expect(names).toEqual(readdirSync(committed).sort());
    for (const name of names) {
      expect(readFileSync(join(out, name), 'utf8'), name).toBe(readFileSync(join(committed, name), 'utf8'));
    }
  });
});

describe('wire format', () => {
  it('encodes proto3 optional presence: an absent query result differs from an empty one', () => {
    const absent = reference.ReferenceValueQueryResponse.encode({}).finish();
    const empty = reference.ReferenceValueQueryResponse.encode({ referenceValueResults: '' }).finish();
    expect([...absent]).toEqual([]);
    // field 1, wire type 2 (length-delimited), length 0
    expect([...empty]).toEqual([0x0a, 0x00]);
    expect(reference.ReferenceValueQueryResponse.decode(empty).referenceValueResults).toBe('');
    expect(reference.ReferenceValueQueryResponse.decode(absent).referenceValueResults).toBeUndefined();
  });

  it('keeps the field numbers of trustee (evidence is 3, structured runtime data 5)', () => {
    const bytes = attestation.IndividualAttestationRequest.encode({
      tee: 'sample',
      evidence: 'e',
      structuredRuntimeData: '{}',
      runtimeDataHashAlgorithm: '',
    }).finish();
    expect(Buffer.from(bytes).toString('hex')).toBe('0a0673616d706c651a01652a027b7d');
  });

  it('serves the paths trustee clients call', () => {
    expect(attestation.AttestationServiceService.attestationEvaluate.path).toBe(
      '/attestation.AttestationService/AttestationEvaluate',
    );
    expect(reference.ReferenceValueProviderServiceService.registerReferenceValue.path).toBe(
      '/reference.ReferenceValueProviderService/RegisterReferenceValue',
    );
  });
});
