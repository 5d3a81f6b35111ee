// The models and prices page: every model the account may use, with what
// it costs in dollars, from the gateway's configuration.
'use strict';

document.addEventListener('DOMContentLoaded', async () => {
  $('logout').addEventListener('click', logout);
  const user = await pageUser();
  if (user === undefined) return;
  if (!user) { $('need-login').hidden = false; return; }
  $('whoami').textContent = user.username;
  $('logout').hidden = false;
  try {
    const r = await api('GET', '/api/user/models');
    $('models').replaceChildren(...r.data.map((m) => el('tr', { 'data-model': m.id },
      el('td', {}, el('code', {}, m.id)),
      el('td', {}, m.chat ? t('models.yes') : t('models.no')),
      el('td', { class: 'price' }, el('span', {}, ...priceTerms(m.price).flatMap((term, i) => i ? [el('br'), term] : [term]))))));
    if (!r.data.length) $('models').append(el('tr', {}, el('td', { colspan: 3, class: 'muted' }, t('models.none'))));
  } catch (e) {
    showError($('page-error'), e);
    return;
  }
  $('models-card').hidden = false;
});
