// The KBS operator console: plain DOM, same-origin calls only. The admin JWT is sent once to sign in;
// afterwards the HttpOnly session cookie authenticates and the CSRF token goes in a header on every call
// that changes state. Values are always set with textContent, never parsed as HTML.

const API = '/kbs/v0';
let csrf = '';
let verdictsById = new Map();
/** Counts verdict list requests: only the latest one's answer is drawn (an older, slower one is dropped). */
let verdictLoads = 0;
/** The view on screen; each view has its own banner, cleared when the view is shown again. */
let current = 'signin';
/** The attestation policy to open next (the one that appraised a verdict being dry run). */
let wantedPolicy;

const $ = (id) => document.getElementById(id);

/** Writes the banner of `view` (the one on screen unless named): a message never shows in another view. */
function message(text, kind, view) {
  const m = $(`${view || current}-message`);
  m.textContent = text;
  m.className = `banner ${kind || ''}`.trim();
}

/** Handles a failure of an action started in the view on screen, in that view's banner. */
const failIn = (view) => (e) => message(e.message, 'error', view);

/** Asks before a destructive action; resolves true when the operator confirms. */
function confirmAction(text, okLabel) {
  const d = $('confirm');
  $('confirm-text').textContent = text;
  $('confirm-ok').textContent = okLabel;
  d.returnValue = '';
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.showModal();
  });
}

async function call(method, path, body, contentType) {
  const headers = {};
  if (method !== 'GET') headers['x-csrf-token'] = csrf;
  if (body !== undefined) headers['content-type'] = contentType || 'application/json';
  const res = await fetch(API + path, {
    method,
    headers,
    body,
    credentials: 'same-origin',
    cache: 'no-store',
  });
  const text = await res.text();
  let data;
  try {
    data = text === '' ? {} : JSON.parse(text);
  } catch {
    data = { text };
  }
  if (!res.ok) {
    const why = data.detail || data.error || text || res.statusText;
    throw new Error(`${method} ${path}: ${res.status} ${why}`);
  }
  return data;
}

