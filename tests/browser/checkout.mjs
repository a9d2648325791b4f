// Pays a hosted payment through the checkout page in headless Chromium, like
// a customer on a phone: choose the operator, enter the number, (OTP,) then
// wait on the live status until it is final. Prints one JSON line.
// Usage: node checkout.mjs <checkout_url> <screenshot.png> <fr|en> <operator> <phone> [otp]
import { chromium } from 'playwright-core';

const [url, screenshot, lang, operator, phone, otp] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const context = await browser.newContext({
    viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, locale: lang,
    extraHTTPHeaders: { 'Accept-Language': lang },
  });
  const page = await context.newPage();
  await page.goto(url);
  const merchant = await page.textContent('#merchant');
  const amount = await page.textContent('#amount');
  const htmlLang = await page.getAttribute('html', 'lang');
  await page.selectOption('#operator', operator);
  await page.fill('#phone', phone);
  await page.click('#pay');
  if (otp) {
    await page.waitForSelector('#otp', { timeout: 15000 });
    await page.fill('#otp', otp);
    await page.click('#confirm');
  }
  const sawWaiting = await page.locator('#status[data-status="processing"]').count() > 0;
  // The page refreshes itself until the payment is final.
  await page.waitForSelector('#status[data-status="completed"], #status[data-status="failed"]', { timeout: 30000 });
  const status = await page.getAttribute('#status', 'data-status');
  const message = (await page.textContent('#status')).trim();
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ merchant, amount, htmlLang, status, message, sawWaiting }));
} finally {
  await browser.close();
}
