// Opens /docs in headless Chromium, follows its link to the API reference,
// then the reference's link to createPayment, and reports every request the
// pages made (all must go to the server itself) and what the anchor shows.
// Usage: node docs_api.mjs <docs_url> ; prints one JSON line.
import { chromium } from 'playwright-core';

const [url] = process.argv.slice(2);
const origin = new URL(url).origin;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const requests = [];
  const violations = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) violations.push(m.text()); });
  await page.goto(url);
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('a[href="/docs/api"]')]);
  const reference = { url: page.url(), title: await page.title(),
                      contentType: null, scripts: await page.evaluate(() => document.scripts.length) };
  await page.click('a[href="#createPayment"]');
  await page.waitForTimeout(200);
  const op = await page.evaluate(() => {
    const el = document.getElementById('createPayment');
    if (!el) return null;
    const r = el.getBoundingClientRect();
    return { heading: el.querySelector('h4') ? el.querySelector('h4').innerText : null,
             text: el.innerText.slice(0, 2000), top: Math.round(r.top), scrollY: Math.round(window.scrollY),
             hash: location.hash };
  });
  const outside = requests.filter((u) => !u.startsWith(origin + '/'));
  console.log(JSON.stringify({ reference, op, requests, outside, violations }));
} finally {
  await browser.close();
}
