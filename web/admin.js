// The admin pages: users (create, search, filter by plan and group,
// enable/disable, adjust quota, role, plan, rate limits, password reset;
// a name opens the user's page) and redemption codes (create for an
// amount or a plan, list, search, disable, export as CSV).
'use strict';

let me = null;
let loadUsers, loadCodes;
const loadedUsers = new Map(); // id -> user, as listed
const loadedCodes = new Map(); // id -> code, as listed
let editingUser = null;
let plans = { plans: [], groups: [] }; // GET /api/admin/plans: what a picker offers

document.addEventListener('DOMContentLoaded', async () => {
  // the users' search is the gateway's (every user, by a part of the name);
  // the loaded rows are filtered at once meanwhile
  const usersURL = () => {
    const q = new URLSearchParams();
    if ($('user-search').value.trim()) q.set('search', $('user-search').value.trim());
    if ($('user-plan-filter').value) q.set('plan', $('user-plan-filter').value);
    if ($('user-group-filter').value) q.set('group', $('user-group-filter').value);
    return '/api/admin/users' + (q.size ? '?' + q : '');
  };
  const users = pager(usersURL, 'after', $('users'), $('users-more'), $('user-error'), userRow);
  const codes = pager('/api/admin/codes', 'before', $('codes'), $('codes-more'), $('code-error'), codeRow);
  loadUsers = async (fromStart) => {
    if (fromStart) loadedUsers.clear();
    await users(fromStart);
    searchRows($('users'), $('user-search').value);
  };
  loadCodes = async (fromStart) => {
    if (fromStart) loadedCodes.clear();
    await codes(fromStart);
    searchRows($('codes'), $('code-search').value);
  };
  $('user-form').addEventListener('submit', onCreateUser);
  $('code-form').addEventListener('submit', onCreateCodes);
  $('users-more').addEventListener('click', () => loadUsers(false));
  $('codes-more').addEventListener('click', () => loadCodes(false));
  $('copy-codes').addEventListener('click', () => copyText($('new-codes-list').textContent, $('copy-codes-feedback'), $('new-codes-list')));
  let searching = null;
  $('user-search').addEventListener('input', () => {
    searchRows($('users'), $('user-search').value);
    clearTimeout(searching);
    searching = setTimeout(() => loadUsers(true), 250);
  });
  $('code-search').addEventListener('input', () => searchRows($('codes'), $('code-search').value));
  $('user-plan-filter').addEventListener('change', () => loadUsers(true));
  $('user-group-filter').addEventListener('change', () => loadUsers(true));
  $('code-kind').addEventListener('change', showCodeKind);
  $('plan-dialog-form').addEventListener('submit', onSavePlan);
  $('plan-dialog-cancel').addEventListener('click', () => $('plan-dialog').close());
  $('codes-csv').addEventListener('click', exportCodes);
  $('codes-csv-all').addEventListener('click', () => {
    const q = $('code-search').value.trim();
    location.href = '/api/admin/codes/export' + (q ? '?search=' + encodeURIComponent(q) : '');
  });
  $('edit-user-form').addEventListener('submit', onSaveUser);
  $('edit-user-cancel').addEventListener('click', () => $('edit-user').close());
  $('reset-form').addEventListener('submit', onResetPassword);
  $('reset-copy').addEventListener('click', () => copyText($('reset-made-password').textContent, $('reset-feedback'), $('reset-made-password')));
  me = await startAdminPage();
  if (!me) return;
  if (me.role !== 'root') $('user-role').querySelector('option[value="admin"]').remove();
  $('admin').hidden = false;
  await loadPlans();
  await loadUsers(true); // first, so codes name who used them
  await loadCodes(true);
});

// loadPlans fills the pickers and filters with the configured plans and
// budget groups: a plan is picked, never typed.
async function loadPlans() {
  try {
    plans = await api('GET', '/api/admin/plans');
  } catch (e) {
    showError($('user-error'), e);
    return;
  }
  const options = (list) => list.map((p) => el('option', { value: p.name }, p.name));
  $('user-plan-filter').append(...options(plans.plans));
  $('user-group-filter').append(...options(plans.groups));
  $('code-plan').replaceChildren(...options(plans.plans));
  $('code-kind').disabled = !plans.plans.length;
}

