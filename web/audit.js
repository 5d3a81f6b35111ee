// The audit log: administrators' and the command line's changes, newest
// first, filtered by who, what, on what and when (GET /api/admin/audit).
'use strict';

let auditQuery = '';
let auditCursor = '';

document.addEventListener('DOMContentLoaded', async () => {
  $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); auditFilter(); });
  $('audit-clear').addEventListener('click', () => { $('audit-form').reset(); auditFilter(); });
  $('audit-first').addEventListener('click', () => auditLoad(true));
  $('audit-next').addEventListener('click', () => auditLoad(false));
  if (!(await startAdminPage())) return;
  $('admin').hidden = false;
  const params = new URLSearchParams(location.search);
  for (const f of ['actor', 'target']) if (params.get(f)) $('audit-' + f).value = params.get(f);
  auditFilter();
});

function auditFilter() {
  showError($('audit-error'), null);
  const q = new URLSearchParams();
  try {
    for (const f of ['actor', 'action', 'target']) {
      const v = $('audit-' + f).value.trim();
      if (v) q.set(f, v);
    }
    if ($('audit-since').value) q.set('since', rfc3339($('audit-since').value));
    if ($('audit-until').value) q.set('until', rfc3339($('audit-until').value));
  } catch (e) {
    showError($('audit-error'), e);
    return;
  }
  auditQuery = q.toString();
  auditLoad(true);
}

async function auditLoad(fromStart) {
  if (fromStart) auditCursor = '';
  showError($('audit-error'), null);
  $('audit').dataset.loading = 'yes';
  try {
    const q = new URLSearchParams(auditQuery);
    if (auditCursor) q.set('before', auditCursor);
    const r = await api('GET', '/api/admin/audit' + (q.toString() ? '?' + q : ''));
    const rows = r.data.map(auditRow);
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 5 }, tr('audit.none', 'Nothing matches.'))));
    $('audit').replaceChildren(...rows);
    auditCursor = r.next_cursor;
    $('audit-next').disabled = !auditCursor;
  } catch (e) {
    showError($('audit-error'), e);
  } finally {
    $('audit').dataset.loading = 'no';
  }
}

function auditRow(a) {
  return el('tr', { 'data-audit-id': a.id, 'data-action': a.action },
    el('td', {}, fmtTime(a.created_at)),
    el('td', {}, a.actor === 'cli' ? tr('audit.cli', 'the command line (cli)') : a.actor),
    el('td', {}, el('code', {}, a.action)), el('td', {}, a.target || '—'),
    el('td', { class: 'audit-change' }, changeList(a.before || {}, a.after || {})));
}

// changeList shows each field as "before → after", or its one value; a
// field holding fields (limits) shows those of them that changed.
function changeList(before, after) {
  before = flatten(before);
  after = flatten(after);
  const both = Object.keys(before).length && Object.keys(after).length;
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()
    .filter((k) => !both || JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  if (!keys.length) return '—';
  return el('ul', { class: 'plain' }, ...keys.map((k) => {
    const had = k in before;
    const has = k in after;
    const text = had && has ? show(k, before[k]) + ' → ' + show(k, after[k]) : show(k, has ? after[k] : before[k]) + (has ? '' : ' ' + tr('audit.removed', '(removed)'));
    return el('li', { 'data-field': k }, el('strong', {}, k), ': ', text);
  }));
}

// flatten turns {limits: {rpm: 1}} into {'limits.rpm': 1}.
function flatten(fields) {
  const out = {};
  for (const [k, v] of Object.entries(fields)) {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const [sk, sv] of Object.entries(v)) out[k + '.' + sk] = sv;
    } else {
      out[k] = v;
    }
  }
  return out;
}

// show writes a field's value; amounts of quota in dollars.
function show(field, v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'number' && /^quota/.test(field)) return usd(v);
  if (typeof v === 'object') return Array.isArray(v) ? '[' + v.join(', ') + ']' : Object.entries(v).map(([k, x]) => k + ' ' + show(k, x)).join(', ');
  return String(v);
}
