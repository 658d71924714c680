/** A trustee `sample` registration message carrying `values` (name → reference values). */
export function sampleMessage(values: Record<string, unknown>, version = '0.1.0'): string {
  return JSON.stringify({
    version,
    type: 'sample',
    payload: Buffer.from(JSON.stringify(values)).toString('base64'),
  });
}
export { makeTestPki, pem, type TestPki } from './pki.js';
