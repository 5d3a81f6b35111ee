// The operators' dashboard: requests, spend, tokens and errors over time,
// for everything or one model, user, key or channel; the top of each; the
// cache's share of prompt tokens, in all and per model, user, key and
// channel (GET /api/admin/dashboard).
'use strict';

let dash = null;
let group = 'model';

const metricNames = { requests: 'requests', cost: 'spend', tokens: 'tokens', errors: 'errors' };

document.addEventListener('DOMContentLoaded', async () => {
  $('dash-days').addEventListener('change', load);
  $('dash-metric').addEventListener('change', drawChart);
  $('dash-series').addEventListener('change', drawChart);
  document.querySelectorAll('[data-group]').forEach((tab) => tab.addEventListener('click', () => {
    group = tab.dataset.group;
    document.querySelectorAll('[data-group]').forEach((t) => t.setAttribute('aria-selected', String(t === tab)));
    drawTable();
  }));
  if (!(await startAdminPage())) return;
  $('admin').hidden = false;
  await load();
});

async function load() {
  showError($('dash-error'), null);
  $('admin').dataset.loading = 'yes';
  try {
    dash = await api('GET', '/api/admin/dashboard?days=' + $('dash-days').value);
  } catch (e) {
    showError($('dash-error'), e);
    return;
  } finally {
    $('admin').dataset.loading = 'no';
  }
  const t = dash.total;
  const r = dash.recent;
  $('stat-requests').textContent = fmtNumber(t.requests);
  $('stat-spend').textContent = usd(t.cost);
  $('stat-tokens').textContent = fmtNumber(t.tokens);
  $('stat-errors').textContent = fmtNumber(r.total.errors) + (r.total.requests ? ' (' + pct(r.total.errors / r.total.requests) + ')' : '');
  $('stat-cache').textContent = pct(dash.cache.share);
  $('stat-cache').title = tr('dash.cacheOf', '{cached} of {prompt} prompt tokens read from cache', { cached: fmtNumber(dash.cache.cached_tokens), prompt: fmtNumber(dash.cache.prompt_tokens) });
  $('dash-sources').textContent = tr('dash.sources', 'Requests, spend, tokens and cache per day, model and user are the exact daily totals since {since}. Errors, channels and keys are counted over every request of the period that the usage log still keeps.', { since: dash.since });
  const keep = $('dash-series').value;
  const opts = [el('option', { value: '' }, tr('op.everything', 'everything'))];
  for (const g of ['model', 'user', 'key', 'channel']) {
    for (const row of rows(g)) opts.push(el('option', { value: row.ref }, tr('dash.group.' + g, g) + ': ' + row.name));
  }
  $('dash-series').replaceChildren(...opts);
  $('dash-series').value = opts.some((o) => o.value === keep) ? keep : '';
  drawChart();
  drawTable();
  drawResponseCache();
}

// drawResponseCache is the response cache's hit rate and money saved per
// model and per key, from the recent rows' sums.
function drawResponseCache() {
  const r = dash.recent;
  const of = [['model', tr('rcache.model', 'model'), r.models || []], ['key', tr('rcache.key', 'key'), r.keys || []]];
  const trs = [];
  for (const [g, label, list] of of) {
    for (const s of list) {
      if (!s.cache_hits) continue;
      trs.push(el('tr', { 'data-rcache': g + ':' + s.name },
        el('td', {}, label), el('td', {}, s.name), el('td', { class: 'num' }, fmtNumber(s.requests)),
        el('td', { class: 'num' }, fmtNumber(s.cache_hits)), el('td', { class: 'num' }, s.requests ? pct(s.cache_hits / s.requests) : '–'),
        el('td', { class: 'num' }, usd(s.cache_saved))));
    }
  }
  if (!trs.length) trs.push(el('tr', {}, el('td', { colspan: 6 }, tr('rcache.none', 'No request was answered from the response cache in this period.'))));
  $('rcache-rows').replaceChildren(...trs);
}

function pct(x) { return (100 * (x || 0)).toFixed(1) + '%'; }

