// The guest API's errors share GuestApiError and carry a `code`.
import { describe, expect, it } from 'vitest';
import { decodeKbsTokenReply, InvalidKbsTokenReply } from './attestation-agent.js';
import { GuestApiError } from './errors.js';

describe('guest-api errors', () => {
  it('a malformed token reply is a coded GuestApiError', () => {
    for (const bytes of ['not json', '[]', '{"token":1,"tee_keypair":"k"}']) {
      let caught: unknown;
      try {
        decodeKbsTokenReply(new TextEncoder().encode(bytes));
      } catch (e) {
        caught = e;
      }
      expect(caught).toBeInstanceOf(InvalidKbsTokenReply);
      expect(caught).toBeInstanceOf(GuestApiError);
      expect((caught as GuestApiError).code).toBe('KBS_TOKEN_REPLY_INVALID');
    }
  });
});
