// The console's two languages, English and Chinese, with no build step:
// one dictionary of keys, each in both. Pages mark static text with
// data-i18n="key" (data-i18n-placeholder, data-i18n-aria-label for
// attributes), translated as soon as this runs; scripts call t('key').
// The choice is kept in localStorage; until one is made, the browser's
// language decides. Load it before common.js and the page's script.
'use strict';

const LANG_KEY = 'gateway.lang';
const LANGS = ['en', 'zh'];

// pickLang is the saved choice, else the browser's first language.
function pickLang() {
  let saved = null;
  try { saved = localStorage.getItem(LANG_KEY); } catch (e) { /* storage off: not remembered */ }
  if (LANGS.includes(saved)) return saved;
  const prefs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || 'en'];
  return /^zh\b/i.test(prefs[0]) ? 'zh' : 'en';
}

const LANG = pickLang();

// t is the key's text in the page's language, with {name} filled from
// vars; a key missing from the dictionary shows as itself, so it is seen.
function t(key, vars) {
  const entry = I18N[key];
  let s = entry ? (entry[LANG] || entry.en) : key;
  if (vars) s = s.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
  return s;
}

// setLang remembers a language and reloads, so text scripts wrote is
// written again in it.
function setLang(lang) {
  try { localStorage.setItem(LANG_KEY, lang); } catch (e) { /* kept for this page only */ }
  location.reload();
}

function translatePage(root) {
  root.querySelectorAll('[data-i18n]').forEach((n) => { n.textContent = t(n.dataset.i18n); });
  root.querySelectorAll('[data-i18n-placeholder]').forEach((n) => { n.placeholder = t(n.dataset.i18nPlaceholder); });
  root.querySelectorAll('[data-i18n-aria-label]').forEach((n) => n.setAttribute('aria-label', t(n.dataset.i18nAriaLabel)));
}

const I18N = {
  'sso.error.unavailable': { en: 'The sign-in provider could not be reached. Try again in a moment, or log in with a password.', zh: '无法连接登录服务提供方。请稍后重试，或使用密码登录。' },
  'sso.error.expired': { en: 'The sign-in took too long or was started in another browser. Click “Sign in with SSO” again.', zh: '登录耗时过长，或是在另一个浏览器中发起的。请再次点击“使用 SSO 登录”。' },
  'sso.error.denied': { en: 'The sign-in provider did not approve the sign-in: it was cancelled or refused there.', zh: '登录服务提供方没有批准此次登录：登录已被取消或拒绝。' },
  'sso.error.failed': { en: 'The sign-in provider’s answer could not be checked. Try again; if it keeps failing, tell the administrator.', zh: '无法验证登录服务提供方的应答。请重试；如果一直失败，请告知管理员。' },
  'sso.error.no_email': { en: 'The sign-in provider did not share your email address, which this gateway needs to know who you are.', zh: '登录服务提供方没有提供你的邮箱地址，网关需要它来识别你的身份。' },
  'sso.error.email_unverified': { en: 'Your email address is not verified at the sign-in provider. Verify it there, then try again.', zh: '你的邮箱地址在登录服务提供方处尚未验证。请先完成验证，然后重试。' },
  'sso.error.domain_not_allowed': { en: 'Your email address’s domain is not allowed to sign in to this gateway. Use your work account, or ask the administrator.', zh: '你的邮箱域名不允许登录此网关。请使用工作账号，或联系管理员。' },
  'sso.error.account_disabled': { en: 'Your account is disabled. Ask the gateway’s administrator to enable it.', zh: '你的账号已被停用。请联系网关管理员启用。' },
  'sso.error.name_taken': { en: 'An account named with your email address already exists and logs in with a password. Log in with it, or ask the administrator.', zh: '已存在以你的邮箱地址命名、使用密码登录的账号。请用密码登录，或联系管理员。' },
  'sso.error.other': { en: 'Single sign-on failed. Try again; if it keeps failing, tell the administrator.', zh: '单点登录失败。请重试；如果一直失败，请告知管理员。' },
};

document.documentElement.lang = LANG === 'zh' ? 'zh-CN' : 'en';
translatePage(document);