const b64 = (text) => {
  const bytes = new TextEncoder().encode(text);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
};
const b64url = (text) => b64(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const pathPart = (s) => encodeURIComponent(s);

function el(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (className) e.className = className;
  return e;
}

// ---- views
const VIEWS = ['signin', 'verdicts', 'resources', 'policy', 'attestation', 'refvalues', 'health'];

function show(view) {
  current = view;
  for (const v of VIEWS) {
    $(`${v}-view`).hidden = v !== view;
    if (v === view) message('', '', v);
  }
  for (const b of document.querySelectorAll('nav button[data-view]')) {
    b.classList.toggle('active', b.dataset.view === view);
  }
  const fail = failIn(view);
  if (view === 'verdicts') loadVerdicts().catch(fail);
  if (view === 'resources') loadResources().catch(fail);
  if (view === 'policy') loadPolicy().catch(fail);
  if (view === 'health') loadHealth().catch(fail);
  if (view === 'attestation') loadAttestationPolicies().catch(fail);
  if (view === 'refvalues') loadReferenceValues().catch(fail);
}

function signedIn(role) {
  $('nav').hidden = false;
  $('who').textContent = `role: ${role}`;
  show('verdicts');
}

async function signIn(ev) {
  ev.preventDefault();
  try {
    const r = await call(
      'POST',
      '/admin/console/session',
      JSON.stringify({ token: $('signin-token').value }),
    );
    csrf = r.csrf;
    $('signin-token').value = '';
    signedIn(r.role);
  } catch (e) {
    message(e.message, 'error', 'signin');
  }
}

async function signOut() {
  let failed;
  try {
    await call('DELETE', '/admin/console/session');
  } catch (e) {
    failed = e;
  }
  csrf = '';
  $('nav').hidden = true;
  $('who').textContent = '';
  show('signin');
  if (failed) message(failed.message, 'error', 'signin');
}

// ---- verdicts
function summary(v) {
  if (v.kind === 'resource') return `${v.method} ${v.resource}`;
  return (v.policyIds || []).join(', ');
}

function why(v) {
  if (v.reason) return v.reason;
  const failing = [];
  for (const a of v.appraisals || []) {
    for (const f of a.why || a.failing) failing.push(`${a.name}: ${f}`);
  }
  return failing.join('; ');
}

// ---- chart: verdicts over time, one row per TEE, bars stacked by status (SVG drawn here)
const STATUSES = ['affirming', 'allowed', 'warning', 'none', 'contraindicated', 'denied', 'failed', 'error'];
const SVG = 'http://www.w3.org/2000/svg';
const BUCKETS = 12;

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

const hhmm = (t) => new Date(t).toISOString().slice(11, 16);

function drawChart(verdicts) {
  const box = $('verdict-chart');
  box.replaceChildren();
  if (verdicts.length === 0) {
    box.append(el('figcaption', 'No verdicts to chart.'));
    return;
  }
  const times = verdicts.map((v) => Date.parse(v.time));
  const t0 = Math.min(...times);
  const t1 = Math.max(...times);
  const span = Math.max(t1 - t0, 1);
  const bucketOf = (t) => Math.min(BUCKETS - 1, Math.floor(((t - t0) / span) * BUCKETS));
  const tees = [...new Set(verdicts.map((v) => v.tee || 'no TEE'))].sort();
  const counts = new Map(tees.map((t) => [t, Array.from({ length: BUCKETS }, () => new Map())]));
  let peak = 1;
  for (const v of verdicts) {
    const row = counts.get(v.tee || 'no TEE')[bucketOf(Date.parse(v.time))];
    row.set(v.status, (row.get(v.status) || 0) + 1);
  }
  for (const rows of counts.values()) {
    for (const b of rows)
      peak = Math.max(
        peak,
        [...b.values()].reduce((x, y) => x + y, 0),
      );
  }
  const label = 90;
  const barW = 24;
  const gap = 4;
  const rowH = 48;
  const width = label + BUCKETS * (barW + gap);
  const height = tees.length * (rowH + 10) + 18;
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img' });
  root.append(svg('title'));
  root.firstChild.textContent = `Verdicts from ${new Date(t0).toISOString()} to ${new Date(t1).toISOString()}, by TEE and status`;
  tees.forEach((tee, i) => {
    const g = svg('g', { 'data-tee': tee, transform: `translate(0 ${i * (rowH + 10)})` });
    const name = svg('text', { x: 0, y: rowH / 2 + 4 });
    name.textContent = tee;
    g.append(name, svg('line', { x1: label, y1: rowH, x2: width, y2: rowH, stroke: '#aab' }));
    counts.get(tee).forEach((bucket, b) => {
      let y = rowH;
      for (const status of STATUSES) {
        const n = bucket.get(status) || 0;
        if (n === 0) continue;
        const h = Math.max(1, Math.round((n / peak) * (rowH - 4)));
        y -= h;
        const r = svg('rect', {
          x: label + b * (barW + gap),
          y,
          width: barW,
          height: h,
          class: `fill-${status}`,
          'data-status': status,
          'data-count': n,
        });
        const tip = svg('title');
        tip.textContent = `${tee}, ${status}: ${n} (from ${hhmm(t0 + (b * span) / BUCKETS)} UTC)`;
        r.append(tip);
        g.append(r);
      }
    });
    root.append(g);
  });
  const axis = svg('g', { transform: `translate(0 ${height - 4})` });
  for (const [b, anchor] of [
    [0, 'start'],
    [BUCKETS, 'end'],
  ]) {
    const t = svg('text', {
      x: label + b * (barW + gap) - (b === BUCKETS ? gap : 0),
      y: 0,
      'text-anchor': anchor,
    });
    t.textContent = `${hhmm(t0 + (b * span) / BUCKETS)} UTC`;
    axis.append(t);
  }
  root.append(axis);
  box.append(root);
  const legend = el('figcaption', undefined, 'legend');
  const seen = new Set(verdicts.map((v) => v.status));
  for (const status of STATUSES.filter((x) => seen.has(x))) {
    const item = el('span');
    item.append(el('span', undefined, `swatch fill-${status}`), document.createTextNode(status));
    legend.append(item);
  }
  box.append(legend);
}

async function loadVerdicts() {
  const q = new URLSearchParams();
  if ($('filter-kind').value) q.set('kind', $('filter-kind').value);
  if ($('filter-status').value) q.set('status', $('filter-status').value);
  if ($('filter-tee').value.trim()) q.set('tee', $('filter-tee').value.trim());
  q.set('limit', '200');
  const load = ++verdictLoads;
  const r = await call('GET', `/admin/verdicts?${q}`);
  // Opening the view and then changing a filter sends two requests; the list on screen must be the one
  // the filters ask for, whichever answer comes back last.
  if (load !== verdictLoads) return;
  $('verdict-table').dataset.query = q.toString();
  $('verdict-table').dataset.load = String(load);
  const tbody = $('verdict-table').querySelector('tbody');
  tbody.replaceChildren();
  verdictsById = new Map();
  drawChart(r.verdicts);
  for (const v of r.verdicts) {
    verdictsById.set(v.id, v);
    const tr = el('tr');
    tr.dataset.id = String(v.id);
    const cells = [v.id, v.time, v.kind, v.tee || '', v.session || '', v.source || ''];
    for (const c of cells) tr.append(el('td', c));
    tr.append(el('td', v.status, `status-${v.status}`));
    tr.append(el('td', summary(v)));
    tr.append(el('td', why(v), 'failing'));
    tr.addEventListener('click', () => openVerdict(v.id));
    tbody.append(tr);
  }
}

function tree(value) {
  if (value === null || typeof value !== 'object') return el('span', JSON.stringify(value), 'value');
  const ul = el('ul');
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  for (const [k, v] of entries) {
    const li = el('li');
    li.append(el('span', `${k}: `, 'key'));
    li.append(tree(v));
    ul.append(li);
  }
  return ul;
}

/** A table of the trust vector: claim, value, tier and what the value means. */
function vectorTable(rows) {
  const t = el('table', undefined, 'vector');
  const head = el('tr');
  for (const h of ['Claim', 'Value', 'Tier', 'Meaning']) head.append(el('th', h));
  t.append(el('thead'));
  t.firstChild.append(head);
  const body = el('tbody');
  for (const r of rows) {
    const tr = el('tr');
    tr.append(el('td', r.claim), el('td', r.value), el('td', r.tier, `status-${r.tier}`));
    tr.append(el('td', r.meaning || 'no meaning defined by AR4SI'));
    body.append(tr);
  }
  t.append(body);
  return t;
}

/** The policy a verdict was decided by: `{kind, version, current()}` or undefined. */
function decidingPolicy(v) {
  if (v.kind === 'resource') {
    return v.policyVersion
      ? {
          kind: 'resource',
          version: v.policyVersion,
          current: async () => (await call('GET', '/admin/resource-policy')).policy || '',
        }
      : undefined;
  }
  const a = (v.appraisals || []).find((x) => x.policyVersion);
  if (!a) return undefined;
  const id = `${a.policyId}_${a.name.replace(/[0-9]+$/, '')}`;
  return {
    kind: 'attestation',
    submod: a.name,
    id,
    version: a.policyVersion,
    current: async () => (await call('GET', `/admin/attestation-policy/${pathPart(id)}`)).policy,
  };
}

/** Line diff (longest common subsequence after trimming the common head and tail). */
function lineDiff(a, b) {
  const x = a.split('\n');
  const y = b.split('\n');
  let head = 0;
  while (head < x.length && head < y.length && x[head] === y[head]) head++;
  let tail = 0;
  while (
    tail < x.length - head &&
    tail < y.length - head &&
    x[x.length - 1 - tail] === y[y.length - 1 - tail]
  )
    tail++;
  const xs = x.slice(head, x.length - tail);
  const ys = y.slice(head, y.length - tail);
  const out = x.slice(0, head).map((l) => [' ', l]);
  if (xs.length * ys.length > 4_000_000) {
    for (const l of xs) out.push(['-', l]);
    for (const l of ys) out.push(['+', l]);
  } else {
    const n = xs.length;
    const m = ys.length;
    const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        L[i][j] = xs[i] === ys[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && xs[i] === ys[j]) {
        out.push([' ', xs[i]]);
        i++;
        j++;
      } else if (j < m && (i === n || L[i][j + 1] >= L[i + 1][j])) out.push(['+', ys[j++]]);
      else out.push(['-', xs[i++]]);
    }
  }
  for (const l of x.slice(x.length - tail)) out.push([' ', l]);
  return out;
}

