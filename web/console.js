// The home view: base address and SDK examples for everyone, the login
// form for visitors, and the dashboard (balance, invitations, keys, usage,
// spend chart) once logged in.
'use strict';

let tokensById = new Map();
let models = [];          // GET /api/user/models: what keys may name
let editing = null;       // the key the edit dialog shows
let usageCursor = '';     // next_cursor of the page shown
let usageFilter = {};

document.addEventListener('DOMContentLoaded', () => {
  $('copy-base').addEventListener('click', () => copyText($('base-url').textContent, $('copy-base-feedback'), $('base-url')));
  setupTabs();
  $('logout').addEventListener('click', logout);
  $('login-form').addEventListener('submit', onLogin);
  if ($('register-form')) $('register-form').addEventListener('submit', onRegister);
  $('redeem-form').addEventListener('submit', onRedeem);
  $('transfer-form').addEventListener('submit', onTransfer);
  $('copy-invite').addEventListener('click', () => copyText($('invite-link').textContent, $('copy-invite-feedback'), $('invite-link')));
  $('logout-all').addEventListener('click', onLogoutAll);
  $('password-form').addEventListener('submit', onChangePassword);
  $('edit-form').addEventListener('submit', onSaveToken);
  $('edit-cancel').addEventListener('click', () => $('edit-key').close());
  $('token-form').addEventListener('submit', onCreateToken);
  $('copy-key').addEventListener('click', () => copyText($('new-key-value').textContent, $('copy-key-feedback'), $('new-key-value')));
  $('usage-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadUsage(true); });
  $('usage-first').addEventListener('click', () => loadUsage(true));
  $('usage-next').addEventListener('click', () => loadUsage(false));
  start();
});

async function start() {
  const user = await pageUser();
  if (user === undefined) return;
  if (!user) {
    $('login-card').hidden = false;
    // an invitation link (/?aff=CODE) fills in the code at sign-up
    const aff = new URLSearchParams(location.search).get('aff');
    if (aff && $('reg-aff')) {
      $('reg-aff').value = aff;
      $('reg-username').focus();
    } else {
      $('login-username').focus();
    }
    await showSSO();
    return;
  }
  showUser(user);
  $('dashboard').hidden = false;
  $('logout').hidden = false;
  // tokens first: the usage table names the key of each row
  await Promise.all([loadTokens().then(() => loadUsage(true)), loadChart(), loadModels(), loadInvitations()]);
}

// showSSO offers single sign-on when the gateway has it, and says why a
// sign-in that came back here failed (the callback's ?sso_error=reason).
async function showSSO() {
  const params = new URLSearchParams(location.search);
  const reason = params.get('sso_error');
  if (reason) {
    showError($('sso-error'), new Error(ssoMessage(reason)));
    // a reload or a bookmark should not repeat an old failure
    params.delete('sso_error');
    history.replaceState(null, '', location.pathname + (params.size ? '?' + params : '') + location.hash);
  }
  try {
    $('sso').hidden = !(await api('GET', '/api/user/sso')).oidc;
  } catch (e) {
    showError($('sso-error'), e);
  }
}

// ssoMessage words a failed sign-in's reason for the person.
function ssoMessage(reason) {
  const known = ['unavailable', 'expired', 'denied', 'failed', 'no_email', 'email_unverified',
    'domain_not_allowed', 'account_disabled', 'name_taken'];
  return t('sso.error.' + (known.includes(reason) ? reason : 'other'));
}

async function loadModels() {
  try {
    models = (await api('GET', '/api/user/models')).data;
  } catch (e) {
    showError($('token-error'), e);
    return;
  }
  $('token-models').replaceChildren($('token-models').firstElementChild, ...modelBoxes('new-model', []));
  $('usage-models').replaceChildren(...models.map((m) => el('option', { value: m.id })));
}

// modelBoxes are one checkbox a model, those in picked ticked; a model a
// key keeps that is no longer served is shown too, so saving keeps it.
function modelBoxes(prefix, picked) {
  const ids = models.map((m) => m.id);
  for (const m of picked) if (!ids.includes(m)) ids.push(m);
  return ids.map((id, i) => el('label', { for: prefix + '-' + i },
    el('input', { type: 'checkbox', id: prefix + '-' + i, value: id, checked: picked.includes(id) }), id));
}

function pickedModels(fieldset) {
  return [...fieldset.querySelectorAll('input[type="checkbox"]:checked')].map((b) => b.value);
}

function showUser(u) {
  $('whoami').textContent = u.username + (u.role !== 'user' ? ' (' + u.role + ')' : '');
  $('nav-admin').hidden = !(u.role === 'admin' || u.role === 'root');
  $('quota').textContent = usd(u.quota);
  $('used-quota').textContent = usd(u.used_quota);
  $('request-count').textContent = String(u.request_count);
  $('aff-code').textContent = u.aff_code || t('invite.none');
  $('aff-quota').textContent = usd(u.aff_quota);
  showBudget(u.budget);
}

// showBudget lists the spending windows that apply to the user (their
// own, their group's, their plan's) under the balance: spent of limit and
// when each resets (docs/budgets.md).
function showBudget(b) {
  let box = $('budget-windows');
  if (!box) {
    box = el('div', { id: 'budget-windows' });
    $('redeem-form').before(box);
  }
  box.replaceChildren();
  // when a plan pays, the home page says so: requests it covers cost the
  // balance nothing
  $('plan-pays').hidden = !(b && b.plan);
  if (b && b.plan) {
    $('plan-pays').textContent = b.plan_until ? t('plan.paysUntil', { plan: b.plan, date: fmtTime(b.plan_until) }) : t('plan.pays', { plan: b.plan });
  }
  if (!b || (!b.plan && !(b.windows || []).length)) return;
  box.append(el('h3', {}, t('budget.title')));
  if (b.plan) {
    box.append(el('p', { id: 'budget-plan' }, t('budget.plan', { plan: b.plan }) +
      (b.plan_until ? ' ' + t('budget.until', { date: fmtTime(b.plan_until) }) : '')));
  }
  const whose = (subject) => {
    const [kind, rest] = subject.split(':');
    return t('budget.of.' + kind, { name: (rest || '').split('/')[0] });
  };
  const rows = (b.windows || []).map((w) => el('tr', { 'data-window': w.window },
    el('td', { class: 'soft' }, whose(w.subject) + ' · ' + t('budget.window.' + w.window)),
    el('td', { class: 'num' }, usd(w.spent) + ' / ' + usd(w.limit)),
    el('td', { class: 'soft' }, w.reset_at ? fmtTime(w.reset_at) : t('budget.never'))));
  if (rows.length) {
    // in a table-wrap, so a phone stacks its rows instead of scrolling
    const table = el('table', { id: 'budget-table' },
      el('thead', {}, el('tr', {}, el('th', {}, t('budget.col.window')), el('th', { class: 'num' }, t('budget.col.spent')), el('th', {}, t('budget.col.reset')))),
      el('tbody', {}, ...rows));
    box.append(el('div', { class: 'table-wrap' }, table));
    labelCells(table);
  }
}

async function refreshUser() {
  const u = await currentUser();
  if (u) showUser(u);
}

function onLogin(ev) {
  ev.preventDefault();
  runAction($('login-submit'), $('login-error'), async () => {
    const r = await api('POST', '/api/user/login', { username: $('login-username').value, password: $('login-password').value });
    if (r && r.second_factor_required) return showSecondStep(r); // signin.js
    location.reload();
  });
}

function onChangePassword(ev) {
  ev.preventDefault();
  $('password-feedback').textContent = '';
  runAction($('password-submit'), $('password-error'), async () => {
    await api('POST', '/api/user/password', { current_password: $('password-current').value, password: $('password-new').value });
    $('password-form').reset();
    $('password-feedback').textContent = t('password.changed');
  });
}

function onRegister(ev) {
  ev.preventDefault();
  runAction($('register-submit'), $('register-error'), async () => {
    const body = { username: $('reg-username').value, password: $('reg-password').value };
    if ($('reg-aff').value.trim()) body.aff_code = $('reg-aff').value.trim();
    await api('POST', '/api/user/register', body);
    // a login error from before signing up no longer applies
    showError($('login-error'), null);
    $('register-feedback').textContent = t('register.done');
    await api('POST', '/api/user/login', { username: body.username, password: body.password });
    location.reload();
  });
}

function onRedeem(ev) {
  ev.preventDefault();
  $('redeem-feedback').textContent = '';
  runAction($('redeem-submit'), $('redeem-error'), async () => {
    const r = await api('POST', '/api/user/topup', { key: $('redeem-key').value.trim() });
    $('redeem-key').value = '';
    // the balance read after the topup, so the message cannot be stale
    const u = await currentUser();
    if (u) showUser(u);
    await Promise.all([loadChart(), loadUsage(true), loadInvitations()]);
    // a plan code names its plan and when it ends
    $('redeem-feedback').textContent = r.plan ? (r.plan_until ? t('redeem.plan', { plan: r.plan, date: fmtTime(r.plan_until) }) : t('redeem.planForever', { plan: r.plan }))
      : t('redeem.done', { balance: usd(u.quota) });
  });
}

function onTransfer(ev) {
  ev.preventDefault();
  $('transfer-feedback').textContent = '';
  runAction($('transfer-submit'), $('transfer-error'), async () => {
    const text = $('transfer-amount').value.trim();
    const body = text ? { quota: usdToUnits(text) } : {};
    const r = await api('POST', '/api/user/aff_transfer', body);
    $('transfer-amount').value = '';
    await refreshUser();
    $('transfer-feedback').textContent = t('invite.moved', { amount: usd(r.transferred) });
  });
}

function onLogoutAll() {
  runAction($('logout-all'), $('logout-all-error'), async () => {
    await api('POST', '/api/user/logout_all', {});
    location.href = '/';
  });
}

function onCreateToken(ev) {
  ev.preventDefault();
  runAction($('token-submit'), $('token-error'), async () => {
    const body = { name: $('token-name').value.trim() };
    const quota = $('token-quota').value.trim();
    if (quota) body.quota_limit = usdToUnits(quota);
    const picked = pickedModels($('token-models'));
    if (picked.length) body.models = picked;
    const days = $('token-days').value;
    if (days) body.expires_at = new Date(Date.now() + Number(days) * 86400000).toISOString().replace(/\.\d+Z$/, 'Z');
    if ($('token-management').checked) body.management = true;
    const created = await api('POST', '/api/user/tokens', body);
    $('token-form').reset();
    $('new-key-name').textContent = created.name;
    $('new-key-value').textContent = created.key;
    $('copy-key-feedback').textContent = '';
    $('new-key').hidden = false;
    $('copy-key').focus();
    await loadTokens();
  });
}

async function loadTokens() {
  const tbody = $('tokens');
  try {
    const r = await api('GET', '/api/user/tokens');
    tokensById = new Map(r.data.map((tok) => [tok.id, tok]));
    tbody.replaceChildren(...r.data.map(tokenRow));
    if (!r.data.length) tbody.append(el('tr', {}, el('td', { colspan: 9, class: 'muted' }, t('keys.none'))));
  } catch (e) {
    showError($('token-error'), e);
  }
}

function tokenRow(tok) {
  const toggle = tok.status === 'enabled' ? t('keys.disable') : t('keys.enable');
  const err = $('token-error');
  const toggleBtn = el('button', { type: 'button', class: 'secondary', 'aria-label': t(tok.status === 'enabled' ? 'keys.disableNamed' : 'keys.enableNamed', { name: tok.name }),
    onclick: () => runAction(toggleBtn, err, async () => {
      await api('PATCH', '/api/user/tokens/' + tok.id, { status: tok.status === 'enabled' ? 'disabled' : 'enabled' });
      await loadTokens();
    }) }, toggle);
  const editBtn = el('button', { type: 'button', class: 'secondary', 'aria-label': t('keys.editNamed', { name: tok.name }),
    onclick: () => openEdit(tok) }, t('keys.edit'));
  const deleteBtn = el('button', { type: 'button', class: 'danger', 'aria-label': t('keys.deleteNamed', { name: tok.name }),
    onclick: () => {
      if (!confirm(t('keys.confirmDelete', { name: tok.name }))) return;
      runAction(deleteBtn, err, async () => {
        await api('DELETE', '/api/user/tokens/' + tok.id, {});
        await loadTokens();
      });
    } }, t('keys.delete'));
  return el('tr', { 'data-token-id': tok.id },
    el('td', { class: 'soft' }, tok.name, tok.management ? el('span', { class: 'muted' }, ' (' + t('keys.managementTag') + ')') : null),
    el('td', {}, el('code', {}, tok.key_prefix + '…')),
    el('td', {}, statusText(tok.status)),
    el('td', { class: 'num' }, usd(tok.used_quota)),
    el('td', { class: 'num' }, tok.quota_limit ? usd(tok.quota_limit) : '—'),
    el('td', { class: 'soft' }, tok.models.length ? tok.models.join(', ') : t('keys.allModels')),
    el('td', { class: 'soft' }, limitsText(tok.limits)),
    el('td', { class: 'soft' }, tok.expires_at ? fmtTime(tok.expires_at) : t('keys.never')),
    el('td', {}, el('span', { class: 'row' }, editBtn, toggleBtn, deleteBtn)));
}

// statusText words a key's status; one the dictionary lacks shows as it is.
function statusText(status) {
  return I18N['status.' + status] ? t('status.' + status) : status;
}

// limitsText shows a key's own rate limits; the account API lets only
// administrators set them, so the edit dialog shows them and no field.
function limitsText(l) {
  const parts = [];
  if (l && l.rpm) parts.push(t('limits.rpm', { n: l.rpm }));
  if (l && l.tpm) parts.push(t('limits.tpm', { n: l.tpm }));
  if (l && l.max_parallel) parts.push(t('limits.parallel', { n: l.max_parallel }));
  return parts.length ? parts.join(', ') : t('limits.default');
}

function openEdit(tok) {
  editing = tok;
  $('edit-name').value = tok.name;
  $('edit-quota').value = tok.quota_limit ? usd(tok.quota_limit).slice(1) : '';
  $('edit-expires').value = tok.expires_at ? localDate(new Date(tok.expires_at)) : '';
  $('edit-models').replaceChildren($('edit-models').firstElementChild, ...modelBoxes('edit-model', tok.models));
  $('edit-limits').textContent = t('edit.limits', { limits: limitsText(tok.limits) });
  showError($('edit-error'), null);
  $('edit-key').showModal();
  $('edit-name').focus();
}

function localDate(d) {
  const pad = (n) => String(n).padStart(2, '0');
  return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate());
}

