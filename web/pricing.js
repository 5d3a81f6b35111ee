// The prices and plans page: every price and plan with where it is set
// (the Caddyfile's are read-only here); those kept in the database are
// added, replaced and deleted (GET/POST /api/admin/prices and
// /api/admin/plans, PATCH and DELETE .../{name}).
'use strict';

document.addEventListener('DOMContentLoaded', async () => {
  $('price-form').addEventListener('submit', savePrice);
  $('plan-form').addEventListener('submit', savePlan);
  if (!(await startAdminPage())) return;
  $('admin').hidden = false;
  await load();
});

let prices = [];
let plans = [];

async function load() {
  showError($('prices-error'), null);
  showError($('plans-error'), null);
  try {
    prices = (await api('GET', '/api/admin/prices')).data;
    $('prices').replaceChildren(...prices.map(priceRow));
  } catch (e) { showError($('prices-error'), e); }
  try {
    plans = (await api('GET', '/api/admin/plans')).data;
    $('plans').replaceChildren(...plans.map(planRow));
  } catch (e) { showError($('plans-error'), e); }
}

function sourceLabel(s) {
  return s === 'database' ? tr('rt.fromDatabase', 'database') : tr('rt.fromCaddyfile', 'from the Caddyfile');
}

// actions are a database item's Delete button, with its own error line.
function actions(kind, name) {
  const err = el('p', { class: 'error', role: 'alert' });
  const del = el('button', { type: 'button', class: 'danger', 'aria-label': 'Delete ' + name }, tr('rt.delete', 'Delete'));
  del.addEventListener('click', () => {
    if (!confirm(tr('rt.deleteItemConfirm', 'Delete {name} on every instance?', { name }))) return;
    runAction(del, err, async () => {
      await api('DELETE', '/api/admin/' + kind + '/' + encodeURIComponent(name));
      await load();
    });
  });
  return el('div', {}, del, err);
}

function priceRow(p) {
  return el('tr', { 'data-model': p.model },
    el('td', {}, el('code', {}, p.model)), el('td', {}, sourceLabel(p.source)),
    el('td', { class: 'wrap' }, priceTerms(p.price).join(', ')),
    el('td', {}, p.source === 'database' ? actions('prices', p.model) : '—'));
}

function planRow(p) {
  const v = p.plan || {};
  const windows = Object.entries(v.windows || {}).map(([w, amount]) => w + ' $' + amount).join(', ') || '—';
  return el('tr', { 'data-plan': p.name },
    el('td', {}, p.name), el('td', {}, sourceLabel(p.source)), el('td', {}, windows),
    el('td', { class: 'wrap' }, (v.models || []).join(', ') || tr('rt.allModels', 'all models')),
    el('td', {}, p.source === 'database' ? actions('plans', p.name) : '—'));
}

// units reads a USD amount typed in a field into quota units, undefined
// when the field is empty.
function units(id) {
  const v = $(id).value.trim();
  return v ? usdToUnits(v) : undefined;
}

async function savePrice(ev) {
  ev.preventDefault();
  await runAction($('pr-submit'), $('price-form-error'), async () => {
    const model = $('pr-model').value.trim();
    const price = {};
    if ($('pr-free').checked) price.free = true;
    for (const [field, id] of [['input', 'pr-input'], ['output', 'pr-output'], ['cached_input', 'pr-cached'], ['request', 'pr-request']]) {
      const u = units(id);
      if (u !== undefined) price[field] = u;
    }
    const known = prices.some((p) => p.model === model && p.source === 'database');
    if (known) await api('PATCH', '/api/admin/prices/' + encodeURIComponent(model), { price });
    else await api('POST', '/api/admin/prices', { model, price });
    $('price-form').reset();
    $('price-form-done').textContent = tr('rt.priceSaved', 'Saved: {model} costs this on every instance at its next request.', { model });
    await load();
  });
}

async function savePlan(ev) {
  ev.preventDefault();
  await runAction($('pl-submit'), $('plan-form-error'), async () => {
    const name = $('pl-name').value.trim();
    const plan = { windows: {} };
    for (const w of ['daily', 'weekly', 'monthly']) {
      const v = $('pl-' + w).value.trim();
      if (v) { usdToUnits(v); plan.windows[w] = v; }
    }
    const models = $('pl-models').value.split(',').map((m) => m.trim()).filter(Boolean);
    if (models.length) plan.models = models;
    if ($('pl-then-balance').checked) plan.then_balance = true;
    const known = plans.some((p) => p.name === name && p.source === 'database');
    if (known) await api('PATCH', '/api/admin/plans/' + encodeURIComponent(name), { plan });
    else await api('POST', '/api/admin/plans', { name, plan });
    $('plan-form').reset();
    $('plan-form-done').textContent = tr('rt.planSaved', 'Saved: the plan {name} is in force on every instance at its next request.', { name });
    await load();
  });
}
