// The password reset page's behaviour: sends the link's token and the new password to
// POST password-resets/completion (relative to this page, so it works under any prefix) and
// says what came of it. A file of its own, so that a strict Content-Security-Policy
// (script-src 'self') allows it; no third-party code.
'use strict';
(() => {
  const form = document.getElementById('reset');
  const button = document.getElementById('submit');
  const status = document.getElementById('status');
  // The link carries the token in its fragment (#token=…), which a browser never sends to a
  // server, a proxy or a log: only this script reads it.
  const token = new URLSearchParams(window.location.hash.slice(1)).get('token');

  const say = (text, kind) => {
    status.textContent = text;
    status.className = kind;
  };
  const end = (text, kind) => {
    form.hidden = true;
    say(text, kind);
  };

  if (token === null || token.trim() === '') {
    end('This link is incomplete: open the link from the e-mail again, whole, or ask for a new reset.', 'error');
    return;
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const password = form.elements.password.value;
    if (password !== form.elements.confirm.value) {
      say('The two passwords differ: type the same password in both fields.', 'error');
      form.elements.confirm.focus();
      return;
    }
    button.disabled = true;
    say('Setting the new password…', '');
    let response;
    try {
      response = await fetch(new URL('password-resets/completion', window.location.href), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, application/problem+json' },
        body: JSON.stringify({ token, newPassword: password }),
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch {
      button.disabled = false;
      say('The service could not be reached: check the connection and try again.', 'error');
      return;
    }
    button.disabled = false;
    if (response.status === 204) {
      end('Your password has been changed. Sign in with the new password.', 'done');
      return;
    }
    const problem = await response.json().catch(() => ({}));
    const errors = Array.isArray(problem.errors) ? problem.errors : [];
    if (errors.some((e) => e.field === 'token')) {
      end('This link has expired or has already been used: ask for a new password reset.', 'error');
      return;
    }
    const rule = errors.find((e) => e.field === 'newPassword');
    if (rule !== undefined) {
      say(
        `That password cannot be used (${String(rule.message)}). ${document.getElementById('rule').textContent}`,
        'error',
      );
      form.elements.password.focus();
      return;
    }
    if (response.status === 429) {
      const wait = response.headers.get('retry-after');
      say(`Too many attempts: try again${wait === null ? ' later' : ` in ${wait} seconds`}.`, 'error');
      return;
    }
    const detail = typeof problem.detail === 'string' ? `: ${problem.detail}` : '';
    say(`The password could not be changed (HTTP ${response.status}${detail}). Try again later.`, 'error');
  });
})();