function onSaveToken(ev) {
  ev.preventDefault();
  runAction($('edit-save'), $('edit-error'), async () => {
    const quota = $('edit-quota').value.trim();
    const body = { name: $('edit-name').value.trim(), quota_limit: quota ? usdToUnits(quota) : 0, models: pickedModels($('edit-models')) };
    const day = $('edit-expires').value;
    // an unchanged expiry is left out: an expired key can still be renamed
    const before = editing.expires_at ? localDate(new Date(editing.expires_at)) : '';
    if (day !== before) body.expires_at = day ? new Date(day + 'T23:59:59').toISOString().replace(/\.\d+Z$/, 'Z') : '';
    await api('PATCH', '/api/user/tokens/' + editing.id, body);
    $('edit-key').close();
    await loadTokens();
  });
}

async function loadUsage(fromStart) {
  if (fromStart) {
    usageCursor = '';
    usageFilter = {};
    // a part of a name in any case: "GPT" finds gpt-4o and gpt-4o-mini
    const model = $('usage-model').value.trim();
    if (model) usageFilter.model_contains = model;
    const since = $('usage-since').value;
    if (since) usageFilter.since = new Date(since + 'T00:00:00').toISOString().replace(/\.\d+Z$/, 'Z');
  }
  const q = new URLSearchParams({ limit: '20', ...usageFilter });
  if (!fromStart && usageCursor) q.set('after', usageCursor);
  showError($('usage-error'), null);
  $('usage').dataset.loading = 'yes';
  try {
    const r = await api('GET', '/api/user/usage?' + q);
    const tbody = $('usage');
    tbody.replaceChildren(...r.data.map((l) => el('tr', {},
      el('td', { class: 'soft' }, fmtTime(l.created_at)),
      el('td', { class: 'soft' }, l.model),
      el('td', { class: 'soft' }, tokensById.has(l.token_id) ? tokensById.get(l.token_id).name : el('span', { class: 'muted' }, t('usage.deletedKey'))),
      el('td', { class: 'num' }, l.prompt_tokens),
      el('td', { class: 'num' }, l.completion_tokens),
      // a row a plan paid cost the balance nothing: it says so
      el('td', { class: 'num' }, l.plan ? el('span', { 'data-plan': l.plan }, usd(l.cost) + ' · ' + t('usage.byPlan', { plan: l.plan })) : usd(l.cost)),
      el('td', { class: 'num' }, l.status),
      el('td', { class: 'num' }, t('usage.ms', { n: l.latency_ms })),
      el('td', { class: 'error-text' }, l.error || ''))));
    if (!r.data.length) tbody.append(el('tr', {}, el('td', { colspan: 9, class: 'muted' }, usageFilter.model_contains || usageFilter.since ? t('usage.noMatch') : t('usage.none'))));
    usageCursor = r.next_cursor;
    $('usage-next').disabled = !r.next_cursor;
  } catch (e) {
    showError($('usage-error'), e);
  } finally {
    $('usage').dataset.loading = 'no';
  }
}