function showCodeKind() {
  const plan = $('code-kind').value === 'plan';
  $('code-quota-field').hidden = plan;
  $('code-plan-field').hidden = !plan;
  $('code-plan-days-field').hidden = !plan;
}

function openPlan(u) {
  editingUser = u;
  $('plan-dialog-name').textContent = u.username;
  const opts = plans.plans.map((p) => el('option', { value: p.name }, p.name));
  if (u.plan && !plans.plans.some((p) => p.name === u.plan)) opts.push(el('option', { value: u.plan }, u.plan));
  $('plan-dialog-pick').replaceChildren(el('option', { value: '' }, tr('user.planNone', '(no plan)')), ...opts);
  $('plan-dialog-pick').value = u.plan || '';
  const d = u.plan_until ? new Date(u.plan_until) : null;
  $('plan-dialog-until').value = d ? d.getFullYear() + '-' + String(d.getMonth() + 1).padStart(2, '0') + '-' + String(d.getDate()).padStart(2, '0') : '';
  showError($('plan-dialog-error'), null);
  $('plan-dialog').showModal();
}

function onSavePlan(ev) {
  ev.preventDefault();
  const u = editingUser;
  runAction($('plan-dialog-save'), $('plan-dialog-error'), async () => {
    const body = { plan: $('plan-dialog-pick').value };
    const day = $('plan-dialog-until').value;
    if (body.plan && day) body.until = new Date(day + 'T23:59:59').toISOString().replace(/\.\d+Z$/, 'Z');
    await api('PUT', '/api/admin/users/' + u.id + '/plan', body);
    $('plan-dialog').close();
    await loadUsers(true);
  });
}

function onCreateUser(ev) {
  ev.preventDefault();
  runAction($('user-submit'), $('user-error'), async () => {
    const q = $('user-quota').value.trim();
    await api('POST', '/api/admin/users', { username: $('user-name').value.trim(), password: $('user-password').value,
      role: $('user-role').value, quota: q ? usdToUnits(q) : 0 });
    $('user-form').reset();
    await loadUsers(true);
  });
}

// searchRows shows the rows whose search text holds what was typed.
function searchRows(tbody, text) {
  const q = text.trim().toLowerCase();
  for (const tr of tbody.children) {
    const hay = tr.dataset.search;
    if (hay === undefined) continue;
    tr.hidden = q !== '' && !hay.includes(q);
  }
}

function limitsText(l) {
  const parts = [];
  if (l && l.rpm) parts.push(tr('limits.rpm', '{n} requests/min', { n: l.rpm }));
  if (l && l.tpm) parts.push(tr('limits.tpm', '{n} tokens/min', { n: l.tpm }));
  if (l && l.max_parallel) parts.push(tr('limits.parallel', '{n} at once', { n: l.max_parallel }));
  return parts.length ? parts.join(', ') : tr('op.default', 'default');
}

