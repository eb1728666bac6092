"""URL handling: normalisation, registrable domains and address safety.

Everything here is pure and synchronous (sub-millisecond per URL), so it is safe to call on the
event loop.

* :func:`normalize_url` turns a cited URL into the one canonical form citeguard fetches, caches and
  reports. It parses with the WHATWG URL standard (ada-url), the parser browsers use, so the host
  citeguard checks is the host the user's browser opens (``http://evil.example\\@good.example/``
  is evil.example; ``\\`` is ``/``; tabs and newlines vanish; ``0x7f.1`` is 127.0.0.1), then adds
  citeguard's own steps: no fragment (kept aside by :func:`split_fragment`), no empty query, no
  trailing dot, RFC 3986 percent-encoding normalisation, and stricter refusals (no ``http:host``,
  no port 0, LDH host labels, no control characters). Malformed URLs and schemes outside the
  allow-list raise :class:`UrlProblem`, which callers turn into a ``CitationStatus``.
* :func:`join_url` resolves a link or a ``Location`` header against its page the same way.
* :func:`registrable_domain` and :func:`same_site` decide whether a redirect leaves the cited site.
  They use the public-suffix list of :mod:`citeguard.web.suffixes` (tldextract's bundled
  snapshot): nothing is downloaded at run time.
* :func:`parse_ip_literal` and :func:`blocked_address_reason` implement the address-safety rules
  (loopback, private, link-local, metadata, ... including the odd IPv4 spellings browsers accept).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Any, Final

import ada_url
import idna

from citeguard.errors import CiteguardError
from citeguard.models import CitationStatus
from citeguard.web.suffixes import suffix_list

__all__ = [
    "DEFAULT_ALLOWED_SCHEMES",
    "MAX_URL_CHARS",
    "TRACKING_PARAMS",
    "IPAddress",
    "UrlProblem",
    "blocked_address_reason",
    "host_of",
    "join_url",
    "normalize_all",
    "normalize_url",
    "parse_ip_literal",
    "registrable_domain",
    "same_site",
    "split_fragment",
    "strip_tracking",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_ALLOWED_SCHEMES: frozenset[str] = frozenset({"http", "https"})
# WHATWG "special" schemes: their authority may be introduced by backslashes as well as slashes.
_SPECIAL_SCHEMES = frozenset({"ftp", "file", "http", "https", "ws", "wss"})
_ADA_PARTS = (
    "username",
    "password",
    "hostname",
    "host_type",
    "port",
    "pathname",
    "search",
)
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")

# RFC 3986 character classes. Unreserved characters are decoded when percent-encoded; everything
# outside the "allowed" set of a component is percent-encoded (as UTF-8).
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = "!$&'()*+,;="
_PATH_SAFE = frozenset(_UNRESERVED | set(_SUB_DELIMS) | set(":@/"))
_QUERY_SAFE = frozenset(_PATH_SAFE | set("?"))
_USERINFO_SAFE = frozenset(_UNRESERVED | set(_SUB_DELIMS) | set(":"))
_HEX = frozenset("0123456789abcdefABCDEF")
# Anything that _normalize_component could change: "%" (escapes) and characters outside the set.
_PATH_UNSAFE_RE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/]")
_QUERY_UNSAFE_RE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/?]")

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")
_HOST_LABEL_RE = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
# Characters a WHATWG domain may not hold (to say why a URL failed to parse).
_FORBIDDEN_HOST_RE = re.compile(r"[\x00-\x20\x7f#%/:<>?@\[\\\]^|]")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD_RE = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


class UrlProblem(CiteguardError, ValueError):
    """A URL citeguard refuses to fetch: malformed, or a scheme outside the allow-list.

    A :class:`~citeguard.errors.CiteguardError` and a ``ValueError``; ``status`` is the
    ``CitationStatus`` it maps to and ``reason`` says why.
    """

    def __init__(self, status: CitationStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _malformed(reason: str) -> UrlProblem:
    return UrlProblem(CitationStatus.MALFORMED_URL, reason)


# The longest URL citeguard reads. RFC 9110 asks servers to take request lines of 8,000
# octets; a cited "URL" past that is an LLM's run-on text, and every step that reads it (the
# canonicaliser's per-character escapes, the source table's parent names, the host's labels)
# is then bounded by this, not by the answer's size.
MAX_URL_CHARS: Final = 8192


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------


def split_fragment(url: str) -> tuple[str, str | None]:
    """Split ``url`` into the part before ``#`` and the fragment (``None`` when there is none)."""
    base, sep, fragment = url.partition("#")
    return base, (fragment if sep else None)


