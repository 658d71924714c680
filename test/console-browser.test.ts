// The KBS operator console in a real browser (Debian's chromium driven by puppeteer-core): an operator
// signs in with an admin JWT, finds the guest's denied request and its failing claims, fixes the
// resource policy through a dry run, saves it, and the guest's next attestation gets its secret; with
// reference values registered in the console the next attestation shows affirming; one value expired,
// the attestation policy is fixed through a dry run on the recorded claims, saved, and the next
// attestation is affirming again; a viewer role reads every view but cannot save or expire; a
// state-changing call without the CSRF token is refused. Also: nothing of the app shows before sign-in,
// each view's banner stays in its view, delete and expire ask first, denials are said in words with
// the AR4SI vector as a table, the verdicts chart, a verdict replayed on the policy that decided it and
// on the current one with their diff, reference values' expiry and provenance, and every view at
// 420 px wide without a horizontal scroll. Screenshots of each view go to dist/test-artifacts/console/.
import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SampleAttester } from '@broker/attester';
import { parseKbsConfigText, type RunningKbs, startKbs } from '@broker/kbs';
import { KbsClient } from '@broker/kbs-client';
import pino from 'pino';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeServerCert, type TlsMaterial } from './helpers/tls.js';

// The functions given to page.evaluate run in the browser; the repository's TypeScript has no DOM lib.
interface DomElement {
  textContent: string | null;
  hidden: boolean;
  open?: boolean;
  getAttribute(name: string): string | null;
}
declare const document: {
  querySelector(selector: string): DomElement | null;
  querySelectorAll(selector: string): DomElement[];
  getElementById(id: string): { value: string } | null;
  createElement(tag: string): { textContent: string | null };
  body: { append(node: unknown): void };
  documentElement: { scrollWidth: number; clientWidth: number };
};
declare const window: { __inline?: number };
declare function getComputedStyle(e: DomElement): { display: string };

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(import.meta.dirname, '..', 'dist', 'test-artifacts', 'console');
const VIEWS = ['verdicts', 'resources', 'policy', 'attestation', 'refvalues', 'health'] as const;
const SECRET = 'console-test-secret-value';

let dir: string;
let tls: TlsMaterial;
let kbs: RunningKbs;
let browser: Browser;
const idp = generateKeyPairSync('ed25519');

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
function adminJwt(role: string): string {
  const input = `${b64url({ alg: 'EdDSA' })}.${b64url({ role, exp: Math.floor(Date.now() / 1000) + 600 })}`;
  return `${input}.${sign(null, Buffer.from(input), idp.privateKey).toString('base64url')}`;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'console-browser-'));
  mkdirSync(ARTIFACTS, { recursive: true });
  tls = makeServerCert(['localhost', '127.0.0.1'], dir);
  writeFileSync(join(dir, 'idp.pem'), idp.publicKey.export({ type: 'spki', format: 'pem' }));
  const toml = `[http_server]
sockets = ["127.0.0.1:0"]
private_key = "${tls.keyPath}"
certificate = "${tls.certPath}"
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "AuthenticatedAuthorization"
console = true
[admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "${join(dir, 'idp.pem')}" }]
[admin.authorization.regex_acl]
acls = [
  { role = "admin", allowed_endpoints = "^/kbs/v0/.+$" },
  { role = "viewer", allowed_endpoints = "^/kbs/v0/admin/(verdicts(/[0-9]+)?|console/session|resources|resource-policy|attestation-policy(/[^/]+)?|reference-values|health)$" },
]
[[plugins]]
name = "resource"
`;
  kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      `--user-data-dir=${join(dir, 'chromium-profile')}`,
      // The test KBS's certificate is self-signed.
      '--ignore-certificate-errors',
    ],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await kbs?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

function guest(): KbsClient {
  return new KbsClient({ url: kbs.urls[0] as string, certPem: tls.certPem, attester: new SampleAttester() });
}

async function guestFetch(): Promise<string> {
  const client = guest();
  try {
    return (await client.getResource('default/key/secret')).toString('utf8');
  } finally {
    client.close();
  }
}

