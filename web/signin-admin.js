// How one user signs in, as an administrator manages it: a one-time
// password reset link (shown once, to hand over), the account's link to a
// single sign-on identity, and second factors cleared for a lost phone.
// Self-contained: a page includes it after common.js and i18n.js and calls
// SignInAdmin.mount(container, user) where the user is shown (the admin
// page's user dialog, the user page).
'use strict';

const SignInAdmin = (() => {
  function mount(container, user) {
    container.replaceChildren();
    const status = el('p', { class: 'muted', role: 'status', id: 'signin-admin-status' });
    const error = el('p', { class: 'error', role: 'alert', id: 'signin-admin-error' });
    const feedback = el('p', { class: 'feedback', role: 'status', id: 'signin-admin-feedback' });

    const linkOut = el('code', { id: 'signin-reset-url' });
    const linkCopy = el('button', { type: 'button', class: 'secondary', id: 'signin-reset-copy' }, t('action.copy'));
    const linkBox = el('div', { class: 'notice', id: 'signin-reset-link', hidden: true },
      el('p', {}, t('signin.adminLinkHint')), el('p', { class: 'copy-line' }, linkOut, ' ', linkCopy), el('p', { class: 'muted', id: 'signin-reset-expires' }));
    linkCopy.addEventListener('click', () => copyText(linkOut.textContent, feedback, linkOut));
    const issue = el('button', { type: 'button', id: 'signin-reset-issue' }, t('signin.adminIssueLink'));
    issue.addEventListener('click', () => runAction(issue, error, async () => {
      const r = await api('POST', '/api/admin/users/' + user.id + '/reset_link', {});
      linkOut.textContent = r.url;
      linkBox.querySelector('#signin-reset-expires').textContent = t('signin.adminLinkExpires', { when: new Date(r.expires_at).toLocaleString(LANG === 'zh' ? 'zh-CN' : 'en') });
      linkBox.hidden = false;
    }));

    const ssoKind = el('select', { id: 'signin-sso-kind', 'aria-label': t('signin.adminSSOKind') },
      el('option', { value: 'email' }, t('signin.adminSSOEmail')), el('option', { value: 'subject' }, t('signin.adminSSOSubject')));
    const ssoValue = el('input', { id: 'signin-sso-value', autocomplete: 'off', 'aria-label': t('signin.adminSSOValue') });
    const ssoLink = el('button', { type: 'button', class: 'secondary', id: 'signin-sso-link' }, t('signin.adminSSOLink'));
    const ssoUnlink = el('button', { type: 'button', class: 'secondary', id: 'signin-sso-unlink', hidden: true }, t('signin.adminSSOUnlink'));
    const ssoRow = el('div', { id: 'signin-sso', hidden: true }, el('p', { class: 'row' }, ssoKind, ssoValue, ssoLink, ssoUnlink));
    ssoLink.addEventListener('click', () => runAction(ssoLink, error, async () => {
      await api('POST', '/api/admin/users/' + user.id + '/sso_link', { [ssoKind.value]: ssoValue.value.trim() });
      ssoValue.value = '';
      feedback.textContent = t('signin.adminSSOLinked');
      await refresh();
    }));
    ssoUnlink.addEventListener('click', () => runAction(ssoUnlink, error, async () => {
      await api('DELETE', '/api/admin/users/' + user.id + '/sso_link');
      feedback.textContent = t('signin.adminSSOUnlinked');
      await refresh();
    }));

    const clear = el('button', { type: 'button', class: 'danger', id: 'signin-factors-reset', hidden: true }, t('signin.adminClearFactors'));
    clear.addEventListener('click', () => runAction(clear, error, async () => {
      if (!confirm(t('signin.adminClearConfirm', { name: user.username }))) return;
      await api('DELETE', '/api/admin/users/' + user.id + '/second_factor');
      feedback.textContent = t('signin.adminCleared');
      await refresh();
    }));

    container.append(el('h3', {}, t('signin.adminTitle')), status,
      el('p', { class: 'row' }, issue, clear), linkBox, ssoRow, error, feedback);

    async function refresh() {
      const s = await api('GET', '/api/admin/users/' + user.id + '/sign_in');
      const f = s.second_factors;
      const parts = [f.totp ? t('signin.adminTOTPOn') : t('signin.adminTOTPOff'), t('signin.adminPasskeys', { n: f.passkeys })];
      if (s.sso_link) parts.push(t('signin.adminSSOStatus', { who: s.sso_link.subject || s.sso_link.email }));
      status.textContent = parts.join(' · ');
      clear.hidden = !(f.totp || f.passkeys);
      ssoRow.hidden = !s.sso;
      ssoUnlink.hidden = !s.sso_link;
    }
    refresh().catch((e) => showError(error, e));
  }
  return { mount };
})();
