// What the operators' pages share: the administrator check, the
// navigation between them, a bar chart of days, numbers and CSV.
'use strict';

// startAdminPage wires the header and returns the logged-in
// administrator, or null after sending a visitor home or saying why a
// user may not see the page.
async function startAdminPage() {
  $('logout').addEventListener('click', logout);
  document.querySelectorAll('header.top nav a').forEach((a) => {
    if (a.getAttribute('href') === location.pathname) a.setAttribute('aria-current', 'page');
  });
  const me = await pageUser();
  if (me === undefined) return null;
  if (!me) { location.href = '/'; return null; }
  $('whoami').textContent = me.username + ' (' + me.role + ')';
  if (me.role !== 'admin' && me.role !== 'root') {
    showError($('page-error'), new Error(tr('op.notAdmin', 'These pages are for administrators. Your account is a user account.')));
    return null;
  }
  return me;
}

function fmtNumber(n) { return Number(n || 0).toLocaleString('en-US'); }

function fmtMS(ms) { return ms >= 10000 ? (ms / 1000).toFixed(1) + ' s' : fmtNumber(ms) + ' ms'; }

// barChart draws one bar a day into svg (viewBox 0 0 600 145) with a
// label a week under it in labelsNode, counted back from the last day.
// value gives a day's number, show writes it for the bar's title.
function barChart(svg, labelsNode, days, value, show) {
  const max = Math.max(1, ...days.map(value));
  const w = 600 / Math.max(1, days.length);
  const ns = 'http://www.w3.org/2000/svg';
  const nodes = [];
  const labels = [];
  const every = days.length > 31 ? 14 : 7;
  days.forEach((d, i) => {
    const v = value(d);
    const h = Math.round((v / max) * 130);
    const rect = document.createElementNS(ns, 'rect');
    rect.setAttribute('x', String(i * w + 1));
    rect.setAttribute('y', String(140 - h));
    rect.setAttribute('width', String(Math.max(1, w - 2)));
    rect.setAttribute('height', String(Math.max(h, v > 0 ? 1 : 0)));
    const title = document.createElementNS(ns, 'title');
    title.textContent = d.day + ': ' + show(v);
    rect.append(title);
    nodes.push(rect);
    if ((days.length - 1 - i) % every === 0) {
      const label = el('span', {}, d.day.slice(5));
      label.style.left = ((i + 0.5) * 100 / days.length).toFixed(2) + '%'; // CSSOM: the CSP refuses style attributes
      labels.push(label);
    }
  });
  const base = document.createElementNS(ns, 'line');
  base.setAttribute('x1', '0');
  base.setAttribute('x2', '600');
  base.setAttribute('y1', '140');
  base.setAttribute('y2', '140');
  svg.replaceChildren(base, ...nodes);
  labelsNode.replaceChildren(...labels);
}

// csv writes rows (arrays) as RFC 4180 text; a cell that a spreadsheet
// would run as a formula is quoted with a leading apostrophe.
function csv(rows) {
  const cell = (v) => {
    let s = v === null || v === undefined ? '' : String(v);
    if (/^[=+\-@]/.test(s)) s = "'" + s;
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  return rows.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}

// download hands text to the browser as a file.
function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el('a', { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// rfc3339 turns a datetime-local input's value into an RFC 3339 time.
function rfc3339(local) {
  const d = new Date(local);
  if (isNaN(d)) throw new Error(tr('op.badTime', 'Write the time as the date picker gives it.'));
  return d.toISOString().replace(/\.\d+Z$/, 'Z');
}