async function text(page: Page, selector: string): Promise<string> {
  return page.$eval(selector, (e) => e.textContent ?? '');
}

/** Waits until `selector`'s text contains `want`. */
async function waitText(page: Page, selector: string, want: string): Promise<void> {
  await page.waitForFunction(
    (s: string, w: string) => (document.querySelector(s)?.textContent ?? '').includes(w),
    {},
    selector,
    want,
  );
}

/**
 * Clicks the first element matching `selector` in one page task: a view that re-renders its table
 * (a refresh answered after the one the test waited for) would otherwise detach the row between
 * puppeteer finding it and clicking it.
 */
async function clickNow(page: Page, selector: string): Promise<void> {
  await page.$eval(selector, (e) => (e as unknown as { click(): void }).click());
}

/** Whether the element is rendered (neither it nor an ancestor is display: none). */
async function shown(page: Page, selector: string): Promise<boolean> {
  return page.$eval(
    selector,
    (e) => (e as unknown as { getClientRects(): unknown[] }).getClientRects().length > 0,
  );
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Answers the confirmation dialog the last click opened. */
/**
 * Clicks the verdicts view's refresh and waits until the list drawn is that click's answer, for the
 * filters now set (an answer to an earlier request, such as opening the view, is not it).
 */
async function refreshVerdicts(page: Page): Promise<void> {
  const loaded = (t: unknown) => Number((t as { dataset: { load?: string } }).dataset.load ?? 0);
  const before = await page.$eval('#verdict-table', loaded);
  await page.click('#verdict-refresh');
  await page.waitForFunction(
    (after: number) => {
      const q = new URLSearchParams();
      const value = (id: string) =>
        (document.getElementById(id) as unknown as { value: string }).value.trim();
      if (value('filter-kind')) q.set('kind', value('filter-kind'));
      if (value('filter-status')) q.set('status', value('filter-status'));
      if (value('filter-tee')) q.set('tee', value('filter-tee'));
      q.set('limit', '200');
      const table = document.getElementById('verdict-table') as unknown as {
        dataset: { load?: string; query?: string };
      };
      return Number(table.dataset.load ?? 0) > after && table.dataset.query === q.toString();
    },
    {},
    before,
  );
}

async function confirmDialog(page: Page, answer: 'ok' | 'cancel', screenshot?: string): Promise<void> {
  await page.waitForSelector('#confirm[open]');
  if (screenshot !== undefined) await shot(page, screenshot);
  await page.click(answer === 'ok' ? '#confirm-ok' : '#confirm-cancel');
  await page.waitForFunction(() => document.querySelector('#confirm')?.open === false);
}

describe('KBS operator console in chromium', () => {
  it('shows a denied request with its failing claims, fixes the policy by dry run, and refuses a call without the CSRF token', async () => {
    const base = kbs.urls[0] as string;
    const page = await browser.newPage();
    const external: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base)) external.push(r.url());
    });
    const cspViolations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    await page.setViewport({ width: 1400, height: 900 });

    // Before sign-in only the sign-in form shows: no navigation, no view, no role.
    await page.goto(`${base}/console/`);
    await page.waitForFunction(() => document.querySelector('#signin-view')?.hidden === false);
    expect(await shown(page, '#nav')).toBe(false);
    for (const v of VIEWS) expect(await shown(page, `#${v}-view`), v).toBe(false);
    expect(await text(page, '#who')).toBe('');
    expect(
      await page.$$eval(
        'main section',
        (all) => all.filter((e) => getComputedStyle(e as unknown as DomElement).display !== 'none').length,
      ),
    ).toBe(1);
    await shot(page, 'signin');
    // A bad token: the error is in the sign-in view.
    await page.type('#signin-token', 'not-a-jwt');
    await page.click('#signin-submit');
    await waitText(page, '#signin-message', '401');
    expect(await shown(page, '#nav')).toBe(false);
    await page.$eval('#signin-token', (e) => {
      (e as unknown as { value: string }).value = '';
    });

    // Sign in with the admin JWT.
    await page.type('#signin-token', adminJwt('admin'));
    await page.click('#signin-submit');
    await waitText(page, '#who', 'role: admin');
    const cookies = await browser.cookies();
    const session = cookies.find((c) => c.name === 'kbs-console');
    expect(session).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Strict' });

    // Add the secret through the console; its value is never shown back.
    await page.click('nav button[data-view="resources"]');
    await page.type('#resource-path', 'default/key/secret');
    await page.type('#resource-value', SECRET);
    await page.click('#resource-save');
    await waitText(page, '#resource-table tbody', 'default/key/secret');
    expect(await page.content()).not.toContain(SECRET);

    // Delete asks first: cancelled, the resource stays; confirmed, it goes.
    await page.$eval('#resource-path', (e) => {
      (e as unknown as { value: string }).value = '';
    });
    await page.type('#resource-path', 'default/key/temporary');
    await page.type('#resource-value', 'temporary-value');
    await page.click('#resource-save');
    await waitText(page, '#resource-table tbody', 'default/key/temporary');
    const tempRow = async () =>
      page.$$eval('#resource-table tbody tr', (rows) =>
        rows.findIndex((r) => (r.textContent ?? '').startsWith('default/key/temporary')),
      );
    await clickNow(page, `#resource-table tbody tr:nth-child(${(await tempRow()) + 1}) button`);
    await confirmDialog(page, 'cancel', 'resources-confirm-delete');
    await waitText(page, '#resources-message', 'default/key/temporary was not deleted.');
    expect(await text(page, '#resource-table tbody')).toContain('default/key/temporary');
    await clickNow(page, `#resource-table tbody tr:nth-child(${(await tempRow()) + 1}) button`);
    await confirmDialog(page, 'ok');
    await waitText(page, '#resources-message', 'Deleted default/key/temporary.');
    await page.waitForFunction(
      () => !(document.querySelector('#resource-table tbody')?.textContent ?? '').includes('temporary'),
    );
    await shot(page, 'resources');

    // The guest attests (the sample TEE has no reference values: not affirming) and is refused.
    await expect(guestFetch()).rejects.toThrow();

    // The operator sees the denied request and why.
    await page.click('nav button[data-view="verdicts"]');
    await page.select('#filter-status', 'denied');
    await refreshVerdicts(page);
    await waitText(page, '#verdict-table tbody', 'denied');
    const row = await text(page, '#verdict-table tbody tr');
    expect(row).toContain('GET default/key/secret');
    expect(row).toMatch(/cpu0 (warning|contraindicated)/);
    await clickNow(page, '#verdict-table tbody tr');
    await waitText(page, '#verdict-claims', 'ear.trustworthiness-vector');
    const failing = await text(page, '#verdict-detail');
    expect(failing).toMatch(/executables=\d+ \((warning|contraindicated)\)/);
    // A resource verdict names the TEE of its token's appraisal and the policy version that decided.
    expect(row).toContain('sample');
    expect(await text(page, '#verdict-policy-version')).toMatch(/resource policy version [0-9a-f]{12}…/);
    const deniedId = Number(await page.$eval('#verdict-table tbody tr', (e) => e.getAttribute('data-id')));
    // The attestation that issued the token is not in this (denied only) list: no link to it.
    expect(await shown(page, '#verdict-attestation')).toBe(false);
    await shot(page, 'verdicts-denied-resource');

    // The attestation behind it, in words: each claim that missed and what its value means, and the
    // AR4SI vector as a table of claim, value, tier and meaning.
    await page.select('#filter-status', '');
    await page.select('#filter-kind', 'attestation');
    await refreshVerdicts(page);
    await waitText(page, '#verdict-table tbody tr:first-child', 'attestation');
    await clickNow(page, '#verdict-table tbody tr');
    await waitText(page, '#verdict-detail-title', 'attestation');
    const words = await page.$$eval('#verdict-appraisals ul.why li', (li) =>
      li.map((e) => e.textContent ?? ''),
    );
    expect(words).toContainEqual(
      expect.stringMatching(/^executables \d+ \((warning|contraindicated)\): executables not recognised$/),
    );
    const vector = await page.$$eval('#verdict-appraisals table.vector tbody tr', (rows) =>
      rows
        .map((r) => (r as unknown as { children: { textContent: string }[] }).children)
        .map((c) => [c[0]?.textContent, c[1]?.textContent, c[3]?.textContent]),
    );
    expect(vector).toContainEqual([
      'executables',
      expect.stringMatching(/^\d+$/),
      'executables not recognised',
    ]);
    expect(
      await page.$$eval('#verdict-appraisals table.vector thead th', (th) => th.map((e) => e.textContent)),
    ).toEqual(['Claim', 'Value', 'Tier', 'Meaning']);
    await shot(page, 'verdicts-attestation-why');
    await page.select('#filter-kind', '');
    await refreshVerdicts(page);

    // Dry run: the saved policy denies; an edited one that accepts this guest's evidence allows.
    await page.click('#verdict-dry-run');
    await page.waitForFunction(
      () => (document.getElementById('policy-text') as unknown as { value: string }).value !== '',
    );
    await page.click('#policy-dry-run');
    await waitText(page, '#policy-message', 'denied');
    const fixed =
      'package policy\n\ndefault allow := false\n\n# The sample TEE is a test platform: accept its evidence for default/key/*.\nallow if {\n  input.submods.cpu0["ear.veraison.annotated-evidence"].sample.svn == "1"\n  data["resource-path"][0] == "default"\n}\n';
    await page.$eval(
      '#policy-text',
      (e, v) => {
        (e as unknown as { value: string }).value = v as string;
      },
      'package policy\nallow if {',
    );
    await page.click('#policy-check');
    await waitText(page, '#policy-message', 'Syntax error');
    expect(
      await page.$eval('#policy-message', (e) => (e as unknown as { className: string }).className),
    ).toContain('error');
    // The error belongs to the policy view: another view never shows it, and coming back clears it.
    await page.click('nav button[data-view="health"]');
    await waitText(page, '#health-table tbody', 'attestationSuccesses');
    expect(await shown(page, '#policy-message')).toBe(false);
    const visibleBanners = await page.$$eval('.banner', (all) =>
      all
        .filter(
          (e) =>
            (e as unknown as { getClientRects(): unknown[] }).getClientRects().length > 0 &&
            (e.textContent ?? '') !== '',
        )
        .map((e) => e.textContent),
    );
    expect(visibleBanners).toEqual([]);
    await page.click('nav button[data-view="policy"]');
    expect(await text(page, '#policy-message')).toBe('');
    // Opening the view loads the stored policy again.
    await page.waitForFunction(
      () =>
        !(document.getElementById('policy-text') as unknown as { value: string }).value.endsWith(
          'allow if {',
        ),
    );
    await page.$eval(
      '#policy-text',
      (e, v) => {
        (e as unknown as { value: string }).value = v as string;
      },
      fixed,
    );
    await page.click('#policy-dry-run');
    await waitText(page, '#policy-message', 'allowed');
    await shot(page, 'policy-dry-run');
    await page.click('#policy-save');
    await waitText(page, '#policy-message', 'Resource policy saved.');

    // The guest attests again and now gets its secret; the console lists the request as allowed.
    expect(await guestFetch()).toBe(SECRET);
    await page.click('nav button[data-view="verdicts"]');
    await page.select('#filter-status', 'allowed');
    await refreshVerdicts(page);
    await waitText(page, '#verdict-table tbody', 'allowed');
    expect(await text(page, '#verdict-table tbody tr')).toContain('GET default/key/secret');
    await shot(page, 'verdicts-allowed');

    // The denied request replayed on the policy that decided it (denied) and on the current one
    // (allowed), and the two policies compared line by line.
    await page.select('#filter-status', '');
    await refreshVerdicts(page);
    await page.waitForSelector(`#verdict-table tbody tr[data-id="${deniedId}"]`);
    await clickNow(page, `#verdict-table tbody tr[data-id="${deniedId}"]`);
    await waitText(page, '#verdict-detail-title', `#${deniedId} resource denied`);
    await page.click('#verdict-replay-recorded');
    await waitText(page, '#verdict-replay', 'Replay on the policy that decided');
    expect(await text(page, '#verdict-replay')).toMatch(/: denied$/);
    await page.click('#verdict-replay-current');
    await waitText(page, '#verdict-replay', 'Replay on the current policy');
    expect(await text(page, '#verdict-replay')).toMatch(/: allowed$/);
    await page.click('#verdict-diff-button');
    await page.waitForSelector('#verdict-diff .add');
    await shot(page, 'verdicts-policy-diff');
    // From the denied request to the attestation that issued its token (same session), and its words.
    await page.click('#verdict-attestation');
    await waitText(page, '#verdict-detail-title', 'attestation');
    expect(await text(page, '#verdict-appraisals ul.why')).toContain('executables not recognised');
    await clickNow(page, `#verdict-table tbody tr[data-id="${deniedId}"]`);
    await waitText(page, '#verdict-detail-title', `#${deniedId} resource denied`);
    await page.click('#verdict-diff-button');
    await page.waitForSelector('#verdict-diff .add');
    const added = await page.$$eval('#verdict-diff .add', (d) => d.map((e) => e.textContent ?? ''));
    expect(added).toContain('+ # The sample TEE is a test platform: accept its evidence for default/key/*.');
    expect((await page.$$eval('#verdict-diff .del', (d) => d.length)) > 0).toBe(true);

    // The chart: one row per TEE, bars stacked by status, as many verdicts as listed.
    const listed = await page.$$eval('#verdict-table tbody tr', (rows) => rows.length);
    const charted = await page.$$eval('#verdict-chart svg rect[data-count]', (r) =>
      r.reduce((n, e) => n + Number(e.getAttribute('data-count')), 0),
    );
    expect(charted).toBe(listed);
    expect(
      await page.$$eval('#verdict-chart svg g[data-tee]', (g) => g.map((e) => e.getAttribute('data-tee'))),
    ).toEqual(['sample']);
    const statuses = await page.$$eval('#verdict-chart rect[data-status]', (r) =>
      [...new Set(r.map((e) => e.getAttribute('data-status')))].sort(),
    );
    expect(statuses).toEqual(expect.arrayContaining(['allowed', 'denied']));
    await page.$eval('#verdict-chart', (e) => (e as unknown as { scrollIntoView(): void }).scrollIntoView());
    const chart = await page.$('#verdict-chart');
    await chart?.screenshot({ path: join(ARTIFACTS, 'verdicts-chart.png') });

    // The sample TEE's reference values, registered in the console: the next attestation is affirming.
    await page.click('nav button[data-view="refvalues"]');
    const values: [string, string][] = [
      ['launch_digest', '["abcde"]'],
      ['svn', '["1"]'],
      ['major_version', '1'],
      ['minimum_minor_version', '4'],
    ];
    for (const [name, value] of values) {
      await page.$eval('#refvalue-name', (e) => {
        (e as unknown as { value: string }).value = '';
      });
      await page.type('#refvalue-name', name);
      await page.type('#refvalue-value', value);
      if (name === 'launch_digest') {
        await page.type('#refvalue-image-tag', 'podvm:1.11.1');
        await page.type('#refvalue-initdata', 'ab'.repeat(32));
      }
      await page.click('#refvalue-save');
      await waitText(page, '#refvalues-message', `Registered ${name}.`);
      await page.$eval('#refvalue-image-tag', (e) => {
        (e as unknown as { value: string }).value = '';
      });
      await page.$eval('#refvalue-initdata', (e) => {
        (e as unknown as { value: string }).value = '';
      });
    }
    await waitText(page, '#refvalue-table tbody', 'minimum_minor_version');
    expect(await page.$$eval('#refvalue-table tbody tr', (rows) => rows.length)).toBe(4);
    // Provenance as given when registered; the others say it was not given.
    expect(await text(page, '#refvalue-table tbody tr[data-name="launch_digest"] .provenance')).toBe(
      `image tag: podvm:1.11.1initdata digest: ${'ab'.repeat(32)}`,
    );
    expect(await text(page, '#refvalue-table tbody tr[data-name="svn"] .provenance')).toBe('not given');
    // A record past its expiration (written as an older RVPS would have) is marked expired.
    await kbs.storage.set(
      'reference_value',
      'old_digest',
      Buffer.from(
        '{"version":"0.1.0","name":"old_digest","expiration":"2020-11-30T00:00:00Z","value":["ff"]}',
      ),
    );
    await page.click('nav button[data-view="health"]');
    await page.click('nav button[data-view="refvalues"]');
    await waitText(page, '#refvalue-table tbody', 'old_digest');
    expect(await text(page, '#refvalue-table tbody tr[data-name="old_digest"]')).toContain(
      '2020-11-30T00:00:00Z (expired: policies no longer see it)',
    );
    expect(await text(page, '#refvalue-table tbody tr[data-name="svn"]')).not.toContain('expired');
    await shot(page, 'reference-values');
    await clickNow(page, '#refvalue-table tbody tr[data-name="old_digest"] button');
    await confirmDialog(page, 'ok');
    await waitText(page, '#refvalues-message', 'Expired old_digest.');
    expect(await guestFetch()).toBe(SECRET);
    await page.click('nav button[data-view="verdicts"]');
    await page.select('#filter-kind', 'attestation');
    await page.select('#filter-status', 'affirming');
    await refreshVerdicts(page);
    // The list the view loaded on opening (all kinds) may land first: wait for the filtered one.
    await waitText(page, '#verdict-table tbody tr:first-child', 'attestation');
    await waitText(page, '#verdict-table tbody tr:first-child', 'affirming');
    await clickNow(page, '#verdict-table tbody tr');
    await waitText(page, '#verdict-detail-title', 'attestation affirming');
    await shot(page, 'verdicts-affirmed');

    // Expire svn: trustee's default policy no longer affirms these claims. The operator dry runs the
    // stored attestation policy on the affirmed verdict's claims, drops the svn check, sees affirming in
    // the dry run, saves, and the guest's next attestation is affirming again.
    await page.click('nav button[data-view="refvalues"]');
    await waitText(page, '#refvalue-table tbody', 'svn');
    const svnRow = await page.$$eval('#refvalue-table tbody tr', (rows) =>
      rows.findIndex((r) => (r as unknown as { textContent: string }).textContent.startsWith('svn')),
    );
    await clickNow(page, `#refvalue-table tbody tr:nth-child(${svnRow + 1}) button`);
    await confirmDialog(page, 'cancel');
    await waitText(page, '#refvalues-message', 'svn was not expired.');
    await clickNow(page, `#refvalue-table tbody tr:nth-child(${svnRow + 1}) button`);
    await confirmDialog(page, 'ok');
    await waitText(page, '#refvalues-message', 'Expired svn.');
    expect(await page.$$eval('#refvalue-table tbody tr', (rows) => rows.length)).toBe(3);

    await page.click('nav button[data-view="verdicts"]');
    await refreshVerdicts(page);
    await waitText(page, '#verdict-table tbody', 'affirming');
    await clickNow(page, '#verdict-table tbody tr');
    await waitText(page, '#verdict-detail-title', 'attestation affirming');
    await page.click('#verdict-att-dry-run');
    await page.waitForFunction(() =>
      (document.getElementById('att-policy-text') as unknown as { value: string }).value.includes('svn'),
    );
    expect(await page.$eval('#att-dry-run-submod', (e) => (e as unknown as { value: string }).value)).toBe(
      'cpu0',
    );
    await page.click('#att-policy-dry-run');
    await waitText(page, '#attestation-message', 'cpu0: contraindicated');
    await page.$eval('#att-policy-text', (e) => {
      const t = e as unknown as { value: string };
      t.value = t.value.replace('\tinput.sample.svn in query_reference_value("svn")\n', '');
    });
    await page.click('#att-policy-dry-run');
    await waitText(page, '#attestation-message', 'cpu0: affirming');
    expect(await text(page, '#att-dry-run-result table.vector')).toContain('only approved executables');
    await shot(page, 'attestation-dry-run');
    expect(await page.$eval('#att-policy-id', (e) => (e as unknown as { value: string }).value)).toBe(
      'default_cpu',
    );
    await page.click('#att-policy-save');
    await waitText(page, '#attestation-message', 'Attestation policy default_cpu saved.');
    expect(await guestFetch()).toBe(SECRET);
    await page.click('nav button[data-view="verdicts"]');
    await refreshVerdicts(page);
    await page.waitForFunction(
      () =>
        (document.querySelector('#verdict-table tbody')?.textContent ?? '').split('affirming').length === 3,
    );

    // Health: the handshake counters of /metrics.
    await page.click('nav button[data-view="health"]');
    await waitText(page, '#health-table tbody', 'attestationSuccesses');
    expect(await text(page, '#health-summary')).toContain('storage Memory');
    expect(await text(page, '#health-summary')).toContain('replicas 1');
    await shot(page, 'health');

    // Every view at 420 px: nothing wider than the window (tables scroll inside their own box).
    await page.setViewport({ width: 420, height: 900 });
    for (const v of VIEWS) {
      await page.click(`nav button[data-view="${v}"]`);
      await page.waitForFunction(
        (id: string) => document.querySelector(`#${id}-view`)?.hidden === false,
        {},
        v,
      );
      if (v === 'verdicts') await page.waitForSelector('#verdict-chart svg');
      if (v === 'refvalues') await waitText(page, '#refvalue-table tbody', 'launch_digest');
      if (v === 'health') await waitText(page, '#health-table tbody', 'attestationSuccesses');
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width, v).toBeLessThanOrEqual(420);
      await shot(page, `narrow-${v}`);
    }
    await page.setViewport({ width: 1400, height: 900 });

    // The page's own cookie without the CSRF header cannot change anything.
    const noCsrf = await page.evaluate(async () => {
      const r = await fetch('/kbs/v0/resource-policy', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ policy: 'cGFja2FnZSBwb2xpY3kKZGVmYXVsdCBhbGxvdyA6PSB0cnVlCg' }),
      });
      return { status: r.status, body: await r.text() };
    });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body).toContain('x-csrf-token');
    const noCsrfExpire = await page.evaluate(async () => {
      const r = await fetch('/kbs/v0/admin/reference-values/launch_digest', { method: 'DELETE' });
      return r.status;
    });
    expect(noCsrfExpire).toBe(403);

    // An inline script is blocked by the CSP.
    const inlineRan = await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = 'window.__inline = 1';
      document.body.append(s);
      return window.__inline === 1;
    });
    expect(inlineRan).toBe(false);
    expect(external).toEqual([]);
    await page.close();
  }, 120_000);

  it('lets a viewer role see verdicts and the policy but not change them', async () => {
    const base = kbs.urls[0] as string;
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.goto(`${base}/console/`);
    await page.type('#signin-token', adminJwt('viewer'));
    await page.click('#signin-submit');
    await waitText(page, '#who', 'role: viewer');
    await waitText(page, '#verdict-table tbody', 'default/key/secret');
    await page.click('nav button[data-view="policy"]');
    await page.waitForFunction(
      () => (document.getElementById('policy-text') as unknown as { value: string }).value !== '',
    );
    await page.click('#policy-save');
    await waitText(page, '#policy-message', '401');
    expect(await text(page, '#policy-message')).toContain('Role viewer not allowed');

    // The attestation policies: readable, checked, not saved.
    await page.click('nav button[data-view="attestation"]');
    await page.waitForFunction(() =>
      (document.getElementById('att-policy-text') as unknown as { value: string }).value.includes(
        'package policy',
      ),
    );
    await page.click('#att-policy-check');
    await waitText(page, '#attestation-message', 'Syntax OK.');
    await page.click('#att-policy-save');
    await waitText(page, '#attestation-message', '401');
    expect(await text(page, '#attestation-message')).toContain('Role viewer not allowed');

    // The reference values: listed, not expired.
    await page.click('nav button[data-view="refvalues"]');
    await waitText(page, '#refvalue-table tbody', 'launch_digest');
    await clickNow(page, '#refvalue-table tbody tr button');
    await confirmDialog(page, 'ok');
    await waitText(page, '#refvalues-message', '401');
    await page.click('nav button[data-view="refvalues"]');
    await waitText(page, '#refvalue-table tbody', 'launch_digest');
    expect(await page.$$eval('#refvalue-table tbody tr', (rows) => rows.length)).toBe(3);
    await context.close();
  }, 60_000);
});
