"""Where a score came from: code, container, software, hardware, pinned inputs and seeds.

Every scorecard carries this block so that two numbers can be told apart by more than their value
(lm-eval's results provenance, WorldFoundry's scorecard). It never carries secrets: environment
values are not recorded, and ``redact`` / ``scrub`` strip tokens from anything that is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from enum import Enum
from functools import lru_cache
from itertools import pairwise
from pathlib import Path, PurePath
from typing import Any

from pinbench import __version__
from pinbench.core import processes
from pinbench.core.notices import announced

PACKAGE_DIR = Path(__file__).resolve().parent
IMAGE_DIGEST_ENV = "PINBENCH_IMAGE_DIGEST"
# JSON set by the Docker runtime from the image's org.pinbench.base-image label (written by `pinbench build`).
BASE_IMAGE_ENV = "PINBENCH_BASE_IMAGE"
# Set by every image itself (ENV from its build ARGs, images/README.md): PINBENCH_IMAGE_<ARG> is the base the build
# was given for ARG (BASE_IMAGE, BUILD_BASE, ...), PINBENCH_IMAGE_<ARG>_PINNED the Dockerfile's pinned default.
BAKED_BASE_PREFIX = "PINBENCH_IMAGE_"
BAKED_PINNED_SUFFIX = "_PINNED"
FINAL_BASE_ARG = "BASE_IMAGE"
_BASE_IMAGE_KEYS = ("image", "digest", "pinned", "overridden", "differs_from_pinned")

_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _starts(first: str, word: str) -> str:
    """Where a token starting with one of ``first`` may start: after no ``word`` character, or after a JSON escape
    that ends in one (\\n, \\t, \\r, \\b, \\f, \\u00a0): ``redact`` of a log line holding JSON text kept
    "x\\nghp_..." whole, its 'n' read as a word's. Every escape stands for a character no token's word holds, so raw
    JSON text is read as its decoded text is; "myghp_..." stays a word. ``first`` is looked at before the look-behinds
    (three of them cost a 10 kB text's scan 3x, this gate cuts them to below the one's cost)."""
    return rf"(?=[{first}])(?:(?<![{word}])|(?<=\\[bfnrt])|(?<=\\u[0-9A-Fa-f]{{4}}))"


class _Lazy:
    """A scrubber's regular expression, compiled where it is first used: sre's compiler is Python, and these (the
    hints and the rules a hint sends a text to) cost about 40 M instructions at import, paid by every command that
    imports this module though most of them redact nothing (the CameraBench rerun: +3.9 % when session 60 added three).
    ``pattern`` is there uncompiled, for the patterns built from others."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:   # search, match, sub, finditer, ...: the compiled pattern's
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return getattr(self._compiled, name)


