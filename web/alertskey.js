// The home page's part of budget alerts: the alerts page's link, shown once
// logged in, and a key's own thresholds in the edit-key dialog: a field
// added to the dialog, filled from GET /api/user/tokens/{id}/alerts when
// it opens and saved with PUT when the dialog is saved. Kept apart from
// console.js, which it reads only its `editing` key from.
'use strict';

document.addEventListener('DOMContentLoaded', () => {
  // the alerts page's link shows with the logout button: once logged in
  const link = $('nav-alerts');
  const logout = $('logout');
  if (link && logout) {
    const sync = () => { link.hidden = logout.hidden; };
    new MutationObserver(sync).observe(logout, { attributes: true, attributeFilter: ['hidden'] });
    sync();
  }
  const form = $('edit-form');
  const dialog = $('edit-key');
  if (!form || !dialog) return;
  const label = el('label', { for: 'edit-alerts', 'data-i18n': 'alerts.keyField' },
    tr('alerts.keyField', 'Alert me at (% of each budget, space-separated; empty for none)'));
  const input = el('input', { id: 'edit-alerts', inputmode: 'numeric', placeholder: '50 80 100', autocomplete: 'off' });
  form.insertBefore(input, $('edit-models'));
  form.insertBefore(label, input);
  // filled each time the dialog opens, for the key being edited
  new MutationObserver(async () => {
    if (!dialog.open || typeof editing === 'undefined' || !editing) return;
    input.value = '';
    input.dataset.loaded = 'no';
    try {
      const r = await api('GET', '/api/user/tokens/' + editing.id + '/alerts');
      input.value = r.thresholds.join(' ');
    } catch (e) {
      showError($('edit-error'), e);
    } finally {
      input.dataset.loaded = 'yes';
    }
  }).observe(dialog, { attributes: true, attributeFilter: ['open'] });
  // before console.js saves the rest: a bad list keeps the dialog open
  form.addEventListener('submit', (ev) => {
    const text = input.value.trim();
    const list = text ? text.split(/[\s,]+/).map((s) => s.replace(/%$/, '')) : [];
    if (list.some((s) => !/^\d+$/.test(s) || Number(s) < 1 || Number(s) > 100)) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
      showError($('edit-error'), new Error(tr('alerts.keyInvalid', 'Write whole percentages from 1 to 100, such as 50 80 100.')));
      return;
    }
    // sent beside console.js's save, which closes the dialog: a refusal
    // shows under the keys
    api('PUT', '/api/user/tokens/' + editing.id + '/alerts', { thresholds: [...new Set(list.map(Number))] })
      .catch((e) => showError($('token-error'), e));
  }, { capture: true });
});
