// Shared by every console page: calling the account API, showing money and
// errors, copying to the clipboard, the light/dark and language switches
// in the header. No framework: the pages are small.
'use strict';

// tr is i18n.js's t where the page loads the dictionary; a page without
// it speaks English, given here.
function tr(key, english, vars) {
  if (typeof t === 'function') return t(key, vars);
  return vars ? english.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m)) : english;
}

// The theme: the saved choice, else the system's (style.css follows
// prefers-color-scheme while <html> has no data-theme). Applied as soon
// as this script runs, before the page's own script draws anything.
const THEME_KEY = 'gateway.theme';

function savedTheme() {
  try { return localStorage.getItem(THEME_KEY); } catch (e) { return null; }
}

function applyTheme() {
  const s = savedTheme();
  if (s === 'light' || s === 'dark') document.documentElement.dataset.theme = s;
  else delete document.documentElement.dataset.theme;
}

function currentTheme() {
  return document.documentElement.dataset.theme || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
}

applyTheme();

// headerSwitches adds the theme toggle to the page's header, and the
// language switch where the page has the dictionary.
function headerSwitches() {
  const nav = document.querySelector('header.top nav');
  if (!nav) return;
  const theme = el('button', { type: 'button', class: 'secondary', id: 'theme-toggle' });
  const label = () => {
    const dark = currentTheme() === 'dark';
    theme.textContent = dark ? tr('theme.light', 'Light') : tr('theme.dark', 'Dark');
    theme.setAttribute('aria-label', dark ? tr('theme.toLight', 'Switch to the light theme') : tr('theme.toDark', 'Switch to the dark theme'));
  };
  theme.addEventListener('click', () => {
    const next = currentTheme() === 'dark' ? 'light' : 'dark';
    try { localStorage.setItem(THEME_KEY, next); } catch (e) { /* kept for this page only */ }
    document.documentElement.dataset.theme = next;
    label();
  });
  label();
  nav.append(theme);
  if (typeof setLang === 'function') {
    // each language named in itself, so a reader of the other finds it
    const other = LANG === 'zh' ? 'en' : 'zh';
    nav.append(el('button', { type: 'button', class: 'secondary', id: 'lang-toggle', lang: other === 'zh' ? 'zh-CN' : 'en',
      'aria-label': other === 'zh' ? '切换到中文' : 'Switch to English', onclick: () => setLang(other) },
    other === 'zh' ? '中文' : 'English'));
  }
}

document.addEventListener('DOMContentLoaded', headerSwitches);

// api calls the gateway's account API with the session cookie and a JSON
// body. It throws an Error whose message is the gateway's own, so a page
// can show the person what went wrong and how to fix it.
async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { 'Accept': 'application/json' } };
  if (method !== 'GET') {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body || {});
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new Error(tr('api.unreachable', 'The gateway could not be reached: {error}', { error: e.message }));
  }
  let data = null;
  try { data = await resp.json(); } catch (e) { /* not JSON: reported below */ }
  if (!resp.ok) {
    // require_second_factor admins: an administrator enrols before the console's administration answers
    if (resp.status === 403 && data && data.error && data.error.code === 'second_factor_required' && location.pathname !== '/console/security') {
      location.href = '/console/security?enrol=1';
    }
    const msg = data && data.error && data.error.message ? data.error.message : tr('api.status', 'the gateway answered {status}', { status: resp.status });
    const err = new Error(msg);
    err.status = resp.status;
    throw err;
  }
  return data;
}

// Quota is in units of one millionth of a US dollar.
const UNITS_PER_USD = 1000000;

// usd shows units exactly: whole cents always, and the sub-cent digits
// when there are any (a request can cost $0.000034).
function usd(units) {
  const n = Math.trunc(Number(units));
  const abs = Math.abs(n);
  let frac = String(abs % UNITS_PER_USD).padStart(6, '0').replace(/0+$/, '');
  frac = frac.padEnd(2, '0');
  return (n < 0 ? '-$' : '$') + Math.trunc(abs / UNITS_PER_USD) + '.' + frac;
}

