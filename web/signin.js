// Sign-in beyond a password, shared by the home page (a login's second
// step, a sign-in with a passkey alone) and the security page (passkeys
// registered): WebAuthn's binary fields travel as base64url in JSON.
'use strict';

function b64urlToBuf(s) {
  s = s.replace(/-/g, '+').replace(/_/g, '/');
  while (s.length % 4) s += '=';
  const bin = atob(s);
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b.buffer;
}

function bufToB64url(buf) {
  let s = '';
  for (const x of new Uint8Array(buf)) s += String.fromCharCode(x);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function passkeysAvailable() { return !!(window.PublicKeyCredential && navigator.credentials); }

// passkeyCreate asks the browser for a new credential with the gateway's
// options and returns its answer as the API takes it.
async function passkeyCreate(options) {
  const pk = options.publicKey;
  pk.challenge = b64urlToBuf(pk.challenge);
  pk.user.id = b64urlToBuf(pk.user.id);
  (pk.excludeCredentials || []).forEach((c) => { c.id = b64urlToBuf(c.id); });
  const cred = await navigator.credentials.create({ publicKey: pk });
  return {
    id: cred.id, rawId: bufToB64url(cred.rawId), type: cred.type,
    response: {
      attestationObject: bufToB64url(cred.response.attestationObject),
      clientDataJSON: bufToB64url(cred.response.clientDataJSON),
      transports: cred.response.getTransports ? cred.response.getTransports() : [],
    },
  };
}

// passkeyGet asks the browser to sign the gateway's challenge.
async function passkeyGet(options) {
  const pk = options.publicKey;
  pk.challenge = b64urlToBuf(pk.challenge);
  (pk.allowCredentials || []).forEach((c) => { c.id = b64urlToBuf(c.id); });
  const cred = await navigator.credentials.get({ publicKey: pk });
  const r = cred.response;
  return {
    id: cred.id, rawId: bufToB64url(cred.rawId), type: cred.type,
    response: {
      authenticatorData: bufToB64url(r.authenticatorData),
      clientDataJSON: bufToB64url(r.clientDataJSON),
      signature: bufToB64url(r.signature),
      userHandle: r.userHandle ? bufToB64url(r.userHandle) : null,
    },
  };
}

// passkeyLogin runs a passkey check: a pending login's when loginToken is
// given, a sign-in with a passkey alone when not.
async function passkeyLogin(loginToken) {
  const body = loginToken ? { login_token: loginToken } : {};
  const o = await api('POST', '/api/user/login/passkey/options', body);
  const credential = await passkeyGet(o.options);
  await api('POST', '/api/user/login/passkey', Object.assign(body, { token: o.token, credential }));
}

// showSecondStep replaces the login form with the second step a password
// login answered with.
function showSecondStep(answer) {
  const form = $('login-form');
  form.hidden = true;
  if ($('sso')) $('sso').hidden = true;
  const methods = answer.methods || [];
  const code = el('input', { id: 'second-step-code', autocomplete: 'one-time-code', spellcheck: 'false', required: true });
  const error = el('p', { class: 'error', id: 'second-step-error', role: 'alert' });
  const submit = el('button', { type: 'submit', id: 'second-step-submit' }, t('signin.verify'));
  const step = el('form', { id: 'second-step-form' },
    el('h3', {}, t('signin.secondStep')),
    el('p', { class: 'muted' }, t(methods.includes('totp') ? 'signin.secondStepHint' : 'signin.secondStepPasskeyHint')));
  if (methods.includes('totp')) {
    step.append(el('label', { for: 'second-step-code' }, t('signin.code')), code,
      el('p', { class: 'row' }, submit));
  }
  if (methods.includes('passkey') && passkeysAvailable()) {
    const pk = el('button', { type: 'button', class: 'secondary', id: 'second-step-passkey' }, t('signin.usePasskey'));
    pk.addEventListener('click', () => runAction(pk, error, async () => {
      await passkeyLogin(answer.login_token);
      location.reload();
    }));
    step.append(el('p', { class: 'row' }, pk));
  }
  step.append(error);
  step.addEventListener('submit', (ev) => {
    ev.preventDefault();
    runAction(submit, error, async () => {
      await api('POST', '/api/user/login/second_factor', { login_token: answer.login_token, code: code.value.trim() });
      location.reload();
    });
  });
  form.after(step);
  if (methods.includes('totp')) code.focus();
}

// offerPasskeySignIn adds "Sign in with a passkey" under the login form.
function offerPasskeySignIn() {
  const form = $('login-form');
  if (!form || !passkeysAvailable() || $('passkey-signin')) return;
  const error = el('p', { class: 'error', id: 'passkey-signin-error', role: 'alert' });
  const b = el('button', { type: 'button', class: 'secondary', id: 'passkey-signin' }, t('signin.passkeySignIn'));
  b.addEventListener('click', () => runAction(b, error, async () => {
    await passkeyLogin('');
    location.reload();
  }));
  form.after(el('div', {}, el('p', { class: 'row' }, b), error));
}

document.addEventListener('DOMContentLoaded', () => {
  if ($('login-form')) offerPasskeySignIn();
});