async function showDiff(v) {
  const p = decidingPolicy(v);
  const box = $('verdict-diff');
  box.replaceChildren();
  box.hidden = false;
  const old = await call('GET', `/admin/policy-versions/${p.version}`);
  const now = await p.current();
  const lines = lineDiff(old.text, now);
  const changed = lines.filter(([k]) => k !== ' ').length;
  box.append(
    el(
      'div',
      changed === 0
        ? `The current ${p.kind} policy is the one that decided (${p.version.slice(0, 12)}…).`
        : `${changed} line(s) differ: - the policy that decided (${p.version.slice(0, 12)}…), + the current one.`,
      'same',
    ),
  );
  for (const [k, l] of lines) {
    box.append(el('div', `${k} ${l}`, k === '+' ? 'add' : k === '-' ? 'del' : 'same'));
  }
}

async function replay(v, version) {
  const p = decidingPolicy(v);
  const out = $('verdict-replay');
  out.textContent = '';
  const r =
    p.kind === 'resource'
      ? await call(
          'POST',
          '/admin/resource-policy/dry-run',
          JSON.stringify({ version, verdict: v.id, resource: v.resource }),
        )
      : await call(
          'POST',
          '/admin/attestation-policy/dry-run',
          JSON.stringify({ version, verdict: v.id, submod: p.submod }),
        );
  const which = version === 'recorded' ? 'the policy that decided' : 'the current policy';
  if (r.error) throw new Error(`Replay on ${which} failed: ${r.error}`);
  const result = p.kind === 'resource' ? (r.allow ? 'allowed' : 'denied') : `${r.submod}: ${r.status}`;
  out.textContent = `Replay on ${which} (${r.version.slice(0, 12)}…): ${result}`;
  out.className = /allowed|affirming/.test(result) ? 'status-allowed' : 'status-denied';
}