function userRow(u) {
  loadedUsers.set(u.id, u);
  const err = $('user-error');
  const patch = (btn, body) => runAction(btn, err, async () => {
    await api('PATCH', '/api/admin/users/' + u.id, body);
    await loadUsers(true);
  });
  const actions = el('span', { class: 'row' });
  if (u.id !== me.id && u.role !== 'root' && (u.role !== 'admin' || me.role === 'root')) {
    const on = u.status === 'enabled';
    const b = el('button', { type: 'button', class: on ? 'danger' : 'secondary', 'aria-label': on ? tr('op.disableNamed', 'Disable {name}', { name: u.username }) : tr('op.enableNamed', 'Enable {name}', { name: u.username }),
      onclick: () => patch(b, { status: on ? 'disabled' : 'enabled' }) }, on ? tr('op.disable', 'Disable') : tr('op.enable', 'Enable'));
    actions.append(b);
    if (me.role === 'root') {
      const to = u.role === 'admin' ? 'user' : 'admin';
      const rb = el('button', { type: 'button', class: 'secondary', 'aria-label': tr('op.makeNamed', 'Make {name} {role}', { name: u.username, role: to }),
        onclick: () => patch(rb, { role: to }) }, tr('op.makeRole', 'Make {role}', { role: tr('role.' + to, to) }));
      actions.append(rb);
    }
  }
  // administrators manage users; root manages administrators and itself
  if (u.role === 'user' || me.role === 'root' || u.id === me.id) {
    const qb = el('button', { type: 'button', class: 'secondary', 'aria-label': tr('op.adjustNamed', 'Adjust quota of {name}', { name: u.username }),
      onclick: () => {
        const text = prompt(tr('op.addQuotaPrompt', "Add to {name}'s quota, in USD (negative to take away):", { name: u.username }), '1');
        if (text === null) return;
        const neg = text.trim().startsWith('-');
        let units;
        try { units = usdToUnits(text.trim().replace(/^-/, '')); } catch (e) { showError(err, e); return; }
        patch(qb, { quota_delta: neg ? -units : units });
      } }, tr('op.adjustQuota', 'Adjust quota'));
    actions.append(qb);
    // a plan of the configuration, picked, for some days or without end
    const pb = el('button', { type: 'button', class: 'secondary', 'aria-label': tr('op.planNamed', 'Set the plan of {name}', { name: u.username }),
      onclick: () => openPlan(u) }, tr('op.plan', 'Plan'));
    actions.append(pb);
  }
  // limits and passwords: administrators for users, root for
  // administrators; one's own row for quota alone
  if (u.role !== 'root' && (u.role === 'user' || me.role === 'root' || u.id === me.id)) {
    actions.append(el('button', { type: 'button', class: 'secondary', 'aria-label': tr('op.editNamed', 'Edit {name}', { name: u.username }), onclick: () => openEditUser(u) }, tr('op.edit', 'Edit')));
  }
  return el('tr', { 'data-user-id': u.id, 'data-search': u.username.toLowerCase() },
    el('td', {}, u.id), el('td', {}, el('a', { href: '/console/user?id=' + u.id }, u.username)), el('td', {}, tr('role.' + u.role, u.role)), el('td', {}, tr('status.' + u.status, u.status)),
    el('td', { class: 'num' }, usd(u.quota)), el('td', { class: 'num' }, usd(u.used_quota)),
    el('td', {}, u.plan ? u.plan + (u.plan_until ? ' · ' + tr('op.planUntilShort', 'until {date}', { date: fmtDate(u.plan_until) }) : '') : '—'),
    el('td', {}, u.group || '—'), el('td', {}, limitsText(u.limits)), el('td', {}, actions));
}

function openEditUser(u) {
  editingUser = u;
  $('edit-user-name').textContent = u.username;
  const l = u.limits || {};
  $('edit-rpm').value = l.rpm || '';
  $('edit-tpm').value = l.tpm || '';
  $('edit-parallel').value = l.max_parallel || '';
  $('edit-quota-delta').value = '';
  $('edit-user-limits').disabled = u.id === me.id; // nobody lifts their own limits
  $('reset-form').hidden = u.id === me.id;
  for (const id of ['edit-user-error', 'reset-error', 'reset-feedback']) showError($(id), null);
  $('reset-password').value = '';
  $('reset-made').hidden = true;
  // signin-admin.js: reset link, SSO link, second factors
  $('signin-admin').hidden = u.id === me.id;
  if (u.id !== me.id) SignInAdmin.mount($('signin-admin'), u);
  $('edit-user').showModal();
}

function onSaveUser(ev) {
  ev.preventDefault();
  const u = editingUser;
  runAction($('edit-user-save'), $('edit-user-error'), async () => {
    const body = {};
    if (u.id !== me.id) {
      const n = (id) => {
        const v = $(id).value.trim();
        if (v === '') return 0;
        if (!/^\d+$/.test(v)) throw new Error(tr('op.limitsWhole', 'Rate limits are whole numbers; leave a field empty for the default.'));
        return Number(v);
      };
      const l = u.limits || {};
      const want = { rpm: n('edit-rpm'), tpm: n('edit-tpm'), max_parallel: n('edit-parallel') };
      if (want.rpm !== (l.rpm || 0) || want.tpm !== (l.tpm || 0) || want.max_parallel !== (l.max_parallel || 0)) body.limits = want;
    }
    const q = $('edit-quota-delta').value.trim();
    if (q && q !== '0') {
      const units = usdToUnits(q.replace(/^-/, ''));
      body.quota_delta = q.startsWith('-') ? -units : units;
    }
    if (Object.keys(body).length) await api('PATCH', '/api/admin/users/' + u.id, body);
    $('edit-user').close();
    await loadUsers(true);
  });
}

