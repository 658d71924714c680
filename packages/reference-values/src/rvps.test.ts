import { MemoryStorage } from '@broker/kv-storage';
import { createRvps } from '@broker/rvps-core';
import { describe, expect, it } from 'vitest';
import { MAX_PROVENANCE_VALUE_LENGTH, messageProvenance, rvpsSampleMessage } from './rvps.js';

describe('messageProvenance', () => {
  it('keeps the members given, leaving out absent, empty and over-long ones', () => {
    const long = `registry.example/${'r'.repeat(MAX_PROVENANCE_VALUE_LENGTH)}:1.0`;
    expect(messageProvenance({ image_tag: '1.0', image: long, image_digest: undefined, tee: '' })).toEqual({
      image_tag: '1.0',
    });
    expect(messageProvenance({ image: long })).toBeUndefined();
  });

  it('a message with what it keeps registers in the RVPS, which would refuse the over-long value', async () => {
    const long = 'r'.repeat(MAX_PROVENANCE_VALUE_LENGTH + 1);
    const rvps = createRvps(new MemoryStorage());
    const message = rvpsSampleMessage(
      { snp_pcr11: ['00'] },
      messageProvenance({ image: long, image_tag: 't' }),
    );
    await rvps.register(JSON.stringify(message));
    expect((await rvps.get('snp_pcr11'))?.provenance).toEqual({ image_tag: 't' });
    // Cut from the helper, the same value makes the RVPS refuse the whole message.
    const refused = { ...message, provenance: { image: long } };
    await expect(rvps.register(JSON.stringify(refused))).rejects.toThrow(/provenance/);
  });

  it('without a provenance the message is trustee’s three members only', () => {
    expect(Object.keys(rvpsSampleMessage({ a: ['1'] }))).toEqual(['version', 'type', 'payload']);
    expect(Object.keys(rvpsSampleMessage({ a: ['1'] }, {}))).toEqual(['version', 'type', 'payload']);
  });
});
