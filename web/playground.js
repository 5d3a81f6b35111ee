// The playground: chat with any model the account may use. Requests go to
// the gateway's own /v1/chat/completions with the login session (no key in
// the page) and stream back as server-sent events, rendered as Markdown as
// they arrive. Stop aborts the request; the gateway bills what was made.
// The conversation and settings are kept in this browser (localStorage),
// per user, until "New conversation".
'use strict';

let history = []; // { role, content, image?, cost?, usage? }
let attached = ''; // the image going with the next message, as a data URL

// maxImageBytes bounds an attached image: its data URL goes in the
// request's JSON, well within the gateway's max_request_body.
const maxImageBytes = 4 << 20;
let controller = null;
let prices = new Map(); // model id -> price, from GET /api/user/models
let storeKey = '';

document.addEventListener('DOMContentLoaded', async () => {
  $('logout').addEventListener('click', logout);
  $('chat-form').addEventListener('submit', (ev) => { ev.preventDefault(); send(); });
  $('prompt').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); send(); }
  });
  $('stop').addEventListener('click', () => { if (controller) controller.abort(); });
  $('clear').addEventListener('click', () => {
    if (controller) controller.abort();
    history = [];
    $('chat').replaceChildren();
    save();
    showCode();
    $('status').textContent = t('playground.newDone');
    $('prompt').focus();
  });
  $('show-code').addEventListener('click', () => {
    const open = $('code-card').hidden;
    $('code-card').hidden = !open;
    $('show-code').setAttribute('aria-expanded', String(open));
    if (open) showCode();
  });
  $('copy-code').addEventListener('click', () => {
    const panel = document.querySelector('#code-card [role="tabpanel"]:not([hidden]) code');
    copyText(panel.textContent, $('copy-code-feedback'), panel);
  });
  setupTabs();
  for (const id of ['model', 'temperature', 'max-tokens', 'system']) {
    $(id).addEventListener('change', () => { save(); showCode(); showPrice(); });
  }
  $('prompt').addEventListener('input', showCode);
  $('image').addEventListener('change', onImage);
  $('image-remove').addEventListener('click', () => attach(''));
  const user = await pageUser();
  if (user === undefined) return;
  if (!user) { $('need-login').hidden = false; return; }
  $('whoami').textContent = user.username;
  $('logout').hidden = false;
  storeKey = 'gateway.playground.' + user.id;
  try {
    const r = await api('GET', '/api/user/models');
    // only chat models: an image, audio, rerank, Realtime or video model
    // would refuse what the playground sends
    const chat = r.data.filter((m) => m.chat);
    prices = new Map(chat.map((m) => [m.id, m.price]));
    $('model').replaceChildren(...chat.map((m) => el('option', { value: m.id }, m.id)));
    if (prices.has('demo')) $('model').value = 'demo';
    if (!chat.length) showError($('page-error'), new Error(t('playground.noModels')));
  } catch (e) {
    showError($('page-error'), e);
    return;
  }
  restore();
  showPrice();
  $('playground').hidden = false;
  $('prompt').focus();
});

// save keeps the conversation and settings in this browser; a full
// storage only loses the keeping, never the conversation on the page.
function save() {
  if (!storeKey) return;
  const state = { model: $('model').value, temperature: $('temperature').value, maxTokens: $('max-tokens').value,
    system: $('system').value, messages: history };
  try {
    localStorage.setItem(storeKey, JSON.stringify(state));
  } catch (e) {
    // images fill the browser's few megabytes first: keep the words
    state.messages = history.map(({ image, ...m }) => m);
    try { localStorage.setItem(storeKey, JSON.stringify(state)); } catch (e2) { /* storage full or refused */ }
  }
}

// onImage reads the chosen file as a data URL, within maxImageBytes.
function onImage() {
  const file = $('image').files[0];
  showError($('chat-error'), null);
  if (!file) return;
  if (!/^image\/(png|jpeg|webp|gif)$/.test(file.type)) {
    attach('');
    showError($('chat-error'), new Error(t('playground.imageType')));
    return;
  }
  if (file.size > maxImageBytes) {
    attach('');
    showError($('chat-error'), new Error(t('playground.imageTooBig', { size: (file.size / 1048576).toFixed(1) })));
    return;
  }
  const reader = new FileReader();
  reader.onload = () => attach(String(reader.result));
  reader.onerror = () => { attach(''); showError($('chat-error'), reader.error); };
  reader.readAsDataURL(file);
}

