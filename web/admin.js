// The admin pages: users (create, enable/disable, adjust quota, role) and
// redemption codes (create, list, disable).
'use strict';

let me = null;
let loadUsers, loadCodes;

document.addEventListener('DOMContentLoaded', async () => {
  loadUsers = pager('/api/admin/users', 'after', $('users'), $('users-more'), $('user-error'), userRow);
  loadCodes = pager('/api/admin/codes', 'before', $('codes'), $('codes-more'), $('code-error'), codeRow);
  $('logout').addEventListener('click', logout);
  $('user-form').addEventListener('submit', onCreateUser);
  $('code-form').addEventListener('submit', onCreateCodes);
  $('users-more').addEventListener('click', () => loadUsers(false));
  $('codes-more').addEventListener('click', () => loadCodes(false));
  $('copy-codes').addEventListener('click', () => copyText($('new-codes-list').textContent, $('copy-codes-feedback'), $('new-codes-list')));
  me = await pageUser();
  if (me === undefined) return;
  if (!me) { location.href = '/'; return; }
  $('whoami').textContent = me.username + ' (' + me.role + ')';
  if (me.role !== 'admin' && me.role !== 'root') {
    showError($('page-error'), new Error('These pages are for administrators. Your account is a user account.'));
    return;
  }
  if (me.role !== 'root') $('user-role').querySelector('option[value="admin"]').remove();
  $('admin').hidden = false;
  await Promise.all([loadUsers(true), loadCodes(true)]);
});

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

function userRow(u) {
  const err = $('user-error');
  const patch = (btn, body) => runAction(btn, err, async () => {
    await api('PATCH', '/api/admin/users/' + u.id, body);
    await loadUsers(true);
  });
  const actions = el('span', { class: 'row' });
  if (u.id !== me.id && u.role !== 'root' && (u.role !== 'admin' || me.role === 'root')) {
    const on = u.status === 'enabled';
    const b = el('button', { type: 'button', class: on ? 'danger' : 'secondary', 'aria-label': (on ? 'Disable ' : 'Enable ') + u.username,
      onclick: () => patch(b, { status: on ? 'disabled' : 'enabled' }) }, on ? 'Disable' : 'Enable');
    actions.append(b);
    if (me.role === 'root') {
      const to = u.role === 'admin' ? 'user' : 'admin';
      const rb = el('button', { type: 'button', class: 'secondary', 'aria-label': 'Make ' + u.username + ' ' + to,
        onclick: () => patch(rb, { role: to }) }, 'Make ' + to);
      actions.append(rb);
    }
  }
  // administrators manage users; root manages administrators and itself
  if (u.role === 'user' || me.role === 'root' || u.id === me.id) {
    const qb = el('button', { type: 'button', class: 'secondary', 'aria-label': 'Adjust quota of ' + u.username,
      onclick: () => {
        const text = prompt('Add to ' + u.username + "'s quota, in USD (negative to take away):", '1');
        if (text === null) return;
        const neg = text.trim().startsWith('-');
        let units;
        try { units = usdToUnits(text.trim().replace(/^-/, '')); } catch (e) { showError(err, e); return; }
        patch(qb, { quota_delta: neg ? -units : units });
      } }, 'Adjust quota');
    actions.append(qb);
  }
  return el('tr', {}, el('td', {}, u.id), el('td', {}, u.username), el('td', {}, u.role), el('td', {}, u.status),
    el('td', { class: 'num' }, usd(u.quota)), el('td', { class: 'num' }, usd(u.used_quota)), el('td', {}, actions));
}

function onCreateCodes(ev) {
  ev.preventDefault();
  runAction($('code-submit'), $('code-error'), async () => {
    const body = { count: Number($('code-count').value || 1), quota: usdToUnits($('code-quota').value) };
    const days = $('code-days').value;
    if (days) body.expires_at = new Date(Date.now() + Number(days) * 86400000).toISOString().replace(/\.\d+Z$/, 'Z');
    const r = await api('POST', '/api/admin/codes', body);
    $('new-codes-list').textContent = r.data.map((c) => c.code).join('\n');
    $('new-codes').hidden = false;
    await loadCodes(true);
  });
}

function codeRow(c) {
  const actions = el('span', { class: 'row' });
  if (!c.used_by) {
    const on = c.status === 'enabled';
    const b = el('button', { type: 'button', class: on ? 'danger' : 'secondary', 'aria-label': (on ? 'Disable' : 'Enable') + ' code ' + c.id,
      onclick: () => runAction(b, $('code-error'), async () => {
        await api('PATCH', '/api/admin/codes/' + c.id, { status: on ? 'disabled' : 'enabled' });
        await loadCodes(true);
      }) }, on ? 'Disable' : 'Enable');
    actions.append(b);
  }
  return el('tr', {}, el('td', {}, c.id), el('td', {}, el('code', {}, c.code)), el('td', { class: 'num' }, usd(c.quota)),
    el('td', {}, c.used_by ? 'used' : c.status), el('td', {}, c.used_by ? '#' + c.used_by : '—'),
    el('td', {}, c.expires_at ? fmtTime(c.expires_at) : 'never'), el('td', {}, actions));
}
