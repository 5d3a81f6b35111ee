// One user, for administrators (/console/user?id=N): account, plan and
// budget group (picked from the configured ones), spending windows with
// their spend, keys (disable, edit limits, windows, models, expiry),
// balance history, sessions (end them), invitees and the audit entries
// about the user. GET /api/admin/users/{id} gives it all at once.
'use strict';

const WINDOWS = ['5h', 'daily', 'weekly', 'monthly', 'lifetime'];
let userID = 0;
let page = null;        // the last GET /api/admin/users/{id}
let plans = { plans: [], groups: [] };
let servedModels = [];  // GET /api/user/models
let editingKey = null;
let myID = 0;          // the administrator looking

document.addEventListener('DOMContentLoaded', async () => {
  userID = Number(new URLSearchParams(location.search).get('id'));
  $('plan-form').addEventListener('submit', onSavePlan);
  $('plan-pick').addEventListener('change', showPlanDetail);
  $('user-windows-save').addEventListener('click', onSaveUserWindows);
  $('key-form').addEventListener('submit', onSaveKey);
  $('key-cancel').addEventListener('click', () => $('key-dialog').close());
  $('sessions-end-all').addEventListener('click', () => endSessions($('sessions-end-all'), ''));
  const me = await startAdminPage();
  if (!me) return;
  myID = me.id;
  if (!Number.isInteger(userID) || userID <= 0) {
    showError($('page-error'), new Error(tr('user.noID', 'Open a user from the users list: this address names none.')));
    return;
  }
  $('user-audit-more').href = '/console/audit?target=user:' + userID;
  try {
    [plans, servedModels] = await Promise.all([api('GET', '/api/admin/plans'),
      api('GET', '/api/user/models').then((r) => r.data)]);
  } catch (e) {
    showError($('page-error'), e);
  }
  windowInputs($('user-windows-form'), 'user-window');
  windowInputs($('key-windows'), 'key-window');
  if (await load()) $('admin').hidden = false;
  await Promise.all([loadBalance(), loadAudit()]);
});

// load reads the page's user again and draws everything from it.
async function load() {
  try {
    page = await api('GET', '/api/admin/users/' + userID);
  } catch (e) {
    showError($('page-error'), e);
    return false;
  }
  const u = page.user;
  document.title = u.username + ' · ' + tr('user.title', 'User');
  $('user-title').textContent = u.username;
  $('user-readonly').hidden = page.manage;
  for (const b of document.querySelectorAll('#plan-form button, #user-windows-save, #sessions-end-all')) b.disabled = !page.manage;
  showProfile(u);
  showPlan(u);
  showWindows();
  showKeys();
  showSessions();
  showInvitees();
  // reset link, SSO link, second factors: not for one's own account
  if (page.manage && u.id !== myID) SignInAdmin.mount($('signin-actions'), u);
  $('admin').dataset.loaded = String(Date.now());
  return true;
}

function showProfile(u) {
  const item = (label, value, id) => [el('dt', {}, label), el('dd', id ? { id } : {}, value)];
  $('profile').replaceChildren(
    ...item(tr('op.id', 'ID'), String(u.id)),
    ...item(tr('op.role', 'Role'), tr('role.' + u.role, u.role)),
    ...item(tr('op.status', 'Status'), tr('status.' + u.status, u.status), 'profile-status'),
    ...item(tr('balance.title', 'Balance'), usd(u.quota), 'profile-quota'),
    ...item(tr('op.used', 'Used'), tr('user.usedIn', '{amount} in {n} requests', { amount: usd(u.used_quota), n: u.request_count })),
    ...item(tr('invite.quota', 'Invitation quota:').replace(/[:：]$/, ''), usd(u.aff_quota)),
    ...item(tr('user.created', 'Signed up'), fmtTime(u.created_at * 1000)),
    ...item(tr('op.rateLimits', 'Rate limits'), limitsWords(u.limits)));
}

