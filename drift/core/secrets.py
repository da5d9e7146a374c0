"""Secrets kept out of what drift prints and writes: `redact(text)` replaces the password of every URL's
userinfo (`http://user:***@host`; a userinfo without a password, a token, becomes `http://***@host`) and each
current value of SECRET_ENV, and the passwords of the endpoint URLs ENDPOINT_ENV holds, with `***`. It is
applied at the edges: the stages' one-line errors and logs (drift.core.stage), the `drift` command's errors
(drift.cli.common.fail), and where a message names an endpoint. Ordinary text comes back unchanged."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

MASK = "***"
# credentials that may sit in the environment of a stage or a command: their values never leave it
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID")
ENDPOINT_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")  # URLs that may carry user:password@
MIN_SECRET = 4  # shorter values are no secret worth the name, and would mask ordinary words

# scheme://userinfo@ : the userinfo runs to the last '@' before the host's end (a '/', '?', '#' or a space)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/?#@]*(?:@[^\s/?#@]*)*)@")


def _mask_userinfo(match: re.Match) -> str:
    user, colon, _ = match["userinfo"].partition(":")
    return f"{match['scheme']}{user}:{MASK}@" if colon else f"{match['scheme']}{MASK}@"


def url_password(url: str) -> str | None:
    """The password (or the token, when the userinfo has no ':') of a URL; None when it has none."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if "@" not in parts.netloc:
        return None
    userinfo = parts.netloc.rpartition("@")[0]
    return userinfo.partition(":")[2] if ":" in userinfo else userinfo


def secret_values(extra: Iterable[str] = ()) -> list[str]:
    """The values to mask: SECRET_ENV's, the passwords of ENDPOINT_ENV's URLs and of `extra` URLs, each as
    written and percent-decoded; the longest first, so a secret containing another is masked whole."""
    values = [os.environ.get(name, "") for name in SECRET_ENV]
    for url in [*(os.environ.get(name, "") for name in ENDPOINT_ENV), *extra]:
        password = url_password(url) if url else None
        values += [password, unquote(password)] if password else []
    return sorted({v for v in values if len(v) >= MIN_SECRET}, key=len, reverse=True)


def redact(text: str, urls: Iterable[str] = ()) -> str:
    """`text` with every URL's password and every secret (`secret_values(urls)`) replaced by `***`."""
    text = _USERINFO.sub(_mask_userinfo, str(text))
    for value in secret_values(urls):
        text = text.replace(value, MASK)
    return text