# Real Hugging Face tokens are "hf_" plus ~34 letters/digits; the 10-character minimum keeps names
# such as hf_hub_download or hf_transfer intact.
_HF_TOKEN = re.compile(_starts("h", "A-Za-z0-9") + r"hf_[A-Za-z0-9]{10,}(?![A-Za-z0-9])")
# A URL's user info (https://user:PASSWORD@host/...): an endpoint given as a -g value or option reached the scorecard,
# generator.json and the report whole. The user name runs to the first ':' or '@'; after a ':' the password runs to the
# URL's last '@' (its run of non-space), so that one holding an unencoded '/', '?', '#' or '@' is hidden whole
# (postgres://u:pa/ss?w#rd@host showed "ss?w#rd"; https://u:p@ss@host showed "ss"); in JSON text to the last '@' before
# its string's unescaped '"' (one holding none: the run's; a '"' before a letter or digit ends no string:
# https://u:p@ss"w@host showed 'ss"w'), and an '@' starting an image digest (img:22.04@sha256:...) ends no password. A
# ':' and one to five digits before a '/', '?' or '#' is a port, no password (docker://registry:5000/img@sha256:...; a
# password of six digits or more before a '/' was shown). A scheme starts after no scheme character, whatever its own
# first one (1.https://, -https://, an empty or non-ASCII scheme's :// showed theirs), and "://" may stand as JSON
# escapes it (https:\/\/u:p@host). No user info holds a '[': http://[::1]:8080/users/@me names an IPv6 host (its ':'
# read as a password's showed "http://[:***@me"). The user name is hidden only when it has a token's shape
# (``_token_shaped``, https://TOKEN@host as GitHub and GitLab accept; TOKEN:x-oauth-basic too).
_HEX_TOKEN = re.compile(r"(?=.*[0-9])(?=.*[a-f])[0-9a-f]{32,}")
_URL_USER = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z0-9+.-]*:(?://|\\/\\/))([^\s/?#@:\[]*)(?=[:@])")
_URL_PORT = re.compile(r":[0-9]{1,5}\\?[/?#]")
_NON_SPACE = re.compile(r"\S*")
_IN_STRING = re.compile(r'(?:[^\s"\\]|\\\S|"(?=[A-Za-z0-9]))*')   # to a run's end or a JSON string's end
_DIGEST = re.compile(r"sha(?:256:[0-9a-f]{64}|512:[0-9a-f]{128})(?![0-9A-Za-z])")
# Other services' tokens by their published shapes: GitHub (ghp_/gho_/ghs_/ghu_, github_pat_), GitLab (glpat-),
# OpenAI/Anthropic-style sk- keys, AWS access key ids (AKIA; ASIA of temporary credentials) and Slack tokens
# (xoxb-/xoxp-/xoxa-/xoxr-/xoxs-, app-level xapp-, then digits, letters and dashes with a digit among them). An sk-
# body must be long and mix upper case, lower case and digits, or (all-lower keys: sk-proj-..., DeepSeek's sk- and 32
# hex) hold a run of 20 or more lower-case letters and digits with both in it, so that names such as sk-learn, an
# option spelled with "sk-" or sk-2024-01-05-run stay.
_SERVICE_TOKEN = _Lazy(
    _starts("gsAx", "A-Za-z0-9_-")
    + r"(?:gh[opsu]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|sk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]{20,}"
    r"|sk-(?:[a-z0-9]*[_-])*?(?=[a-z]*[0-9])(?=[0-9]*[a-z])[a-z0-9]{20,}[a-z0-9_-]*"
    r"|A(?:KIA|SIA)[0-9A-Z]{16}|(?:xox[abprs]|xapp)-(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9-]{10,})(?![A-Za-z0-9_-])")
# A URL query's key whose value is a credential, in any case: an API key (Google's ?key=, Firebase's ?auth=), OAuth's
# ?access_token=, an Azure SAS's sig=, an AWS or GCS presigned URL's X-Amz-Signature=, X-Amz-Credential=,
# X-Amz-Security-Token=, X-Goog-Signature=, CloudFront's Signature=. Each was written whole (but a value of six
# characters or more, no number, after a secret's word: ``_NAMED_VALUE``). Its value is hidden to the next '&'; the key,
# host and path stay, and so do other keys' values (?revision=main, ?page=2). Its key may follow an HTML-escaped '&'
# (href="...?x=1&amp;key=V" showed V), or stand in a URL-encoded inner URL, its value to the encoded '&' or '#'
# (?url=https%3A%2F%2Fx%3Fkey%3DV%26y%3D1 showed V; escapes in either case). Spelled as a tree of shared starts:
# ``_KEYED_HINT`` tries it at each '?' and '&', 1.4 ms on 100 kB of URLs, 1.6 ms as a list of whole names (by hand).
_QUERY_SECRET = (r"(?i:sig(?:nature)?|key|a(?:uth|ccess_token|pi_?key)|token|password|credential"
                 r"|x-(?:amz-(?:signature|credential|security-token)|goog-(?:signature|credential)))")
# The '&' before a query's key as a text may escape it, once or more: HTML (&amp;, &AMP;, &amp;amp;, &#38;, &#x26;,
# &amp;#38;; a numeric reference without its ';', &#38key=, as HTML5 parsers read it), JSON (\u0026: Go's encoder
# writes every '&' so) or a JavaScript or Python string (\x26). Each showed the value after it (secrets85, left89).
# HTML's names are case-sensitive: &AMP; is one of them, &Amp; none
_QUERY_AMP = r"(?:&|\\u0026|\\x26)(?:amp;|AMP;)*(?:#(?:0*38|[xX]0*26);?)?"
# What starts a query's key: '?' as it is or escaped (HTML's &#63;, &#x3F;, &quest;, JSON's \u003f, \x3f, a URL's
# %3F before a raw '=': &#63;key=V showed V), or '&' (``_QUERY_AMP``)
_QUERY_MARK = (r"(?:\?|&(?:amp;|AMP;)*(?:#(?:0*63|[xX]0*3[Ff]);?|quest;)|\\(?:u003|x3)[Ff]|%3[Ff]|"
               + _QUERY_AMP + ")")
# Secrets known by what stands before them, hidden from there on: a Slack webhook's path (the URL is the secret;
# hooks.slack.com and GovSlack's hooks.slack-gov.com), a URL query's credential (``_QUERY_SECRET``), a storage or
# Service Bus connection string's AccountKey=, SharedAccessKey= or SharedAccessSignature= value (to its ';'), cased as
# the AWS name's hint is (``_MAY_HINT``): camel, lower or upper case, either case first (Azure reads any casing:
# accountkey= and ACCOUNTKEY= were written whole; a scoped (?i:) or an [Aa] class first made the hint's search about
# four times slower).
# A PEM private key's body, between its BEGIN and END lines (multi-line, or with \n escapes in JSON text); a key cut
# before its END line loses the base64 run after BEGIN. A PuTTY key's (PuTTY-User-Key-File-2: or -3:) Private-Lines body
# and Private-MAC value, each line ending at a real or escaped line break; its public lines stay. An Authorization
# header's Bearer, Basic or token credential (RFC 6750's b64token characters; token: GitHub's API, Django REST
# framework), as a generator logs it (curl -H, a requests headers dict, JSON): it was written whole. A Bearer or Basic
# scheme is followed by its credential (Basic dXNlcjpwYXNz, base64 of user:pass, holds no digit); a token one only
# when it looks like one, as a free-text value after ':' must: six characters or more mixing digits and letters
# (Authorization: token expired hid 'expired'; GitHub's and Django's keys are hex), or twenty characters or more (a
# key of letters alone, Token abcdefghijklmnopqrstuv, was shown). The header is sought only where
# str.find finds its name (``_hide_authorization``), and the other alternatives are tried only at a first character
# of theirs: one Authorization header in a 1 MB training log ran them all over the log, 74-102 ms for that step; 0.7 ms
# now, beside the 6 ms of the hint's scan (by hand).
_KEYED_SECRET = _Lazy(r"(?=[h?&%AaSsP\\])"
                           r"(?:(hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+"
                           r"|(" + _QUERY_MARK + _QUERY_SECRET + r"=)[^&\s\"'#\\]+"
                           r"|(%(?P<depth>(?:25)*)(?:3[Ff]|26)" + _QUERY_SECRET + r"%(?P=depth)3[Dd])"
                           r"(?:[^&\s\"'#\\%]|%(?!(?P=depth)2[36]))+"
                           r"|(" + _starts("AaSs", "A-Za-z0-9")
                           + r"(?:[Aa]ccount[Kk]ey|ACCOUNTKEY|[Ss]hared[Aa]ccess(?:[Kk]ey|[Ss]ignature)"
                           r"|SHAREDACCESS(?:KEY|SIGNATURE))=)[^;\s\"'\\]+"
                           r"|(Private-Lines:[ \t]*[0-9]+)(?:(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=]+(?![A-Za-z0-9+/=:-]))+"
                           r"|(Private-MAC:[ \t]*)[0-9a-fA-F]+)")
_CREDENTIAL = r"[A-Za-z0-9._~+/-]+(?:=+[A-Za-z0-9._~+/-]+)*=*"   # a '=' inside: a name=value glued on
# A word with a credential's shape (six characters or more mixing digits and letters, or twenty or more mixing upper and
# lower case): a bare Bearer's, and one more after a header's credential, a list's (Bearer abc123, def456) or another
# word's (Bearer k3y s3cr3t: a key and a secret in one header; Bearer Bearer t0ken, a scheme written twice: the second
# was hidden as the credential and the token shown). Prose's words hold no digit (Bearer abc123 expired stays
# 'expired'), and a protocol's name and version is none (Bearer abc123 HTTP/1.1, a request line logged after the
# header, hid 'HTTP/1.1'): upper-case letters, '/', one digit and maybe '.' and one more (HTTP/2, RTSP/1.0)
_TOKEN_SHAPED = (r"(?![A-Z]{2,8}/[0-9](?:\.[0-9])?(?![A-Za-z0-9._~+/=-]))"
                 r"(?:(?=[A-Za-z0-9._~+/-]*[0-9])(?=[A-Za-z0-9._~+/-]*[A-Za-z])(?=[A-Za-z0-9._~+/-]{6})"
                 r"|(?=[A-Za-z0-9._~+/-]*[A-Z])(?=[A-Za-z0-9._~+/-]*[a-z])(?=[A-Za-z0-9._~+/-]{20}))")
# Auth schemes and the header's name are read in any case (RFC 7235, RFC 9110: BeArEr V and bearer V are one). A Digest
# credential (RFC 7616) is its response= value, the hash that proves the password (it was written whole); its other
# parameters (username, realm, nonce, uri, cnonce) stay, each one name=value, quoted ("..." or \"...\" in JSON text) or
# not. An unquoted value is never empty: spaces on both sides of an empty one split a run of 100,000 spaces every way
_DIGEST_PARAM = r"[A-Za-z0-9_-]+[ \t]*=[ \t]*(?:\\?\"[^\"\\\r\n]*\\?\"|[^\s,\"\\]+)[ \t]*,[ \t]*"
_DIGEST_RESPONSE = r"(?i:digest)[ \t]+(?:" + _DIGEST_PARAM + r")*?(?i:response)[ \t]*=[ \t]*\\?\"?"
_AUTHORIZATION = _Lazy(r"((?i:authorization)\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
                           r"(?:(?:(?i:bearer|basic)[ \t]*:?[ \t]+)+|(?i:token)[ \t]+"
                           r"(?:(?=[A-Za-z0-9._~+/-]*[0-9])(?=[A-Za-z0-9._~+/-]*[A-Za-z])(?=[A-Za-z0-9._~+/-]{6})"
                           r"|(?=[A-Za-z0-9._~+/-]{20}))"
                           r"|" + _DIGEST_RESPONSE + "))"
                           + _CREDENTIAL + r"(?:(?:[ \t]*,[ \t]*|[ \t]+)" + _TOKEN_SHAPED + _CREDENTIAL + ")*")
# A standalone Bearer (as the header spells it) without the header's name before it: a log line's "sending Bearer V",
# curl -H 'Bearer V' (secrets74: written whole). Prose has the word too (the bearer of the news): its credential must
# look like one, six characters or more mixing digits and letters, or twenty or more mixing upper and lower case. One
# word of lower-case letters (a capital first, maybe one digit) may stand before the credential, tried only after the
# word itself failed as one: Bearer token V showed V; Bearer token2 V hides both (a credential's list follows it)
_BEARER = _Lazy(_starts("Bb", "A-Za-z0-9") + r"((?i:bearer)[ \t]+(?:[A-Z]?[a-z]+[0-9]?[ \t]+)??" + _TOKEN_SHAPED + ")"
                + _CREDENTIAL + r"(?:(?:[ \t]*,[ \t]*|[ \t]+)" + _TOKEN_SHAPED + _CREDENTIAL + ")*")
# A standalone Digest credential without the header's name before it (a log line's 'Digest username="u", ...,
# response="V"' showed V): only where a Digest parameter list stands, a username=, realm= or nonce= in it (prose's
# "digest" of a text or image stays)
_DIGEST_ALONE = _Lazy(_starts("Dd", "A-Za-z0-9") + r"(?=(?i:digest)[ \t]+(?:" + _DIGEST_PARAM
                           + r")*?(?i:username|realm|nonce)[ \t]*=)(" + _DIGEST_RESPONSE + ")" + _CREDENTIAL)
# Where ``_hide_authorization`` looks, in a text whose lowered form is not as long (a character lowering to two); a
# match's group names its needle ('digeſt' matches under IGNORECASE, lowers to no needle)
_AUTH_NEEDLES = re.compile(r"(?i:(?P<authorization>authorization)|(?P<bearer>bearer)|(?P<digest>digest))")
# A query's key after '?' and after '&', not after [?&]: a class first loses the scan's first-character skip (2.5x).
# After an escaped '?' or '&' by its last character (';' of &amp; or &#38;) or from its last letter ('u' of \u0026 and
# \u003f, 'x' of \x26 and \x3f; '&' of a numeric reference without ';', '%' of %3F): ``_QUERY_MARK`` here made the
# scan of a 100 kB log holding \n escapes 4x slower, a '\\' first 1.7x, these 1.3x (0.40 to 0.52 ms, by hand)
_KEYED_HINT = _Lazy(r"hooks\.slack(?:-gov)?\.com/|\?" + _QUERY_SECRET + "=|;" + _QUERY_SECRET
                         + r"=|&(?:(?:amp;|AMP;)*#(?:0*(?:38|63)|[xX]0*(?:26|3[Ff])))?" + _QUERY_SECRET
                         + "=|u00(?:26|3[Ff])" + _QUERY_SECRET + "=|x(?:26|3[Ff])" + _QUERY_SECRET + "="
                         r"|%(?:25)*(?:3[Ff]|26)" + _QUERY_SECRET + "(?:=|%(?:25)*3[Dd])"
                         r"|ccount[Kk]ey=|CCOUNTKEY=|hared[Aa]ccess|HAREDACCESS|PuTTY-User-Key-File-")
# A text holding one of these goes through the scrubbers (``_may_match``): an hf_ or service token's start, a PEM
# private key, a ``_KEYED_SECRET``'s key, an Authorization header's name or a Digest parameter list's start (its first
# letter spelled twice, literal: [Dd] made a plain 100 kB log line's check 3x slower)
_SURE_HINT = _Lazy(r"hf_|gh[opsu]_|github_pat_|glpat-|A[KS]IA|xox[abprs]-|xapp-|PRIVATE KEY|"
                        r"a(?i:uthorization)|A(?i:uthorization)|b(?i:earer)|B(?i:earer)"
                        r"|d(?i:igest[ \t]+[a-z0-9_-]+[ \t]*=)|D(?i:igest[ \t]+[a-z0-9_-]+[ \t]*=)|"
                        + _KEYED_HINT.pattern)
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s\\:,-]*")
_SK_HINT = re.compile(r"sk-[A-Za-z0-9_-]{20}")   # no lookbehind: in JSON text a token may follow an escape (\n)
# What ``_may_match`` looks for first, in one scan: testing each with ``in`` cost twice as much on a sample id. An AWS
# secret's name (``_AWS_SECRET_NAME``, any case) by "ecret" in any case, as the name's other checks (``_redact``,
# ``_may_match``: "ecret" in the lowered text) read it: "ecret" or "ECRET" alone let aws_SeCrEt_access_key= through. No
# character but the ASCII ones matches c, r, e or t under IGNORECASE, nor lowers to one. A literal first letter keeps
# the scan fast: [Ee][Cc][Rr][Ee][Tt] made it ~3.8x slower on a 10 kB YAML.
_MAY_HINT = _Lazy(_SURE_HINT.pattern + r"|://|:\\|sk-|e(?i:cret)|E(?i:cret)")
# An AWS secret access key is 40 characters of base64's alphabet, which a path or a digest can be too: it is taken
# for one only after its name (aws_secret_access_key=, "SecretAccessKey": ...) or, mixing upper and lower case
# (a 40-hex commit does not), on the line of an access key id (AKIA.../ASIA...), within 32 characters of it; never
# the end of a word after _ or - (ghp_ and 40 letters beside a key id is a GitHub token, hidden whole by its shape).
_AWS_SECRET_NAME = re.compile(r"(?:aws[_-]?)?secret[_-]?access[_-]?key", re.IGNORECASE)
_AWS_SECRET_BODY = r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
_AWS_SECRET_VALUE = _starts("A-Za-z0-9/+", "A-Za-z0-9/+_-") + _AWS_SECRET_BODY
_AWS_MIXED_VALUE = (_starts("A-Za-z0-9/+", "A-Za-z0-9/+_-") + r"(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])"
                    + _AWS_SECRET_BODY)
_AWS_KEY_ID = _starts("A", "A-Za-z0-9_-") + r"A(?:KIA|SIA)[0-9A-Z]{16}(?![A-Za-z0-9_-])"
# Between the name and its value: quotes (escaped in JSON text: aws_secret_access_key=\"...), a ':' or '=', and
# spaces or escaped line breaks and tabs; those after the ':' or '=' only when there is one (two runs side by side
# split a name's run of 50,000 "\n" or spaces every way: quadratic, minutes on a 100 kB text)
_JSON_SEPARATOR = r"\\?[\"']?(?:\s|\\[nrt])*(?:[:=](?:\s|\\[nrt])*)?\\?[\"']?"
_AWS_SECRET_AFTER_NAME = _Lazy(rf"({_AWS_SECRET_NAME.pattern}{_JSON_SEPARATOR}){_AWS_SECRET_VALUE}",
                                    re.IGNORECASE)
_AWS_SECRET_NEAR_ID = _Lazy(rf"({_AWS_KEY_ID}[^\n]{{0,32}}?){_AWS_MIXED_VALUE}"
                                 rf"|{_AWS_MIXED_VALUE}(?=[^\n]{{0,32}}?{_AWS_KEY_ID})")
