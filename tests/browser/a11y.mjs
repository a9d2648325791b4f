// Audits a page with axe-core in headless Chromium at a phone's width
// (390 px) and a desktop's, and reports the serious and critical violations
// and whether the page overflows the screen sideways. Prints one JSON line.
// Usage: node a11y.mjs <url> <screenshot-prefix>
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const [url, shots] = process.argv.slice(2);
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const viewports = {
  phone: { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true },
  desktop: { viewport: { width: 1280, height: 800 } },
};
const result = {};
try {
  for (const [name, options] of Object.entries(viewports)) {
    // The page's CSP rightly forbids injected scripts: the audit bypasses it.
    const context = await browser.newContext({ ...options, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(url);
    await page.addScriptTag({ content: axeSource });
    const axe = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
    });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    await page.screenshot({ path: `${shots}-${name}.png`, fullPage: true });
    result[name] = {
      serious: axe.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
      other: axe.filter((v) => v.impact !== 'serious' && v.impact !== 'critical'),
      overflow,
    };
    await context.close();
  }
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}