// limitsWords writes rate limits as a person reads them.
function limitsWords(l) {
  const parts = [];
  if (l && l.rpm) parts.push(tr('limits.rpm', '{n} requests/min', { n: l.rpm }));
  if (l && l.tpm) parts.push(tr('limits.tpm', '{n} tokens/min', { n: l.tpm }));
  if (l && l.max_parallel) parts.push(tr('limits.parallel', '{n} at once', { n: l.max_parallel }));
  return parts.length ? parts.join(', ') : tr('op.default', 'default');
}

// planNow says the user's plan and its end, or that they have none.
function planNow(u) {
  if (!u.plan) return tr('user.noPlan', 'No plan: requests are paid from the balance.');
  return u.plan_until ? tr('user.planUntilText', 'Plan {plan} until {date}.', { plan: u.plan, date: fmtTime(u.plan_until) })
    : tr('user.planForever', 'Plan {plan}, without end.', { plan: u.plan });
}

function showPlan(u) {
  $('plan-now').textContent = planNow(u) + (u.group ? ' ' + tr('user.inGroup', 'Budget group {group}.', { group: u.group }) : '');
  // the configured plans only: a name typed by hand could name nothing
  const none = el('option', { value: '' }, tr('user.planNone', '(no plan)'));
  const opts = plans.plans.map((p) => el('option', { value: p.name }, p.name));
  if (u.plan && !plans.plans.some((p) => p.name === u.plan)) opts.push(el('option', { value: u.plan }, tr('user.planGone', '{plan} (no longer configured)', { plan: u.plan })));
  $('plan-pick').replaceChildren(none, ...opts);
  $('plan-pick').value = u.plan || '';
  $('plan-until').value = u.plan_until ? localDay(new Date(u.plan_until)) : '';
  const groups = plans.groups.map((g) => el('option', { value: g.name }, g.name));
  if (u.group && !plans.groups.some((g) => g.name === u.group)) groups.push(el('option', { value: u.group }, u.group));
  $('group-pick').replaceChildren(el('option', { value: '' }, tr('user.groupNone', '(no group)')), ...groups);
  $('group-pick').value = u.group || '';
  showPlanDetail();
}

// showPlanDetail says what the picked plan pays for and its windows.
function showPlanDetail() {
  const p = plans.plans.find((x) => x.name === $('plan-pick').value);
  if (!p) { $('plan-detail').textContent = plans.plans.length ? '' : tr('user.noPlans', 'No plans are configured (plan in the Caddyfile).'); return; }
  const models = p.models.length ? p.models.join(', ') : tr('user.everyModel', 'every model');
  const windows = Object.entries(p.windows).map(([w, units]) => tr('budget.window.' + w, w) + ' ' + usd(units)).join(', ');
  $('plan-detail').textContent = tr('user.planPays', '{plan} pays for {models}.', { plan: p.name, models }) +
    (windows ? ' ' + tr('user.planWindows', 'Windows: {windows}.', { windows }) : '') +
    (p.then_balance ? ' ' + tr('user.thenBalance', 'Past its windows, the balance pays.') : '');
}

function localDay(d) {
  return d.getFullYear() + '-' + String(d.getMonth() + 1).padStart(2, '0') + '-' + String(d.getDate()).padStart(2, '0');
}

function onSavePlan(ev) {
  ev.preventDefault();
  $('plan-feedback').textContent = '';
  runAction($('plan-save'), $('plan-error'), async () => {
    const body = { plan: $('plan-pick').value, group: $('group-pick').value };
    const day = $('plan-until').value;
    if (body.plan && day) body.until = new Date(day + 'T23:59:59').toISOString().replace(/\.\d+Z$/, 'Z');
    await api('PUT', '/api/admin/users/' + userID + '/plan', body);
    await load();
    $('plan-feedback').textContent = planNow(page.user);
    await loadAudit();
  });
}

