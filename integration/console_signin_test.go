package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Sign-in beyond a password in the browser, one page session: an
// administrator, sent to enrol two-factor codes first (require_second_factor
// admins), makes a reset link on the admin page (1280 px, English);
// the user opens it on a phone (390 px, Chinese) and sets a password;
// enrols two-factor codes on the security page and signs in with a code
// computed here as an authenticator app would; registers a passkey with
// Chromium's virtual authenticator and signs in with it alone, and as a
// password login's second step.

func (b *browserSession) logOutByAPI(base string) {
	b.t.Helper()
	evalJS[bool](b, `fetch('/api/user/logout', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.ok)`)
	b.do(chromedp.Navigate(base + "/"))
	b.waitFor(`!document.getElementById('login-card').hidden`)
}

func (b *browserSession) passwordLogin(name, password string) {
	b.t.Helper()
	b.do(chromedp.SendKeys(chromedp.ID("login-username"), name), chromedp.SendKeys(chromedp.ID("login-password"), password),
		chromedp.Click(chromedp.ID("login-submit")))
}

func TestConsoleSignInInBrowser(t *testing.T) {
	// passkeys need a domain, not an address: the site answers as localhost too
	cfg := accountConfig("off", 1000, 1000).option("require_second_factor admins")
	cfg.address = "http://localhost:{{PORT}}, http://127.0.0.1:{{PORT}}"
	g := gatewaytest.Start(t, cfg.String(), nil)
	createUser(g, "ops", 0, "admin")
	createUser(g, "bob", 0, "user")
	bob := g.User("bob")
	b := startBrowser(t, g)
	base := strings.Replace(g.URL, "127.0.0.1", "localhost", 1)

	// the administrator makes a link in the user's dialog (desktop, English)
	b.desktop()
	b.do(chromedp.Navigate(base + "/"))
	b.setLang("en")
	b.do(chromedp.Navigate(base + "/"))
	b.waitFor(`!document.getElementById('login-card').hidden`)
	b.passwordLogin("ops", "password-ops")
	b.waitFor(`!document.getElementById('dashboard').hidden`)
	// require_second_factor admins: the admin page sends ops to enrol first
	b.do(chromedp.Navigate(base + "/console/admin"))
	b.waitFor(`location.pathname === '/console/security' && !!document.getElementById('enrol-required') && !document.getElementById('enrol-required').hidden`)
	b.screenshot("signin-admin-must-enrol")
	b.do(chromedp.Click(chromedp.ID("totp-begin")))
	b.waitFor(`document.getElementById('totp-secret').textContent !== ''`)
	b.do(chromedp.SendKeys(chromedp.ID("totp-code"), totpCode(t, b.text("totp-secret"), 0)), chromedp.Click(chromedp.ID("totp-confirm")))
	b.waitFor(`!document.getElementById('recovery-new').hidden && document.getElementById('enrol-required').hidden`)
	b.do(chromedp.Navigate(base + "/console/admin"))
	b.waitFor(fmt.Sprintf(`!!document.querySelector('#users tr[data-user-id="%d"]')`, bob.ID))
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('#users tr[data-user-id="%d"] button[aria-label="Edit bob"]').click()`, bob.ID)))
	b.waitFor(`document.getElementById('edit-user').open && !!document.getElementById('signin-reset-issue') && document.getElementById('signin-admin-status').textContent.includes('no two-factor codes')`)
	b.do(chromedp.Click(chromedp.ID("signin-reset-issue")))
	b.waitFor(`!document.getElementById('signin-reset-link').hidden`)
	link := b.text("signin-reset-url")
	if !strings.HasPrefix(link, base+"/console/reset#") {
		t.Fatalf("the admin page shows the link %q", link)
	}
	b.screenshot("signin-admin-reset-link")
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('edit-user').close()`))
	b.logOutByAPI(base)

	// bob opens it on his phone, in Chinese
	b.phone()
	b.setLang("zh")
	b.do(chromedp.Navigate(link))
	b.waitFor(`!document.getElementById('reset-link-form').hidden`)
	if h := b.text("h-reset"); h != "设置新密码" || !strings.Contains(b.text("reset-for"), "bob") {
		t.Fatalf("the reset page says %q / %q", h, b.text("reset-for"))
	}
	if evalJS[string](b, `location.hash`) != "" {
		t.Fatal("the link's secret stays in the address bar")
	}
	b.noSideScroll("the reset page")
	b.do(chromedp.SendKeys(chromedp.ID("reset-new"), "bobs-new-password"), chromedp.SendKeys(chromedp.ID("reset-again"), "bobs-new-password"),
		chromedp.Click(chromedp.ID("reset-link-submit")))
	b.waitFor(`!document.getElementById('reset-link-done').hidden`)
	b.screenshot("signin-reset-phone-zh")
	// the link is spent (from another page: a change of fragment alone does not load one)
	b.do(chromedp.Navigate(base+"/"), chromedp.Navigate(link))
	b.waitFor(`document.getElementById('reset-link-error').textContent !== ''`)
	b.do(chromedp.Navigate(base + "/"))
	b.waitFor(`!document.getElementById('login-card').hidden`)
	b.passwordLogin("bob", "bobs-new-password")
	b.waitFor(`!document.getElementById('dashboard').hidden`)

	// two-factor codes on the security page (phone, Chinese)
	b.do(chromedp.Navigate(base + "/console/security"))
	b.waitFor(`!document.getElementById('security').hidden && !document.getElementById('totp-off').hidden`)
	b.do(chromedp.Click(chromedp.ID("totp-begin")))
	b.waitFor(`!document.getElementById('totp-enrol').hidden && document.getElementById('totp-secret').textContent !== ''`)
	secret := b.text("totp-secret")
	b.noSideScroll("the security page")
	b.screenshot("signin-totp-enrol-phone-zh")
	b.do(chromedp.SendKeys(chromedp.ID("totp-code"), totpCode(t, secret, 0)), chromedp.Click(chromedp.ID("totp-confirm")))
	b.waitFor(`!document.getElementById('recovery-new').hidden && !document.getElementById('totp-manage').hidden`)
	if n := len(strings.Fields(b.text("recovery-list"))); n != 10 {
		t.Fatalf("%d recovery codes shown", n)
	}

	// signing in now takes a code (desktop, English)
	b.desktop()
	b.setLang("en")
	b.logOutByAPI(base)
	b.passwordLogin("bob", "bobs-new-password")
	b.waitFor(`!!document.getElementById('second-step-form') && document.getElementById('login-form').hidden`)
	b.do(chromedp.SendKeys(chromedp.ID("second-step-code"), "000000"), chromedp.Click(chromedp.ID("second-step-submit")))
	b.waitFor(`document.getElementById('second-step-error').textContent.includes('wrong')`)
	b.screenshot("signin-second-step")
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('second-step-code').value = ''`),
		chromedp.SendKeys(chromedp.ID("second-step-code"), totpCode(t, secret, 1)), chromedp.Click(chromedp.ID("second-step-submit")))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('whoami').textContent !== ''`)

	// a passkey, from Chromium's virtual authenticator
	b.do(chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		if _, err := cdp.Call(ctx, target, webauthn.Enable, webauthn.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, target, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Transport: webauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}})
		return err
	}))
	b.do(chromedp.Navigate(base + "/console/security"))
	b.waitFor(`!document.getElementById('security').hidden && !document.getElementById('passkey-add').disabled`)
	b.do(chromedp.SendKeys(chromedp.ID("passkey-name"), "laptop"), chromedp.Click(chromedp.ID("passkey-add")))
	b.waitFor(`document.querySelectorAll('#passkeys button[data-passkey]').length === 1`)
	b.screenshot("signin-passkey-added")
	if pks, err := g.Store().ListPasskeys(context.Background(), bob.ID); err != nil || len(pks) != 1 || pks[0].Name != "laptop" {
		t.Fatalf("stored passkeys %+v, %v", pks, err)
	}

	// the passkey alone signs bob in
	b.logOutByAPI(base)
	b.waitFor(`!!document.getElementById('passkey-signin')`)
	b.do(chromedp.Click(chromedp.ID("passkey-signin")))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('whoami').textContent.startsWith('bob')`)

	// and finishes a password login in place of a code
	b.logOutByAPI(base)
	b.passwordLogin("bob", "bobs-new-password")
	b.waitFor(`!!document.getElementById('second-step-passkey')`)
	b.do(chromedp.Click(chromedp.ID("second-step-passkey")))
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('whoami').textContent.startsWith('bob')`)
	if pks, _ := g.Store().ListPasskeys(context.Background(), bob.ID); pks[0].LastUsedAt.IsZero() {
		t.Fatal("the passkey's use is not recorded")
	}
}
