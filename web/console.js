// The home view: base address and SDK examples for everyone, the login
// form for visitors, and the dashboard (balance, invitations, keys, usage,
// spend chart) once logged in.
'use strict';

let tokensById = new Map();
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
  $('logout-all').addEventListener('click', onLogoutAll);
  $('token-form').addEventListener('submit', onCreateToken);
  $('copy-key').addEventListener('click', () => copyText($('new-key-value').textContent, $('copy-key-feedback'), $('new-key-value')));
  $('usage-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadUsage(true); });
  $('usage-first').addEventListener('click', () => loadUsage(true));
  $('usage-next').addEventListener('click', () => loadUsage(false));
  start();
});

function setupTabs() {
  const tabs = document.querySelectorAll('[role="tab"]');
  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => selectTab(tab, tabs));
    tab.addEventListener('keydown', (ev) => {
      const step = ev.key === 'ArrowRight' ? 1 : ev.key === 'ArrowLeft' ? -1 : 0;
      if (!step) return;
      const next = tabs[(i + step + tabs.length) % tabs.length];
      selectTab(next, tabs);
      next.focus();
    });
  });
}

function selectTab(tab, tabs) {
  tabs.forEach((t) => {
    const on = t === tab;
    t.setAttribute('aria-selected', String(on));
    $(t.getAttribute('aria-controls')).hidden = !on;
  });
}

async function start() {
  const user = await pageUser();
  if (user === undefined) return;
  if (!user) {
    $('login-card').hidden = false;
    $('login-username').focus();
    return;
  }
  showUser(user);
  $('dashboard').hidden = false;
  $('logout').hidden = false;
  // tokens first: the usage table names the key of each row
  await Promise.all([loadTokens().then(() => loadUsage(true)), loadChart()]);
}

function showUser(u) {
  $('whoami').textContent = u.username + (u.role !== 'user' ? ' (' + u.role + ')' : '');
  $('nav-admin').hidden = !(u.role === 'admin' || u.role === 'root');
  $('quota').textContent = usd(u.quota);
  $('used-quota').textContent = usd(u.used_quota);
  $('request-count').textContent = String(u.request_count);
  $('aff-code').textContent = u.aff_code || '(none)';
  $('aff-quota').textContent = usd(u.aff_quota);
}

async function refreshUser() {
  const u = await currentUser();
  if (u) showUser(u);
}

function onLogin(ev) {
  ev.preventDefault();
  runAction($('login-submit'), $('login-error'), async () => {
    await api('POST', '/api/user/login', { username: $('login-username').value, password: $('login-password').value });
    location.reload();
  });
}

function onRegister(ev) {
  ev.preventDefault();
  runAction($('register-submit'), $('register-error'), async () => {
    const body = { username: $('reg-username').value, password: $('reg-password').value };
    if ($('reg-aff').value.trim()) body.aff_code = $('reg-aff').value.trim();
    await api('POST', '/api/user/register', body);
    $('register-feedback').textContent = 'Account created: log in above.';
    $('login-username').value = body.username;
    $('login-password').focus();
  });
}

