// In-memory CDH and AA backends for tests: they record calls and answer from tables.
import { type AttestationBackend, BackendError, ExtendResult, type ResourceBackend } from '../backends.js';

const utf8 = (s: string) => new TextEncoder().encode(s);

export class FakeDataHub implements ResourceBackend {
  readonly calls: string[] = [];
  readonly resources = new Map<string, Uint8Array>();
  /** When set, every call rejects with this. */
  failure: Error | null = null;
  closed = false;

  constructor(resources: Record<string, string | Uint8Array> = {}) {
    for (const [k, v] of Object.entries(resources))
      this.resources.set(k, typeof v === 'string' ? utf8(v) : v);
  }

  async getResource(uri: string): Promise<Uint8Array> {
    this.calls.push(uri);
    if (this.failure) throw this.failure;
    const r = this.resources.get(uri);
    if (r === undefined) throw new BackendError(`ttrpc request error: INTERNAL: [CDH] [ERROR]: no ${uri}`);
    return r;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

export class FakeAttestationAgent implements AttestationBackend {
  readonly calls: [string, ...unknown[]][] = [];
  tee = 'sample';
  additionalTees: string[] = [];
  extendResult: number = ExtendResult.OK;
  failure: Error | null = null;
  closed = false;

  #answer<T>(value: T): T {
    if (this.failure) throw this.failure;
    return value;
  }

  async getToken(tokenType: string): Promise<Uint8Array> {
    this.calls.push(['getToken', tokenType]);
    return this.#answer(utf8(JSON.stringify({ token: `token-${tokenType}`, tee_keypair: 'PEM' })));
  }

  async getEvidence(runtimeData: Uint8Array): Promise<Uint8Array> {
    this.calls.push(['getEvidence', runtimeData]);
    const report = Buffer.from(runtimeData).toString('base64');
    return this.#answer(utf8(JSON.stringify({ svn: '1', report_data: report })));
  }

  async getAdditionalEvidence(runtimeData: Uint8Array): Promise<Uint8Array> {
    this.calls.push(['getAdditionalEvidence', runtimeData]);
    return this.#answer(utf8(JSON.stringify({ sampledevice: Buffer.from(runtimeData).toString('hex') })));
  }

  async extendRuntimeMeasurement(domain: string, operation: string, content: string): Promise<number> {
    this.calls.push(['extendRuntimeMeasurement', domain, operation, content]);
    return this.#answer(this.extendResult);
  }

  async getTeeType(): Promise<string> {
    this.calls.push(['getTeeType']);
    return this.#answer(this.tee);
  }

  async getAdditionalTees(): Promise<string[]> {
    this.calls.push(['getAdditionalTees']);
    return this.#answer(this.additionalTees);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