# A value after a name whose last word is a secret's (``_ends_secret``: password=V, api_key: V, "hf_token": "V",
# MY_TOKEN=V) in free text a generator prints: no variable or option declared it. Its name may follow a JSON escape
# (\npassword=V), or a lower-case letter or digit as camelCase's last word (accessToken=V, clientSecret=V: shown whole;
# HFToken=V and OpenAIApiKey=V after an acronym too, as S3SecretKey=V after a digit: shown whole after review55; a name
# only holding the word stays: maxTokens=, tokenizer=); between name and value a quote (escaped in JSON text), spaces,
# one ':' or '=', spaces, a quote. The value is one word of six characters or more (true, none, >- and short words stay;
# to an '&' or ',' a name= follows: a URL's query, token=V,user=bob hid ',user=bob'; password=ab&cdefgh was shown whole,
# Tr0ub4dor&3 its '&3'; one not in single quotes holds a "'" inside it: p@ss'word was shown whole), no number (a count);
# a quoted one ends at its quote or line (a quoted phrase is prose: HF_TOKEN: "Hugging Face ..."), an unquoted one after
# ':' ends its line, string or field, or mixes digits and letters (api_key: V as a log's last word, token: q1w2e3 and
# more; not HF_TOKEN: Hugging Face token). One that is a whole placeholder or repr (<...>, [...], {...}, ${...} to the
# value's end) or a variable ($NAME, %(name)s) is no value (pad_token=<|endoftext|>, token: [MASK], password=$PASSWORD,
# token: {token}), in single quotes too (unk_token='<unk>' hid "'<unk>": too short a value in its quotes, it was read
# unquoted); one only starting like one is (password=<x9Kd!>zz, password={Secr3tPass, token=${x}rest1 were shown
# whole), and so is a placeholder or $NAME holding a digit (password=[hunter2], api_key: <sk-abc123def456>,
# password=$ECRET2024 were shown whole; <|reserved_special_token_0|> is hidden with them).
_PLACEHOLDER = r"(?:<[^<>\r\n\"'0-9]*>|\[[^\[\]\r\n\"'0-9]*\]|\$?\{[^{}\r\n\"'0-9]*\}|\$[A-Z_]+)"
# A secret-named field's value that is a whole placeholder (a tokenizer config's "bos_token": "<s>", "pad_token":
# "[PAD]", "hf_token": "${HF_TOKEN}") is no secret, as in free text: ``scrub`` blanked them. One holding a digit is
# ("password": "[hunter2]", "api_key": "<sk-abc123def456>" were kept)
_WHOLE_PLACEHOLDER = re.compile(_PLACEHOLDER)
_SECRET_WORD = r"(?i:token|secret|passw(?:or)?d|passphrase|credentials?|apikey|(?:api|access|private|secret)[_.-]?key)"
_NAMED_VALUE = _Lazy("(?:" + _starts("tTsSpPcCaA", "A-Za-z0-9")
                          + r"|(?<=[a-z0-9])(?=[TSPCA])|(?<=[A-Z])(?=[TSPCA][a-z]))" + _SECRET_WORD +
                          r"(\\?[\"']?[ \t]*[:=][ \t]*)(?:(\\?\")|(\\?'))?"
                          r"(?!%\(|(?:'" + _PLACEHOLDER + "'|" + _PLACEHOLDER + r")(?![^\s\"'\\&,;}\]]))"
                          r"((?:[^\s\"'\\&,]|\\[^\s\"'nrtbfu]|[&,](?![^\s\"'\\&,=]*=)|(?(3)(?!)|'(?=[^\s\"'\\&]))){6,})")
# An unquoted dotted name of lower-case letters and '_' after a token's name is code, no value: a tokenizer's attribute
# (tokenizer.pad_token = tokenizer.eos_token hid 'tokenizer.eos_token'), as a token-named JSON field's whole value is
# (``_code_name``), in the object, its JSON text or its Python repr ("pad_token": "tokenizer.eos_token" was hidden in a
# log, kept by ``scrub``, secrets68; 'pad_token': 'tokenizer.eos_token' too, secrets74); quoted otherwise it is a value
# (token = "tokenizer.eos_token"). Only after "token" (NLP code's word for a tokenizer's unit; a generated credential
# holds digits or upper case: token=Secret.Value and a JWT's shape abc.DEF.ghi were shown; hf_/ghp_ shapes are hidden by
# their own patterns): after a password's or a key's name a dotted word may be a passphrase
# (correct.horse.battery.staple).
_DOTTED_NAME = re.compile(r"[a-z_]+(?:\.[a-z_]+)+[,;)]*")   # a call's keyword argument: its "," or ")" too
_FIELD_END = re.compile(r"$|[\r\n,;}\]]|\\[nr]")
_MIXED = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z])")   # a word of digits and letters: no prose's word
# A variable or build-arg name that holds a secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWD, ...): its
# value is redacted everywhere, and the Docker path refuses to pass such a name as env or build arg.
# A secret word ends a part of the name or comes before a digit (PGPASSWORD, GITHUB_TOKEN, OPENAI_API_KEY2); KEY only
# as a whole part or after API, ACCESS, PRIVATE or SECRET (OPENAI_APIKEY): as a substring it took MONKEY=sample and
# KEYBOARD_LAYOUT=us for secrets. PASS and PAT only as a part (DB_PASS, GITHUB_PAT; not BYPASS, PATH), PWD only
# after one (MYSQL_PWD; PWD and OLDPWD are directories). A KEYFILE part may hold the key (GOOGLE_CLOUD_KEYFILE_JSON).
# DSN, NETRC as a part (SENTRY_DSN holds Sentry's key; a DSN may hold a password), SERVICE_ACCOUNT (the key's JSON)
# and AUTH_CONFIG (DOCKER_AUTH_CONFIG: registry logins) anywhere. TOKEN only singular: MAX_TOKENS, NUM_TOKENS count
# (MAX_TOKENS=131072 hid every "131072" and refused every id holding it).
# DATABASE_URL, REDIS_URL, MONGODB_URI are no secret names: a password in them goes by the URL's shape
# (``_URL_USER``), and a URL without one (redis://cache:6379/0) names a host, no secret.
_SECRET_NAME = re.compile(r"(?:TOKEN|SECRETS?|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|WEBHOOK|CONNECTION_?STRING"
                          r"|[^A-Z0-9]PWD|SERVICE_?ACCOUNTS?|AUTH_?CONFIG|(?:^|[^A-Z0-9])(?:PA(?:SS|T)|DSN|NETRC)"
                          r"|(?:^|[^A-Z0-9]|API|ACCESS|PRIVATE|SECRET)KEY(?:S|FILE)?)"
                          r"(?![A-Z])")   # matched against the name upper-cased: IGNORECASE tripled its compile
# Shorter values (flags such as "1" or "true") would redact unrelated text.
_MIN_SECRET_LEN = 6
_SECRET_FIELD_PARTS = {"token", "secret", "password", "passwd", "passphrase", "credential", "credentials", "apikey"}
_KEY_PREFIXES = {"api", "access", "private", "secret"}
# What a secret-named key's lowered name holds, one of these at least (each part above, or "key"), fewest needles
_SECRET_FIELD_NEEDLES = ("key", "token", "secret", "passw", "passphrase", "credential")
REDACTED = "***"


def is_secret_name(name: str) -> bool:
    """Whether an environment variable or build-arg name looks like it holds a secret."""
    return bool(_SECRET_NAME.search(name.upper()))


# The values ``keep_secret`` was given, as a JSON list: in the environment, so that every process a run starts (its
# generator's, a command's) redacts them too.
KEPT_SECRETS_ENV = "PINBENCH_SECRET_VALUES"
_FLAG_NAME = re.compile(r"-{0,2}[A-Za-z0-9_.-]+")


def keep_secret(values: Iterable[str]) -> None:
    """Redact ``values`` from now on, in this process and those it starts, as a secret-named env var's value: a
    secret-named -g option's (-g api_key=..., -g password=...) is known by no variable and may have no shape."""
    kept = set(_kept_secrets(os.environ.get(KEPT_SECRETS_ENV))) | {v for v in values if v}
    if kept:
        os.environ[KEPT_SECRETS_ENV] = json.dumps(sorted(kept))


def keep_secret_options(options: Mapping[str, str], argv: Sequence[str] | None = None) -> None:
    """``keep_secret`` of the secret-named ones among a command's -g options (named to a secret's word,
    ``_ends_secret``: api_key=, password=, token=, not token_budget=; a number never) and among a ``command:``
    generator's ``argv`` flags (``--token VALUE``, ``--api-key=VALUE``, env's ``API_KEY=VALUE``): each command given
    them (run, submit) redacts their values from what it writes and prints. A flag's value of no token's shape
    reached the scorecard, generator.json, the report and diff.txt."""
    keep_secret(value for name, value in options.items() if _named_secret(name, value))
    keep_secret(secret_flag_values(argv or ()))


def _named_secret(name: str, value: str) -> bool:
    return _ends_secret(name) and not _number(value)


def secret_option(name: str, value: str) -> bool:
    """Whether a -g option's value is a secret: its name is a secret's (``keep_secret_options`` keeps it) or
    ``redact`` hides some of it. Why: ``pinbench submit`` keeps such a value out of the sbatch scripts it writes."""
    return bool(value) and (_named_secret(name, value) or holds_secret(value))


def secret_flag_values(argv: Sequence[str]) -> list[str]:
    """The values ``argv``'s secret-named flags give (``_flag_secret``); a placeholder ({out}) is no secret. Those
    of a shell's ``-c`` script too, split at spaces and its operators as the shell splits it (``sh -c "gen --token
    abc"`` kept none), or the whole script when it does not split."""
    values = [value for value in (_flag_secret(word, after) for word, after in pairwise([*argv, ""]))
              if value and "{" not in value and not _number(value)]
    for script in _shell_scripts(argv):
        words = shlex.shlex(script, posix=True, punctuation_chars=True)   # "--token abc;" gives abc, not "abc;"
        words.whitespace_split, words.commenters = True, ""   # a comment's flags are written too
        try:
            values += secret_flag_values(list(words))
        except ValueError:
            values.append(script)
    return values


_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"}
_SHELL_C = re.compile(r"-[A-Za-z]*c[A-Za-z]*")   # -c, -ec, -lc


def _shell_scripts(argv: Sequence[str]) -> list[str]:
    """The words of ``argv`` after a ``-c`` that follows a shell's name (``timeout 60 bash -ec SCRIPT``)."""
    shell = False
    scripts = []
    for word, after in pairwise(argv):
        shell = shell or PurePath(word).name in _SHELLS
        if shell and _SHELL_C.fullmatch(word):
            scripts.append(after)
    return scripts


def _number(value: str) -> bool:
    """Whether a secret-named option's value is a number (``--token-budget 100000``, ``-g token_limit=131072``): a
    count, never a credential, and kept as one it hid that number's digits in every value, path and id written."""
    try:
        float(value)
    except ValueError:
        return False
    return True


