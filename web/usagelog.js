// The operators' usage log: every user's requests with filters (user, key,
// model, channel, status, time, request id) and each request's detail
// (GET /api/admin/usage).
'use strict';

const userNames = new Map(); // id -> name, of the users loaded
const userIds = new Map();   // name -> id
let prices = new Map();      // model -> price, as served today
let query = '';
let cursor = '';

// maxUserPages bounds the users loaded for names: 50 a page.
const maxUserPages = 20;

document.addEventListener('DOMContentLoaded', async () => {
  $('log-form').addEventListener('submit', (ev) => { ev.preventDefault(); filter(); });
  $('log-clear').addEventListener('click', () => { $('log-form').reset(); filter(); });
  $('log-first').addEventListener('click', () => load(true));
  $('log-next').addEventListener('click', () => load(false));
  $('detail-close').addEventListener('click', () => $('detail').close());
  if (!(await startAdminPage())) return;
  $('admin').hidden = false;
  await Promise.all([loadUsers(), loadChannels(), loadPrices()]);
  const params = new URLSearchParams(location.search);
  if (params.get('request_id')) $('log-request').value = params.get('request_id');
  filter();
});

async function loadUsers() {
  let after = '';
  try {
    for (let i = 0; i < maxUserPages; i++) {
      const r = await api('GET', '/api/admin/users' + (after ? '?after=' + after : ''));
      for (const u of r.data) { userNames.set(u.id, u.username); userIds.set(u.username, u.id); }
      after = r.next_cursor;
      if (!after) break;
    }
  } catch (e) {
    showError($('log-error'), e);
  }
  $('log-users').replaceChildren(...[...userIds.keys()].map((n) => el('option', { value: n })));
}

async function loadChannels() {
  try {
    const r = await api('GET', '/api/admin/channels');
    $('log-channel').append(...r.data.map((c) => el('option', { value: c.name }, c.name)));
  } catch (e) {
    showError($('log-error'), e);
  }
}

async function loadPrices() {
  try {
    const r = await api('GET', '/api/user/models');
    prices = new Map(r.data.map((m) => [m.id, m.price]));
  } catch (e) { /* the detail then shows the total alone */ }
}

// filter builds the query from the form, or says what to fix.
function filter() {
  showError($('log-error'), null);
  const q = new URLSearchParams();
  try {
    const user = $('log-user').value.trim();
    if (user) {
      if (/^\d+$/.test(user)) q.set('user_id', user);
      else if (userIds.has(user)) q.set('user_id', userIds.get(user));
      else throw new Error(tr('log.noUserNamed', 'No user is named "{name}" among the {count} users loaded: write their id instead.', { name: user, count: userIds.size }));
    }
    const key = $('log-key').value.trim();
    if (key) q.set('token_id', key);
    const model = $('log-model').value.trim();
    if (model) q.set('model_contains', model);
    if ($('log-channel').value) q.set('channel', $('log-channel').value);
    const status = $('log-status').value.trim();
    if (status) q.set('status', status);
    if ($('log-since').value) q.set('since', rfc3339($('log-since').value));
    if ($('log-until').value) q.set('until', rfc3339($('log-until').value));
    const rid = $('log-request').value.trim();
    if (rid) q.set('request_id', rid);
  } catch (e) {
    showError($('log-error'), e);
    return;
  }
  query = q.toString();
  load(true);
}

async function load(fromStart) {
  if (fromStart) cursor = '';
  showError($('log-error'), null);
  $('log').dataset.loading = 'yes';
  try {
    const q = new URLSearchParams(query);
    if (cursor) q.set('after', cursor);
    const r = await api('GET', '/api/admin/usage' + (q.toString() ? '?' + q : ''));
    const rows = r.data.map(logRow);
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 11 }, tr('log.none', 'No requests match.'))));
    $('log').replaceChildren(...rows);
    cursor = r.next_cursor;
    $('log-next').disabled = !cursor;
  } catch (e) {
    showError($('log-error'), e);
  } finally {
    $('log').dataset.loading = 'no';
  }
}

function userName(id) { return userNames.get(id) || tr('op.userN', 'user #{id}', { id }); }