function onRedeem(ev) {
  ev.preventDefault();
  $('redeem-feedback').textContent = '';
  runAction($('redeem-submit'), $('redeem-error'), async () => {
    const before = $('quota').textContent;
    await api('POST', '/api/user/topup', { key: $('redeem-key').value.trim() });
    $('redeem-key').value = '';
    await refreshUser();
    $('redeem-feedback').textContent = 'Redeemed: balance was ' + before + ', now ' + $('quota').textContent + '.';
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
    $('transfer-feedback').textContent = 'Moved ' + usd(r.transferred) + ' to your balance.';
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
    const models = $('token-models').value.split(',').map((s) => s.trim()).filter(Boolean);
    if (models.length) body.models = models;
    const days = $('token-days').value;
    if (days) body.expires_at = new Date(Date.now() + Number(days) * 86400000).toISOString().replace(/\.\d+Z$/, 'Z');
    const t = await api('POST', '/api/user/tokens', body);
    $('token-form').reset();
    $('new-key-value').textContent = t.key;
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
    tokensById = new Map(r.data.map((t) => [t.id, t]));
    tbody.replaceChildren(...r.data.map(tokenRow));
    if (!r.data.length) tbody.append(el('tr', {}, el('td', { colspan: 8, class: 'muted' }, 'No keys yet: create one above.')));
  } catch (e) {
    showError($('token-error'), e);
  }
}

function tokenRow(t) {
  const toggle = t.status === 'enabled' ? 'Disable' : 'Enable';
  const err = $('token-error');
  const toggleBtn = el('button', { type: 'button', class: 'secondary', 'aria-label': toggle + ' key ' + t.name,
    onclick: () => runAction(toggleBtn, err, async () => {
      await api('PATCH', '/api/user/tokens/' + t.id, { status: t.status === 'enabled' ? 'disabled' : 'enabled' });
      await loadTokens();
    }) }, toggle);
  const deleteBtn = el('button', { type: 'button', class: 'danger', 'aria-label': 'Delete key ' + t.name,
    onclick: () => {
      if (!confirm('Delete the key "' + t.name + '"? Programs using it will stop working.')) return;
      runAction(deleteBtn, err, async () => {
        await api('DELETE', '/api/user/tokens/' + t.id, {});
        await loadTokens();
      });
    } }, 'Delete');
  return el('tr', { 'data-token-id': t.id },
    el('td', {}, t.name),
    el('td', {}, el('code', {}, t.key_prefix + '…')),
    el('td', {}, t.status),
    el('td', { class: 'num' }, usd(t.used_quota)),
    el('td', { class: 'num' }, t.quota_limit ? usd(t.quota_limit) : '—'),
    el('td', {}, t.models.length ? t.models.join(', ') : 'all'),
    el('td', {}, t.expires_at ? fmtTime(t.expires_at) : 'never'),
    el('td', {}, el('span', { class: 'row' }, toggleBtn, deleteBtn)));
}

async function loadUsage(fromStart) {
  if (fromStart) {
    usageCursor = '';
    usageFilter = {};
    const model = $('usage-model').value.trim();
    if (model) usageFilter.model = model;
    const since = $('usage-since').value;
    if (since) usageFilter.since = new Date(since + 'T00:00:00').toISOString().replace(/\.\d+Z$/, 'Z');
  }
  const q = new URLSearchParams({ limit: '20', ...usageFilter });
  if (!fromStart && usageCursor) q.set('after', usageCursor);
  showError($('usage-error'), null);
  try {
    const r = await api('GET', '/api/user/usage?' + q);
    const tbody = $('usage');
    tbody.replaceChildren(...r.data.map((l) => el('tr', {},
      el('td', {}, fmtTime(l.created_at)),
      el('td', {}, l.model),
      el('td', {}, tokensById.has(l.token_id) ? tokensById.get(l.token_id).name : '#' + l.token_id),
      el('td', { class: 'num' }, l.prompt_tokens),
      el('td', { class: 'num' }, l.completion_tokens),
      el('td', { class: 'num' }, usd(l.cost)),
      el('td', { class: 'num' }, l.status),
      el('td', { class: 'num' }, l.latency_ms + ' ms'))));
    if (!r.data.length) tbody.append(el('tr', {}, el('td', { colspan: 8, class: 'muted' }, 'No requests yet.')));
    usageCursor = r.next_cursor;
    $('usage-next').disabled = !r.next_cursor;
  } catch (e) {
    showError($('usage-error'), e);
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
      title.textContent = d.day + ': ' + usd(d.cost) + ' in ' + d.requests + ' requests';
      rect.append(title);
      nodes.push(rect);
      // a label a week, counted back from today so today always has one
      if ((r.data.length - 1 - i) % 7 === 0) {
        const label = document.createElementNS(ns, 'text');
        label.setAttribute('x', String(Math.min(i * w, 570)));
        label.setAttribute('y', '155');
        label.textContent = d.day.slice(5);
        nodes.push(label);
      }
    });
    const base = document.createElementNS(ns, 'line');
    base.setAttribute('x1', '0');
    base.setAttribute('x2', '600');
    base.setAttribute('y1', '140');
    base.setAttribute('y2', '140');
    svg.replaceChildren(base, ...nodes);
    $('chart-summary').textContent = 'Total ' + usd(total) + ' over ' + r.data.length + ' days; highest day ' + usd(peak) + '.';
  } catch (e) {
    $('chart-summary').textContent = 'The chart could not be loaded: ' + e.message;
  }
}
