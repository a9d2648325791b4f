// Opens /docs/errors#<code> for each error code given, in headless Chromium, and
// reports where the anchor landed: its row must be scrolled into view.
// Usage: node docs.mjs <docs_url> <code>... ; prints one JSON line.
import { chromium } from 'playwright-core';

const [url, ...codes] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const violations = [];
  const result = { contentType: null, anchors: {}, violations };
  for (const code of codes) {
    // A page each: a second goto to the same document with another hash does not load it.
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    // What the policy blocked (a missing favicon is not its doing).
    page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) violations.push(m.text()); });
    const response = await page.goto(`${url}#${code}`);
    result.contentType = response.headers()['content-type'];
    await page.waitForLoadState('load');
    result.anchors[code] = await page.evaluate((id) => {
      const el = document.getElementById(id);
      if (!el) return null;
      const r = el.getBoundingClientRect();
      return { top: Math.round(r.top), scrollY: Math.round(window.scrollY), viewport: window.innerHeight,
               row: el.closest('tr') ? el.closest('tr').innerText.slice(0, 80) : null };
    }, code);
    await page.close();
  }
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}
