// The page an administrator's reset link opens: the link's secret is in
// the address's fragment, which never reaches a server or a log; it is
// taken out of the address bar at once, checked, and spent with the new
// password, which also ends every session of the account.
'use strict';

let resetToken = '';

document.addEventListener('DOMContentLoaded', async () => {
  resetToken = location.hash.slice(1);
  history.replaceState(null, '', location.pathname);
  $('reset-link-form').addEventListener('submit', onReset);
  if (!resetToken) {
    showError($('reset-link-error'), new Error(t('signin.resetNoToken')));
    return;
  }
  try {
    const r = await api('POST', '/api/user/reset_link/check', { token: resetToken });
    $('reset-for').textContent = t('signin.resetFor', { name: r.username });
    $('reset-link-form').hidden = false;
    $('reset-new').focus();
  } catch (e) {
    showError($('reset-link-error'), e);
  }
});

function onReset(ev) {
  ev.preventDefault();
  runAction($('reset-link-submit'), $('reset-link-form-error'), async () => {
    if ($('reset-new').value !== $('reset-again').value) throw new Error(t('signin.passwordMismatch'));
    const r = await api('POST', '/api/user/reset_link', { token: resetToken, password: $('reset-new').value });
    resetToken = '';
    $('reset-link-form').hidden = true;
    $('reset-link-feedback').textContent = t('signin.resetDone', { name: r.username });
    $('reset-link-done').hidden = false;
  });
}