def _ends_secret(name: str) -> bool:
    """Whether ``name``'s last word is a secret's (``hf_token``, ``--api-key``: ``is_secret_field``'s words)."""
    parts = _words(name)
    last = parts[-1] if parts else ""
    return last in _SECRET_FIELD_PARTS or last == "key" and len(parts) > 1 and parts[-2] in _KEY_PREFIXES


def _flag_secret(word: str, after: str) -> str | None:
    """The value a secret-named argv flag gives: its own after '=' (--token=V, API_KEY=V), else the next word's
    (--token V); None for any other word (a shell's -c script with a '=' in it is no flag). The flag's name ends in
    the secret's word (``--hf-token``, ``--api-key``): one that only holds it names another thing
    (``--credentials-profile default``, ``--token-budget 100k``), whose value kept as a secret hid that word in
    every value, id and path written. A ``--no-*`` negation takes no next word (its ``=`` value is still kept)."""
    name, equals, value = word.partition("=")
    if not _FLAG_NAME.fullmatch(name) or not _ends_secret(name):
        return None
    if equals:
        return value
    negation = _words(name)[0] == "no"   # --no-token is a switch: the word after it (a prompt.txt) is no value
    return after if name.startswith("-") and not negation and not after.startswith("-") else None


def _kept_secrets(text: str | None) -> list[str]:
    try:
        values = json.loads(text) if text else []
    except ValueError:
        return []
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []


def _named_secrets() -> set[str]:
    """The values of the secret-named env vars and those ``keep_secret`` kept."""
    return {value for name, value in os.environ.items() if is_secret_name(name)} | \
        set(_kept_secrets(os.environ.get(KEPT_SECRETS_ENV)))


def secret_holder(text: str) -> str | None:
    """What holds a secret value that ``text`` holds: a secret-named env var (by its name, never redacted), a
    secret-named -g option (``keep_secret``); None for neither. Why: an id refused for holding one
    (``MY_API_KEY=sample``, an id ``sample_001``) was said to have a token's shape, which named nothing the user could
    change."""
    for name, value in sorted(os.environ.items()):
        if name != KEPT_SECRETS_ENV and is_secret_name(name) and len(value) >= _MIN_SECRET_LEN and value in text:
            return f"the environment variable {name} (named like a secret's: its value is redacted everywhere)"
    kept = _kept_secrets(os.environ.get(KEPT_SECRETS_ENV))
    if any(len(value) >= _MIN_SECRET_LEN and value in text for value in kept):
        return "a secret-named -g option"
    return None


