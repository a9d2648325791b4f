"""Signs a console user in through their invitation link, as a person would
in a browser: reads the form's anti-forgery token, sets a password, and
prints the `Cookie` header value of the session opened.

Usage: console_session.py BASE_URL SIGN_IN_LINK (the link's path is
followed on BASE_URL, the server the bench started)."""
import http.cookiejar, re, sys, urllib.parse, urllib.request

base, link = sys.argv[1], sys.argv[2]
link = base + urllib.parse.urlsplit(link).path
jar = http.cookiejar.CookieJar()
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
page = opener.open(link).read().decode()
pre = re.search(r'name="pre" value="([^"]+)"', page)
if not pre:
    sys.exit("the invitation page has no form token")
password = "bench-console-password-1"
form = urllib.parse.urlencode(
    {"pre": pre.group(1), "password": password, "password2": password}
).encode()
opener.open(link, data=form).read()
session = [c for c in jar if c.name == "mmc_console"]
if not session:
    sys.exit("accepting the invitation opened no console session")
print(f"mmc_console={session[0].value}")