function openVerdict(id) {
  const v = verdictsById.get(id);
  if (!v) return;
  for (const tr of $('verdict-table').querySelectorAll('tbody tr')) {
    tr.classList.toggle('selected', tr.dataset.id === String(id));
  }
  $('verdict-detail').hidden = false;
  $('verdict-detail-title').textContent = `#${v.id} ${v.kind} ${v.status}`;
  const p = decidingPolicy(v);
  $('verdict-policy-version').textContent = p
    ? `Decided by the ${p.kind} policy${p.id ? ` ${p.id}` : ''} version ${p.version.slice(0, 12)}…`
    : 'The policy version that decided is not recorded.';
  $('verdict-replay').textContent = '';
  $('verdict-diff').hidden = true;
  for (const b of ['verdict-replay-recorded', 'verdict-replay-current', 'verdict-diff-button']) {
    $(b).hidden = p === undefined || v.claims === undefined;
  }
  $('verdict-diff-button').hidden = p === undefined;
  const fail = failIn('verdicts');
  $('verdict-replay-recorded').onclick = () => replay(v, 'recorded').catch(fail);
  $('verdict-replay-current').onclick = () => replay(v, 'current').catch(fail);
  $('verdict-diff-button').onclick = () => showDiff(v).catch(fail);
  // A resource request's token came from the attestation of the same session, when it is listed.
  const issuer =
    v.kind === 'resource' && v.session
      ? [...verdictsById.values()].find((x) => x.kind === 'attestation' && x.session === v.session)
      : undefined;
  $('verdict-attestation').hidden = issuer === undefined;
  $('verdict-attestation').onclick = () => openVerdict(issuer.id);
  const box = $('verdict-appraisals');
  box.replaceChildren();
  for (const a of v.appraisals || []) {
    const d = el('div', undefined, 'appraisal');
    d.append(el('h4', `${a.name} (policy ${a.policyId}): `));
    d.firstChild.append(el('span', a.status, `status-${a.status}`));
    const words = a.why || a.failing;
    if (words.length > 0) {
      const ul = el('ul', undefined, 'why failing');
      for (const w of words) ul.append(el('li', w));
      d.append(ul);
    }
    if (a.vector) d.append(el('div', undefined, 'scroll'));
    if (a.vector) d.lastChild.append(vectorTable(a.vector));
    else d.append(el('div', `trust vector: ${JSON.stringify(a.trustVector)}`));
    // Earlier entries carry the failing claims only; keep showing them.
    if (a.why) for (const f of a.failing) d.append(el('div', f, 'failing raw'));
    box.append(d);
  }
  if (v.reason) box.append(el('div', v.reason, 'failing'));
  $('verdict-claims').replaceChildren(v.claims === undefined ? el('em', 'no claims kept') : tree(v.claims));
  $('verdict-dry-run').hidden = v.claims === undefined;
  $('verdict-dry-run').onclick = () => {
    $('dry-run-verdict').value = String(v.id);
    if (v.kind === 'resource') $('dry-run-resource').value = v.resource;
    show('policy');
  };
  $('verdict-att-dry-run').hidden = v.claims === undefined || v.kind !== 'attestation';
  $('verdict-att-dry-run').onclick = () => {
    $('att-dry-run-verdict').value = String(v.id);
    const first = (v.appraisals || [])[0];
    $('att-dry-run-submod').value = first ? first.name : '';
    // An appraisal `cpu0` under policy id `default` was made by the policy `default_cpu`.
    if (first?.policyId) wantedPolicy = `${first.policyId}_${first.name.replace(/[0-9]+$/, '')}`;
    show('attestation');
  };
}