def _secret_values(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Values of secret-named env vars plus ``extra``, longest first (a value containing another goes first)."""
    extra = set(extra)
    if not extra:
        return _environment_secrets()
    return _longest_first(_named_secrets() | extra)


def _longest_first(values: Iterable[str]) -> tuple[str, ...]:
    """The values long enough to be secrets and their spellings in JSON text (``_json_spellings``), longest first."""
    kept = {spelling for v in values if v and len(v) >= _MIN_SECRET_LEN for spelling in _json_spellings(v)}
    return tuple(sorted(kept, key=len, reverse=True))


def _json_spellings(value: str) -> set[str]:
    """``value`` and how JSON text spells it (a generator logging JSON): its '"' and '\\' escaped, its non-ASCII
    as \\u escapes or not, its '/' as \\/ or not; a value holding one of them was written whole."""
    escaped = {json.dumps(value, ensure_ascii=ascii_only)[1:-1] for ascii_only in (False, True)}
    return {value, *escaped, *(e.replace("/", "\\/") for e in escaped)}


_environment_cache: tuple[dict[Any, Any], tuple[str, ...]] | None = None


def _environment_secrets() -> tuple[str, ...]:
    """The secret-named env vars' values, read again only when the environment changed: a run redacts every
    failed sample's message and checks every sample id, and decoding all of ``os.environ`` each time cost 40 us a
    call (0.8 s CPU for the 10,096 missing samples of a 10 % CameraBench run). The key is a copy of the raw
    environment CPython keeps (``os.environ._data``), which every change through ``os.environ`` updates: comparing
    the dicts costs a quarter of building and comparing a tuple of their items."""
    global _environment_cache
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return _longest_first(_named_secrets())
    if _environment_cache is None or _environment_cache[0] != raw:
        _environment_cache = (dict(raw), _longest_first(_named_secrets()))
    return _environment_cache[1]


def _redact(text: str, secrets: Sequence[str]) -> str:
    for value in secrets:
        text = text.replace(value, REDACTED)
    if "PRIVATE KEY" in text:
        text = _hide_private_keys(text)
    if _KEYED_HINT.search(text):
        text = _KEYED_SECRET.sub(lambda m: m.group(m.lastindex or 0) + REDACTED, text)
    lowered = text.lower()
    if "authorization" in lowered or "bearer" in lowered or "digest" in lowered:
        shown = _hide_authorization(text, lowered)
        if shown != text:
            text, lowered = shown, shown.lower()
    if "ecret" in lowered:   # 8 us on a 10 kB text, a regex's hint ~60 us
        shown = _AWS_SECRET_AFTER_NAME.sub(rf"\g<1>{REDACTED}", text)
        if shown != text:
            text, lowered = shown, shown.lower()
    if _may_name_a_secret(lowered):
        text = _hide_named_values(text, lowered)
    if "AKIA" in text or "ASIA" in text:
        text = _AWS_SECRET_NEAR_ID.sub(lambda m: (m.group(1) or "") + REDACTED, text)
    text = _SERVICE_TOKEN.sub(REDACTED, _HF_TOKEN.sub(REDACTED, text))
    return _hide_url_userinfo(text) if _may_hold_url_userinfo(text) else text


_AUTH_PATTERNS = {"authorization": _AUTHORIZATION, "bearer": _BEARER, "digest": _DIGEST_ALONE}


def _hide_authorization(text: str, lowered: str) -> str:
    """``text`` with each ``_AUTHORIZATION`` header's, bare ``_BEARER``'s or bare ``_DIGEST_ALONE``'s credential
    hidden, each sought where its name is (a Bearer or Digest inside a header is the header's). A credential ends
    before a header's name glued to it (``_GLUED_HEADER``: log lines run together without a line break):
    'Authorization: Basic a1b2c3Authorization: Bearer x' hid 'a1b2c3Authorization' and showed 'x'. Or before a
    secret's name ending it in any case (``_GLUED_SECRET``), which ``_hide_named_values`` then reads: 'Bearer
    abcx-api-key: V' and 'Basic YWJjZGVmpassword: V' showed V (secrets59); a name=V glued on is in the credential.
    Such a name before no value ``_hide_named_values`` hides is the credential's tail (``_glued_value_hidden``):
    'Bearer abc123def456XyzToken: 401' showed 'Token' (secrets68)."""
    if len(lowered) == len(text):
        starts = sorted([(at, pattern) for needle, pattern in _AUTH_PATTERNS.items()
                         for at in _occurrences(lowered, needle)], key=lambda start: start[0])
    else:
        starts = [(m.start(), _AUTH_PATTERNS[m.lastgroup or ""]) for m in _AUTH_NEEDLES.finditer(text)]
    parts, done = [], 0
    for start, pattern in starts:
        match = pattern.match(text, max(start, 0)) if start >= done else None
        if match:
            end = match.end()
            if _HEADER_COLON.match(text, end):
                tail = max(match.end(1), end - _HEADER_MOST)
                glued = _GLUED_HEADER.search(text, tail, end)
                name = glued.group() if glued else ""
                if not _ends_secret(name) and not name.lower().endswith("authorization"):
                    glued = _GLUED_SECRET.search(text, tail, end)
                if (glued and not glued.group().lower().endswith("authorization")
                        and not _glued_value_hidden(text, glued.start(), end)):
                    glued = None
                end = glued.start() if glued and glued.start() > match.end(1) else end   # a name alone: the credential
            parts += [text[done:match.end(1)], REDACTED]
            done = end
    return "".join([*parts, text[done:]])


def _glued_value_hidden(text: str, at: int, end: int) -> bool:
    """Whether a secret's name glued to a credential at ``at`` (to ``end``, before its ':') is followed by a value
    that ``_hide_named_values`` hides once the credential before it is. Read in a window of its line
    (``_VALUE_WINDOW``), so that 2,500 such headers on a 97 kB line took 16 ms by hand; a value the window
    cuts counts as hidden: the name is shown, its value hidden."""
    stop = text.find("\n", end, end + _VALUE_WINDOW)
    probe = REDACTED + text[at:stop if stop >= 0 else end + _VALUE_WINDOW]
    word = _GLUED_SECRET.search(probe, 0, len(REDACTED) + end - at)
    match = _NAMED_VALUE.match(probe, word.start()) if word else None
    if match is None:
        return False
    shown, stop = _named_value_hidden(probe, match)
    return shown != probe[match.start():stop]


_VALUE_WINDOW = 256   # characters after a glued name that decide whether its value is hidden

# A header's name (Title-Case words of letters joined by '-': X-Api-Key; or this header's own in any case) ending a
# credential that a ':' follows: no credential holds a ':', so its run of b64token characters took the next header's
# name in. Only an Authorization's or one ending in a secret's word (whose credential or value follows) ends it; any
# other is hidden with the credential: a credential's tail of Title-Case letters (Basic QWxhZGRpbjpPcGVu: showed 'Vu',
# Bearer ...Xyz-Abc: showed 'Xyz-Abc'; secrets63) is one. Letters only, and never the whole credential: a tail of
# digits too (Bearer abcdefA0123...def: 401 showed 'A0123...def') or a credential of one such word (Token Ab0123...:
# bad) was shown (secrets59). Sought in the credential's last 64 characters: from each of its characters, a
# credential of 50,000 'A-' took 99 s.
_GLUED_HEADER = re.compile(r"(?:(?:[A-Z][a-z]*-)*[A-Z][a-z]+|(?i:authorization))$")
_GLUED_SECRET = re.compile(_SECRET_WORD + "$")
_HEADER_MOST = 64
_HEADER_COLON = re.compile(r"[ \t]*:")


def _hide_named_values(text: str, lowered: str) -> str:
    """``text`` with each ``_NAMED_VALUE``'s value hidden, but a number's, or one that does not end where a value
    must (its quote; after ':' its line, string or field). ``lowered`` is ``text.lower()``, which the caller has
    (lowering a 1 MB log twice cost ~5 ms). A query's value cut at its fragment's '#' is read to there only: the
    fragment is read again (?client_secret=123456#access_token=V showed V, secrets85)."""
    parts, done = [], 0
    if len(lowered) != len(text):   # a character lowering to two: positions differ, read the text whole
        while match := _NAMED_VALUE.search(text, done):
            shown, stop = _named_value_hidden(text, match)
            parts += [text[done:match.start()], shown]
            done = stop
        return "".join([*parts, text[done:]])
    starts = sorted({at - back for needle in _SECRET_FIELD_NEEDLES for at in _occurrences(lowered, needle)
                     for back in (_KEY_BACKS if needle == "key" else (0,)) if at >= back})
    for start in starts:
        match = _NAMED_VALUE.match(text, start) if start >= done else None
        if match:
            shown, stop = _named_value_hidden(text, match)
            parts += [text[done:start], shown]
            done = stop
    return "".join([*parts, text[done:]])


def _named_value_hidden(text: str, match: re.Match[str]) -> tuple[str, int]:
    """``match`` (a ``_NAMED_VALUE`` of ``text``) with its value hidden, or as it is, and where it stops in ``text``:
    its end, or a query value's fragment ('#'), which is no part of it. A URL query's value is hidden if a number too:
    no count (?client_secret=123456, a PIN or one-time code, was shown; secrets85). A dotted code name after a token's
    name (``_code_name``) stays unquoted or as a field's value quoted as its name is (``_FIELD_KEY_END``), in JSON
    text ("pad_token": "tokenizer.eos_token") or a Python repr ('pad_token': 'tokenizer.eos_token'), as ``scrub``
    keeps that field of the object."""
    quote, value, end = match.group(2) or match.group(3), match.group(4), match.end()
    stop = end
    query = not quote and "=" in match.group(1) and _QUERY_KEY.search(
        text, max(match.start() - _QUERY_KEY_MOST, 0), match.start()) is not None
    if not quote and "=" not in match.group(1) and value[-1] in ",;":   # api_key: V, next: the field's end
        value, end = value[:-1], end - 1
    elif query and "#" in value:
        value = value[:value.index("#")]   # a query's value ends at its fragment: ?password=V#frag kept no '#frag'
        end = stop = match.start(4) + len(value)
        if not value:
            return text[match.start():stop], stop
    ends = (_FIELD_END.match(text, end) is not None or (text.startswith(quote, end) if quote
            else "=" in match.group(1) or _MIXED.match(value)))
    key_end = _FIELD_KEY_END.match(match.group(1))
    code = not quote or bool(key_end and key_end.group(1) == quote)
    if not ends or _number(value) and not query or code and _code_name(text[match.start():match.start(1)], value):
        return text[match.start():stop], stop
    return text[match.start():match.start(4)] + REDACTED + text[end:stop], stop


# A URL query's key (after '?' or '&', as it is or escaped: ``_QUERY_MARK``) ending where a secret's name starts: its
# value ends at the fragment's '#', which no query value holds raw. Sought in the name's last 64 characters (a longer
# key's value runs on, hidden whole)
_QUERY_KEY = _Lazy(_QUERY_MARK + r"[A-Za-z0-9._~-]*$")
_QUERY_KEY_MOST = 64

# Where a field's name ends: its quote (escaped in JSON text; ' in a Python repr), then ':'. A value in the same quote
# is that field's
_FIELD_KEY_END = re.compile(r"""(\\?["'])[ \t]*:""")


def _code_name(word: str, value: str) -> bool:
    """Whether ``value`` after a secret's name ending in ``word`` is code (``_DOTTED_NAME``): the name's word is
    "token" in code's lower case (HF_TOKEN=abc.defgh.ijk, hfToken=Abc.Defgh are values), and the value names a token
    or a tokenizer last (tokenizer.eos_token, cfg.token, self.tokenizer): access_token=correct.horse.battery is a
    passphrase."""
    return (word == "token" and _DOTTED_NAME.fullmatch(value) is not None
            and "token" in value.rstrip(",;)").rsplit(".", 1)[1])


_KEY_BACKS = (3, 4, 6, 7, 8)   # where a name ending in "key" starts: apikey, api_key, accesskey, secret-key


def _occurrences(text: str, needle: str) -> Iterable[int]:
    """Where ``needle`` occurs in ``text``: str.find runs 30x faster than a pattern with a look-behind before it (1 ms
    on the 45 kB of recipe YAML a command reads), or than one of the needles' alternation."""
    at = text.find(needle)
    while at >= 0:
        yield at
        at = text.find(needle, at + 1)


def _hide_url_userinfo(text: str) -> str:
    """``text`` with each URL's password and token-shaped user name hidden (``_URL_USER``). In linear time: a
    password runs to the last '@' of its JSON string or run of non-space, so once one is sought no later URL of that
    string or run can hold user info and it is skipped: sought again from each "://" of it, a 100 kB line of
    "a://b:c/" fragments took 4.2 s, not 0.02 s."""
    parts, at, skip = [], 0, 0
    for match in _URL_USER.finditer(text):
        if match.start() < skip:
            continue
        scheme, user = match.groups()
        sep = match.end()
        if text[sep] == "@":
            end, password = sep, None
        elif _URL_PORT.match(text, sep):
            continue
        else:
            skip = _IN_STRING.match(text, sep).end()
            if text.find("@", sep, skip) < 0:   # no '@' before the quote: a password holding a raw '"'
                skip = _NON_SPACE.match(text, sep).end()
            end = _last_at(text, sep, skip)
            if end < 0:
                continue
            password = text[sep + 1:end]
        parts += [text[at:match.start()], scheme, REDACTED if _token_shaped(user) else user,
                  "" if password is None else f":{REDACTED}" if password else ":", "@"]
        at = end + 1
    return "".join([*parts, text[at:]])


def _last_at(text: str, start: int, stop: int) -> int:
    """The last '@' of ``text[start:stop]`` that starts no image digest (``ubuntu:22.04@sha256:...`` names an image,
    its tag read as a password was hidden); -1 for none."""
    end = text.rfind("@", start, stop)
    while end >= 0 and _DIGEST.match(text, end + 1):
        end = text.rfind("@", start, end)
    return end


def _may_hold_url_userinfo(text: str) -> bool:
    """Whether ``text`` may have what ``_URL_USER`` needs: a "://" or a ':' and a backslash (":\\/\\/" as JSON
    escapes "://", also when a string holding it is encoded again: ``_scrubbed`` asks this of an object's JSON text),
    and an '@'."""
    return ("://" in text or ":\\" in text) and "@" in text


def _token_shaped(user: str) -> bool:
    """Whether a URL's user name looks generated, not chosen: 20 characters or more mixing upper case, lower case
    and digits, or 32 or more of hex with a digit and a letter (an old GitHub token). A long chosen name
    (averylongusername, john.smith%40example.com) stays."""
    if len(user) < 20:
        return False
    if _HEX_TOKEN.fullmatch(user):
        return True
    return any(c.isupper() for c in user) and any(c.islower() for c in user) and any(c.isdigit() for c in user)


def _hide_private_keys(text: str) -> str:
    """``text`` with each PEM private key's body hidden: from its BEGIN line to the first END line after it, or, cut
    before one, the base64 run after BEGIN. In one pass over the BEGIN and END lines: one pattern spanning BEGIN to
    END searched the rest of the text from every BEGIN, 3.9 s for 4,000 BEGIN lines without an END (136 KB)."""
    ends = [m.start() for m in _PEM_END.finditer(text)]
    parts, at, j = [], 0, 0
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < at:   # within a body already hidden
            continue
        while j < len(ends) and ends[j] < begin.end():
            j += 1
        stop = ends[j] if j < len(ends) else _PEM_BODY.match(text, begin.end()).end()
        parts += [text[at:begin.end()], REDACTED]
        at = stop
    return "".join([*parts, text[at:]])


def _may_match(text: str) -> bool:
    """Whether ``text`` could hold an ``_HF_TOKEN``, a ``_SERVICE_TOKEN``, an AWS secret's name, a URL's user
    info, a PEM private key or a ``_KEYED_SECRET``: the scrubbers' fast paths skip the rest. "sk-" is common in
    plain words (task-, mask-): only a long run after it counts. The AWS name alone counts: in JSON text an escaped
    quote may stand between it and the value. A value after a secret's name in free text (``_holds_named_value``)
    counts with or without a hint."""
    if _MAY_HINT.search(text) is not None and (
            _SURE_HINT.search(text) is not None or _may_hold_url_userinfo(text)
            or ("sk-" in text and _SK_HINT.search(text) is not None)
            or ("ecret" in text.lower() and _AWS_SECRET_NAME.search(text) is not None)):
        return True
    return _holds_named_value(text)


def _holds_named_value(text: str) -> bool:
    """Whether ``_hide_named_values`` would change ``text``; none without a ':' or '=' (a sample id: lowering
    t2v-0001 and seeking the names' words took _may_match from 0.23 to 1.4 us)."""
    if ":" not in text and "=" not in text:
        return False
    lowered = text.lower()
    return _may_name_a_secret(lowered) and _hide_named_values(text, lowered) != text


# Terminal colour codes: what a process printed, kept in one line that a record or the console shows, loses them
# (a builder wraps every character in them; a logger colours its errors)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def one_line(text: str) -> str:
    """``text`` as one line without its colour codes (``ANSI``): what a generator said (a command's last line, a
    Python generator's exception), as a sample's reason keeps it and the run's ending prints it."""
    return " ".join(ANSI.sub("", text).split())


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Replace Hugging Face, GitHub, GitLab, sk-, Slack and AWS tokens (key ids; secret keys beside a name or a key id),
    Authorization headers' and bare Bearer credentials (a Digest header's response), PEM private key bodies, Slack
    webhook paths, Azure account keys, URL query credentials (?key=, X-Amz-Signature=, ...), URL passwords and token
    user names, values of secret-named env vars (*TOKEN, *_KEY, ...) and ``extra`` secret values (a token handed to
    a container, say) by ***."""
    return _redact(text, _secret_values(extra))


def holds_secret(text: str) -> bool:
    """Whether ``redact`` would change ``text``, by its fast path first: only a text holding a secret value or what
    could be a token's shape (``_may_match``) goes through the scrubbers. Why: every YAML read asks this of its
    text before keeping its parse, and ``redact`` itself took 4.7 ms over the 45 KB of YAML ``pinbench list`` reads."""
    secrets = _secret_values()
    if not (_may_match(text) or any(v in text for v in secrets)):
        return False
    return _redact(text, secrets) != text


def secret_shaped_parts(path: PurePath) -> list[str]:
    """What ``redact`` makes of the parts of ``path`` it would change (the whole path where only a span of parts has
    a secret's shape): a run directory printed or written so names no folder, and unredacted it leaks the token."""
    text = str(path)
    if redact(text) == text:
        return []
    return [shown for part in path.parts if (shown := redact(part)) != part] or [redact(text)]


def secret_shaped_refusal(option: str, value: str | PurePath, instead: str = "choose another folder") -> str | None:
    """The one line refusing ``option`` when ``value`` (a path, a checkpoint name) has a token's shape, else None: the
    one check of every option a command prints or writes into what it makes (a run, a report, a bundle, an export),
    where the token would stand unredacted in the user's own copy, a CI log or a shared folder."""
    parts = secret_shaped_parts(PurePath(value))
    if not parts:
        return None
    what = "a part of this path has" if isinstance(value, PurePath) else "it has"
    return f"{option} {redact(str(value))}: {what} the shape of a secret token ({', '.join(parts)}); {instead}"


def redactor() -> Callable[[str], str]:
    """``redact`` with the environment's secret values read once: for many strings in a row (a report page)."""
    secrets = _secret_values()
    return lambda text: _redact(text, secrets)


COMPACT_JSON: dict[str, Any] = {"separators": (",", ":"), "allow_nan": False}  # a page's data (ASCII, no NaN)


class Scrubber:
    """``scrub`` with the environment's secret values read once: for many objects in a row (a view's samples)."""

    def __init__(self) -> None:
        self.secrets = _secret_values()
        self.escaped = [json.dumps(v)[1:-1] for v in self.secrets]  # as they stand in ASCII JSON text

    def __call__(self, obj: Any) -> Any:
        return _scrubbed(obj, self.secrets)

    def json(self, obj: Any) -> str:
        """``json.dumps(self(obj), **COMPACT_JSON)`` for an object whose keys are strings, from one encoding when
        nothing in it could be a secret (a view bundle's 11,222 sample pages: not encoded, decoded and encoded
        again). Anything that could be one goes by way of ``self(obj)``; the gate is ``_scrubbed``'s on this
        text: a secret value as JSON escapes it (escaping is per character, so a string holding it holds its
        escaped form), a token's shape or a URL with user info (``_may_match``), a secret-named key's part or
        ``key`` in the lowered text; a ``\\u`` escape (a character lowering to ASCII, such as the Kelvin sign, would
        hide in it) sends the object that way too."""
        try:
            text = json.dumps(obj, **COMPACT_JSON)
        except (TypeError, ValueError):
            text = None
        if text is None or "\\u" in text or _may_match(text) or any(v in text for v in self.escaped):
            return json.dumps(self(obj), **COMPACT_JSON)
        if _may_name_a_secret(text.lower()):
            return json.dumps(self(obj), **COMPACT_JSON)
        return text


def scrubber() -> Scrubber:
    """``scrub`` with the environment's secret values read once (``Scrubber``)."""
    return Scrubber()


@lru_cache(maxsize=4096)  # a page scrubs the same few field names thousands of times
def is_secret_field(name: str) -> bool:
    """Whether a JSON field or file name names a secret as a word of it (``hf_token``, ``.git-credentials``)."""
    parts = _words(name)
    if any(p in _SECRET_FIELD_PARTS for p in parts):
        return True
    return any(a in _KEY_PREFIXES and b == "key" for a, b in pairwise(parts))


def is_secret_file(name: str) -> bool:
    """Whether a file or folder name is a secret's: its last word is one (``_ends_secret``: ``token``,
    ``.git-credentials``, ``private.key``), or that of its part before any '.' without the words holding a digit
    (``credentials.json``, ``token_v2.json.bak``, Google's ``client_secret_<id>.apps.googleusercontent.com.json``);
    and, but for source code and a model's weights or arrays, any word of it is (``hf_token_backup``,
    ``token_old``). Why: code that only holds such a word is about a secret (``password_reset.py``,
    ``passwordReset.py``, ``secret_santa.py`` were refused as mounts in either spelling), and so are tensors
    (``token_embeddings.safetensors``, ``image_token_ids.npy`` refused a model's folder), while a copy of a token
    renamed by hand still holds one. A tool's credential file or
    folder is one whatever its words (``_SECRET_FILES``: .netrc, id_rsa, .env.local, secrets.yaml, kubeconfig,
    stored_tokens, .ssh; a key's ``.pem``): each was mounted (secrets59); a public key (id_rsa.pub) is not, nor a
    template (``TEMPLATE_SUFFIXES``: .env.example usually holds placeholders; its reader checks what it holds), nor a
    package's metadata folder (keyring's SecretStorage-3.3.3.dist-info or Debian's .egg-info refused a venv)."""
    if os.path.splitext(name)[1].lower() in TEMPLATE_SUFFIXES + _PACKAGE_METADATA:
        return False
    stem = [word for word in _words(name.lstrip(".").split(".")[0]) if not any(c.isdigit() for c in word)]
    if _ends_secret(name) or _ends_secret("_".join(stem)):
        return True
    suffix, lowered = os.path.splitext(name)[1].lower(), name.lower()
    first = lowered[:1] + lowered[1:].split(".")[0]   # .env.local: .env; secrets.yaml: secrets
    return suffix not in CODE_SUFFIXES and (is_secret_field(name) and suffix not in _MODEL_DATA_SUFFIXES
                                             or suffix in _SECRET_SUFFIXES
                                             or first in _SECRET_FILES and suffix != ".pub")


CODE_SUFFIXES = frozenset({".py", ".pyc", ".pyi", ".ipynb", ".sh", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".c",
                           ".cc", ".cpp", ".h", ".hpp", ".cu", ".rs", ".go", ".java", ".rb", ".lua", ".jl"})
_MODEL_DATA_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".npy", ".npz", ".onnx", ".gguf",
                                  ".h5", ".msgpack", ".tflite"})
# Names (before a first '.' but a leading one) that tools keep logins, keys and tokens in: netrc and the package
# managers' (pip, npm), Postgres', Docker's old one, htpasswd, boto's and s3cmd's, dotenv's and direnv's, SSH private
# keys, a kubeconfig, huggingface_hub's saved tokens, a secrets file or folder, and the folders of SSH, AWS, Docker,
# kubectl, GnuPG and the Azure CLI (a folder holding one is refused). Key and keystore files go by their suffix.
_SECRET_FILES = frozenset({".netrc", "_netrc", ".pgpass", ".npmrc", ".pypirc", ".dockercfg", ".htpasswd", ".boto",
                           ".s3cfg", ".env", ".envrc", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk",
                           "id_ed25519_sk", "kubeconfig", "stored_tokens", "secrets", ".ssh", ".aws", ".docker",
                           ".kube", ".gnupg", ".azure"})
# a secret file's template (.env.example), named for one but written to be shared, its values placeholders
TEMPLATE_SUFFIXES = (".example", ".sample", ".template")
_PACKAGE_METADATA = (".dist-info", ".egg-info")
_SECRET_SUFFIXES = frozenset({".pem", ".key", ".p12", ".pfx", ".ppk", ".jks", ".keystore", ".env"})


def _words(name: str) -> list[str]:
    """``name``'s words, lower-cased, as the secret-name checks of fields and flags read it; a camelCase name's too
    (accessToken, clientSecret: a JSON field of either kept its value, as free text's ``_NAMED_VALUE`` reads them),
    after an acronym or a digit too (HFToken, OpenAIApiKey, S3SecretKey kept theirs)."""
    return [p for p in _WORD_BREAK.split(_CAMEL_BREAK.sub("_", name).lower()) if p]


_WORD_BREAK = re.compile(r"[^a-z0-9]+")
_CAMEL_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def scrub(obj: Any) -> Any:
    """A copy of a JSON-like object with every string redacted and secret-named fields blanked.

    A field named like ``hf_token`` / ``api_key`` / ``password`` loses its string value even when
    the value is not a known token: config dicts are the usual way a secret leaks into a report.
    """
    return _scrubbed(obj, _secret_values())


def _may_name_a_secret(lowered: str) -> bool:
    """Whether a lowered JSON text could hold a secret-named key (``is_secret_field``): one of its parts, or
    ``key``, appears in it."""
    return any(needle in lowered for needle in _SECRET_FIELD_NEEDLES)


class _SecretField(Exception):
    """A secret-named key met while the JSON fast path decodes an object."""


def _plain_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if any(is_secret_field(key) for key, _ in pairs):
        raise _SecretField
    return dict(pairs)


def _scrubbed(obj: Any, secrets: Sequence[str]) -> Any:
    """``_scrub``, by way of the object's JSON text when nothing in it could be a secret: no secret value (as
    written or JSON-escaped), no token shape (``_may_match``), no secret-named key. A view's 11,222 sample pages
    then cost one ``json`` round trip each, not a walk of every string in Python; anything else takes the walk."""
    try:
        text = json.dumps(obj, ensure_ascii=False)
    except (TypeError, ValueError):
        return _scrub(obj, secrets)
    if _may_match(text) or any(v in text or json.dumps(v, ensure_ascii=False)[1:-1] in text for v in secrets):
        return _scrub(obj, secrets)
    if not _may_name_a_secret(text.lower()):
        # no key can be secret-named (each part of a name is a run of [a-z0-9], never escaped in the text): the
        # plain C decoder, not a Python hook per object (257,314 objects in a view's 11,222 sample pages)
        return json.loads(text)
    try:
        return json.loads(text, object_pairs_hook=_plain_object)
    except _SecretField:
        return _scrub(obj, secrets)


def _scrub(obj: Any, secrets: Sequence[str]) -> Any:
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, str):
        return _redact(obj, secrets)
    if isinstance(obj, (dict, Mapping)):
        out = {}
        for key, value in obj.items():
            name = _redact(str(key), secrets)
            if (isinstance(value, str) and value and is_secret_field(str(key))
                    and not _WHOLE_PLACEHOLDER.fullmatch(value) and not _code_name(str(key)[-5:], value)):
                out[name] = REDACTED
            else:
                out[name] = _scrub(value, secrets)
        return out
    if isinstance(obj, (list, tuple)):
        return [_scrub(v, secrets) for v in obj]
    return obj


