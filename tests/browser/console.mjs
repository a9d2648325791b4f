// The merchant console in headless Chromium, at a phone's width (390 px) and
// a desktop's: sign in, search a payment by its reference, refund part of it
// (form, confirmation, done), audit every page given with axe-core in English
// and in French (nothing wider than the screen, every value of each table's
// first row on screen), sign out.
// Screenshots go to <shots>/<name>-<width>.png. Prints one JSON line.
// Usage: node console.mjs <base_url> <email> <password> <reference> <shots_dir> <path>...
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const [base, email, password, reference, shots, ...paths] = process.argv.slice(2);
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const widths = {
  390: { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true },
  1280: { viewport: { width: 1280, height: 800 } },
};

async function audit(page, width) {
  await page.addScriptTag({ content: axeSource });
  const violations = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help,
                                      targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  // Against the width asked for: a mobile browser widens its layout viewport
  // to the content, so innerWidth would grow with an overflowing page.
  const overflow = await page.evaluate((w) => document.documentElement.scrollWidth > w, Number(width));
  // The first row of every table: each value it holds is on screen, not cut
  // off or scrolled out of sight.
  const hidden = await page.evaluate((w) => {
    const out = [];
    for (const table of document.querySelectorAll('main table')) {
      const row = table.querySelector('tbody tr');
      if (!row) continue;
      for (const cell of row.children) {
        if (cell.textContent.trim() === '') continue;
        const r = cell.getBoundingClientRect();
        if (r.width === 0 || r.height === 0 || r.left < -0.5 || r.right > w + 0.5) {
          out.push(cell.dataset.label || `column ${cell.cellIndex + 1}`);
        }
      }
    }
    return out;
  }, Number(width));
  return {
    hidden,
    serious: violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
    other: violations.filter((v) => v.impact !== 'serious' && v.impact !== 'critical').map((v) => v.id),
    overflow,
  };
}

const result = {};
try {
  for (const [width, options] of Object.entries(widths)) {
    // The console's CSP rightly forbids injected scripts: the audit bypasses it.
    const context = await browser.newContext({ ...options, bypassCSP: true, locale: 'en' });
    const page = await context.newPage();
    const run = { audits: {} };
    await page.goto(`${base}/console/sign-in`);
    run.audits['/console/sign-in'] = await audit(page, width);
    await page.screenshot({ path: `${shots}/sign-in-${width}.png` });
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', password);
    await Promise.all([page.waitForURL('**/console/payments'), page.click('main form button')]);

    // Search the payment by its reference, then open it.
    await page.fill('input[name=q]', reference.toUpperCase().slice(0, 12));
    await Promise.all([page.waitForURL(/q=/), page.click('main form button')]);
    run.found = await page.locator(`main table tr:has-text("${reference}")`).count();
    await page.screenshot({ path: `${shots}/payments-${width}.png`, fullPage: true });
    await Promise.all([page.waitForURL(/\/console\/payments\/[^/?]+$/),
                       page.click(`main table tr:has-text("${reference}") a`)]);
    const paymentPath = new URL(page.url()).pathname;

    // Refund 100: the form, the confirmation, then the payment page says done.
    await Promise.all([page.waitForURL(/\/refund$/), page.click('main a[href$="/refund"]')]);
    await page.fill('input[name=amount]', '100');
    await page.click('main form button');
    await page.waitForSelector('main button.danger');
    run.confirmation = (await page.textContent('main p')).trim();
    await page.screenshot({ path: `${shots}/refund-confirm-${width}.png`, fullPage: true });
    await Promise.all([page.waitForURL(/done=/), page.click('main button.danger')]);
    run.done = (await page.textContent('main p.ok')).trim();
    await page.screenshot({ path: `${shots}/payment-${width}.png`, fullPage: true });

    for (const path of [paymentPath, ...paths]) {
      await page.goto(`${base}${path}`);
      run.audits[path] = await audit(page, width);
      if (width === '1280' && ['/console/overview', '/console/links', '/console/bulk'].includes(path)) {
        await page.screenshot({ path: `${shots}/${path.split('/').pop()}-${width}.png`, fullPage: true });
      }
    }
    // Every page again in French.
    run.fr = {};
    await page.goto(`${base}/console/overview?lang=fr`);
    for (const path of [paymentPath, ...paths]) {
      await page.goto(`${base}${path}`);
      run.fr[path] = { ...(await audit(page, width)), lang: await page.getAttribute('html', 'lang') };
      if (path === '/console/payments') {
        await page.screenshot({ path: `${shots}/payments-fr-${width}.png`, fullPage: true });
      }
    }
    await page.goto(`${base}/console/overview?lang=en`);
    await Promise.all([page.waitForURL('**/console/sign-in'), page.click('header form[action="/console/sign-out"] button')]);
    await page.goto(`${base}/console/payments`);
    run.signedOut = page.url().endsWith('/console/sign-in');
    result[width] = run;
    await context.close();
  }
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}
