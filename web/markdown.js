// A small Markdown renderer for the playground's answers: headings,
// paragraphs (line breaks kept), lists, block quotes, rules, tables, fenced
// code blocks, inline code, bold, italic and links. Every piece of the source is HTML-escaped before
// any tag is added, and links keep only http(s) and mailto addresses, so a
// model's answer cannot put markup or script into the page. An unclosed
// code fence (mid-stream) renders as a code block up to the end.
'use strict';

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

// renderInline formats one line's text; code spans are cut out first so
// nothing inside them is formatted.
function renderInline(text) {
  const parts = text.split(/(`+[^`]*`+)/);
  return parts.map((part, i) => {
    if (i % 2 === 1) {
      return '<code>' + escapeHtml(part.replace(/^`+|`+$/g, '')) + '</code>';
    }
    let s = escapeHtml(part);
    s = s.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (m, label, url) => {
      // url is already escaped, so it cannot close the attribute
      if (!/^(https?:\/\/|mailto:)/i.test(url)) return m;
      return '<a href="' + url + '" rel="noopener noreferrer" target="_blank">' + label + '</a>';
    });
    s = s.replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>');
    s = s.replace(/__([^_]+)__/g, '<strong>$1</strong>');
    s = s.replace(/(^|[^*])\*([^*\s][^*]*)\*/g, '$1<em>$2</em>');
    s = s.replace(/(^|[^\w_])_([^_\s][^_]*)_(?!\w)/g, '$1<em>$2</em>');
    return s;
  }).join('');
}

// tableCells splits a table row on its pipes, leaving escaped pipes (\|)
// and those inside code spans in the cell.
function tableCells(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  let code = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && s[i + 1] === '|') { cur += '|'; i++; continue; }
    if (c === '`') code = !code;
    if (c === '|' && !code) { cells.push(cur.trim()); cur = ''; continue; }
    cur += c;
  }
  cells.push(cur.trim());
  return cells;
}

const tableDelimiter = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function renderMarkdown(src) {
  const lines = String(src).replace(/\r\n?/g, '\n').split('\n');
  const out = [];
  let para = [];
  let list = null; // { tag, items }
  const flushPara = () => {
    if (para.length) out.push('<p>' + para.map(renderInline).join('<br>') + '</p>');
    para = [];
  };
  const flushList = () => {
    if (list) out.push('<' + list.tag + '>' + list.items.map((it) => '<li>' + renderInline(it) + '</li>').join('') + '</' + list.tag + '>');
    list = null;
  };
  const flush = () => { flushPara(); flushList(); };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```+|~~~+)\s*([\w+-]*)/.exec(line);
    if (fence) {
      flush();
      const code = [];
      let j = i + 1;
      while (j < lines.length && !lines[j].trim().startsWith(fence[1])) code.push(lines[j++]);
      const lang = fence[2] ? ' class="language-' + escapeHtml(fence[2]) + '"' : '';
      out.push('<pre><code' + lang + '>' + escapeHtml(code.join('\n')) + '</code></pre>');
      i = j;
      continue;
    }
    let m;
    if (!line.trim()) { flush(); continue; }
    // a table: a row of headings, a row of dashes, then rows until a line
    // without a pipe
    if (line.includes('|') && i + 1 < lines.length && tableDelimiter.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      flush();
      const head = tableCells(line);
      const align = tableCells(lines[i + 1]).map((d) => (d.endsWith(':') ? (d.startsWith(':') ? 'center' : 'right') : ''));
      const cell = (tag, text, k) => '<' + tag + (align[k] ? ' class="align-' + align[k] + '"' : '') + '>' + renderInline(text) + '</' + tag + '>';
      const rows = [];
      let j = i + 2;
      while (j < lines.length && lines[j].includes('|') && lines[j].trim()) {
        const cells = tableCells(lines[j++]);
        rows.push('<tr>' + head.map((_, k) => cell('td', cells[k] || '', k)).join('') + '</tr>');
      }
      out.push('<table><thead><tr>' + head.map((h, k) => cell('th', h, k)).join('') + '</tr></thead><tbody>' + rows.join('') + '</tbody></table>');
      i = j - 1;
      continue;
    }
    if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) {
      flush();
      const n = m[1].length;
      out.push('<h' + n + '>' + renderInline(m[2]) + '</h' + n + '>');
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); out.push('<hr>'); continue; }
    if ((m = /^\s*>\s?(.*)$/.exec(line))) {
      flush();
      out.push('<blockquote>' + renderInline(m[1]) + '</blockquote>');
      continue;
    }
    if ((m = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(line))) {
      flushPara();
      const tag = /\d/.test(m[1]) ? 'ol' : 'ul';
      if (!list || list.tag !== tag) { flushList(); list = { tag, items: [] }; }
      list.items.push(m[2]);
      continue;
    }
    flushList();
    para.push(line);
  }
  flush();
  return out.join('\n');
}