// windowInputs puts one USD field a window into box.
function windowInputs(box, prefix) {
  for (const w of WINDOWS) {
    box.append(el('div', {}, el('label', { for: prefix + '-' + w }, tr('budget.window.' + w, w)),
      el('input', { id: prefix + '-' + w, inputmode: 'decimal', autocomplete: 'off' })));
  }
}

function fillWindows(prefix, units) {
  for (const w of WINDOWS) $(prefix + '-' + w).value = units && units[w] ? usd(units[w]).slice(1) : '';
}

// windowChange is what changed of the window fields, as PUT .../budget
// takes it: USD strings, "0" to remove.
function windowChange(prefix, had) {
  const out = {};
  for (const w of WINDOWS) {
    const v = $(prefix + '-' + w).value.trim();
    const units = v === '' ? 0 : usdToUnits(v);
    if (units !== ((had && had[w]) || 0)) out[w] = v === '' ? '0' : v.replace(/^\$/, '');
  }
  return out;
}

function showWindows() {
  const b = page.budget;
  const rows = ((b && b.windows) || []).map((w) => el('tr', { 'data-window': w.subject + '/' + w.window },
    el('td', {}, windowOwner(w.subject) + ' · ' + tr('budget.window.' + w.window, w.window)),
    el('td', { class: 'num' }, usd(w.spent) + ' / ' + usd(w.limit)),
    el('td', {}, w.reset_at ? fmtTime(w.reset_at) : tr('budget.never', 'never'))));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 3, class: 'muted' }, tr('user.noWindows', 'No spending window applies.'))));
  $('windows').replaceChildren(...rows);
  fillWindows('user-window', page.windows);
}

function windowOwner(subject) {
  const [kind, rest] = subject.split(':');
  return tr('user.of.' + kind, kind, { name: (rest || '').split('/')[0] });
}

function onSaveUserWindows() {
  runAction($('user-windows-save'), $('user-windows-error'), async () => {
    const windows = windowChange('user-window', page.windows);
    if (Object.keys(windows).length) await api('PUT', '/api/admin/users/' + userID + '/budget', { windows });
    await load();
    await loadAudit();
  });
}

function showKeys() {
  const rows = page.tokens.map(keyRow);
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 10, class: 'muted' }, tr('user.noKeys', 'No keys.'))));
  $('keys').replaceChildren(...rows);
}

function keyRow(k) {
  const actions = el('span', { class: 'row' });
  if (page.manage) {
    const on = k.status === 'enabled';
    const b = el('button', { type: 'button', class: on ? 'danger' : 'secondary',
      'aria-label': tr(on ? 'keys.disableNamed' : 'keys.enableNamed', on ? 'Disable key {name}' : 'Enable key {name}', { name: k.name }),
      onclick: () => runAction(b, $('keys-error'), async () => {
        await api('PATCH', '/api/admin/tokens/' + k.id, { status: on ? 'disabled' : 'enabled' });
        await load();
        await loadAudit();
      }) }, on ? tr('op.disable', 'Disable') : tr('op.enable', 'Enable'));
    const e = el('button', { type: 'button', class: 'secondary', 'aria-label': tr('user.editKeyNamed', 'Edit key {name}', { name: k.name }),
      onclick: () => openKey(k) }, tr('op.edit', 'Edit'));
    actions.append(b, e);
  }
  const windows = Object.entries(k.windows || {}).map(([w, units]) => tr('budget.window.' + w, w) + ' ' + usd(units)).join(', ');
  return el('tr', { 'data-token-id': k.id },
    el('td', { class: 'soft' }, k.name + (k.management ? ' · ' + tr('user.management', 'management key') : '')),
    el('td', {}, el('code', {}, k.key_prefix + '…')),
    el('td', {}, tr('status.' + k.status, k.status)),
    el('td', { class: 'num' }, usd(k.used_quota)),
    el('td', { class: 'num' }, k.quota_limit ? usd(k.quota_limit) : tr('user.none', 'none')),
    el('td', { class: 'soft' }, k.models.length ? k.models.join(', ') : tr('user.everyModel', 'every model')),
    el('td', {}, limitsWords(k.limits)),
    el('td', { class: 'soft' }, windows || tr('user.none', 'none')),
    el('td', {}, k.expires_at ? fmtTime(k.expires_at) : tr('op.never', 'never')),
    el('td', {}, actions));
}