async function loadChart() {
  const svg = $('chart');
  try {
    const r = await api('GET', '/api/user/usage/daily?days=30');
    const peak = Math.max(0, ...r.data.map((d) => d.cost));
    const max = Math.max(1, peak);
    const w = 600 / r.data.length;
    const ns = 'http://www.w3.org/2000/svg';
    const nodes = [];
    const labels = [];
    let total = 0;
    r.data.forEach((d, i) => {
      total += d.cost;
      const h = Math.round((d.cost / max) * 130);
      const rect = document.createElementNS(ns, 'rect');
      rect.setAttribute('x', String(i * w + 1));
      rect.setAttribute('y', String(140 - h));
      rect.setAttribute('width', String(Math.max(1, w - 2)));
      rect.setAttribute('height', String(Math.max(h, d.cost > 0 ? 1 : 0)));
      const title = document.createElementNS(ns, 'title');
      title.textContent = t('chart.bar', { day: d.day, cost: usd(d.cost), n: d.requests });
      rect.append(title);
      nodes.push(rect);
      // a label a week, counted back from today so today always has one;
      // in HTML under the chart, which stretches, so the text does not
      if ((r.data.length - 1 - i) % 7 === 0) {
        const label = el('span', {}, d.day.slice(5));
        label.style.left = ((i + 0.5) * 100 / r.data.length).toFixed(2) + '%'; // CSSOM: the CSP refuses style attributes
        labels.push(label);
      }
    });
    const base = document.createElementNS(ns, 'line');
    base.setAttribute('x1', '0');
    base.setAttribute('x2', '600');
    base.setAttribute('y1', '140');
    base.setAttribute('y2', '140');
    svg.replaceChildren(base, ...nodes);
    $('chart-labels').replaceChildren(...labels);
    $('chart-summary').textContent = t('chart.summary', { total: usd(total), days: r.data.length, peak: usd(peak) });
  } catch (e) {
    $('chart-summary').textContent = t('chart.failed', { error: e.message });
  }
}

