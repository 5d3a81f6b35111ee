// The channels page: each channel's health, recent traffic, models and
// prices, and a test that sends one token through it
// (GET /api/admin/channels, POST /api/admin/channels/{name}/test, "test
// all": POST /api/admin/channels/test_all); channels kept in the database
// are added, changed, disabled and deleted here (POST, PATCH, DELETE
// /api/admin/channels[/{name}]), the Caddyfile's are read-only.
'use strict';

// editing is the name of the database channel the form changes, '' when it adds one
let editing = '';

document.addEventListener('DOMContentLoaded', async () => {
  $('channels-refresh').addEventListener('click', load);
  $('channels-test-all').addEventListener('click', testAll);
  $('channel-form').addEventListener('submit', saveChannel);
  $('ch-cancel').addEventListener('click', () => editChannel(null));
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
  if (c.models.length > 1) pick.append(el('option', { value: '*' }, tr('rt.everyModel', 'every model')));
  const result = el('div', { class: 'test-result', role: 'status', 'data-channel': c.name });
  const btn = el('button', { type: 'button', class: 'secondary', 'aria-label': tr('channels.testNamed', 'Test channel {name}', { name: c.name }) }, tr('op.test', 'Test'));
  btn.addEventListener('click', () => runAction(btn, result, async () => {
    result.className = 'test-result';
    result.textContent = tr('channels.testing', 'Testing…');
    if (pick.value === '*') {
      const all = await api('POST', '/api/admin/channels/' + encodeURIComponent(c.name) + '/test', { all: true });
      result.className = 'test-result ' + (all.failed ? 'bad' : 'good');
      result.textContent = tr('rt.testAllDone', '{ok} passed, {failed} failed; together they would have cost {cost}.', { ok: all.ok, failed: all.failed, cost: usd(all.cost || 0) });
      return;
    }
    const t = await api('POST', '/api/admin/channels/' + encodeURIComponent(c.name) + '/test', { model: pick.value });
    result.className = 'test-result ' + (t.ok ? 'good' : 'bad');
    const parts = [t.ok ? tr('channels.ok', 'OK') : tr('channels.failed', 'Failed'), 'HTTP ' + t.status, fmtMS(t.latency_ms)];
    if (t.ok) parts.push(tr('channels.tokens', '{prompt} + {completion} tokens', { prompt: t.prompt_tokens, completion: t.completion_tokens }));
    if (t.error) parts.push(t.error);
    if (t.detail) parts.push(tr('channels.upstreamSaid', 'upstream: {detail}', { detail: t.detail }));
    if (t.upstream_request_id) parts.push(tr('channels.upstreamID', 'upstream id {id}', { id: t.upstream_request_id }));
    if (t.ok) parts.push(tr('rt.cost', 'cost {cost}', { cost: usd(t.cost || 0) }));
    result.textContent = parts.join(' · ');
  }));
  const last = lastTests(c);
  if (last) { result.className = 'test-result muted'; result.textContent = last; }
  return el('tr', { 'data-channel': c.name },
    // where it is set up goes under its name: a column more would widen the table past its card
    el('td', { class: 'wrap' }, el('div', {}, c.name), el('div', { class: 'setup', 'data-setup': c.name }, setupCell(c))),
    el('td', {}, c.type), el('td', {}, state),
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

// setupCell says where the channel is set up: the Caddyfile (read-only
// here) or the database, with its masked key and its controls.
function setupCell(c) {
  const s = c.setup;
  if (!s) return '';
  if (s.source !== 'database') return el('span', { class: 'muted' }, tr('rt.fromCaddyfile', 'from the Caddyfile'));
  const err = el('p', { class: 'error', role: 'alert' });
  const edit = el('button', { type: 'button', class: 'secondary', 'aria-label': 'Edit channel ' + c.name }, tr('rt.edit', 'Edit'));
  edit.addEventListener('click', () => editChannel(s));
  const toggle = el('button', { type: 'button', class: 'secondary', 'aria-label': (s.disabled ? 'Enable' : 'Disable') + ' channel ' + c.name },
    s.disabled ? tr('rt.enable', 'Enable') : tr('rt.disable', 'Disable'));
  toggle.addEventListener('click', () => runAction(toggle, err, async () => {
    await api('PATCH', '/api/admin/channels/' + encodeURIComponent(c.name), { disabled: !s.disabled });
    await load();
  }));
  const del = el('button', { type: 'button', class: 'danger', 'aria-label': 'Delete channel ' + c.name }, tr('rt.delete', 'Delete'));
  del.addEventListener('click', () => {
    if (!confirm(tr('rt.deleteConfirm', 'Delete the channel {name} on every instance?', { name: c.name }))) return;
    runAction(del, err, async () => {
      await api('DELETE', '/api/admin/channels/' + encodeURIComponent(c.name));
      await load();
    });
  });
  return el('div', {},
    el('div', {}, tr('rt.fromDatabase', 'database'), s.disabled ? ' · ' + tr('rt.disabled', 'disabled') : ''),
    el('div', { class: 'muted' }, s.keys ? tr('rt.keyPrefix', 'key {prefix}', { prefix: s.key_prefix }) : tr('rt.noKey', 'no key')),
    el('div', { class: 'row' }, edit, toggle, del), err);
}

// lastTests is what the channel's last tests found (database channels
// keep theirs for every instance), '' when none.
function lastTests(c) {
  const tests = c.setup && c.setup.last_test;
  if (!Array.isArray(tests) || !tests.length) return '';
  return tests.map((t) => tr('rt.lastTest', '{model}: {result} {latency} at {time}', {
    model: t.model, result: t.ok ? tr('channels.ok', 'OK') : tr('channels.failed', 'Failed') + (t.error ? ' (' + t.error + ')' : ''),
    latency: fmtMS(t.latency_ms), time: fmtTime(t.tested_at) })).join(' · ');
}

// editChannel fills the form with a database channel's setup (null: back
// to adding one); its keys are never shown, and kept when left empty.
function editChannel(s) {
  editing = s ? s.name : '';
  $('channel-form').reset();
  $('ch-name').disabled = !!s;
  $('ch-cancel').hidden = !s;
  $('ch-keys-note').hidden = !s;
  $('ch-submit').textContent = s ? tr('action.save', 'Save') : tr('rt.add', 'Add channel');
  $('h-channel-form').textContent = s ? tr('rt.editTitle', 'Change the channel {name}', { name: s.name }) : tr('rt.addTitle', 'Add a channel');
  showError($('channel-form-error'), null);
  $('channel-form-done').textContent = '';
  if (!s) return;
  $('ch-name').value = s.name;
  $('ch-type').value = s.type || '';
  $('ch-base').value = s.base_url || '';
  $('ch-models').value = (s.models || []).join(', ');
  $('ch-priority').value = s.priority || 0;
  $('ch-weight').value = s.weight || 1;
  $('ch-header-timeout').value = (s.config && s.config.response_header_timeout) || '';
  // what the form has no field for, as JSON
  const extra = Object.assign({}, s.config || {});
  for (const k of ['type', 'base_url', 'models', 'priority', 'weight', 'response_header_timeout']) delete extra[k];
  if (extra.adapter && s.type) delete extra.type;
  $('ch-extra').value = Object.keys(extra).length ? JSON.stringify(extra) : '';
  $('ch-name').scrollIntoView({ block: 'center' });
}

async function saveChannel(ev) {
  ev.preventDefault();
  const body = {
    type: $('ch-type').value.trim(),
    base_url: $('ch-base').value.trim(),
    models: $('ch-models').value.split(',').map((m) => m.trim()).filter(Boolean),
    priority: Number($('ch-priority').value || 0),
    weight: Number($('ch-weight').value || 1),
  };
  const keys = $('ch-keys').value.split('\n').map((k) => k.trim()).filter(Boolean);
  if (keys.length || !editing) body.keys = keys;
  const timeout = $('ch-header-timeout').value.trim();
  body.response_header_timeout = timeout || null;
  const name = editing || $('ch-name').value.trim();
  await runAction($('ch-submit'), $('channel-form-error'), async () => {
    const extra = $('ch-extra').value.trim();
    if (extra) {
      let more;
      try { more = JSON.parse(extra); } catch (e) { throw new Error(tr('rt.extraInvalid', 'More settings must be a JSON object: {error}', { error: e.message })); }
      if (!more || typeof more !== 'object' || Array.isArray(more)) throw new Error(tr('rt.extraInvalid', 'More settings must be a JSON object: {error}', { error: typeof more }));
      // an adapter object replaces the type field
      if (more.adapter) delete body.type;
      Object.assign(body, more);
    }
    if (editing) {
      await api('PATCH', '/api/admin/channels/' + encodeURIComponent(editing), body);
    } else {
      body.name = name;
      if (!body.response_header_timeout) delete body.response_header_timeout;
      await api('POST', '/api/admin/channels', body);
    }
    editChannel(null);
    // the keys leave the page with the form
    $('ch-keys').value = '';
    $('channel-form-done').textContent = tr('rt.saved', 'Saved: {name} is in service on every instance at its next request.', { name });
    await load();
  });
}

// testAll tests every model of every channel, a few at a time on the
// gateway, and shows the sum.
async function testAll() {
  const out = $('channels-test-all-result');
  await runAction($('channels-test-all'), $('channels-error'), async () => {
    out.textContent = tr('channels.testing', 'Testing…');
    const r = await api('POST', '/api/admin/channels/test_all', {});
    out.textContent = tr('rt.testAllDone', '{ok} passed, {failed} failed; together they would have cost {cost}.', { ok: r.ok, failed: r.failed, cost: usd(r.cost || 0) });
    await load();
  });
}

// stateLabel is the channel's state on this instance: ejected, failing
// (failed since its last success, before any ejection: attempts no channel
// answered name none in the usage log, so its recent errors say nothing)
// or in service.
function stateLabel(c) {
  if (c.ejected) return el('span', { class: 'bad' }, tr('channels.ejectedUntil', 'ejected until {time}', { time: fmtTime(c.ejected_until) }));
  if (c.state === 'disabled') return el('span', { class: 'muted' }, tr('rt.stateDisabled', 'disabled: out of service on every instance'));
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