// ---- resources
async function loadResources() {
  const r = await call('GET', '/admin/resources');
  const tbody = $('resource-table').querySelector('tbody');
  tbody.replaceChildren();
  for (const res of r.resources) {
    const tr = el('tr');
    tr.append(el('td', res.path));
    tr.append(el('td', `${res.size} bytes`));
    const td = el('td');
    const del = el('button', 'Delete');
    del.type = 'button';
    del.addEventListener('click', async () => {
      if (
        !(await confirmAction(`Delete the resource ${res.path}? Guests can no longer fetch it.`, 'Delete'))
      ) {
        message(`${res.path} was not deleted.`, '', 'resources');
        return;
      }
      try {
        await call('DELETE', `/resource/${res.path.split('/').map(encodeURIComponent).join('/')}`);
        message(`Deleted ${res.path}.`, 'ok', 'resources');
        await loadResources();
      } catch (e) {
        message(e.message, 'error', 'resources');
      }
    });
    td.append(del);
    tr.append(td);
    tbody.append(tr);
  }
}

async function saveResource(ev) {
  ev.preventDefault();
  const path = $('resource-path').value.trim();
  const file = $('resource-file').files[0];
  const body = file ? new Uint8Array(await file.arrayBuffer()) : $('resource-value').value;
  try {
    await call(
      'POST',
      `/resource/${path.split('/').map(encodeURIComponent).join('/')}`,
      body,
      'application/octet-stream',
    );
    $('resource-value').value = '';
    $('resource-file').value = '';
    message(`Saved ${path}.`, 'ok', 'resources');
    await loadResources();
  } catch (e) {
    message(e.message, 'error', 'resources');
  }
}

// ---- health
async function loadHealth() {
  const h = await call('GET', '/admin/health');
  const replicas = h.replicas === null ? `unknown (${h.replicasError})` : h.replicas;
  $('health-summary').textContent =
    `Up ${h.uptimeSeconds} s; storage ${h.storage.backend}, sessions ${h.storage.sessions}, ` +
    `verdict log ${h.storage.verdictLog}; replicas ${replicas}; rates over the last ${h.rateWindowSeconds} s.`;
  const tbody = $('health-table').querySelector('tbody');
  tbody.replaceChildren();
  for (const [name, value] of Object.entries(h.totals)) {
    const tr = el('tr');
    tr.append(el('td', name), el('td', value), el('td', h.perMinute[name]));
    tbody.append(tr);
  }
}

// ---- policy
async function loadPolicy() {
  const r = await call('GET', '/admin/resource-policy');
  $('policy-text').value = r.policy || '';
}

async function checkPolicy() {
  const r = await call(
    'POST',
    '/admin/resource-policy/check',
    JSON.stringify({ policy: $('policy-text').value }),
  );
  if (!r.ok) throw new Error(`Syntax error: ${r.error}`);
  return r;
}