function logRow(l) {
  const ok = l.status >= 200 && l.status < 300;
  const btn = el('button', { type: 'button', class: 'secondary', 'aria-label': tr('log.detailNamed', 'Detail of request {id}', { id: l.request_id || l.id }), onclick: () => showDetail(l) }, tr('op.detail', 'Detail'));
  return el('tr', { 'data-id': l.id, 'data-request-id': l.request_id },
    el('td', {}, fmtTime(l.created_at)), el('td', {}, userName(l.user_id)), el('td', {}, l.token_id ? tr('log.keyN', 'key {id}', { id: l.token_id }) : '—'),
    el('td', {}, l.model), el('td', {}, l.channel || '—'), el('td', { class: 'num' + (ok ? '' : ' bad') }, l.status),
    el('td', { class: 'num' }, fmtNumber(l.prompt_tokens + l.completion_tokens)), el('td', { class: 'num' }, l.plan ? el('span', { 'data-plan': l.plan }, usd(l.cost) + ' · ' + tr('usage.byPlan', 'paid by plan {plan}', { plan: l.plan })) : usd(l.cost)),
    el('td', { class: 'num' }, fmtMS(l.latency_ms)), el('td', { class: 'error-text' }, l.error || ''), el('td', {}, btn));
}

function showDetail(l) {
  const items = [
    ['Time', fmtTime(l.created_at)], ['User', userName(l.user_id) + ' (' + tr('log.idN', 'id {id}', { id: l.user_id }) + ')'], ['Key', l.token_id ? tr('log.idN', 'id {id}', { id: l.token_id }) : tr('log.noneValue', 'none')],
    ['Model', l.model], ['Channel', l.channel || tr('log.noneAnswered', 'none answered')], ['Endpoint', l.endpoint || '—'],
    ['Status', String(l.status)], ['Error', l.error || tr('log.noneValue', 'none')],
    ['Request id', l.request_id || '—'], ['Upstream request id', l.upstream_request_id || '—'],
    ['Trace id', l.trace_id || tr('log.notTraced', 'not traced')],
    ['Streamed', l.stream ? tr('log.yes', 'yes') : tr('log.no', 'no')], ['Time to first byte', fmtMS(l.ttfb_ms)], ['Latency', fmtMS(l.latency_ms)],
    ['Prompt tokens', fmtNumber(l.prompt_tokens) + (l.cached_tokens ? ' (' + fmtNumber(l.cached_tokens) + ' ' + tr('log.fromCache', 'from cache') + ')' : '')],
    ['Completion tokens', fmtNumber(l.completion_tokens) + (l.reasoning_tokens ? ' (' + fmtNumber(l.reasoning_tokens) + ' ' + tr('log.reasoning', 'reasoning') + ')' : '')],
    ['Counted by', l.estimated ? tr('log.countedByGateway', 'the gateway (the upstream reported none)') : tr('log.countedByUpstream', 'the upstream')],
  ];
  $('detail-list').replaceChildren(...items.flatMap(([k, v]) => [el('dt', {}, tr('log.f.' + k.replace(/\W+/g, '_'), k)), el('dd', { 'data-field': k }, v)]));
  $('detail-cost').replaceChildren(...costBreakdown(l));
  $('detail').showModal();
}

// costBreakdown is what the row's tokens cost at today's price, term by
// term, beside what was charged: the row keeps the total alone.
function costBreakdown(l) {
  const out = [el('p', {}, tr('log.charged', 'Charged:') + ' ', el('strong', { id: 'detail-charged' }, usd(l.cost)))];
  const p = prices.get(l.model);
  if (!p || p.free || !(l.prompt_tokens || l.completion_tokens)) return out;
  const perM = (n, price) => Number((BigInt(n) * BigInt(price || 0) + 999999n) / 1000000n);
  const cached = l.cached_tokens || 0;
  const terms = [
    [tr('log.term.input', 'input'), l.prompt_tokens - cached, p.input],
    [tr('log.term.cached', 'cached input'), cached, p.cached_input !== undefined ? p.cached_input : p.input],
    [tr('log.term.output', 'output'), l.completion_tokens, p.output],
  ].filter(([, n]) => n > 0);
  const lines = terms.map(([what, n, price]) => el('li', {}, tr('log.term', '{n} {what} tokens at {price} per 1M: {cost}',
    { n: fmtNumber(n), what, price: usd(price || 0), cost: usd(perM(n, price)) })));
  if (p.request) lines.push(el('li', {}, tr('log.perRequest', 'per request: {price}', { price: usd(p.request) })));
  out.push(el('ul', { id: 'detail-terms' }, ...lines),
    el('p', { class: 'muted' }, tr('log.todaysPrice', 'At today\'s price of {model} (each term rounded up to a unit; the gateway rounds the sum once). Media, audio and search terms are in the total only.', { model: l.model })));
  return out;
}
