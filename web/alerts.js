// Budget alerts: the crossings of thresholds of a budget window, a balance
// or a key's limit (docs/alerts.md). A user sees their own
// (GET /api/user/alerts); an administrator everyone's, or one user's
// (GET /api/admin/alerts).
'use strict';

let alertsAdmin = false;

document.addEventListener('DOMContentLoaded', async () => {
  const me = await pageUser();
  if (me === undefined) return;
  if (!me) { location.href = '/'; return; }
  $('whoami').textContent = me.username;
  alertsAdmin = me.role === 'admin' || me.role === 'root';
  $('alerts-card').hidden = false;
  if (alertsAdmin) {
    $('nav-dashboard').hidden = false;
    $('alerts-intro-user').hidden = true;
    $('alerts-intro-admin').hidden = false;
    $('alerts-form').hidden = false;
    document.querySelectorAll('.alerts-admin').forEach((c) => { c.hidden = false; });
    $('alerts-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadAlerts(); });
  }
  loadAlerts();
});

async function loadAlerts() {
  showError($('alerts-error'), null);
  $('alerts').dataset.loading = 'yes';
  try {
    let path = '/api/user/alerts';
    if (alertsAdmin) {
      const user = $('alerts-user').value.trim();
      path = '/api/admin/alerts' + (user ? '?user_id=' + encodeURIComponent(user) : '');
    }
    const r = await api('GET', path);
    const rows = r.data.map(alertRow);
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: alertsAdmin ? 6 : 5 }, tr('alerts.none', 'No threshold has been crossed.'))));
    $('alerts').replaceChildren(...rows);
  } catch (e) {
    showError($('alerts-error'), e);
  } finally {
    $('alerts').dataset.loading = 'no';
  }
}

// alertWhat names the budget crossed: "your account · daily (2026-11-26)".
function alertWhat(a) {
  const [kind, id] = a.subject.split(':');
  let whose = a.subject;
  if (kind === 'user') whose = tr('alerts.subject.user', 'account {id}', { id });
  else if (kind === 'key') whose = tr('alerts.subject.key', 'key {id}', { id });
  else if (kind === 'group') whose = tr('alerts.subject.group', 'group {id}', { id });
  else if (kind === 'plan') whose = tr('alerts.subject.plan', 'plan {id}', { id: id.split('/')[0] });
  let what = tr('budget.window.' + a.window, a.window);
  if (a.window === 'balance') what = tr('alerts.window.balance', 'balance');
  else if (a.window === 'quota') what = tr('alerts.window.quota', 'spending limit');
  const at = a.period.includes('@') && a.window !== 'balance' && a.window !== 'quota' ? ' (' + a.period.split('@')[1] + ')' : '';
  return whose + ' · ' + what + at;
}

function alertStatus(a) {
  if (a.status === 'sent') return a.last_error ? tr('alerts.status.recorded', 'recorded (no webhook)') : tr('alerts.status.sent', 'delivered');
  if (a.status === 'failed') return tr('alerts.status.failed', 'gave up after {n} attempts', { n: a.attempts });
  return a.attempts ? tr('alerts.status.retrying', 'retrying ({n} attempts)', { n: a.attempts }) : tr('alerts.status.pending', 'pending');
}

function alertRow(a) {
  return el('tr', { 'data-alert-id': a.id, 'data-threshold': a.threshold, 'data-status': a.status },
    el('td', {}, fmtTime(a.created_at)),
    alertsAdmin ? el('td', {}, String(a.user_id)) : null,
    el('td', {}, alertWhat(a)),
    el('td', { class: 'num' }, a.threshold + '%'),
    el('td', { class: 'num' }, usd(a.spent) + ' / ' + usd(a.limit)),
    el('td', { title: a.last_error || '' }, alertStatus(a)));
}