async function dryRun() {
  await checkPolicy();
  const verdict = Number($('dry-run-verdict').value);
  const r = await call(
    'POST',
    '/admin/resource-policy/dry-run',
    JSON.stringify({ policy: $('policy-text').value, verdict, resource: $('dry-run-resource').value.trim() }),
  );
  if (r.error) throw new Error(`Dry run failed: ${r.error}`);
  message(
    `Dry run on verdict #${verdict}: ${r.allow ? 'allowed' : 'denied'}`,
    r.allow ? 'ok' : 'error',
    'policy',
  );
}

async function savePolicy() {
  await checkPolicy();
  await call('POST', '/resource-policy', JSON.stringify({ policy: b64url($('policy-text').value) }));
  message('Resource policy saved.', 'ok', 'policy');
}

// ---- attestation policies
async function loadAttestationPolicy(id) {
  const r = await call('GET', `/admin/attestation-policy/${pathPart(id)}`);
  $('att-policy-text').value = r.policy;
  $('att-policy-id').value = id;
}

async function loadAttestationPolicies() {
  const r = await call('GET', '/admin/attestation-policy');
  const select = $('att-policy-list');
  const keep = wantedPolicy ?? select.value;
  wantedPolicy = undefined;
  select.replaceChildren();
  for (const id of r.policies) {
    const o = el('option', id);
    o.value = id;
    select.append(o);
  }
  const want = r.policies.includes(keep)
    ? keep
    : r.policies.includes('default_cpu')
      ? 'default_cpu'
      : r.policies[0];
  if (want !== undefined) {
    select.value = want;
    await loadAttestationPolicy(want);
  }
}

async function checkAttestationPolicy() {
  const r = await call(
    'POST',
    '/admin/attestation-policy/check',
    JSON.stringify({ policy: $('att-policy-text').value }),
  );
  if (!r.ok) throw new Error(`Syntax error: ${r.error}`);
}

async function dryRunAttestationPolicy() {
  await checkAttestationPolicy();
  const verdict = Number($('att-dry-run-verdict').value);
  const submod = $('att-dry-run-submod').value.trim();
  const r = await call(
    'POST',
    '/admin/attestation-policy/dry-run',
    JSON.stringify({ policy: $('att-policy-text').value, verdict, ...(submod && { submod }) }),
  );
  const box = $('att-dry-run-result');
  box.replaceChildren();
  if (r.error) {
    box.append(el('div', r.error, 'failing'));
    throw new Error(`Dry run failed: ${r.error}`);
  }
  box.append(vectorTable(r.vector || vectorRows(r.trustVector)));
  message(
    `Dry run on verdict #${verdict} ${r.submod}: ${r.status}`,
    r.status === 'affirming' ? 'ok' : 'error',
    'attestation',
  );
}

async function saveAttestationPolicy() {
  const id = $('att-policy-id').value.trim();
  if (id === '') throw new Error('Give the policy id to save as.');
  await checkAttestationPolicy();
  await call(
    'POST',
    '/attestation-policy',
    JSON.stringify({ policy_id: id, policy: b64url($('att-policy-text').value) }),
  );
  message(`Attestation policy ${id} saved.`, 'ok', 'attestation');
  await loadAttestationPolicies();
}

// ---- reference values
async function loadReferenceValues() {
  const r = await call('GET', '/admin/reference-values');
  const tbody = $('refvalue-table').querySelector('tbody');
  tbody.replaceChildren();
  for (const rv of r.referenceValues) {
    const tr = el('tr');
    tr.dataset.name = rv.name;
    tr.append(el('td', rv.name));
    tr.append(el('td', rv.error ? rv.error : JSON.stringify(rv.value), rv.error ? 'failing' : 'value'));
    const exp = el('td', rv.expiration || '');
    if (rv.expired) {
      exp.append(el('span', ' (expired: policies no longer see it)', 'expired'));
      tr.classList.add('is-expired');
    }
    tr.append(exp);
    const prov = el('td', undefined, 'provenance');
    for (const [k, v] of Object.entries(rv.provenance || {}))
      prov.append(el('div', `${k.replace(/_/g, ' ')}: ${v}`));
    if (!rv.provenance) prov.append(el('em', 'not given'));
    tr.append(prov);
    const td = el('td');
    const expire = el('button', 'Expire');
    expire.type = 'button';
    expire.addEventListener('click', async () => {
      if (!(await confirmAction(`Expire ${rv.name} now? Appraisals stop finding it at once.`, 'Expire'))) {
        message(`${rv.name} was not expired.`, '', 'refvalues');
        return;
      }
      try {
        await call('DELETE', `/admin/reference-values/${pathPart(rv.name)}`);
        await loadReferenceValues();
        message(`Expired ${rv.name}.`, 'ok', 'refvalues');
      } catch (e) {
        message(e.message, 'error', 'refvalues');
      }
    });
    td.append(expire);
    tr.append(td);
    tbody.append(tr);
  }
}