// usdToUnits turns what a person typed ("1.5", "$2", "0.000001") into whole
// units without floating point, or throws.
function usdToUnits(text) {
  const m = /^\s*\$?\s*(\d+)(?:\.(\d{0,6}))?\s*$/.exec(text);
  if (!m) throw new Error(tr('usd.invalid', 'Write an amount in US dollars, such as 5 or 0.25 (at most 6 decimals).'));
  return Number(m[1]) * UNITS_PER_USD + Number((m[2] || '').padEnd(6, '0'));
}

// el builds an element; text is always set as text, never parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function $(id) { return document.getElementById(id); }

function showError(target, err) {
  target.textContent = err ? (err.message || String(err)) : '';
}

// copyText copies and says so next to the control; where the clipboard is
// refused (plain HTTP on another host) it selects the text instead and says
// to press Ctrl+C.
async function copyText(text, feedback, selectNode) {
  try {
    await navigator.clipboard.writeText(text);
    feedback.textContent = tr('copy.done', 'Copied.');
  } catch (e) {
    if (selectNode) {
      const range = document.createRange();
      range.selectNodeContents(selectNode);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    }
    feedback.textContent = tr('copy.manual', 'Press Ctrl+C (or ⌘C) to copy the selected text.');
  }
}

// runAction disables a button while its action runs and shows any error.
async function runAction(button, errorNode, fn) {
  showError(errorNode, null);
  button.disabled = true;
  try {
    await fn();
  } catch (e) {
    showError(errorNode, e);
  } finally {
    button.disabled = false;
  }
}

async function logout() {
  try { await api('POST', '/api/user/logout', {}); } finally { location.href = '/'; }
}

// currentUser is the logged-in user, or null when nobody is.
async function currentUser() {
  try {
    return await api('GET', '/api/user/self');
  } catch (e) {
    if (e.status === 401) return null;
    throw e;
  }
}

// pageUser is currentUser for a page starting up: the user, null when
// nobody is logged in, or undefined after showing why it could not tell.
async function pageUser() {
  try {
    return await currentUser();
  } catch (e) {
    showError($('page-error'), e);
    return undefined;
  }
}

// pager loads a listing into tbody a page at a time: load(true) from the
// start, load(false) the next page, which the "more" button asks for.
function pager(url, param, tbody, more, errorNode, row) {
  let cursor = '';
  let latest = 0;
  return async (fromStart) => {
    if (fromStart) cursor = '';
    const mine = ++latest;
    try {
      // url may be a function, for a listing whose filter changes
      const base = typeof url === 'function' ? url() : url;
      const r = await api('GET', base + (cursor ? (base.includes('?') ? '&' : '?') + param + '=' + encodeURIComponent(cursor) : ''));
      if (mine !== latest) return; // a newer listing was asked for meanwhile
      const rows = r.data.map(row);
      if (fromStart) tbody.replaceChildren(...rows); else tbody.append(...rows);
      cursor = r.next_cursor;
      more.disabled = !cursor;
    } catch (e) {
      showError(errorNode, e);
    }
  };
}

// setupTabs makes the page's tabs (role="tab", each naming its panel in
// aria-controls) switch on a click and on the arrow keys.
function setupTabs() {
  const tabs = document.querySelectorAll('[role="tab"]');
  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => selectTab(tab, tabs));
    tab.addEventListener('keydown', (ev) => {
      const step = ev.key === 'ArrowRight' ? 1 : ev.key === 'ArrowLeft' ? -1 : 0;
      if (!step) return;
      const next = tabs[(i + step + tabs.length) % tabs.length];
      selectTab(next, tabs);
      next.focus();
    });
  });
}

function selectTab(tab, tabs) {
  tabs.forEach((each) => {
    const on = each === tab;
    each.setAttribute('aria-selected', String(on));
    $(each.getAttribute('aria-controls')).hidden = !on;
  });
}

// pageLocale is the page's language for dates and numbers: the one the
// console speaks (i18n.js), not the browser's, so a Chinese page shows
// Chinese dates on an English browser and the other way round.
function pageLocale() {
  return typeof LANG !== 'undefined' && LANG === 'zh' ? 'zh-CN' : 'en-US';
}

