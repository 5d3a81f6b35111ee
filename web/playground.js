// The playground: chat with any model the account may use. Requests go to
// the gateway's own /v1/chat/completions with the login session (no key in
// the page) and stream back as server-sent events, rendered as Markdown as
// they arrive. Stop aborts the request; the gateway bills what was made.
'use strict';

const history = []; // { role, content }
let controller = null;

document.addEventListener('DOMContentLoaded', async () => {
  $('logout').addEventListener('click', logout);
  $('chat-form').addEventListener('submit', (ev) => { ev.preventDefault(); send(); });
  $('prompt').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); send(); }
  });
  $('stop').addEventListener('click', () => { if (controller) controller.abort(); });
  $('clear').addEventListener('click', () => {
    if (controller) controller.abort();
    history.length = 0;
    $('chat').replaceChildren();
    $('status').textContent = 'Conversation cleared.';
    $('prompt').focus();
  });
  const user = await pageUser();
  if (user === undefined) return;
  if (!user) { $('need-login').hidden = false; return; }
  $('whoami').textContent = user.username;
  $('logout').hidden = false;
  try {
    const r = await api('GET', '/api/user/models');
    // only chat models: an image, audio, rerank, Realtime or video model
    // would refuse what the playground sends
    const chat = r.data.filter((m) => m.chat).map((m) => m.id);
    $('model').replaceChildren(...chat.map((id) => el('option', { value: id }, id)));
    if (chat.includes('demo')) $('model').value = 'demo';
    if (!chat.length) showError($('page-error'), new Error('No chat models are available: the administrator has not configured any priced chat model.'));
  } catch (e) {
    showError($('page-error'), e);
    return;
  }
  $('playground').hidden = false;
  $('prompt').focus();
});

function addMessage(role, content) {
  const body = el('div', { class: 'body' });
  const node = el('div', { class: 'msg ' + role }, el('div', { class: 'who' }, role === 'user' ? 'You' : 'Assistant'), body);
  if (role === 'user') body.textContent = content; else body.innerHTML = renderMarkdown(content);
  $('chat').append(node);
  return body;
}

async function send() {
  const text = $('prompt').value.trim();
  if (!text || controller) return;
  showError($('chat-error'), null);
  addMessage('user', text);
  history.push({ role: 'user', content: text });
  $('prompt').value = '';
  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...history);
  const body = { model: $('model').value, messages, stream: true, stream_options: { include_usage: true } };
  const temperature = $('temperature').value;
  if (temperature !== '') body.temperature = Number(temperature);
  const maxTokens = $('max-tokens').value;
  if (maxTokens !== '') body.max_tokens = Number(maxTokens);

  const answer = addMessage('assistant', '');
  answer.setAttribute('aria-busy', 'true');
  let content = '';
  controller = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  $('status').textContent = 'Answering…';
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
      let msg = 'the gateway answered ' + resp.status;
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
        if (chunk.error) throw new Error(chunk.error.message || 'the stream ended with an error');
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && delta.content) { content += delta.content; paint(); }
        if (chunk.usage) $('status').textContent = 'Tokens: ' + chunk.usage.prompt_tokens + ' in, ' + chunk.usage.completion_tokens + ' out.';
      }
    }
    if (!content) $('status').textContent = 'The model sent an empty answer.';
  } catch (e) {
    if (e.name === 'AbortError') {
      $('status').textContent = 'Stopped.';
    } else {
      showError($('chat-error'), e);
      $('status').textContent = '';
    }
  } finally {
    answer.innerHTML = renderMarkdown(content);
    answer.removeAttribute('aria-busy');
    if (content) history.push({ role: 'assistant', content });
    controller = null;
    $('send').disabled = false;
    $('stop').disabled = true;
    $('prompt').focus();
  }
}
