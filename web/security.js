// The security page: a user's second factors. Two-factor codes (TOTP)
// enrolled with a QR code and confirmed with a first code, recovery codes
// shown once, passkeys added and removed. Under require_second_factor
// admins, an administrator is sent here before the admin pages answer.
'use strict';

document.addEventListener('DOMContentLoaded', async () => {
  $('logout').addEventListener('click', logout);
  $('totp-begin').addEventListener('click', beginTOTP);
  $('totp-enrol').addEventListener('submit', confirmTOTP);
  $('totp-disable').addEventListener('click', disableTOTP);
  $('recovery-renew').addEventListener('click', renewRecovery);
  $('recovery-copy').addEventListener('click', () => copyText($('recovery-list').textContent, $('recovery-copy-feedback'), $('recovery-list')));
  $('passkey-form').addEventListener('submit', addPasskey);
  const user = await pageUser();
  if (user === undefined) return;
  if (!user) { location.href = '/'; return; }
  $('whoami').textContent = user.username;
  $('security').hidden = false;
  await load();
});

async function load() {
  try {
    const f = await api('GET', '/api/user/second_factor');
    $('enrol-required').hidden = !(f.required && !f.totp && !f.passkeys);
    $('totp-status').textContent = f.totp ? t('signin.totpOn', { n: f.recovery_codes }) : t('signin.totpOffStatus');
    $('totp-off').hidden = f.totp;
    $('totp-manage').hidden = !f.totp;
    if (f.totp) $('totp-enrol').hidden = true;
    $('passkeys').replaceChildren(...f.passkey_list.map(passkeyRow));
    if (!f.passkey_list.length) $('passkeys').append(el('li', { class: 'muted' }, t('signin.noPasskeys')));
    if (!passkeysAvailable()) {
      $('passkey-add').disabled = true;
      showError($('passkey-error'), new Error(t('signin.noWebAuthn')));
    }
  } catch (e) {
    showError($('page-error'), e);
  }
}

function passkeyRow(p) {
  const del = el('button', { type: 'button', class: 'secondary', 'data-passkey': p.id }, t('signin.passkeyDelete'));
  del.addEventListener('click', () => runAction(del, $('passkey-error'), async () => {
    if (!confirm(t('signin.passkeyDeleteConfirm', { name: p.name }))) return;
    await api('DELETE', '/api/user/passkeys/' + p.id);
    await load();
  }));
  const used = p.last_used_at && !p.last_used_at.startsWith('0001') ? t('signin.passkeyUsed', { when: fmtTime(p.last_used_at) }) : t('signin.passkeyNeverUsed');
  return el('li', {}, el('strong', {}, p.name), ' · ', el('span', { class: 'muted' }, used), ' ', del);
}

function fmtTime(iso) {
  try { return new Date(iso).toLocaleString(LANG === 'zh' ? 'zh-CN' : 'en'); } catch (e) { return iso; }
}

function beginTOTP() {
  runAction($('totp-begin'), $('totp-error'), async () => {
    const e = await api('POST', '/api/user/totp', {});
    $('totp-qr').src = e.qr;
    $('totp-qr').alt = e.uri;
    $('totp-secret').textContent = e.secret;
    $('totp-enrol').hidden = false;
    $('totp-off').hidden = true;
    $('totp-code').focus();
  });
}

function confirmTOTP(ev) {
  ev.preventDefault();
  runAction($('totp-confirm'), $('totp-error'), async () => {
    const r = await api('POST', '/api/user/totp/confirm', { code: $('totp-code').value.trim() });
    $('totp-enrol').hidden = true;
    $('totp-secret').textContent = '';
    $('totp-qr').removeAttribute('src');
    showRecovery(r.recovery_codes);
    await load();
  });
}

function showRecovery(codes) {
  $('recovery-list').textContent = codes.join('\n');
  $('recovery-new').hidden = false;
}

function proof() {
  const code = $('prove-code').value.trim();
  return code ? { code } : { password: $('prove-password').value };
}

function disableTOTP() {
  runAction($('totp-disable'), $('totp-error'), async () => {
    await api('POST', '/api/user/totp/disable', proof());
    $('totp-manage').reset();
    $('recovery-new').hidden = true;
    await load();
  });
}

function renewRecovery() {
  runAction($('recovery-renew'), $('totp-error'), async () => {
    const r = await api('POST', '/api/user/recovery_codes', proof());
    $('totp-manage').reset();
    showRecovery(r.recovery_codes);
    await load();
  });
}

function addPasskey(ev) {
  ev.preventDefault();
  runAction($('passkey-add'), $('passkey-error'), async () => {
    const o = await api('POST', '/api/user/passkeys/options', {});
    const credential = await passkeyCreate(o.options);
    await api('POST', '/api/user/passkeys', { token: o.token, name: $('passkey-name').value.trim(), credential });
    $('passkey-form').reset();
    await load();
  });
}