// attach sets (or with '' clears) the image for the next message.
function attach(dataURL) {
  attached = dataURL;
  $('attached').hidden = !dataURL;
  $('attached-img').src = dataURL || '';
  if (!dataURL) $('image').value = '';
  showCode();
}

// userContent is a user turn as the chat API takes it: text alone, or the
// text and its image as content parts.
function userContent(text, image) {
  if (!image) return text;
  return [{ type: 'text', text }, { type: 'image_url', image_url: { url: image } }];
}

function restore() {
  let state = null;
  try { state = JSON.parse(localStorage.getItem(storeKey) || 'null'); } catch (e) { /* unreadable: start afresh */ }
  if (!state) return;
  if (prices.has(state.model)) $('model').value = state.model;
  if (state.temperature !== undefined) $('temperature').value = state.temperature;
  if (state.maxTokens !== undefined) $('max-tokens').value = state.maxTokens;
  if (state.system !== undefined) $('system').value = state.system;
  history = Array.isArray(state.messages) ? state.messages.filter((m) => m && typeof m.content === 'string') : [];
  for (const m of history) {
    const body = addMessage(m.role, m.content, m.image);
    if (m.role === 'assistant') showCost(body, m);
  }
}

function showPrice() {
  const p = prices.get($('model').value);
  $('model-price').textContent = p ? t('playground.price', { model: $('model').value, terms: priceTerms(p).join('; ') }) : '';
}

function addMessage(role, content, image) {
  const body = el('div', { class: 'body' });
  const node = el('div', { class: 'msg ' + role }, el('div', { class: 'who' }, role === 'user' ? t('playground.you') : t('playground.assistant')), body);
  if (role === 'user') body.textContent = content; else body.innerHTML = renderMarkdown(content);
  if (image) node.append(el('img', { class: 'attached', src: image, alt: t('playground.imageAlt') }));
  $('chat').append(node);
  return body;
}

// showCost writes a reply's tokens and cost under it.
function showCost(body, m) {
  if (!m.usage) return;
  const line = t('playground.cost', { in: m.usage.prompt_tokens, out: m.usage.completion_tokens, cost: usd(m.cost || 0) });
  const node = body.parentNode.querySelector('.cost') || body.parentNode.appendChild(el('div', { class: 'cost' }));
  node.textContent = line;
}

// request is the chat request for the conversation so far, as the
// playground sends it and as "show as code" writes it.
function request(stream) {
  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...history.map((m) => ({ role: m.role, content: m.role === 'user' ? userContent(m.content, m.image) : m.content })));
  const body = { model: $('model').value, messages };
  const temperature = $('temperature').value;
  if (temperature !== '') body.temperature = Number(temperature);
  const maxTokens = $('max-tokens').value;
  if (maxTokens !== '') body.max_tokens = Number(maxTokens);
  if (stream) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
  return body;
}