// loadInvitations shows the invitation link, the reward rule in words
// (as configured), the people who signed up with the code and the
// rewards still owed.
async function loadInvitations() {
  let r;
  try {
    r = await api('GET', '/api/user/invitations');
  } catch (e) {
    showError($('transfer-error'), e);
    return;
  }
  $('invite-link-box').hidden = !r.aff_code;
  if (r.aff_code) $('invite-link').textContent = location.origin + '/?aff=' + encodeURIComponent(r.aff_code);
  let rule = r.reward > 0 ? t('invite.rule', { reward: usd(r.reward), min: usd(r.min_payment) }) + ' ' + t(r.plan_codes ? 'invite.rulePlanYes' : 'invite.rulePlanNo')
    : t('invite.noReward');
  if (!r.registration) rule += ' ' + t('invite.closed');
  $('invite-rule').textContent = rule;
  $('invite-pending').textContent = r.invitees.length ? t('invite.pending', { n: r.invitees.length, amount: usd(r.pending) }) : '';
  const rows = r.invitees.map((v) => el('tr', {}, el('td', {}, v.username), el('td', {}, fmtTime(v.created_at)),
    el('td', {}, v.reward_owed ? t('invite.owedYou', { reward: usd(v.reward_owed), min: usd(v.reward_min) }) : t('invite.settled'))));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 3, class: 'muted' }, t('invite.nobody'))));
  $('invitees').replaceChildren(...rows);
}
