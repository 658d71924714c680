// The KBS operator console: plain DOM, same-origin calls only. The admin JWT is sent once to sign in;
// afterwards the HttpOnly session cookie authenticates and the CSRF token goes in a header on every call
// that changes state. Values are always set with textContent, never parsed as HTML.

const API = '/kbs/v0';
let csrf = '';
let verdictsById = new Map();
/** The attestation policy to open next (the one that appraised a verdict being dry run). */
let wantedPolicy;

const $ = (id) => document.getElementById(id);

function message(text, kind) {
  const m = $('message');
  m.textContent = text;
  m.className = kind || '';
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
function show(view) {
  const views = ['signin', 'verdicts', 'resources', 'policy', 'attestation', 'refvalues', 'health'];
  for (const v of views) $(`${v}-view`).hidden = v !== view;
  for (const b of document.querySelectorAll('nav button[data-view]')) {
    b.classList.toggle('active', b.dataset.view === view);
  }
  if (view === 'verdicts') loadVerdicts().catch((e) => message(e.message, 'error'));
  if (view === 'resources') loadResources().catch((e) => message(e.message, 'error'));
  if (view === 'policy') loadPolicy().catch((e) => message(e.message, 'error'));
  if (view === 'health') loadHealth().catch((e) => message(e.message, 'error'));
  if (view === 'attestation') loadAttestationPolicies().catch((e) => message(e.message, 'error'));
  if (view === 'refvalues') loadReferenceValues().catch((e) => message(e.message, 'error'));
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
    message('Signed in.', 'ok');
    signedIn(r.role);
  } catch (e) {
    message(e.message, 'error');
  }
}

async function signOut() {
  try {
    await call('DELETE', '/admin/console/session');
  } catch (e) {
    message(e.message, 'error');
  }
  csrf = '';
  $('nav').hidden = true;
  show('signin');
}

// ---- verdicts
function summary(v) {
  if (v.kind === 'resource') return `${v.method} ${v.resource}`;
  return (v.policyIds || []).join(', ');
}

function why(v) {
  if (v.reason) return v.reason;
  const failing = [];
  for (const a of v.appraisals || []) for (const f of a.failing) failing.push(`${a.name}: ${f}`);
  return failing.join('; ');
}

async function loadVerdicts() {
  const q = new URLSearchParams();
  if ($('filter-kind').value) q.set('kind', $('filter-kind').value);
  if ($('filter-status').value) q.set('status', $('filter-status').value);
  if ($('filter-tee').value.trim()) q.set('tee', $('filter-tee').value.trim());
  q.set('limit', '200');
  const r = await call('GET', `/admin/verdicts?${q}`);
  const tbody = $('verdict-table').querySelector('tbody');
  tbody.replaceChildren();
  verdictsById = new Map();
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

function openVerdict(id) {
  const v = verdictsById.get(id);
  if (!v) return;
  for (const tr of $('verdict-table').querySelectorAll('tbody tr')) {
    tr.classList.toggle('selected', tr.dataset.id === String(id));
  }
  $('verdict-detail').hidden = false;
  $('verdict-detail-title').textContent = `#${v.id} ${v.kind} ${v.status}`;
  const box = $('verdict-appraisals');
  box.replaceChildren();
  for (const a of v.appraisals || []) {
    const d = el('div');
    d.append(el('strong', `${a.name} (policy ${a.policyId}): `));
    d.append(el('span', a.status, `status-${a.status}`));
    d.append(el('div', `trust vector: ${JSON.stringify(a.trustVector)}`));
    for (const f of a.failing) d.append(el('div', f, 'failing'));
    for (const [name, rv] of Object.entries(a.referenceValues || {})) {
      d.append(
        el(
          'div',
          `${name}: evidence ${JSON.stringify(rv.evidence)}, registered ${JSON.stringify(rv.expected)}`,
          'failing',
        ),
      );
    }
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
      try {
        await call('DELETE', `/resource/${res.path.split('/').map(encodeURIComponent).join('/')}`);
        message(`Deleted ${res.path}.`, 'ok');
        await loadResources();
      } catch (e) {
        message(e.message, 'error');
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
    message(`Saved ${path}.`, 'ok');
    await loadResources();
  } catch (e) {
    message(e.message, 'error');
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
  message(`Dry run on verdict #${verdict}: ${r.allow ? 'allowed' : 'denied'}`, r.allow ? 'ok' : 'error');
}

async function savePolicy() {
  await checkPolicy();
  await call('POST', '/resource-policy', JSON.stringify({ policy: b64url($('policy-text').value) }));
  message('Resource policy saved.', 'ok');
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
  box.append(el('div', `trust vector: ${JSON.stringify(r.trustVector)}`));
  message(
    `Dry run on verdict #${verdict} ${r.submod}: ${r.status}`,
    r.status === 'affirming' ? 'ok' : 'error',
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
  message(`Attestation policy ${id} saved.`, 'ok');
  await loadAttestationPolicies();
}

// ---- reference values
async function loadReferenceValues() {
  const r = await call('GET', '/admin/reference-values');
  const tbody = $('refvalue-table').querySelector('tbody');
  tbody.replaceChildren();
  for (const rv of r.referenceValues) {
    const tr = el('tr');
    tr.append(el('td', rv.name));
    tr.append(el('td', rv.error ? rv.error : JSON.stringify(rv.value), rv.error ? 'failing' : 'value'));
    tr.append(el('td', rv.expiration || ''));
    const td = el('td');
    const expire = el('button', 'Expire');
    expire.type = 'button';
    expire.addEventListener('click', async () => {
      try {
        await call('DELETE', `/admin/reference-values/${pathPart(rv.name)}`);
        await loadReferenceValues();
        message(`Expired ${rv.name}.`, 'ok');
      } catch (e) {
        message(e.message, 'error');
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
    message('The value must be JSON, e.g. ["1"] or "abc".', 'error');
    return;
  }
  // An RVPS message of the sample type: the payload is the base64 of {name: value}.
  const msg = { version: '0.1.0', type: 'sample', payload: b64(JSON.stringify({ [name]: value })) };
  try {
    await call('POST', '/reference-value', JSON.stringify(msg));
    $('refvalue-value').value = '';
    await loadReferenceValues();
    message(`Registered ${name}.`, 'ok');
  } catch (e) {
    message(e.message, 'error');
  }
}

const guarded = (f) => () => f().catch((e) => message(e.message, 'error'));

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', signOut);
  for (const b of document.querySelectorAll('nav button[data-view]')) {
    b.addEventListener('click', () => show(b.dataset.view));
  }
  $('verdict-filter').addEventListener('submit', (ev) => {
    ev.preventDefault();
    loadVerdicts().catch((e) => message(e.message, 'error'));
  });
  $('resource-form').addEventListener('submit', saveResource);
  $('policy-check').addEventListener(
    'click',
    guarded(async () => {
      await checkPolicy();
      message('Syntax OK.', 'ok');
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
      message('Syntax OK.', 'ok');
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