// showCode writes the conversation so far (with the prompt being typed,
// when there is one) as curl, Python and JavaScript; the key is read from
// the environment, never written.
function showCode() {
  if ($('code-card').hidden) return;
  const body = request(false);
  const typed = $('prompt').value.trim();
  if (typed) body.messages.push({ role: 'user', content: userContent(typed, attached) });
  // an image's data URL is megabytes of base64: the code names it instead
  for (const m of body.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (part.image_url) part.image_url.url = part.image_url.url.replace(/^(data:[^;,]+;base64,).*$/, '$1<' + t('playground.imageBase64') + '>');
    }
  }
  const base = $('main').dataset.baseUrl;
  const json = JSON.stringify(body, null, 2);
  $('code-curl-text').textContent = 'curl ' + base + '/chat/completions \\\n' +
    '  -H "Authorization: Bearer $GATEWAY_API_KEY" \\\n' +
    '  -H "Content-Type: application/json" \\\n' +
    "  -d '" + json.replace(/'/g, "'\\''") + "'";
  const { model, messages, ...rest } = body;
  const pyArgs = ['model=' + JSON.stringify(model), 'messages=' + pyLiteral(messages)]
    .concat(Object.entries(rest).map(([k, v]) => k + '=' + pyLiteral(v)));
  $('code-python-text').textContent = 'import os\nfrom openai import OpenAI\n\n' +
    'client = OpenAI(base_url=' + JSON.stringify(base) + ', api_key=os.environ["GATEWAY_API_KEY"])\n' +
    'reply = client.chat.completions.create(\n    ' + pyArgs.join(',\n    ') + ')\nprint(reply.choices[0].message.content)';
  $('code-js-text').textContent = 'import OpenAI from "openai";\n\n' +
    'const client = new OpenAI({ baseURL: ' + JSON.stringify(base) + ', apiKey: process.env.GATEWAY_API_KEY });\n' +
    'const reply = await client.chat.completions.create(' + json + ');\nconsole.log(reply.choices[0].message.content);';
}

// pyLiteral writes JSON data as a Python literal (strings as JSON writes
// them, which Python reads the same).
function pyLiteral(v, indent = '    ') {
  const inner = indent + '    ';
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (Array.isArray(v)) {
    return v.length ? '[\n' + v.map((x) => inner + pyLiteral(x, inner)).join(',\n') + '\n' + indent + ']' : '[]';
  }
  if (typeof v === 'object') {
    const entries = Object.entries(v);
    return entries.length ? '{\n' + entries.map(([k, x]) => inner + JSON.stringify(k) + ': ' + pyLiteral(x, inner)).join(',\n') + '\n' + indent + '}' : '{}';
  }
  return JSON.stringify(v);
}

async function send() {
  const text = $('prompt').value.trim();
  if (!text || controller) return;
  showError($('chat-error'), null);
  const model = $('model').value;
  const image = attached;
  const userBody = addMessage('user', text, image);
  history.push(image ? { role: 'user', content: text, image } : { role: 'user', content: text });
  $('prompt').value = '';
  attach('');
  const body = request(true);

  const answer = addMessage('assistant', '');
  answer.setAttribute('aria-busy', 'true');
  let content = '';
  let usage = null;
  let failed = null;
  controller = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  $('status').textContent = t('playground.answering');
  let pending = false;
  const paint = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; answer.innerHTML = renderMarkdown(content); });
  };
  try {
    const resp = await fetch('/v1/chat/completions', {
      method: 'POST', credentials: 'same-origin', signal: controller.signal,
      headers: { 'Content-Type': 'application/json', 'Accept': 'text/event-stream' },
      body: JSON.stringify(body),
    });
    if (!resp.ok) {
      let msg = t('api.status', { status: resp.status });
      try { const e = await resp.json(); if (e.error && e.error.message) msg = e.error.message; } catch (e) { /* keep status */ }
      throw new Error(msg);
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message || t('playground.streamError'));
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && delta.content) { content += delta.content; paint(); }
        if (chunk.usage) usage = chunk.usage;
      }
    }
    $('status').textContent = content ? '' : t('playground.empty');
  } catch (e) {
    if (e.name === 'AbortError') {
      $('status').textContent = t('playground.stopped');
    } else {
      failed = e;
      showError($('chat-error'), e);
      $('status').textContent = '';
    }
  } finally {
    answer.removeAttribute('aria-busy');
    if (content && !failed) {
      answer.innerHTML = renderMarkdown(content);
      const turn = { role: 'assistant', content };
      if (usage) Object.assign(turn, { usage, cost: replyCost(prices.get(model), usage) });
      history.push(turn);
      showCost(answer, turn);
    } else {
      // nothing answered (a refusal, an error, a stop before the first
      // word): the turn leaves the conversation and the text goes back
      // into the box, to send again
      answer.parentNode.remove();
      userBody.parentNode.remove();
      history.pop();
      $('prompt').value = text;
      attach(image);
    }
    save();
    showCode();
    controller = null;
    $('send').disabled = false;
    $('stop').disabled = true;
    $('prompt').focus();
  }
}