function openKey(k) {
  editingKey = k;
  $('key-dialog-name').textContent = k.name;
  $('key-name').value = k.name;
  $('key-quota').value = k.quota_limit ? usd(k.quota_limit).slice(1) : '';
  $('key-expires').value = k.expires_at ? localDay(new Date(k.expires_at)) : '';
  const ids = servedModels.map((m) => m.id);
  for (const m of k.models) if (!ids.includes(m)) ids.push(m);
  $('key-models').replaceChildren($('key-models').firstElementChild, ...ids.map((id, i) => el('label', { for: 'key-model-' + i },
    el('input', { type: 'checkbox', id: 'key-model-' + i, value: id, checked: k.models.includes(id) }), id)));
  const l = k.limits || {};
  $('key-rpm').value = l.rpm || '';
  $('key-tpm').value = l.tpm || '';
  $('key-parallel').value = l.max_parallel || '';
  fillWindows('key-window', k.windows);
  showError($('key-error'), null);
  $('key-dialog').showModal();
}

function onSaveKey(ev) {
  ev.preventDefault();
  const k = editingKey;
  runAction($('key-save'), $('key-error'), async () => {
    const body = {};
    const name = $('key-name').value.trim();
    if (name !== k.name) body.name = name;
    const q = $('key-quota').value.trim();
    const quota = q ? usdToUnits(q) : 0;
    if (quota !== (k.quota_limit || 0)) body.quota_limit = quota;
    const day = $('key-expires').value;
    const before = k.expires_at ? localDay(new Date(k.expires_at)) : '';
    if (day !== before) body.expires_at = day ? new Date(day + 'T23:59:59').toISOString().replace(/\.\d+Z$/, 'Z') : '';
    const models = [...$('key-models').querySelectorAll('input:checked')].map((b) => b.value);
    if (models.join('\n') !== k.models.join('\n')) body.models = models;
    const n = (id) => {
      const v = $(id).value.trim();
      if (v === '') return 0;
      if (!/^\d+$/.test(v)) throw new Error(tr('op.limitsWhole', 'Rate limits are whole numbers; leave a field empty for the default.'));
      return Number(v);
    };
    const l = k.limits || {};
    const want = { rpm: n('key-rpm'), tpm: n('key-tpm'), max_parallel: n('key-parallel') };
    if (want.rpm !== (l.rpm || 0) || want.tpm !== (l.tpm || 0) || want.max_parallel !== (l.max_parallel || 0)) body.limits = want;
    const windows = windowChange('key-window', k.windows);
    if (Object.keys(body).length) await api('PATCH', '/api/admin/tokens/' + k.id, body);
    if (Object.keys(windows).length) await api('PUT', '/api/admin/tokens/' + k.id + '/budget', { windows });
    $('key-dialog').close();
    await load();
    await loadAudit();
  });
}

function showSessions() {
  const rows = page.sessions.map((s) => {
    const b = el('button', { type: 'button', class: 'danger', disabled: !page.manage,
      'aria-label': tr('user.endSessionNamed', 'End session {id}', { id: s.id }), onclick: () => endSessions(b, s.id) }, tr('user.end', 'End'));
    return el('tr', { 'data-session': s.id }, el('td', {}, el('code', {}, s.id.slice(0, 8))), el('td', {}, fmtTime(s.created_at)),
      el('td', {}, fmtTime(s.expires_at)), el('td', {}, b));
  });
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, tr('user.noSessions', 'Not logged in anywhere.'))));
  $('sessions').replaceChildren(...rows);
  $('sessions-end-all').disabled = !page.manage || !page.sessions.length;
}