async function addReferenceValue(ev) {
  ev.preventDefault();
  const name = $('refvalue-name').value.trim();
  let value;
  try {
    value = JSON.parse($('refvalue-value').value);
  } catch {
    message('The value must be JSON, e.g. ["1"] or "abc".', 'error', 'refvalues');
    return;
  }
  const provenance = {};
  if ($('refvalue-image-tag').value.trim()) provenance.image_tag = $('refvalue-image-tag').value.trim();
  if ($('refvalue-initdata').value.trim()) provenance.initdata_digest = $('refvalue-initdata').value.trim();
  // An RVPS message of the sample type: the payload is the base64 of {name: value}.
  const msg = {
    version: '0.1.0',
    type: 'sample',
    payload: b64(JSON.stringify({ [name]: value })),
    ...(Object.keys(provenance).length > 0 && { provenance }),
  };
  try {
    await call('POST', '/reference-value', JSON.stringify(msg));
    $('refvalue-value').value = '';
    await loadReferenceValues();
    message(`Registered ${name}.`, 'ok', 'refvalues');
  } catch (e) {
    message(e.message, 'error', 'refvalues');
  }
}

/** A click handler whose failure goes to the banner of the view it was clicked in. */
const guarded = (f) => () => {
  const view = current;
  return f().catch(failIn(view));
};

/** Rows of a trust vector given as `{claim: value}` (a dry run's answer), without meanings. */
function vectorRows(vector) {
  return Object.entries(vector || {}).map(([claim, value]) => ({ claim, value, tier: tierOf(value) }));
}

/** rust-ear's tiers: -1..1 none, |v| < 32 affirming, < 96 warning, else contraindicated. */
function tierOf(v) {
  if (v >= -1 && v <= 1) return 'none';
  if (v >= -32 && v < 32) return 'affirming';
  if (v >= -96 && v < 96) return 'warning';
  return 'contraindicated';
}

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', signOut);
  for (const b of document.querySelectorAll('nav button[data-view]')) {
    b.addEventListener('click', () => show(b.dataset.view));
  }
  $('verdict-filter').addEventListener('submit', (ev) => {
    ev.preventDefault();
    loadVerdicts().catch(failIn('verdicts'));
  });
  $('resource-form').addEventListener('submit', saveResource);
  $('policy-check').addEventListener(
    'click',
    guarded(async () => {
      await checkPolicy();
      message('Syntax OK.', 'ok', 'policy');
    }),
  );
  $('policy-dry-run').addEventListener('click', guarded(dryRun));
  $('policy-save').addEventListener('click', guarded(savePolicy));
  $('att-policy-list').addEventListener(
    'change',
    guarded(() => loadAttestationPolicy($('att-policy-list').value)),
  );
  $('att-policy-check').addEventListener(
    'click',
    guarded(async () => {
      await checkAttestationPolicy();
      message('Syntax OK.', 'ok', 'attestation');
    }),
  );
  $('att-policy-dry-run').addEventListener('click', guarded(dryRunAttestationPolicy));
  $('att-policy-save').addEventListener('click', guarded(saveAttestationPolicy));
  $('refvalue-form').addEventListener('submit', addReferenceValue);
  call('GET', '/admin/console/session').then(
    (r) => {
      csrf = r.csrf;
      signedIn(r.role);
    },
    () => show('signin'),
  );
});
