// Every error of the token and certificate checks shares AuthError and carries a `code`, so callers
// branch on it (or on the class), never on `name`.
import { describe, expect, it } from 'vitest';
import { AdminAccessDenied, AdminError } from './admin.js';
import { AuthError, type AuthErrorCode } from './errors.js';
import { JwtExpired, JwtVerificationError } from './jws.js';
import { TrustMaterialError } from './sources.js';
import { WriteAuthError } from './write-auth.js';
import { X5cError } from './x5c.js';

describe('auth errors', () => {
  const cases: [AuthError, AuthErrorCode, string][] = [
    [new AdminError('why'), 'ADMIN_FAILED', 'AdminError'],
    [new AdminAccessDenied('why'), 'ADMIN_ACCESS_DENIED', 'AdminAccessDenied'],
    [new JwtVerificationError('why'), 'JWT_INVALID', 'JwtVerificationError'],
    [new JwtExpired('why'), 'JWT_EXPIRED', 'JwtExpired'],
    [new X5cError('why'), 'X5C_INVALID', 'X5cError'],
    [new TrustMaterialError('why'), 'TRUST_MATERIAL_UNAVAILABLE', 'TrustMaterialError'],
    [new WriteAuthError('UNAUTHENTICATED', 'why'), 'UNAUTHENTICATED', 'WriteAuthError'],
    [new WriteAuthError('PERMISSION_DENIED', 'why'), 'PERMISSION_DENIED', 'WriteAuthError'],
    [new WriteAuthError('INVALID_CONFIG', 'why'), 'INVALID_CONFIG', 'WriteAuthError'],
  ];

  it.each(cases)('%s: shares AuthError and names what failed in code', (e, code, name) => {
    expect(e).toBeInstanceOf(AuthError);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(code);
    expect(e.name).toBe(name);
  });

  it('keeps the class hierarchy callers test with instanceof', () => {
    expect(new AdminAccessDenied('why')).toBeInstanceOf(AdminError);
    expect(new JwtExpired('why')).toBeInstanceOf(JwtVerificationError);
    expect(new X5cError('why')).toBeInstanceOf(JwtVerificationError);
  });

  it('keeps the messages, the reason and the cause', () => {
    const denied = new AdminAccessDenied('role not allowed');
    expect(denied.message).toBe('Admin access denied: role not allowed');
    expect(denied.reason).toBe('role not allowed');
    const cause = new Error('ENOENT');
    const e = new TrustMaterialError('cannot read x', { cause });
    expect(e.message).toBe('cannot read x');
    expect(e.cause).toBe(cause);
    expect(new WriteAuthError('INVALID_CONFIG', 'why', { cause }).cause).toBe(cause);
    expect('cause' in new JwtVerificationError('why')).toBe(false);
  });
});
