// The top-up page: the operator's price list, each item a button that
// starts a checkout at the payment provider and goes there; back from it
// (?paid=1), the balance and the user's payments as the provider's webhook
// left them.
'use strict';

// money is an amount of a currency as the page's language writes it.
function money(price, currency) {
  return price + ' ' + String(currency).toUpperCase();
}

async function loadTopup() {
  const [user, prices, payments] = await Promise.all([
    api('GET', '/api/user/self'), api('GET', '/api/user/topup/prices'), api('GET', '/api/user/topup/payments')]);
  $('topup-balance').textContent = usd(user.quota);
  $('topup-off').hidden = prices.enabled;
  $('topup-hint').hidden = !prices.enabled;
  $('topup-prices').replaceChildren(...prices.prices.map((p) => {
    const b = el('button', { type: 'button', 'data-price': p.id },
      t('topup.item', { price: money(p.price, p.currency), credit: usd(p.units) }));
    b.addEventListener('click', () => runAction(b, $('topup-error'), async () => {
      const co = await api('POST', '/api/user/topup/checkout', { price: p.id });
      location.href = co.url;
    }));
    return b;
  }));
  $('topup-history').replaceChildren(...payments.map((p) => el('tr', { 'data-payment': p.reference },
    el('td', {}, fmtTime(p.created_at)),
    el('td', {}, money(major(p.amount, p.currency), p.currency)),
    el('td', {}, usd(p.units - p.refunded - p.disputed)),
    el('td', { class: p.status === 'paid' ? 'good' : (p.status === 'pending' ? 'muted' : 'bad') }, t('topup.status.' + p.status)))));
  if (!payments.length) $('topup-history').append(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, t('topup.none'))));
}

// major writes an amount of a currency's smallest unit in its major unit,
// exactly ("1000" cents is "10.00").
function major(amount, currency) {
  const d = decimals(currency);
  if (!d) return String(amount);
  const s = String(amount).padStart(d + 1, '0');
  return s.slice(0, -d) + '.' + s.slice(-d);
}

// decimals is a currency's digits after the point, as the gateway counts
// them (ISO 4217: none for JPY and KRW, three for a few dinars).
function decimals(currency) {
  if (['bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw', 'mga', 'pyg', 'rwf', 'ugx', 'vnd', 'vuv', 'xaf', 'xof', 'xpf'].includes(currency)) return 0;
  if (['bhd', 'jod', 'kwd', 'omr', 'tnd'].includes(currency)) return 3;
  return 2;
}

document.addEventListener('DOMContentLoaded', async () => {
  $('logout').addEventListener('click', logout);
  const user = await pageUser();
  if (user === undefined) return;
  if (!user) { $('need-login').hidden = false; return; }
  $('whoami').textContent = user.username;
  $('logout').hidden = false;
  const back = new URLSearchParams(location.search);
  $('topup-returned').hidden = back.get('paid') !== '1';
  $('topup-cancelled').hidden = back.get('paid') === '1' || !back.has('cancelled');
  try {
    await loadTopup();
  } catch (e) {
    showError($('page-error'), e);
    return;
  }
  $('topup').hidden = false;
});