def _git(*args: str) -> str | None:
    if shutil.which("git") is None:
        return None
    try:
        proc = processes.run(["git", "-C", str(PACKAGE_DIR), *args], timeout_s=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """Commit and dirty flag of the checkout holding the pinbench package; None outside git.

    A repository without commits yet, or an exported recipe installed from a wheel, gives None.
    """
    head = _git("rev-parse", "--verify", "--quiet", "HEAD")
    commit = head.strip() if head else None
    if commit is None or not _HEX40.fullmatch(commit):
        return {"commit": None, "dirty": None}
    status = _git("status", "--porcelain")
    return {"commit": commit, "dirty": None if status is None else bool(status.strip())}


def container_state() -> dict[str, Any]:
    """Whether we run in a container and, when the docker runtime set them, the image digest and the base
    image it was built on (``base_image``: the base used, its digest, the pinned one and whether it differs
    from it, e.g. a lab's mirror swapped in with ``pinbench build --base-image``; ``others``: builder stages'
    bases, likewise)."""
    digest = os.environ.get(IMAGE_DIGEST_ENV) or None
    in_container = Path("/.dockerenv").exists() or os.environ.get("container") is not None
    state: dict[str, Any] = {"in_container": in_container or digest is not None, "image_digest": digest}
    raw = os.environ.get(BASE_IMAGE_ENV)
    baked = baked_base_image(os.environ)
    if raw:
        state["base_image"] = _base_image(raw)
    elif baked is not None:   # a plain `docker run` of the image: what its build recorded in its ENV
        state["base_image"] = baked
    return state


def base_image_record(*, used: str, pinned: str, digest: str | None,
                      others: Mapping[str, Mapping[str, str | None]] | None = None) -> dict[str, Any]:
    """Which base an image was built on (``digest``: what it resolved to, None when unknown), the pinned one, and
    whether it differs: false only when every base's digest is known and is its pinned digest. ``others``
    ({ARG: {image, digest, pinned}}) are builder stages' bases, which shape what the image carries too."""

    def differs(image_digest: str | None, pinned_ref: str) -> bool:
        pinned_digest = pinned_ref.rpartition("@")[2] if "@" in pinned_ref else None
        return pinned_digest is None or image_digest is None or image_digest.rpartition("@")[2] != pinned_digest

    record: dict[str, Any] = {"image": used, "digest": digest, "pinned": pinned, "overridden": used != pinned,
                              "differs_from_pinned": differs(digest, pinned)}
    if others:
        record["others"] = {arg: {**base, "differs_from_pinned": differs(base["digest"], str(base["pinned"]))}
                            for arg, base in sorted(others.items())}
        record["differs_from_pinned"] |= any(base["differs_from_pinned"] for base in record["others"].values())
    return record


def baked_base_image(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The base-image record from the image's own ENV (PINBENCH_IMAGE_<ARG> and ..._PINNED), or None outside an
    image that sets them. The digest is the one the reference names (``name@sha256:...``); a base named by tag
    alone has none here, so it counts as differing from the pinned one (only the engine can resolve a tag)."""
    pinned = {name[len(BAKED_BASE_PREFIX):-len(BAKED_PINNED_SUFFIX)]: value for name, value in environ.items()
              if name.startswith(BAKED_BASE_PREFIX) and name.endswith(BAKED_PINNED_SUFFIX) and value}
    if FINAL_BASE_ARG not in pinned:
        return None

    def base(arg: str) -> tuple[str, str | None]:
        used = environ.get(BAKED_BASE_PREFIX + arg) or pinned[arg]
        return used, (used.rpartition("@")[2] if "@" in used else None)

    used, digest = base(FINAL_BASE_ARG)
    others = {arg: {"image": base(arg)[0], "digest": base(arg)[1], "pinned": ref}
              for arg, ref in pinned.items() if arg != FINAL_BASE_ARG}
    return base_image_record(used=used, pinned=pinned[FINAL_BASE_ARG], digest=digest, others=others or None)


def _base_image(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not set(_BASE_IMAGE_KEYS) <= set(value) <= {*_BASE_IMAGE_KEYS, "others"}:
        # Recorded as found, flagged: a base we cannot read is never reported as the pinned one.
        return {"image": raw[:500], "digest": None, "pinned": None, "overridden": None, "differs_from_pinned": True}
    return {key: value[key] for key in (*_BASE_IMAGE_KEYS, "others") if key in value}


def _dist_version(*names: str, found: Sequence[tuple[str, str]] | None = None) -> str | None:
    """The installed version of the first of ``names`` that is installed (names compared as pip normalises them),
    among ``found`` (``_distributions()``: scanned here when not given)."""
    versions: dict[str, str] = {}
    for name, version in _distributions() if found is None else found:
        versions.setdefault(name, version)   # the first on sys.path: the one an import finds
    return next((versions[key] for key in map(_normalised, names) if key in versions), None)


def installed_versions(names: Iterable[str], installed: Iterable[str] | None = None) -> tuple[str, ...]:
    """Sorted ``name==version`` of each of ``names`` as installed, ``name==absent`` when it is not (one scan of
    ``sys.path``, about 1 ms: every run asks, for its reuse key, ``pinbench.core.config.Implementation``); as
    ``installed`` has them when given (``name==version`` lines, a scorecard's ``packages.distributions``)."""
    found = _distributions() if installed is None else [
        (_normalised(name), version) for name, _, version in (line.partition("==") for line in installed)]
    return tuple(sorted(f"{name}=={_dist_version(name, found=found) or 'absent'}" for name in set(names)))


_DIST_INFO = re.compile(r"(?P<name>[^-]+)-(?P<version>\d[^-]*)\.dist-info")   # a version begins with a digit


def installed_distributions(found: Sequence[tuple[str, str]] | None = None) -> list[str]:
    """Sorted ``name==version`` of every installed distribution (a pip-freeze equivalent), of ``found`` when given."""
    return sorted({f"{name}=={version}" for name, version in (_distributions() if found is None else found)})


def _distributions() -> list[tuple[str, str]]:
    """(normalised name, version) of every distribution on ``sys.path``, in path order, as
    ``importlib.metadata.distributions()`` finds them (a test holds the two equal on this environment).

    Why not importlib.metadata: importing it (email, zipfile) added 3 MB to every run's peak memory and 10 ms; and a
    wheel's ``<name>-<version>.dist-info`` folder name carries both (the wheel format says so), read without parsing
    its METADATA (244 parses cost 0.3 s of every scorecard). Other layouts (egg-info) are read from their headers."""
    found = []
    for entry in sys.path:
        try:
            items = sorted(os.scandir(entry or "."), key=lambda item: item.name)
        except OSError:   # absent, a file (a zip on the path: no distributions of ours), unreadable
            continue
        for item in items:
            if not item.name.lower().endswith((".dist-info", ".egg-info")):
                continue
            folder = _DIST_INFO.fullmatch(item.name) if item.is_dir() else None
            name, version = (folder["name"], folder["version"]) if folder else _headers(Path(item.path))
            if name and version:
                found.append((_normalised(name), version))
    return found


def _headers(path: Path) -> tuple[str | None, str | None]:
    """Name and Version from a distribution's metadata headers (METADATA, PKG-INFO, or an egg-info file itself)."""
    candidates = [path / "METADATA", path / "PKG-INFO"] if path.is_dir() else [path]
    headers: dict[str, str] = {}
    for file in candidates:
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if not line.strip():
                break   # the headers end at the first blank line
            key, sep, value = line.partition(":")
            if sep and key in ("Name", "Version"):
                headers.setdefault(key, value.strip())
        break
    return headers.get("Name"), headers.get("Version")


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _torch_state(found: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """torch's version, and where this run imported torch for its own work its CUDA / cuDNN versions and GPUs.

    Why not import it here: a run that loads no model (a score-only CameraBench run) would spend 0.7 GB and
    seconds on torch only to describe it; its installed version comes from the package metadata instead, and
    ``torch_runtime`` says the runtime state was not read.
    """
    state: dict[str, Any] = {"torch": _dist_version("torch", found=found), "cuda": None, "cudnn": None, "gpus": [],
                             "torch_runtime": "not imported by this run"}
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "cuda"):  # not imported, or a broken import half-way
        return state
    try:
        state["torch"] = torch.__version__
        state["cuda"] = torch.version.cuda
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        state["cudnn"] = str(cudnn) if cudnn is not None else None
        if torch.cuda.is_available():
            state["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # a broken torch install must not stop a recipe from reporting
        return state
    state["torch_runtime"] = "imported by this run"
    return state


def _driver_version() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = processes.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout_s=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.strip().splitlines() if proc.returncode == 0 else []
    return lines[0].strip() if lines else None


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types from dataclasses, paths, sets, numpy scalars; NaN/inf become None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(to_jsonable(v) for v in obj)
    if isinstance(obj, Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, PurePath):
        return str(obj)
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return to_jsonable(obj.tolist())
    return str(obj)


def input_states(pins: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Verification state of every pinned input: "verified" only when its content is pinned.

    upstream code: a 40-hex commit. Hugging Face: a 40-hex revision and no null file sha256.
    URLs: a 64-hex sha256; a null one (not resolved yet) is "unverified", never passed silently.
    A value filled from this machine's resolved pins (``pins["resolved_at_run_time"]``, see pinbench.ops.machine_pins)
    makes its input "resolved": pinned since, but not by the recipe, so not the reference's input.
    """
    states: dict[str, dict[str, Any]] = {}
    resolved = pins.get("resolved_at_run_time") or {}
    for name, pin in (pins.get("upstream") or {}).items():
        commit = pin.get("commit")
        ok = isinstance(commit, str) and bool(_HEX40.fullmatch(commit))
        states[f"upstream/{name}"] = {
            "kind": "git", "repo": pin.get("repo") or pin.get("url"), "commit": commit,
            "state": "verified" if ok else "unverified",
            **({} if ok else {"reason": "commit is not a 40-hex SHA"}),
        }
    for name, pin in (pins.get("huggingface") or {}).items():
        revision = pin.get("revision")
        hashes = pin.get("sha256") or {}
        unhashed = sorted(path for path, value in hashes.items() if not value)
        reason = None
        if not (isinstance(revision, str) and _HEX40.fullmatch(revision)):
            reason = "revision is not a 40-hex commit"
        elif unhashed:
            reason = f"no sha256 for {', '.join(unhashed)}"
        states[f"huggingface/{name}"] = {
            "kind": "hf", "repo_id": pin.get("repo_id"), "repo_type": pin.get("repo_type", "model"),
            "revision": revision, "state": "unverified" if reason else "verified",
            **({"reason": reason} if reason else {}),
        }
    for name, pin in (pins.get("urls") or {}).items():
        sha = pin.get("sha256")
        ok = isinstance(sha, str) and bool(_HEX64.fullmatch(sha))
        states[f"urls/{name}"] = {
            "kind": "url", "url": pin.get("url"), "sha256": sha,
            "state": "verified" if ok else "unverified",
            **({} if ok else {"reason": "no sha256 (`pinbench fetch` on a connected machine records one)"}),
        }
    for label, entry in resolved.items():
        section, name = label.split(".")[:2]
        state = states.get(f"{section}/{name}")
        if state is not None and state["state"] == "verified":
            state["state"] = "resolved"
            state.setdefault("resolved_at_run_time", {})[label] = dict(entry)
            state["reason"] = f"{entry.get('note')}: {', '.join(sorted(state['resolved_at_run_time']))}"
    return states


@announced(lambda **kw: "provenance: git state, package versions (torch is imported for its CUDA facts), pins")
def collect_provenance(*, pins: Mapping[str, Any], seeds: Mapping[str, Any] | None = None,
                       extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The provenance block of a scorecard. No hostname, no environment values, secrets scrubbed."""
    pins_dict = to_jsonable(pins)
    found = _distributions()   # sys.path scanned once for every version below
    dists = installed_distributions(found)
    torch_state = _torch_state(found)
    provenance = {
        "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pinbench": {"version": __version__, **git_state()},  # also right in an exported copy
        "container": container_state(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {
            "torch": torch_state["torch"],
            "torch_runtime": torch_state["torch_runtime"],
            "cuda": torch_state["cuda"],
            "cudnn": torch_state["cudnn"],
            "numpy": _dist_version("numpy", found=found),
            "opencv": _dist_version("opencv-python-headless", "opencv-python", "opencv-contrib-python", found=found),
            "distributions_sha256": hashlib.sha256("\n".join(dists).encode()).hexdigest(),
            "n_distributions": len(dists),
            "distributions": dists,   # which ones differ, when two runs' digests do (``differences``)
        },
        "gpus": torch_state["gpus"],
        "driver": _driver_version(),
        "pins": pins_dict,
        "inputs": input_states(pins_dict),
        "seeds": to_jsonable(seeds or {}),
        "extra": to_jsonable(extra or {}),
    }
    return scrub(provenance)


# What ``differences`` reads first: what a run ran (code, inputs, seeds, options), then what it ran on.
_ORDER = ("pinbench", "pins", "inputs", "seeds", "extra", "packages", "python", "container", "gpus", "driver",
          "platform")
_PINNED = ("upstream", "huggingface", "urls")   # the pins sections whose every pin has an ``inputs`` entry
_NOT_COMPARED = {("timestamp",), ("runs",), ("extra", "generation")}  # a time, a reference's runs, generation's
SHOWN = 12


def differences(a: Mapping[str, Any], b: Mapping[str, Any], labels: tuple[str, str]) -> list[str]:
    """One line per way two runs' provenance differs (``labels`` names each): where a score difference between them
    may come from. Installed distributions are compared by name when both record them (by their digest when one is
    of a version that records none); a list or another value as a whole. At most ``SHOWN`` lines, then how many
    more. A hand-edited reference's provenance may hold a token, a secret-named field or an integer key: both are
    scrubbed (string keys) before a value is cut to its line, so no part of a secret is shown."""
    lines: list[str] = []
    clean = scrubber()
    a, b = _used_once(*_one_way(clean(a), clean(b)))
    keys = [*(k for k in _ORDER if k in a or k in b), *sorted((set(a) | set(b)) - set(_ORDER))]
    for key in keys:
        _leaf_differences((key,), a.get(key), b.get(key), labels, lines)
    return lines if len(lines) <= SHOWN else [*lines[:SHOWN], f"... and {len(lines) - SHOWN} more"]


# what a scorecard's config (``RunConfig.to_json``) holds that changes its numbers, named as the command line names it;
# where it ran from (out_dir), its runtime, GPUs, shard and mode (of --fixture and --limit) do not
_CONFIG_FLAGS = (("checkpoint", "checkpoint"), ("fixture", "--fixture"), ("limit", "--limit"),
                 ("generator", "--generator"))
_CONFIG_GROUPS = (("options", "-o "), ("generator_options", "-g "))


def config_differences(a: Mapping[str, Any], b: Mapping[str, Any], labels: tuple[str, str]) -> list[str]:
    """One line per way two scorecards' ``config`` differs in what changes their numbers: the checkpoint,
    ``--fixture``, ``--limit``, ``--generator``, each ``-o`` and ``-g`` option, the recipe's version and code
    (``Implementation``). ``differences`` compares provenance alone: a rerun into one ``--out`` with another
    ``--limit`` kept the earlier scorecard aside without a line on why its numbers differ. Scrubbed as there."""
    clean = scrubber()
    a, b = (clean(side) if isinstance(side, Mapping) else {} for side in (a, b))

    def line(name: str, x: Any, y: Any) -> str:
        shown = _shown_pair(x, y)
        return f"{printable(name)}: {labels[0]} {shown[0]}, {labels[1]} {shown[1]}"
    lines = [line(flag, a.get(key), b.get(key)) for key, flag in _CONFIG_FLAGS if a.get(key) != b.get(key)]
    for key, flag in _CONFIG_GROUPS:
        x, y = (side.get(key) if isinstance(side.get(key), Mapping) else {} for side in (a, b))
        lines += [line(flag + name, x.get(name), y.get(name)) for name in [*x, *(k for k in y if k not in x)]
                  if x.get(name) != y.get(name)]
    x, y = (side.get("implementation") if isinstance(side.get("implementation"), Mapping) else {} for side in (a, b))
    lines += [line(name, x.get(field), y.get(field)) for field, name in (("recipe_version", "recipe version"),
                                                                         ("code", "recipe code"))
              if x.get(field) != y.get(field)]
    return lines


def results_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a scorecard's ``config`` that ``config_differences`` reads, scrubbed: what a recorded reference keeps
    (``source.config``), without where the run was written (``out_dir``) or how it ran."""
    keys = [*(key for key, _ in _CONFIG_FLAGS), *(key for key, _ in _CONFIG_GROUPS), "implementation"]
    return scrub({key: config[key] for key in keys if key in config})


def _one_way(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """Both with what they both know stated one way: installed distributions as lists when both hold one, else as
    digests; torch as its installed release alone, without CUDA, cuDNN or GPUs, when one run did not import it
    (``_torch_state``: the package's ``2.15.0`` beside the runtime's ``2.15.0+cu132``, and nothing read, are no
    difference of the install)."""
    packages = [p.get("packages") if isinstance(p.get("packages"), Mapping) else None for p in (a, b)]
    lists = all(isinstance(p, Mapping) and isinstance(p.get("distributions"), list) for p in packages)
    drop = {"distributions_sha256", "n_distributions"} if lists else {"distributions"}
    unread = any(isinstance(p, Mapping) and p.get("torch_runtime") == "not imported by this run" for p in packages)
    if unread:
        drop |= {"torch_runtime", "cuda", "cudnn"}

    def stated(provenance: Mapping[str, Any], held: Mapping[str, Any] | None) -> Mapping[str, Any]:
        if held is None:
            return provenance
        kept = {k: v for k, v in held.items() if k not in drop}
        if unread and isinstance(kept.get("torch"), str):
            kept["torch"] = kept["torch"].partition("+")[0]
        return {**{k: v for k, v in provenance.items() if not (unread and k == "gpus")}, "packages": kept}
    return stated(a, packages[0]), stated(b, packages[1])


def _used_once(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """Both without the pins that one run read and the other did not (``pins_for_provenance``'s ``used``): their
    ``inputs`` line says so once, where the pin's every field would read as "none"."""
    inputs = [p.get("inputs") if isinstance(p.get("inputs"), Mapping) else {} for p in (a, b)]
    once = set(inputs[0]) ^ set(inputs[1])
    if not once:
        return a, b

    def without(provenance: Mapping[str, Any]) -> Mapping[str, Any]:
        pins = provenance.get("pins")
        if not isinstance(pins, Mapping):
            return provenance
        kept = {key: ({name: pin for name, pin in value.items() if f"{key}/{name}" not in once}
                      if key in _PINNED and isinstance(value, Mapping) else value) for key, value in pins.items()}
        return {**provenance, "pins": kept}
    return without(a), without(b)


def _leaf_differences(path: tuple[str, ...], a: Any, b: Any, labels: tuple[str, str], lines: list[str]) -> None:
    if path in _NOT_COMPARED or a == b:
        return
    if len(path) == 2 and path[0] == "inputs" and (a is None) != (b is None):
        lines.append(f"{printable(path[0])}.{printable(path[1])}: {labels[0]} {_read(a)}, {labels[1]} {_read(b)}")
    elif path == ("packages", "distributions") and isinstance(a, list) and isinstance(b, list):
        lines.extend(_distribution_differences(a, b, labels))
    elif path == ("seeds",) and isinstance(a, Mapping) and isinstance(b, Mapping):
        _seed_differences(a, b, labels, lines)
    elif isinstance(a, Mapping | None) and isinstance(b, Mapping | None):   # one side may lack the whole block
        a, b = a or {}, b or {}
        keys = [*a, *(k for k in b if k not in a)]
        changed = [str(k) for k in keys if a.get(k) != b.get(k)]
        if len(changed) > 3 and all(isinstance(v, str) and _DIGEST.fullmatch(v) for v in [*a.values(), *b.values()]):
            # a map of file digests (CameraBench's 24 score files): one line, which left SHOWN lines for the rest
            lines.append(f"{'.'.join(map(printable, path))}: {len(changed)} of {len(keys)} digests differ "
                         f"({', '.join(map(printable, changed[:2]))} and {len(changed) - 2} more)")
            return
        for key in keys:
            _leaf_differences((*path, str(key)), a.get(key), b.get(key), labels, lines)
    else:
        shown = _shown_pair(a, b)
        lines.append(f"{'.'.join(map(printable, path))}: {labels[0]} {shown[0]}, {labels[1]} {shown[1]}")


def _seed_differences(a: Mapping[Any, Any], b: Mapping[Any, Any], labels: tuple[str, str], lines: list[str]) -> None:
    """Seeds by key; those of keys that one run alone holds (a run of other samples: a --limit run beside a full one)
    in one line a side once there are several, where they took a line a sample and crowded out what did differ."""
    alone = [[key for key in side if key not in other] for side, other in ((a, b), (b, a))]
    for key in [*a, *(k for k in b if k not in a)]:
        if key in a and key in b or len(alone[key not in a]) == 1:
            _leaf_differences(("seeds", str(key)), a.get(key), b.get(key), labels, lines)
    for label, keys in zip(labels, alone, strict=True):
        if len(keys) > 1:
            shown = ", ".join(printable(str(key)) for key in keys[:3]) + (", ..." if len(keys) > 3 else "")
            lines.append(f"seeds: {len(keys)} in {label} only ({shown})")


def _read(state: Any) -> str:
    if state is None:
        return "did not read it"
    return f"read it ({_shown(state.get('state') if isinstance(state, Mapping) else state)})"


def _distribution_differences(a: list[Any], b: list[Any], labels: tuple[str, str]) -> list[str]:
    """``name==version`` lists as the distributions whose version differs or that one side lacks."""
    versions = [dict(str(item).partition("==")[::2] for item in side) for side in (a, b)]
    return [f"distribution {name}: {labels[0]} {versions[0].get(name, 'not installed')}, "
            f"{labels[1]} {versions[1].get(name, 'not installed')}"
            for name in sorted(versions[0].keys() | versions[1].keys())
            if versions[0].get(name) != versions[1].get(name)]


def printable(text: str) -> str:
    """``text``, or as JSON escapes it when it holds what no line should (a line break, a terminal escape)."""
    return text if text.isprintable() else json.dumps(text)[1:-1]


def _shown_pair(a: Any, b: Any) -> tuple[str, str]:
    """Two differing values for one line, never two alike: two long texts alike past the cut (``-o reencode_crf``
    45 against 10 in dynamic-degree's clip_source) are shown from a little before their first difference, where both
    had read ``frames decoded with pyav, per-clip MP4 re-encode (libx264...``; two digests alike in their first 12
    characters (a pinned commit edited in its last one) whole."""
    shown = _shown(a), _shown(b)
    if shown[0] != shown[1] or not (isinstance(a, str) and isinstance(b, str)):
        return shown
    x, y = printable(a), printable(b)
    if _DIGEST.fullmatch(x) and _DIGEST.fullmatch(y):
        return x, y
    first = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
    return _shown("..." + x[first - 35:]), _shown("..." + y[first - 35:])


_DIGEST = re.compile(r"(sha256:)?[0-9a-f]{40,64}")


def _shown(value: Any) -> str:
    """A value short enough for one line: a digest cut to 12 hex characters, anything long to 60."""
    if value is None:
        return "none"
    text = printable(value) if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)  # a date
    if _DIGEST.fullmatch(text):
        return text[:text.index(":") + 13] if text.startswith("sha256:") else text[:12]
    return text if len(text) <= 60 else text[:57] + "..."   # files.clipped's cut: files imports this module
