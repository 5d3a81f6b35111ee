// The channels page: each channel's health, recent traffic, models and
// prices, and a test that sends one token through it
// (GET /api/admin/channels, POST /api/admin/channels/{name}/test).
'use strict';

document.addEventListener('DOMContentLoaded', async () => {
  $('channels-refresh').addEventListener('click', load);
  if (!(await startAdminPage())) return;
  $('admin').hidden = false;
  await load();
});

async function load() {
  showError($('channels-error'), null);
  $('channels').dataset.loading = 'yes';
  try {
    const r = await api('GET', '/api/admin/channels');
    const rows = r.data.map(channelRow);
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 13 }, tr('channels.none', 'No channels are configured.'))));
    $('channels').replaceChildren(...rows);
    $('channels-sample').textContent = tr('channels.recentSince', 'Recent figures count every request since {since}. Failures, ejections and state are this instance\'s since it started.', { since: fmtTime(r.since) });
  } catch (e) {
    showError($('channels-error'), e);
  } finally {
    $('channels').dataset.loading = 'no';
  }
}

function channelRow(c) {
  const rec = c.recent || {};
  const state = el('div', {}, stateLabel(c),
    el('div', { class: 'muted', 'data-attempts': c.name }, tr('channels.attempts', '{attempts} attempts here, {failed} failed', { attempts: fmtNumber(c.attempts || 0), failed: fmtNumber(c.failed_attempts || 0) })));
  const models = el('ul', { class: 'plain' }, ...c.models.map((m) => el('li', {}, el('code', {}, m), ': ', priceTerms(c.prices[m]).join(', '))));
  const pick = el('select', { 'aria-label': tr('channels.modelFor', 'Model to test on {name}', { name: c.name }) }, ...c.models.map((m) => el('option', { value: m }, m)));
  const result = el('div', { class: 'test-result', role: 'status', 'data-channel': c.name });
  const btn = el('button', { type: 'button', class: 'secondary', 'aria-label': tr('channels.testNamed', 'Test channel {name}', { name: c.name }) }, tr('op.test', 'Test'));
  btn.addEventListener('click', () => runAction(btn, result, async () => {
    result.className = 'test-result';
    result.textContent = tr('channels.testing', 'Testing…');
    const t = await api('POST', '/api/admin/channels/' + encodeURIComponent(c.name) + '/test', { model: pick.value });
    result.className = 'test-result ' + (t.ok ? 'good' : 'bad');
    const parts = [t.ok ? tr('channels.ok', 'OK') : tr('channels.failed', 'Failed'), 'HTTP ' + t.status, fmtMS(t.latency_ms)];
    if (t.ok) parts.push(tr('channels.tokens', '{prompt} + {completion} tokens', { prompt: t.prompt_tokens, completion: t.completion_tokens }));
    if (t.error) parts.push(t.error);
    if (t.detail) parts.push(tr('channels.upstreamSaid', 'upstream: {detail}', { detail: t.detail }));
    if (t.upstream_request_id) parts.push(tr('channels.upstreamID', 'upstream id {id}', { id: t.upstream_request_id }));
    result.textContent = parts.join(' · ');
  }));
  return el('tr', { 'data-channel': c.name },
    el('td', {}, c.name), el('td', {}, c.type), el('td', {}, state),
    el('td', { class: 'num' }, c.consecutive_failures), el('td', { class: 'num' }, c.ejections),
    el('td', {}, c.last_failure ? fmtTime(c.last_failure) : '—'),
    el('td', { class: 'num' }, fmtNumber(rec.requests)), el('td', { class: 'num' }, fmtNumber(rec.errors)),
    el('td', { class: 'num' }, rec.requests ? fmtMS(rec.avg_latency_ms) : '—'),
    el('td', { class: 'num' }, rec.requests ? fmtMS(rec.avg_ttfb_ms) : '—'),
    el('td', { class: 'error-text', 'data-last-error': c.name }, lastError(c, rec)),
    el('td', { class: 'wrap' }, models),
    // one box in the cell, so a phone's stacked row keeps the result under the button
    el('td', { class: 'wrap' }, el('div', {}, el('div', { class: 'row' }, pick, btn), result)));
}

// stateLabel is the channel's state on this instance: ejected, failing
// (failed since its last success, before any ejection: attempts no channel
// answered name none in the usage log, so its recent errors say nothing)
// or in service.
function stateLabel(c) {
  if (c.ejected) return el('span', { class: 'bad' }, tr('channels.ejectedUntil', 'ejected until {time}', { time: fmtTime(c.ejected_until) }));
  if (c.state === 'failing') return el('span', { class: 'bad' }, tr('channels.failing', 'failing: {n} failures since its last success', { n: fmtNumber(c.failing) }));
  return el('span', { class: 'good' }, tr('channels.inService', 'in service'));
}

// lastError is the newest of the channel's last failed request that it
// answered (the usage log) and its last failure on this instance (its
// health record), which covers requests no channel answered: their usage
// rows name no channel.
function lastError(c, rec) {
  const fromLog = rec.last_error_at ? { at: rec.last_error_at, status: rec.last_error_status, msg: rec.last_error } : null;
  const fromHealth = c.last_error && c.last_failure ? { at: c.last_failure, status: c.last_error_status, msg: c.last_error } : null;
  const e = fromLog && fromHealth ? (new Date(fromLog.at) >= new Date(fromHealth.at) ? fromLog : fromHealth) : (fromLog || fromHealth);
  if (!e) return '—';
  return tr('channels.lastError', '{status} at {time}: {error}', { status: e.status, time: fmtTime(e.at), error: e.msg || '' });
}
