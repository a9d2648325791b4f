// The console's money flows in headless Chromium, by three people:
// A (phone, 390 px) makes a payment link and pays it on the checkout page
// with a test number, then uploads a CSV batch, is not offered to approve it
// and is refused by the server when posting it all the same; B (desktop)
// approves the batch through its confirmation and follows it until its
// items are paid;
// a developer (desktop) creates an API key and revokes it. Prints one JSON line.
// Usage: node console_flows.mjs <base_url> <password> <email_a> <email_b> <email_dev> <csv> <shots_dir>
import { chromium } from 'playwright-core';

const [base, password, emailA, emailB, emailDev, csv, shots] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const phone = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, locale: 'en' };
const desktop = { viewport: { width: 1280, height: 800 }, locale: 'en' };

async function signIn(options, email) {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  await page.goto(`${base}/console/sign-in`);
  await page.fill('input[name=email]', email);
  await page.fill('input[name=password]', password);
  await Promise.all([page.waitForURL('**/console/payments'), page.click('main form button')]);
  return { context, page };
}

async function signOut(page) {
  await Promise.all([page.waitForURL('**/console/sign-in'),
                     page.click('header form[action="/console/sign-out"] button')]);
}

const out = {};
try {
  // A: a payment link, paid on the checkout page.
  const a = await signIn(phone, emailA);
  await a.page.goto(`${base}/console/links`);
  await a.page.fill('input[name=amount]', '2500');
  await a.page.fill('input[name=description]', 'Robe en wax');
  await a.page.fill('input[name=days]', '7');
  await a.page.selectOption('select[name=operator]', 'mtn-bj');
  await Promise.all([a.page.waitForURL(/\/console\/links\/[^/]+$/),
                     a.page.click('main form[action="/console/links"] button')]);
  out.link = new URL(a.page.url()).pathname;
  out.checkout = (await a.page.textContent('main a code')).trim();
  out.qrShown = await a.page.evaluate(() => {
    const img = document.querySelector('main img');
    return img !== null && img.complete && img.naturalWidth > 0;
  });
  await a.page.screenshot({ path: `${shots}/link-390.png`, fullPage: true });
  await a.page.goto(out.checkout);
  await a.page.selectOption('#operator', 'mtn-bj');
  await a.page.fill('#phone', '+2290166000001');
  await a.page.click('#pay');
  await a.page.waitForSelector('#status[data-status="completed"], #status[data-status="failed"]', { timeout: 30000 });
  out.paid = await a.page.getAttribute('#status', 'data-status');
  await a.page.goto(`${base}/console/links`);
  out.listed = await a.page.locator('main table tr:has-text("Robe en wax") td:has-text("completed")').count();

  // A: a CSV batch, uploaded, then A's own approval refused by the server.
  await a.page.goto(`${base}/console/bulk`);
  await a.page.fill('input[name=name]', 'June payroll');
  await a.page.setInputFiles('input[type=file]', csv);
  await Promise.all([a.page.waitForURL(/\/console\/bulk\/[^/?]+\?done=upload/),
                     a.page.click('main form[enctype] button')]);
  out.batch = new URL(a.page.url()).pathname;
  // Not offered to its creator; posted all the same, refused by the server.
  out.approveOffered = await a.page.locator('main a[href$="/approve"]').count();
  out.makerCheckerSaid = (await a.page.textContent('main p.ok')).trim();
  const csrf = await a.page.getAttribute('main input[name=csrf]', 'value');
  const refused = await a.page.request.post(`${base}${out.batch}/validate`, {
    form: { csrf, action: 'approve' }, maxRedirects: 0,
  });
  out.selfApproval = refused.status();
  out.selfApprovalSays = await refused.text();
  await a.page.screenshot({ path: `${shots}/self-approval-390.png`, fullPage: true });
  await a.page.goto(`${base}/console/payments`);
  await signOut(a.page);
  await a.context.close();

  // B: approves, then follows the items until they are paid.
  const b = await signIn(desktop, emailB);
  await b.page.goto(`${base}${out.batch}`);
  await Promise.all([b.page.waitForURL(/\/approve$/), b.page.click('main a[href$="/approve"]')]);
  out.approvalAsks = (await b.page.textContent('main p')).trim();
  await Promise.all([b.page.waitForURL(/done=approve/),
                     b.page.click('main form input[value=approve] ~ button')]);
  const started = Date.now();
  for (;;) {
    await b.page.goto(`${base}${out.batch}`);
    const left = await b.page.locator('main table td:text-is("Pending"), main table td:text-is("In progress")').count();
    if (left === 0 || Date.now() - started > 30000) break;
    await b.page.waitForTimeout(300);
  }
  out.itemsCompleted = await b.page.locator('main table td:text-is("Completed")').count();
  await b.page.screenshot({ path: `${shots}/batch-1280.png`, fullPage: true });
  await signOut(b.page);
  await b.context.close();

  // The developer: a key, shown once, then revoked.
  const d = await signIn(desktop, emailDev);
  await d.page.goto(`${base}/console/developers`);
  await d.page.fill('input[name=name]', 'Shop website');
  await d.page.check('input[name=scope][value="payments:read"]');
  await Promise.all([d.page.waitForURL(/\/keys\/new$/),
                     d.page.click('main form[action="/console/developers/keys"] button')]);
  out.key = (await d.page.textContent('code.secret')).trim();
  await d.page.screenshot({ path: `${shots}/developers-1280.png`, fullPage: true });
  await d.page.goto(`${base}/console/developers`);
  // The newest key is listed first; revoking it asks first.
  await Promise.all([d.page.waitForURL(/\/revoke$/),
                     d.page.click('main table a[href$="/revoke"] >> nth=0')]);
  await Promise.all([d.page.waitForURL(/revoked=/),
                     d.page.click('main form[action$="/revoke"] button')]);
  out.revokedShown = await d.page.locator('main table td:has-text("revoked")').count();
  await signOut(d.page);
  await d.context.close();
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