function onResetPassword(ev) {
  ev.preventDefault();
  const u = editingUser;
  if (!confirm(tr('op.resetConfirm', 'Reset the password of {name} and log them out everywhere?', { name: u.username }))) return;
  showError($('reset-feedback'), null);
  runAction($('reset-submit'), $('reset-error'), async () => {
    const r = await api('POST', '/api/admin/users/' + u.id + '/password', { password: $('reset-password').value });
    $('reset-password').value = '';
    $('reset-feedback').textContent = tr('op.resetDone', 'Password reset; {name} is logged out everywhere.', { name: u.username });
    $('reset-made').hidden = !r.password;
    $('reset-made-password').textContent = r.password || '';
  });
}

function onCreateCodes(ev) {
  ev.preventDefault();
  runAction($('code-submit'), $('code-error'), async () => {
    const body = { count: Number($('code-count').value || 1), name: $('code-name').value.trim() };
    if ($('code-kind').value === 'plan') {
      body.plan = $('code-plan').value;
      body.plan_days = Number($('code-plan-days').value);
    } else {
      body.quota = usdToUnits($('code-quota').value);
    }
    const days = $('code-days').value;
    if (days) body.expires_at = new Date(Date.now() + Number(days) * 86400000).toISOString().replace(/\.\d+Z$/, 'Z');
    const r = await api('POST', '/api/admin/codes', body);
    $('new-codes-list').textContent = r.data.map((c) => c.code).join('\n');
    $('new-codes').hidden = false;
    await loadCodes(true);
  });
}

function codeRow(c) {
  loadedCodes.set(c.id, c);
  const actions = el('span', { class: 'row' });
  if (!c.used_by) {
    const on = c.status === 'enabled';
    const b = el('button', { type: 'button', class: on ? 'danger' : 'secondary', 'aria-label': on ? tr('op.disableCode', 'Disable code {id}', { id: c.id }) : tr('op.enableCode', 'Enable code {id}', { id: c.id }),
      onclick: () => runAction(b, $('code-error'), async () => {
        await api('PATCH', '/api/admin/codes/' + c.id, { status: on ? 'disabled' : 'enabled' });
        await loadCodes(true);
      }) }, on ? tr('op.disable', 'Disable') : tr('op.enable', 'Enable'));
    actions.append(b);
  }
  const status = c.used_by ? 'used' : c.status;
  const usedBy = c.used_by ? usedByName(c.used_by) : '—';
  return el('tr', { 'data-code-id': c.id, 'data-search': [c.id, c.code, c.name || '', status, usedBy, c.plan || ''].join(' ').toLowerCase() },
    el('td', {}, c.id), el('td', {}, el('code', {}, c.code)), el('td', {}, c.name || '—'), el('td', { class: 'num' }, c.plan ? '—' : usd(c.quota)),
    el('td', {}, c.plan ? tr('op.planForDays', '{plan} for {days} days', { plan: c.plan, days: c.plan_days }) : '—'),
    el('td', {}, tr('codeStatus.' + status, status)), el('td', {}, usedBy),
    el('td', {}, c.expires_at ? fmtTime(c.expires_at) : tr('op.never', 'never')), el('td', {}, actions));
}

function usedByName(id) {
  const u = loadedUsers.get(id);
  return u ? u.username + ' (#' + id + ')' : tr('op.userN', 'user #{id}', { id });
}

// exportCodes downloads the codes listed (those the search shows) as CSV.
function exportCodes() {
  const rows = [['id', 'code', 'worth_usd', 'status', 'used_by_user_id', 'used_by', 'redeemed_at', 'created_at', 'expires_at', 'batch', 'plan', 'plan_days']];
  for (const tr of $('codes').children) {
    const c = loadedCodes.get(Number(tr.dataset.codeId));
    if (!c || tr.hidden) continue;
    rows.push([c.id, c.code, usd(c.quota).slice(1), c.used_by ? 'used' : c.status, c.used_by || '', c.used_by ? usedByName(c.used_by) : '',
      c.redeemed_at || '', c.created_at || '', c.expires_at || '', c.name || '', c.plan || '', c.plan_days || '']);
  }
  download('redemption-codes.csv', 'text/csv', csv(rows));
}