def _normalize_component(text: str, safe: frozenset[str]) -> str:
    """Percent-encoding normalisation of one URL component.

    Escapes of unreserved characters are decoded, the others get uppercase hex, a ``%`` that starts
    no valid escape becomes ``%25``, and characters outside ``safe`` (spaces, non-ASCII, ...) are
    encoded as UTF-8.
    """
    if safe is _PATH_SAFE and not _PATH_UNSAFE_RE.search(text):
        return text  # nothing to encode or decode: the common case, in C
    if safe is _QUERY_SAFE and not _QUERY_UNSAFE_RE.search(text):
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "%":
            if i + 2 < n and text[i + 1] in _HEX and text[i + 2] in _HEX:
                decoded = chr(int(text[i + 1 : i + 3], 16))
                out.append(decoded if decoded in _UNRESERVED else "%" + text[i + 1 : i + 3].upper())
                i += 3
                continue
            out.append("%25")
        elif ch in safe:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, so ``/a/./b/../c`` and ``/a/c`` are the same citation."""
    if "." not in path:
        return path
    segments = path.split("/")
    out: list[str] = []
    for seg in segments[1:] if path.startswith("/") else segments:
        if seg == ".":
            continue
        if seg == "..":
            if out:
                out.pop()
            continue
        out.append(seg)
    if segments[-1] in (".", ".."):
        out.append("")
    result = "/".join(out)
    return "/" + result if path.startswith("/") else result


def _preprocess(url: str) -> str:
    """WHATWG pre-processing, as far as citeguard follows it: whitespace trimmed at both ends
    (spaces, tabs, newlines, FF, VT, 0x1C-0x1F, Unicode spaces), then every tab, LF and CR dropped
    (``http://exa<TAB>mple.com/`` is example.com to a browser). Other C0 controls at the ends,
    which a browser strips too (``\\x00``), are left for :func:`normalize_url` to refuse."""
    text = url.strip()
    return text.translate(_TAB_OR_NEWLINE) if "\t" in text or "\n" in text or "\r" in text else text


def _ends_in_number(host: str) -> bool:
    """WHATWG: a host whose last label is numeric must parse as IPv4 or the URL is invalid."""
    host = host.removesuffix(".")
    last = host.rsplit(".", 1)[-1]
    if not last:
        return False
    if last.isascii() and last.isdigit():
        return True
    return last[:2].lower() == "0x" and all(c in _HEX for c in last[2:])


# The common case, parsed without ada: a lowercase http(s) URL with an ASCII lowercase host
# (or a dotted quad), an optional port, and a path and query of characters that WHATWG neither
# encodes nor reinterprets (no "%", "\\", "@", dot segments, "xn--" labels or numeric last
# label). For these the standard's parse is the identity, save the default port, which it drops.
# Each ada-url call goes through cffi, which releases the GIL: on the event loop with any other
# thread busy, one normalize_url cost ~740 us instead of ~15 us, and handed that thread the GIL.
# tests/web/test_whatwg.py checks this path against ada on generated URLs.
_FAST_URL_RE = re.compile(
    r"(https?)://([a-z0-9_-]+(?:\.[a-z0-9_-]+)*)(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*)?(\?[A-Za-z0-9\-._~!$&()*+,;=:@/?]*)?"
)
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _fast_parts(text: str) -> dict[str, Any] | None:
    """What ``ada_url.parse_url(text, attributes=_ADA_PARTS)`` returns, for the URLs
    :data:`_FAST_URL_RE` admits; ``None`` for every other URL (parse it with ada)."""
    m = _FAST_URL_RE.fullmatch(text.partition("#")[0])
    if m is None:
        return None
    scheme, host, port, path, query = m.groups()
    if "xn--" in host or "/." in (path or ""):
        return None
    if _ends_in_number(host):
        if not _DOTTED_QUAD_RE.fullmatch(host):
            return None
        host_type = ada_url.HostType.IPV4
    else:
        host_type = ada_url.HostType.DEFAULT
    if port is not None and int(port) > 65535:
        return None
    if port == _DEFAULT_PORTS[scheme]:
        port = None
    return {
        "username": "",
        "password": "",
        "hostname": host,
        "host_type": host_type,
        "port": port or "",
        "pathname": path or "/",
        "search": query if query and query != "?" else "",
    }


def _parts(text: str) -> dict[str, Any]:
    """The WHATWG parts of ``text``; ``ValueError`` when it does not parse."""
    fast = _fast_parts(text)
    return fast if fast is not None else dict(ada_url.parse_url(text, attributes=_ADA_PARTS))


def _why_invalid(text: str, url: str) -> str:
    """Why WHATWG parsing refuses ``text`` (ada only says "invalid"): a reason for the report."""
    scheme, _colon, rest = text.partition(":")
    special = scheme.lower() in _SPECIAL_SCHEMES
    stops = "/?#\\" if special else "/?#"
    rest = rest.lstrip("/\\" if special else "/")
    end = min((i for i in (rest.find(c) for c in stops) if i != -1), default=len(rest))
    hostport = rest[:end].rpartition("@")[2]
    if hostport.startswith("["):
        host, closed, after = hostport.partition("]")
        if not closed:
            return f"unterminated IPv6 literal in host of {url!r}"
        if after and not after.startswith(":"):
            return f"unexpected text after IPv6 literal in {url!r}"
        port = after[1:]
    else:
        host, _sep, port = hostport.partition(":")
    if port and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        return f"invalid port {port!r} in URL {url!r}"
    if not host:
        return f"URL {url!r} has no host"
    if host.startswith("["):
        return f"invalid IPv6 literal {host + ']'!r} in URL {url!r}"
    if _ends_in_number(host):
        return f"host {host!r} looks like an IPv4 address but is not a valid one"
    if _FORBIDDEN_HOST_RE.search(host):
        return f"invalid character in host {host!r}"
    if not host.isascii():
        return f"host {host!r} is not a valid internationalised name"
    return f"{url!r} is not a valid URL (WHATWG URL parsing fails: a browser cannot open it)"


#: Query parameters that only say who sent the click (``utm_source=openai`` and kin): the same
#: page with or without them is one source. ``utm_*`` is matched as a prefix.
TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "fbclid",
        "msclkid",
        "yclid",
        "twclid",
        "ttclid",
        "li_fat_id",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        "srsltid",
        "_ga",
        "_gl",
        "oly_anon_id",
        "oly_enc_id",
        "vero_id",
        "wickedid",
    }
)


def _is_tracking(name: str) -> bool:
    key = name.lower()
    return key.startswith("utm_") or key in TRACKING_PARAMS


def strip_tracking(url: str) -> str:
    """``url`` without tracking query parameters (:data:`TRACKING_PARAMS`, ``utm_*``).

    The rest of the query keeps its order and spelling; the fragment is kept; a query left
    empty is dropped with its ``?``.
    """
    base, hash_, fragment = url.partition("#")
    head, q, query = base.partition("?")
    if not q:
        return url
    kept = [p for p in query.split("&") if p and not _is_tracking(p.partition("=")[0])]
    out = head + ("?" + "&".join(kept) if kept else "")
    return out + hash_ + fragment


def normalize_url(url: str, *, allowed_schemes: frozenset[str] = DEFAULT_ALLOWED_SCHEMES) -> str:
    """Return the canonical form of ``url`` (without its fragment).

    The URL is parsed as a browser parses it (WHATWG URL standard, via ada-url): scheme and host
    lowercased, ``\\`` read as ``/``, tabs and newlines dropped, the host percent-decoded and
    IDNA-encoded, IPv4 in integer/octal/hex/short form written as a dotted quad, IPv6 compressed,
    default ports dropped, dot segments removed. citeguard then drops the fragment, an empty query,
    tracking parameters (:data:`TRACKING_PARAMS`, ``utm_*``) and a host's trailing dot, and
    normalises percent-encoding (unreserved escapes decoded,
    uppercase hex, stray ``%`` as ``%25``), so one page has one form.

    Raises:
        UrlProblem: ``BLOCKED_SCHEME`` for a scheme outside ``allowed_schemes`` (``javascript:``,
            ``data:``, ``file:``, ``mailto:``, ``ftp:``, ...); ``MALFORMED_URL`` when WHATWG parsing
            fails (bad port, invalid host, ...) and where citeguard is stricter than a browser: no
            ``//`` after the scheme (``http:host``, ``http:///host``), port 0, a host label outside
            letters/digits/hyphens/underscores or too long, control characters, a URL longer
            than :data:`MAX_URL_CHARS`.
    """
    if not isinstance(url, str):
        raise _malformed(f"URL must be a string, not {type(url).__name__}")
    if len(url) > MAX_URL_CHARS:
        raise _malformed(
            f"URL {url[:60]!r}… is {len(url):,} characters long; citeguard reads URLs of at "
            f"most {MAX_URL_CHARS:,} characters (RFC 9110 asks servers for 8,000)"
        )
    text = _preprocess(url)
    if not text:
        raise _malformed("empty URL")
    if _CONTROL_RE.search(text):
        raise _malformed("URL contains control characters")
    scheme, colon, rest = text.partition(":")
    if not colon or not _SCHEME_RE.match(scheme):
        raise _malformed(f"URL {url!r} has no scheme")
    scheme = scheme.lower()
    if scheme not in allowed_schemes:
        allowed = ", ".join(sorted(allowed_schemes))
        raise UrlProblem(
            CitationStatus.BLOCKED_SCHEME,
            f"scheme {scheme!r} is not allowed (allowed: {allowed})",
        )
    # A browser reads http:host, http:/host and http:///host as host; citeguard wants the two
    # slashes (``\`` counts as ``/`` in http(s), as it does for the browser).
    slashes = "/\\" if scheme in _SPECIAL_SCHEMES else "/"
    if len(rest) < 2 or rest[0] not in slashes or rest[1] not in slashes:
        raise _malformed(f"URL {url!r} has no host (expected {scheme}://host/...)")
    if len(rest) > 2 and rest[2] in slashes:
        raise _malformed(f"URL {url!r} has no host (more than two slashes after {scheme}:)")
    try:
        parts = _parts(text)
    except ValueError:
        raise _malformed(_why_invalid(text, url)) from None
    host = parts["hostname"]
    if parts["host_type"] is ada_url.HostType.DEFAULT and scheme in _SPECIAL_SCHEMES:
        # WHATWG accepts names DNS cannot hold (``-x-.example``, 64-letter labels, ``a..b``);
        # citeguard refuses them. ``example.com.`` (fully qualified) is ``example.com``.
        host = host.removesuffix(".")
        labels = host.split(".")
        if len(host) > 253 or not all(_HOST_LABEL_RE.match(label) for label in labels):
            raise _malformed(f"invalid host name {host!r} in URL {url!r}")
    elif not host:
        raise _malformed(f"URL {url!r} has no host")
    port = parts["port"]
    if port == "0":
        raise _malformed(f"invalid port 0 in URL {url!r}")
    authority = f"{host}:{port}" if port else host
    user = _normalize_component(parts["username"], _USERINFO_SAFE)
    password = _normalize_component(parts["password"], _USERINFO_SAFE)
    if user or password:
        authority = f"{user}:{password}@{authority}" if password else f"{user}@{authority}"
    path = _remove_dot_segments(_normalize_component(parts["pathname"], _PATH_SAFE)) or "/"
    if not path.startswith("/"):
        path = "/" + path
    query = _normalize_component(parts["search"][1:], _QUERY_SAFE)
    if query:  # who sent the click (utm_source=openai) does not make another page
        query = "&".join(p for p in query.split("&") if p and not _is_tracking(p.partition("=")[0]))
    return f"{scheme}://{authority}{path}?{query}" if query else f"{scheme}://{authority}{path}"


def join_url(base: str, reference: str) -> str:
    """``reference`` (a link or a ``Location`` header) resolved against ``base`` as a browser
    resolves it (WHATWG): ``\\\\host/x`` and ``/\\host/x`` name another host in http(s), tabs and
    newlines are dropped, ``http:x`` is relative. Not normalised: pass it to :func:`normalize_url`.

    Raises:
        UrlProblem: ``MALFORMED_URL`` when no URL results (``http://[::1/x``, a bad port, ...).
    """
    try:
        return ada_url.join_url(base, reference)
    except ValueError:
        pass
    text = _preprocess(reference)
    scheme, colon, _rest = text.partition(":")
    absolute = bool(colon and _SCHEME_RE.match(scheme))
    if not absolute and len(text) > 1 and text[0] in "/\\" and text[1] in "/\\":
        text = base.partition(":")[0] + ":" + text  # scheme-relative: the base's scheme
        absolute = True
    if absolute:
        raise _malformed(_why_invalid(text, reference))
    raise _malformed(f"{reference!r} cannot be resolved against {base!r}")


def normalize_all(urls: Iterable[str]) -> frozenset[str]:
    """The canonical forms of ``urls``; a URL that cannot be normalised is kept as written."""
    out: set[str] = set()
    for u in urls:
        try:
            out.add(normalize_url(u))
        except UrlProblem:
            out.add(u)
    return frozenset(out)


# --------------------------------------------------------------------------------------------
# Sites
# --------------------------------------------------------------------------------------------


def host_of(url: str) -> str:
    """The lowercase host a browser opens for ``url`` (WHATWG parsing: IDNA-encoded, IPv4 as a
    dotted quad, IPv6 without brackets, no trailing dot); ``""`` if none or unparseable."""
    text = _preprocess(url)
    fast = _fast_parts(text)
    try:
        host: str = (fast or ada_url.parse_url(text, attributes=("hostname",)))["hostname"]
    except ValueError:
        return ""
    return host.strip("[]").rstrip(".").lower()


def registrable_domain(url_or_host: str) -> str:
    """The registrable domain ("eTLD+1") of a URL or host, e.g. ``news.bbc.co.uk`` → ``bbc.co.uk``.

    IP literals, and hosts with no public suffix (``localhost``, ``intranet``, ``foo.test``), are
    returned whole (less a leading ``www.``) since there is no wider site to compare them with.
    """
    host = host_of(url_or_host) if "://" in url_or_host else url_or_host.strip().lower()
    host = host.strip("[]").rstrip(".")
    if not host:
        return ""
    if parse_ip_literal(host) is not None:
        return host
    if not host.isascii():
        with contextlib.suppress(idna.IDNAError, UnicodeError):
            host = idna.encode(host, uts46=True).decode("ascii")
    domain = suffix_list().registrable(_lenient_host(host))
    if domain:
        return domain
    return host.removeprefix("www.")


def _lenient_host(text: str) -> str:
    # the host in a host-like string as tldextract reads one (remote.lenient_netloc): before
    # any path, query or fragment, after any user info, without a port or a root label, with
    # the ideographic full stops read as dots
    authority = text.partition("/")[0].partition("?")[0].partition("#")[0]
    host = authority.rpartition("@")[2].partition(":")[0].strip()
    host = host.rstrip(".\u3002\uff0e\uff61")
    return host.replace("\u3002", ".").replace("\uff0e", ".").replace("\uff61", ".")


def same_site(a: str, b: str) -> bool:
    """True when two URLs (or hosts) share a registrable domain (http→https, ``www.`` pass)."""
    da, db = registrable_domain(a), registrable_domain(b)
    return bool(da) and da == db


# --------------------------------------------------------------------------------------------
# Address safety
# --------------------------------------------------------------------------------------------


def _parse_ipv4_number(part: str) -> int | None:
    if not part:
        return None
    try:
        if part[:2].lower() == "0x":
            return int(part[2:], 16) if part[2:] else 0
        if len(part) > 1 and part.startswith("0"):
            return int(part[1:], 8)
        if part.isdigit():
            return int(part)
    except ValueError:
        return None
    return None


def parse_ip_literal(host: str) -> IPAddress | None:
    """Parse ``host`` as an IP literal the way browsers and ``inet_aton`` do, or return None.

    Accepts dotted quads, integers (``2130706433``), octal (``0177.0.0.1``), hex (``0x7f.1``),
    short forms (``127.1``), and IPv6 with or without brackets (``[::ffff:127.0.0.1]``).
    """
    if _DOTTED_QUAD_RE.fullmatch(host):  # fast path: the canonical form, converted in C
        return ipaddress.IPv4Address(int.from_bytes(socket.inet_pton(socket.AF_INET, host), "big"))
    h = host.strip().rstrip(".") if not host.startswith("[") else host.strip()
    if not h:
        return None
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if ":" in h:
        try:
            return ipaddress.IPv6Address(h)
        except ValueError:
            return None
    parts = h.split(".")
    if len(parts) > 4:
        return None
    numbers = [_parse_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    nums = [n for n in numbers if n is not None]
    if any(n > 255 for n in nums[:-1]) or nums[-1] >= 256 ** (5 - len(nums)):
        return None
    value = nums[-1]
    for i, n in enumerate(nums[:-1]):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


_METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {
        ipaddress.IPv4Address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        ipaddress.IPv4Address("169.254.170.2"),  # AWS ECS task metadata
        ipaddress.IPv4Address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.IPv4Address("192.0.0.192"),  # Oracle Cloud
        ipaddress.IPv6Address("fd00:ec2::254"),  # AWS IMDS over IPv6
    }
)
_SHARED_V4 = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def _embedded_v4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address tunnels to, with the name of the embedding."""
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip in _NAT64 or ip in _NAT64_LOCAL:
        return "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.teredo is not None:
        return "Teredo", ip.teredo[1]
    packed = int(ip)
    # IPv4-compatible (::a.b.c.d, deprecated); :: and ::1 are handled as themselves.
    if packed >> 32 == 0 and packed > 1:
        return "IPv4-compatible", ipaddress.IPv4Address(packed)
    return None


def blocked_address_reason(ip: IPAddress) -> str | None:
    """Why citeguard must not connect to ``ip``, or None when it is a public unicast address."""
    if ip in _METADATA_ADDRESSES:
        return f"{ip} is a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(ip.compressed.split("%", 1)[0])
        embedded = _embedded_v4(ip)
        if embedded is not None:
            kind, v4 = embedded
            inner = blocked_address_reason(v4)
            if inner is not None:
                return f"{ip} is {kind} IPv6 embedding a blocked address ({inner})"
            if kind in ("IPv4-mapped", "NAT64", "6to4"):
                return None
    checks: tuple[tuple[bool, str], ...] = (
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED_V4, "a shared (CGNAT) address"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "a site-local address"),
        (ip.is_reserved, "a reserved address"),
        (ip.is_private, "a private address"),
        (not ip.is_global, "not a globally routable address"),
    )
    for hit, what in checks:
        if hit:
            return f"{ip} is {what}"
    return None