// rows are one group's entries, each with the series its figures come
// from: exact daily totals for models and users (errors from the recent
// rows), the recent rows alone for keys and channels.
function rows(g) {
  const r = dash.recent;
  const match = (list, s) => list.find((x) => (s.id ? x.id === s.id : x.name === s.name));
  const exact = (list, recent) => list.map((s) => {
    const e = match(recent, s);
    return { ref: g + ':' + (s.id || s.name), name: s.name, requests: s.requests, cost: s.cost, tokens: s.tokens,
      errors: e ? e.errors : 0, daily: s.daily, errDaily: e ? e.daily : null, prompt: s.prompt_tokens, cached: s.cached_tokens };
  });
  const sampled = (list) => list.map((s) => ({ ref: g + ':' + (s.id || s.name), name: s.name, requests: s.requests, cost: s.cost,
    tokens: s.tokens, errors: s.errors, daily: s.daily, errDaily: s.daily, prompt: s.prompt_tokens, cached: s.cached_tokens }));
  switch (g) {
    case 'model': return exact(dash.models, r.models);
    case 'user': return exact(dash.users, r.users);
    case 'key': return sampled(r.keys);
    default: return sampled(r.channels);
  }
}

function drawChart() {
  if (!dash) return;
  const metric = $('dash-metric').value;
  const ref = $('dash-series').value;
  let days = metric === 'errors' ? dash.recent.total.daily : dash.total.daily;
  let what = tr('op.everything', 'everything');
  if (ref) {
    const g = ref.slice(0, ref.indexOf(':'));
    const row = rows(g).find((x) => x.ref === ref);
    if (row) {
      what = tr('dash.group.' + g, g) + ' ' + row.name;
      days = metric === 'errors' ? (row.errDaily || days.map((d) => ({ day: d.day, errors: 0 }))) : row.daily;
    }
  }
  const show = metric === 'cost' ? usd : fmtNumber;
  barChart($('chart'), $('chart-labels'), days, (d) => d[metric] || 0, show);
  const total = days.reduce((n, d) => n + (d[metric] || 0), 0);
  const peak = Math.max(0, ...days.map((d) => d[metric] || 0));
  const name = tr('dash.metric.' + metric, metricNames[metric]);
  $('chart-title').textContent = tr('dash.chartOf', '{metric} of {what}', { metric: name, what });
  $('chart-summary').textContent = tr('dash.summary', 'Total {total} {metric} over {days} days; highest day {peak}.', { total: show(total), metric: name, days: days.length, peak: show(peak) });
}

function drawTable() {
  if (!dash) return;
  const list = rows(group);
  const trs = list.map((row) => el('tr', { 'data-name': row.name },
    el('td', {}, row.name), el('td', { class: 'num' }, fmtNumber(row.requests)), el('td', { class: 'num' }, usd(row.cost)),
    el('td', { class: 'num' }, fmtNumber(row.tokens)), el('td', { class: 'num' }, fmtNumber(row.errors)),
    el('td', { class: 'num', title: tr('dash.cacheOf', '{cached} of {prompt} prompt tokens read from cache', { cached: fmtNumber(row.cached), prompt: fmtNumber(row.prompt) }) },
      row.prompt ? pct(row.cached / row.prompt) : '–'),
    el('td', {}, el('button', { type: 'button', class: 'secondary', 'aria-label': tr('dash.chartNamed', 'Chart {group} {name}', { group: tr('dash.group.' + group, group), name: row.name }), onclick: () => {
      $('dash-series').value = row.ref;
      drawChart();
      $('h-time').scrollIntoView({ block: 'nearest' });
    } }, tr('op.chart', 'Chart')))));
  if (!trs.length) trs.push(el('tr', {}, el('td', { colspan: 7 }, tr('dash.nothing', 'Nothing in this period.'))));
  $('by-rows').replaceChildren(...trs);
  $('by-note').textContent = {
    model: tr('dash.note.model', 'Every model used in the period, the costliest first.'),
    user: tr('dash.note.user', 'The {n} users who spent the most in the period (at most 10).', { n: dash.users.length }),
    key: tr('dash.note.key', 'The keys that spent the most among the newest requests counted (at most 10).'),
    channel: tr('dash.note.channel', 'Every channel among the newest requests counted, by the channel that answered; "(no channel answered)" holds requests refused before any channel and those every channel tried failed.'),
  }[group];
}
