"""A failed network, said in one line: what could not be fetched, that the network failed, and the way on.

Why: a machine without network used to end a run in a raw ``URLError`` or ``LocalEntryNotFoundError``, while
the same run with ``--offline`` said what to fetch. Every download (``pinbench.ops.downloads``,
``pinbench.ops.machine_pins``) turns a failure of the network itself (no route, no name resolution, refused,
timed out, a proxy that does not answer) into the same sentence; an HTTP answer (401, 404) is not a network
failure and keeps its own message.
The ways on come from the recipe's declaration: ``pinbench fetch`` on a connected machine, the option that
takes a local copy of that input (``instead_of`` in recipe.yaml), and a run that downloads nothing
(``no_download``). An input missing from the cache offline names the same ways (``pinbench.ops.downloads``).
The fetch they name is this run's (``fetching_as``): ``pinbench fetch mind`` alone would download what
``-o metrics=lcm`` never reads, and a gated repo with it.
"""

from __future__ import annotations

import shlex
import socket
import urllib.error
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pinbench.core.config import fetch_context, fetching_with

if TYPE_CHECKING:
    from pinbench.core.config import RunConfig
    from pinbench.core.recipe import Recipe

PROBE_TIMEOUT_S = 3.0
NEXT = "; next: "  # what a message says before the ways on (a line that needs none cuts it there)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_http_answer(exc: BaseException) -> bool:
    """The server answered (an HTTP status): not a network failure."""
    if isinstance(exc, urllib.error.HTTPError):
        return True
    response = getattr(exc, "response", None)
    return response is not None and getattr(response, "status_code", None) is not None


def network_reason(exc: BaseException) -> str | None:
    """Why the network failed, in a few words, when ``exc`` (or what caused it) is a failure to reach the server;
    None when it is anything else (the server answered with an error, a bad file, a full disk)."""
    links = list(_chain(exc))
    if any(_is_http_answer(link) for link in links):
        return None
    for link in reversed(links):  # the root cause says it best: "Name or service not known", "Connection refused"
        if isinstance(link, socket.gaierror):
            return f"name resolution failed: {link.strerror or link}"
        if isinstance(link, (TimeoutError, socket.timeout)):
            return "timed out"
        if isinstance(link, ConnectionError):
            return link.strerror or type(link).__name__
        if isinstance(link, urllib.error.URLError) and isinstance(link.reason, str):
            return link.reason
    names = {type(link).__name__ for link in links}
    # huggingface_hub and requests wrap the socket error; their own classes name a connection that never happened
    if names & {"ConnectionError", "ConnectTimeout", "ProxyError", "NewConnectionError", "MaxRetryError",
                "ConnectError", "ConnectTimeoutError", "NameResolutionError"}:
        return "could not connect"
    if "LocalEntryNotFoundError" in names and "check your internet connection" in str(exc):
        return "the Hugging Face Hub could not be reached"
    return None


def fetch_args(recipe: Recipe, cfg: RunConfig) -> str:
    """The arguments that make ``pinbench fetch`` download what this run reads: a checkpoint the recipe names,
    ``--limit`` and every option set on the command line or in the environment, except paths (files of this
    machine, which a connected machine has not; a local copy is a way on of its own)."""
    args = [f"-c {shlex.quote(cfg.checkpoint)}"] if cfg.checkpoint in recipe.checkpoints else []
    if cfg.limit is not None:
        args.append(f"--limit {cfg.limit}")
    args += [f"-o {shlex.quote(f'{name}={spec.format(getattr(cfg.options, name))}')}"
             for name, spec in recipe.options.items()
             if cfg.option_sources.get(name) in ("cli", "env") and spec.type != "path"]
    return " ".join(args)


@contextmanager
def fetching_as(recipe: Recipe, cfg: RunConfig) -> Iterator[None]:
    """Within it, every way on names the fetch of this run (``fetch_command``)."""
    with fetching_with((recipe.name, fetch_args(recipe, cfg))):
        yield


def fetch_command(recipe_name: str) -> str:
    """``pinbench fetch <recipe>`` with the arguments of the run under way (``fetching_as``), if of this recipe."""
    name, args = fetch_context()
    return f"pinbench fetch {recipe_name}" + (f" {args}" if args and name == recipe_name else "")


def ways_on(recipe_name: str, pin_keys: str | Iterable[str] | None) -> str:
    """Every way forward when the pins ``pin_keys`` (``urls/raft_things``, ``huggingface/clip``, ...) of
    ``recipe_name`` cannot be read here, online or offline: fetch them on a connected machine, give a local copy
    of each (every option whose ``instead_of`` names one of them), or run without download (``no_download``)."""
    from pinbench.core.config import RecipeError
    from pinbench.core.recipe import get_recipe

    keys = {pin_keys} if isinstance(pin_keys, str) else set(pin_keys or ())
    steps = [f"run `{fetch_command(recipe_name)}` on a connected machine and use its cache here "
             "(PINBENCH_CACHE; then run with --offline)"]
    try:
        recipe = get_recipe(recipe_name)
    except RecipeError:
        return steps[0]
    steps += [f"give a local copy with -o {name}=PATH" for name, spec in recipe.options.items()
              if keys & set(spec.instead_of)]
    if recipe.no_download is not None:
        steps.append(f"run without download: {recipe.no_download.options} ({recipe.no_download.what})")
    return "; or ".join(steps)


def network_failure(what: str, reason: str, recipe_name: str, pin_key: str | Iterable[str] | None) -> str:
    """The one line: ``<what>: could not be fetched, the network failed (<reason>); next: <ways on>``."""
    return f"{what}: could not be fetched, the network failed ({reason}){NEXT}{ways_on(recipe_name, pin_key)}"


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Whether ``url``'s server answers within ``timeout_s`` (any HTTP status counts as an answer): None when it
    does, else the reason it does not. One HEAD request, no body read."""
    import urllib.request  # http.client, ssl and email: 12 ms that a run from local files never needs

    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None
    except (OSError, ValueError) as exc:
        return network_reason(exc) or f"{type(exc).__name__}: {exc}"
