// Every guest REST API error shares ApiServerError and carries a `code`.
import { describe, expect, it } from 'vitest';
import { BackendError } from './backends.js';
import { ApiServerError } from './errors.js';
import { PluginListError, parsePluginList } from './plugins.js';
import { AaelEventError, BodyTooLargeError, parseAaelEvent } from './router.js';
import { RuntimeDataError } from './runtime-data.js';
import { InvalidBindAddress, parseBindAddress } from './server.js';

describe('api-server-rest errors', () => {
  it('share ApiServerError and name what failed in code', () => {
    const cases: [ApiServerError, string][] = [
      [new BackendError('why'), 'BACKEND_FAILED'],
      [new BodyTooLargeError(10), 'BODY_TOO_LARGE'],
      [new AaelEventError('why'), 'AAEL_EVENT_INVALID'],
      [new RuntimeDataError('why'), 'RUNTIME_DATA_INVALID'],
      [new InvalidBindAddress('why'), 'BIND_ADDRESS_INVALID'],
      [new PluginListError('why'), 'PLUGINS_INVALID'],
    ];
    for (const [e, code] of cases) {
      expect(e).toBeInstanceOf(ApiServerError);
      expect(e.code).toBe(code);
    }
    expect(() => parseBindAddress('localhost:8006')).toThrow(
      expect.objectContaining({ code: 'BIND_ADDRESS_INVALID' }),
    );
    expect(() => parsePluginList('resource')).toThrow(expect.objectContaining({ code: 'PLUGINS_INVALID' }));
    expect(() => parseAaelEvent(Buffer.from('{'))).toThrow(
      expect.objectContaining({ code: 'AAEL_EVENT_INVALID' }),
    );
  });
});