function endSessions(button, id) {
  const q = id ? tr('user.endOneConfirm', 'End this session? The user is logged out on that device.')
    : tr('user.endAllConfirm', 'End every session of {name}? They are logged out everywhere.', { name: page.user.username });
  if (!confirm(q)) return;
  runAction(button, $('sessions-error'), async () => {
    await api('DELETE', '/api/admin/users/' + userID + '/sessions' + (id ? '/' + id : ''));
    await load();
    await loadAudit();
  });
}

function showInvitees() {
  const rows = page.invitees.map((v) => el('tr', {},
    el('td', {}, el('a', { href: '/console/user?id=' + v.id }, v.username)), el('td', {}, fmtTime(v.created_at)),
    el('td', {}, v.reward_owed ? tr('invite.owed', '{reward} owed, paid by a first payment of {min} or more', { reward: usd(v.reward_owed), min: usd(v.reward_min) })
      : tr('invite.settled', 'nothing owed'))));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 3, class: 'muted' }, tr('user.noInvitees', "Nobody signed up with this user's code."))));
  $('invitees').replaceChildren(...rows);
}

async function loadBalance() {
  try {
    const r = await api('GET', '/api/admin/users/' + userID + '/balance');
    const rows = r.data.map((e) => el('tr', { 'data-kind': e.kind },
      el('td', {}, e.kind === 'spend' ? fmtDate(e.at) : fmtTime(e.at)),
      el('td', {}, tr('user.kind.' + e.kind, e.kind)),
      el('td', { class: 'num' + (e.amount < 0 ? ' bad' : '') }, e.kind === 'plan_code' ? '—' : usd(e.amount)),
      el('td', { class: 'soft' }, balanceDetail(e))));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, tr('user.noBalance', 'Nothing came in or went out in these days.'))));
    $('balance').replaceChildren(...rows);
  } catch (e) {
    showError($('balance-error'), e);
  }
}

function balanceDetail(e) {
  if (e.kind === 'spend') return tr('user.spendDetail', '{n} requests', { n: e.requests });
  if (e.kind === 'plan_code') return tr('user.planCodeDetail', 'plan {plan} for {days} days', { plan: e.plan, days: e.plan_days });
  if (e.kind === 'credit') return tr('user.creditDetail', 'by {actor}', { actor: e.actor });
  if (e.kind === 'payment' || e.kind === 'refund' || e.kind === 'dispute') return tr('user.paymentDetail', 'through {provider}', { provider: e.actor });
  return '';
}

// loadAudit lists the newest entries about the user and their keys (the
// log keeps a key's changes under key:<id>), merged newest first.
async function loadAudit() {
  try {
    const targets = ['user:' + userID, ...((page && page.tokens) || []).slice(0, 20).map((k) => 'key:' + k.id)];
    const lists = await Promise.all(targets.map((tg) => api('GET', '/api/admin/audit?limit=20&target=' + encodeURIComponent(tg))));
    const entries = lists.flatMap((r) => r.data).sort((a, b) => b.id - a.id).slice(0, 20);
    const rows = entries.map((a) => el('tr', { 'data-action': a.action },
      el('td', {}, fmtTime(a.created_at)), el('td', {}, a.actor), el('td', {}, el('code', {}, a.action), ' ', el('span', { class: 'muted' }, a.target)),
      el('td', { class: 'soft' }, changeWords(a.before || {}, a.after || {}))));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, tr('audit.none', 'Nothing matches.'))));
    $('user-audit').replaceChildren(...rows);
  } catch (e) {
    showError($('page-error'), e);
  }
}

// changeWords is an entry's changed fields on one line, "field: before →
// after" (the audit page shows them in full).
function changeWords(before, after) {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()
    .filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  const val = (k, v) => (v === null || v === undefined ? '—' : typeof v === 'number' && /quota/.test(k) ? usd(v) : typeof v === 'object' ? JSON.stringify(v) : String(v));
  return keys.map((k) => k + ': ' + (k in before ? val(k, before[k]) + ' → ' : '') + val(k, after[k])).join('; ') || '—';
}
