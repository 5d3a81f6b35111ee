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
  "app.name": { en: "Model Gateway", zh: "模型网关" },
  "home.title": { en: "Model Gateway", zh: "模型网关" },
  "nav.label": { en: "Console", zh: "控制台" },
  "nav.home": { en: "Home", zh: "首页" },
  "nav.models": { en: "Models and prices", zh: "模型与价格" },
  "nav.playground": { en: "Playground", zh: "演练场" },
  "nav.admin": { en: "Admin", zh: "管理" },
  "nav.logout": { en: "Log out", zh: "退出登录" },
  "theme.dark": { en: "Dark", zh: "深色" },
  "theme.light": { en: "Light", zh: "浅色" },
  "theme.toDark": { en: "Switch to the dark theme", zh: "切换到深色主题" },
  "theme.toLight": { en: "Switch to the light theme", zh: "切换到浅色主题" },
  "action.copy": { en: "Copy", zh: "复制" },
  "action.save": { en: "Save", zh: "保存" },
  "action.cancel": { en: "Cancel", zh: "取消" },
  "copy.done": { en: "Copied.", zh: "已复制。" },
  "copy.manual": { en: "Press Ctrl+C (or ⌘C) to copy the selected text.", zh: "按 Ctrl+C（或 ⌘C）复制选中的文字。" },
  "api.unreachable": { en: "The gateway could not be reached: {error}", zh: "无法连接网关：{error}" },
  "api.status": { en: "the gateway answered {status}", zh: "网关返回了 {status}" },
  "usd.invalid": { en: "Write an amount in US dollars, such as 5 or 0.25 (at most 6 decimals).", zh: "请输入美元金额，例如 5 或 0.25（最多 6 位小数）。" },
  "need.login": { en: "log in", zh: "登录" },
  "need.first": { en: "first.", zh: "后再使用。" },
  "home.base": { en: "API base address", zh: "API 基础地址" },
  "home.base.use": { en: "Use it with your gateway key", zh: "把它和你的网关密钥" },
  "home.base.instead": { en: "in place of the vendor's address and key.", zh: "一起使用，代替厂商的地址和密钥。" },
  "home.sdk": { en: "SDK examples", zh: "SDK 示例" },
  "login.title": { en: "Log in", zh: "登录" },
  "login.sso": { en: "Sign in with SSO", zh: "使用 SSO 登录" },
  "login.or": { en: "Or log in with a username and password:", zh: "或使用用户名和密码登录：" },
  "login.submit": { en: "Log in", zh: "登录" },
  "field.username": { en: "Username", zh: "用户名" },
  "field.password": { en: "Password", zh: "密码" },
  "field.newPassword": { en: "Password (8 characters or more)", zh: "密码（至少 8 个字符）" },
  "register.title": { en: "New here?", zh: "第一次来？" },
  "register.code": { en: "Invitation code (optional)", zh: "邀请码（可选）" },
  "register.submit": { en: "Create account", zh: "创建账号" },
  "register.done": { en: "Account created: logging you in…", zh: "账号已创建，正在为你登录…" },
  "balance.title": { en: "Balance", zh: "余额" },
  "balance.used": { en: "Used so far:", zh: "已使用：" },
  "balance.in": { en: "in", zh: "，共" },
  "balance.requests": { en: "requests", zh: "次请求" },
  "redeem.code": { en: "Redemption code", zh: "兑换码" },
  "redeem.submit": { en: "Redeem", zh: "兑换" },
  "redeem.done": { en: "Redeemed: your balance is now {balance}.", zh: "兑换成功：当前余额为 {balance}。" },
  "invite.title": { en: "Invitations", zh: "邀请" },
  "invite.code": { en: "Your invitation code:", zh: "你的邀请码：" },
  "invite.quota": { en: "Invitation quota:", zh: "邀请额度：" },
  "invite.none": { en: "(none)", zh: "（无）" },
  "invite.move": { en: "Move to your balance (USD; empty moves all of it)", zh: "转入余额（美元；留空则全部转入）" },
  "invite.all": { en: "all", zh: "全部" },
  "invite.submit": { en: "Transfer", zh: "转入" },
  "invite.moved": { en: "Moved {amount} to your balance.", zh: "已将 {amount} 转入你的余额。" },
  "password.title": { en: "Password and sessions", zh: "密码与会话" },
  "password.current": { en: "Current password", zh: "当前密码" },
  "password.new": { en: "New password (8 characters or more)", zh: "新密码（至少 8 个字符）" },
  "password.submit": { en: "Change password", zh: "修改密码" },
  "password.changed": { en: "Password changed. Your other sessions were logged out; this one stays.", zh: "密码已修改。你的其他会话已退出，当前会话保持登录。" },
  "password.everywhereHint": { en: "Logged in on a device you no longer have? End every login of this account, this one included.", zh: "在不再使用的设备上登录过？结束此账号的所有登录，包括当前这个。" },
  "password.everywhere": { en: "Log out everywhere", zh: "在所有设备上退出" },
  "chart.title": { en: "Spend per day, last 30 days", zh: "近 30 天每日花费" },
  "chart.bar": { en: "{day}: {cost} in {n} requests", zh: "{day}：{cost}，共 {n} 次请求" },
  "chart.summary": { en: "Total {total} over {days} days; highest day {peak}.", zh: "{days} 天合计 {total}；单日最高 {peak}。" },
  "chart.failed": { en: "The chart could not be loaded: {error}", zh: "图表无法加载：{error}" },
  "keys.title": { en: "API keys", zh: "API 密钥" },
  "keys.name": { en: "Name", zh: "名称" },
  "keys.default": { en: "default", zh: "默认" },
  "keys.limit": { en: "Spending limit (USD, optional)", zh: "花费上限（美元，可选）" },
  "keys.days": { en: "Expires in days (optional)", zh: "有效天数（可选）" },
  "keys.models": { en: "Models (none ticked: every model)", zh: "模型（都不勾选即全部模型）" },
  "keys.create": { en: "Create key", zh: "创建密钥" },
  "keys.new": { en: "Your new key", zh: "你的新密钥" },
  "keys.once": { en: "Copy it now: it is not stored and will not be shown again.", zh: "请立即复制：它不会被保存，也不会再次显示。" },
  "keys.col.name": { en: "Name", zh: "名称" },
  "keys.col.key": { en: "Key", zh: "密钥" },
  "keys.col.status": { en: "Status", zh: "状态" },
  "keys.col.used": { en: "Used", zh: "已用" },
  "keys.col.limit": { en: "Limit", zh: "上限" },
  "keys.col.models": { en: "Models", zh: "模型" },
  "keys.col.rates": { en: "Rate limits", zh: "速率限制" },
  "keys.col.expires": { en: "Expires", zh: "过期时间" },
  "keys.col.actions": { en: "Actions", zh: "操作" },
  "keys.none": { en: "No keys yet: create one above.", zh: "还没有密钥：请在上方创建一个。" },
  "keys.enable": { en: "Enable", zh: "启用" },
  "keys.disable": { en: "Disable", zh: "停用" },
  "keys.edit": { en: "Edit", zh: "编辑" },
  "keys.delete": { en: "Delete", zh: "删除" },
  "keys.enableNamed": { en: "Enable key {name}", zh: "启用密钥 {name}" },
  "keys.disableNamed": { en: "Disable key {name}", zh: "停用密钥 {name}" },
  "keys.editNamed": { en: "Edit key {name}", zh: "编辑密钥 {name}" },
  "keys.deleteNamed": { en: "Delete key {name}", zh: "删除密钥 {name}" },
  "keys.confirmDelete": { en: "Delete the key \"{name}\"? Programs using it will stop working.", zh: "删除密钥“{name}”？正在使用它的程序将无法继续工作。" },
  "keys.allModels": { en: "all", zh: "全部" },
  "keys.never": { en: "never", zh: "永不" },
  "status.enabled": { en: "enabled", zh: "已启用" },
  "status.disabled": { en: "disabled", zh: "已停用" },
  "limits.rpm": { en: "{n} requests/min", zh: "{n} 次请求/分钟" },
  "limits.tpm": { en: "{n} tokens/min", zh: "{n} tokens/分钟" },
  "limits.parallel": { en: "{n} at once", zh: "同时 {n} 个" },
  "limits.default": { en: "default", zh: "默认" },
  "edit.title": { en: "Edit key", zh: "编辑密钥" },
  "edit.limit": { en: "Spending limit (USD, empty for none)", zh: "花费上限（美元，留空为不限）" },
  "edit.expires": { en: "Expires on (empty for never)", zh: "过期日期（留空为永不过期）" },
  "edit.limits": { en: "Rate limits: {limits}. Only an administrator can change them.", zh: "速率限制：{limits}。只有管理员可以修改。" },
  "usage.title": { en: "Usage", zh: "用量" },
  "usage.model": { en: "Model", zh: "模型" },
  "usage.allModels": { en: "all models", zh: "全部模型" },
  "usage.since": { en: "Since", zh: "起始日期" },
  "usage.filter": { en: "Filter", zh: "筛选" },
  "usage.col.time": { en: "Time", zh: "时间" },
  "usage.col.model": { en: "Model", zh: "模型" },
  "usage.col.key": { en: "Key", zh: "密钥" },
  "usage.col.prompt": { en: "Prompt", zh: "输入" },
  "usage.col.completion": { en: "Completion", zh: "输出" },
  "usage.col.cost": { en: "Cost", zh: "费用" },
  "usage.col.status": { en: "Status", zh: "状态" },
  "usage.col.latency": { en: "Latency", zh: "延迟" },
  "usage.col.error": { en: "Error", zh: "错误" },
  "usage.newest": { en: "Newest", zh: "最新" },
  "usage.older": { en: "Older", zh: "更早" },
  "usage.deletedKey": { en: "deleted key", zh: "已删除的密钥" },
  "usage.ms": { en: "{n} ms", zh: "{n} 毫秒" },
  "usage.noMatch": { en: "No requests match.", zh: "没有匹配的请求。" },
  "usage.none": { en: "No requests yet.", zh: "还没有请求。" },
  "price.none": { en: "no price", zh: "无价格" },
  "price.free": { en: "free", zh: "免费" },
  "price.perM": { en: "{price} per 1M {what}", zh: "每 100 万{what} {price}" },
  "price.per": { en: "{price} per {what}", zh: "每{what} {price}" },
  "price.image": { en: "{price} per image", zh: "每张图片 {price}" },
  "price.input": { en: "input tokens", zh: "输入 tokens" },
  "price.cached_input": { en: "cached input tokens", zh: "缓存输入 tokens" },
  "price.cache_write": { en: "cache write tokens", zh: "缓存写入 tokens" },
  "price.output": { en: "output tokens", zh: "输出 tokens" },
  "price.audio_input": { en: "audio input tokens", zh: "音频输入 tokens" },
  "price.audio_output": { en: "audio output tokens", zh: "音频输出 tokens" },
  "price.image_input": { en: "image input tokens", zh: "图片输入 tokens" },
  "price.characters": { en: "characters", zh: "字符" },
  "price.audio_second": { en: "second of audio", zh: "秒音频" },
  "price.video_second": { en: "second of video", zh: "秒视频" },
  "price.task": { en: "task", zh: "个任务" },
  "price.search_unit": { en: "search unit", zh: "个搜索单位" },
  "price.request": { en: "request", zh: "次请求" },
  "models.pageTitle": { en: "Models and prices · Model Gateway", zh: "模型与价格 · 模型网关" },
  "models.heading": { en: "Model Gateway · Models and prices", zh: "模型网关 · 模型与价格" },
  "models.needLogin": { en: "Prices are shown to signed-in users:", zh: "价格仅对已登录用户显示：请先" },
  "models.title": { en: "Models you can use", zh: "你可以使用的模型" },
  "models.hint": { en: "What each request costs, in US dollars, as this gateway charges it. Each charge is rounded up to a millionth of a dollar.", zh: "本网关对每次请求的收费（美元）。每笔费用向上取整到百万分之一美元。" },
  "models.price": { en: "Price", zh: "价格" },
  "models.yes": { en: "yes", zh: "是" },
  "models.no": { en: "no", zh: "否" },
  "models.none": { en: "No models are configured yet.", zh: "尚未配置任何模型。" },
  "playground.pageTitle": { en: "Playground · Model Gateway", zh: "演练场 · 模型网关" },
  "playground.heading": { en: "Model Gateway · Playground", zh: "模型网关 · 演练场" },
  "playground.needLogin": { en: "The playground runs on your account:", zh: "演练场使用你的账号运行：请先" },
  "playground.settings": { en: "Settings", zh: "设置" },
  "playground.temperature": { en: "Temperature", zh: "温度" },
  "playground.maxTokens": { en: "Max tokens", zh: "最大 tokens" },
  "playground.system": { en: "System prompt (optional)", zh: "系统提示词（可选）" },
  "playground.billed": { en: "Requests are billed to your balance, under the key named “playground”: the gateway made it for this page, and it is listed with your", zh: "请求从你的余额中扣费，记在名为“playground”的密钥下：它是网关为本页面创建的，列在你的" },
  "playground.keysLink": { en: "API keys", zh: "API 密钥" },
  "playground.disable": { en: "If you disable it there, the playground stops until you enable it again.", zh: "中。如果在那里停用它，演练场将无法使用，直到你重新启用。" },
  "playground.conversation": { en: "Conversation", zh: "对话" },
  "playground.message": { en: "Message (Ctrl+Enter sends)", zh: "消息（Ctrl+Enter 发送）" },
  "playground.send": { en: "Send", zh: "发送" },
  "playground.stop": { en: "Stop", zh: "停止" },
  "playground.new": { en: "New conversation", zh: "新对话" },
  "playground.newDone": { en: "New conversation.", zh: "已开始新对话。" },
  "playground.showCode": { en: "Show as code", zh: "显示为代码" },
  "playground.codeTitle": { en: "This conversation as code", zh: "以代码形式查看此对话" },
  "playground.codeHint": { en: "The same request from your own program. Put one of your API keys in the environment variable", zh: "在你自己的程序中发出同样的请求。把你的一个 API 密钥放进环境变量" },
  "playground.codeHint2": { en: ": the playground's own key is never shown.", zh: "：演练场自己的密钥从不显示。" },
  "playground.languages": { en: "Languages", zh: "语言" },
  "playground.noModels": { en: "No chat models are available: the administrator has not configured any priced chat model.", zh: "没有可用的对话模型：管理员尚未配置任何有价格的对话模型。" },
  "playground.price": { en: "Price of {model}: {terms}.", zh: "{model} 的价格：{terms}。" },
  "playground.you": { en: "You", zh: "你" },
  "playground.assistant": { en: "Assistant", zh: "助手" },
  "playground.cost": { en: "{in} tokens in, {out} out · {cost}", zh: "输入 {in} tokens，输出 {out} · {cost}" },
  "playground.answering": { en: "Answering…", zh: "正在回答…" },
  "playground.streamError": { en: "the stream ended with an error", zh: "流式响应因错误而结束" },
  "playground.empty": { en: "The model sent an empty answer.", zh: "模型返回了空回答。" },
  "playground.stopped": { en: "Stopped.", zh: "已停止。" },
  "sso.error.unavailable": { en: "The sign-in provider could not be reached. Try again in a moment, or log in with a password.", zh: "无法连接登录服务提供方。请稍后重试，或使用密码登录。" },
  "sso.error.expired": { en: "The sign-in took too long or was started in another browser. Click “Sign in with SSO” again.", zh: "登录耗时过长，或是在另一个浏览器中发起的。请再次点击“使用 SSO 登录”。" },
  "sso.error.denied": { en: "The sign-in provider did not approve the sign-in: it was cancelled or refused there.", zh: "登录服务提供方没有批准此次登录：登录已被取消或拒绝。" },
  "sso.error.failed": { en: "The sign-in provider’s answer could not be checked. Try again; if it keeps failing, tell the administrator.", zh: "无法验证登录服务提供方的应答。请重试；如果一直失败，请告知管理员。" },
  "sso.error.no_email": { en: "The sign-in provider did not share your email address, which this gateway needs to know who you are.", zh: "登录服务提供方没有提供你的邮箱地址，网关需要它来识别你的身份。" },
  "sso.error.email_unverified": { en: "Your email address is not verified at the sign-in provider. Verify it there, then try again.", zh: "你的邮箱地址在登录服务提供方处尚未验证。请先完成验证，然后重试。" },
  "sso.error.domain_not_allowed": { en: "Your email address’s domain is not allowed to sign in to this gateway. Use your work account, or ask the administrator.", zh: "你的邮箱域名不允许登录此网关。请使用工作账号，或联系管理员。" },
  "sso.error.account_disabled": { en: "Your account is disabled. Ask the gateway’s administrator to enable it.", zh: "你的账号已被停用。请联系网关管理员启用。" },
  "sso.error.name_taken": { en: "An account named with your email address already exists and logs in with a password. Log in with it, or ask the administrator.", zh: "已存在以你的邮箱地址命名、使用密码登录的账号。请用密码登录，或联系管理员。" },
  "sso.error.other": { en: "Single sign-on failed. Try again; if it keeps failing, tell the administrator.", zh: "单点登录失败。请重试；如果一直失败，请告知管理员。" },
};

document.documentElement.lang = LANG === 'zh' ? 'zh-CN' : 'en';
translatePage(document);