const dateFormats = {};

// fmtTime shows a time (RFC 3339, unix milliseconds or a Date) in the
// page's language and the browser's time zone; fmtDate the day alone.
function fmtTime(s) { return fmtWith(s, { dateStyle: 'medium', timeStyle: 'short' }); }
function fmtDate(s) { return fmtWith(s, { dateStyle: 'medium' }); }

function fmtWith(s, opts) {
  const d = s instanceof Date ? s : new Date(s);
  if (isNaN(d)) return '';
  const key = JSON.stringify(opts);
  if (!dateFormats[key]) dateFormats[key] = new Intl.DateTimeFormat(pageLocale(), opts);
  return dateFormats[key].format(d);
}

// priceTerms describes a model's price (GET /api/user/models: quota units,
// token terms per million tokens) as lines a person reads, in dollars.
function priceTerms(p) {
  if (!p) return [tr('price.none', 'no price')];
  if (p.free) return [tr('price.free', 'free')];
  const out = [];
  const perM = (v, what, english) => { if (v !== undefined && v !== null) out.push(tr('price.perM', '{price} per 1M {what}', { price: usd(v), what: tr('price.' + what, english) })); };
  perM(p.input, 'input', 'input tokens');
  perM(p.cached_input, 'cached_input', 'cached input tokens');
  perM(p.cache_write, 'cache_write', 'cache write tokens');
  perM(p.output, 'output', 'output tokens');
  perM(p.audio_input, 'audio_input', 'audio input tokens');
  perM(p.audio_output, 'audio_output', 'audio output tokens');
  perM(p.image_input, 'image_input', 'image input tokens');
  perM(p.characters, 'characters', 'characters');
  for (const im of p.images || []) {
    const kind = [im.size, im.quality].filter(Boolean).join(' ');
    out.push(tr('price.image', '{price} per image', { price: usd(im.price) }) + (kind ? ' (' + kind + ')' : ''));
  }
  const each = (v, what, english) => { if (v) out.push(tr('price.per', '{price} per {what}', { price: usd(v), what: tr('price.' + what, english) })); };
  each(p.audio_second, 'audio_second', 'second of audio');
  each(p.video_second, 'video_second', 'second of video');
  each(p.task, 'task', 'task');
  each(p.search_unit, 'search_unit', 'search unit');
  each(p.request, 'request', 'request');
  return out.length ? out : [tr('price.free', 'free')];
}

// replyCost is what a chat answer's usage (OpenAI's shape) costs at price,
// in units, computed as the gateway bills it: token terms summed, divided
// by a million and rounded up, plus the flat charge per request.
function replyCost(p, usage) {
  if (!p || p.free || !usage) return 0;
  const cached = (usage.prompt_tokens_details && usage.prompt_tokens_details.cached_tokens) || 0;
  const input = p.input || 0;
  const cachedPrice = p.cached_input !== undefined ? p.cached_input : input;
  const sum = BigInt(Math.max(0, (usage.prompt_tokens || 0) - cached)) * BigInt(input) +
    BigInt(cached) * BigInt(cachedPrice) + BigInt(usage.completion_tokens || 0) * BigInt(p.output || 0);
  const million = BigInt(UNITS_PER_USD);
  return Number((sum + million - 1n) / million) + (p.request || 0);
}

// Phones show a table's rows as stacked cards (style.css); each cell is
// labelled with its column's heading, taken from the table's head as rows
// are added.
function labelCells(table) {
  const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
  const label = () => table.querySelectorAll('tbody tr').forEach((tr) => {
    [...tr.children].forEach((td, i) => {
      if (td.hasAttribute('colspan')) td.classList.add('whole');
      else if (heads[i] && !td.hasAttribute('data-label')) td.setAttribute('data-label', heads[i]);
    });
  });
  label();
  new MutationObserver(label).observe(table, { childList: true, subtree: true });
}

document.addEventListener('DOMContentLoaded', () => document.querySelectorAll('table').forEach(labelCells));
