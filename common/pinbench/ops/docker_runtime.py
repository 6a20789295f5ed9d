"""``--runtime docker``: run a recipe's stages inside its pinned images.

Each stage runs ``pinbench`` inside the image with the same flags the user gave, with the cache and run
directory mounted. What the host sets reaches the container through one path each: recipe options (from
``-o`` or their environment twins) become ``-o`` flags, with path options mounted read-only; the other
variables the recipe declares (recipe.yaml ``env:``) are forwarded as they are, except the ones the image
sets itself (its own layout) and secrets; CUDA_VISIBLE_DEVICES picks the host GPUs the container gets.
Only stages that fetch, and generation in a ``--generator-image`` (``generation_stage``), get the network and
``HF_TOKEN``, and none does under ``--offline`` / ``PINBENCH_OFFLINE=1``. The host's sample cache setting holds in
every stage (``sample_cache_setting``). Containers never run as root: as the calling user, or, for a root caller, as the
image's own non-root user, with the run and cache directories handed to that user.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

from pinbench.core.config import CHECKPOINT_NOTED_ENV, RecipeError, RunConfig, gpu_devices
from pinbench.core.deploy import ContainerStage
from pinbench.core.files import FileError, cache_root, open_regular, regular_sha256, shown_name
from pinbench.core.options import OptionSpec
from pinbench.core.provenance import (
    CODE_SUFFIXES,
    TEMPLATE_SUFFIXES,
    holds_secret,
    is_secret_file,
    is_secret_name,
    redact,
)
from pinbench.core.recipe import Recipe
from pinbench.core.run import refuses_name
from pinbench.core.rundir import TOKEN_ENV, claim_run_dir
from pinbench.core.sample_cache import ENV as SAMPLE_CACHE_ENV
from pinbench.core.sample_cache import SIZE_ENV as SAMPLE_CACHE_SIZE_ENV
from pinbench.core.sample_cache import cache_dir as sample_cache_dir
from pinbench.ops.docker_engine import (
    BASE_IMAGE_LABEL,
    ContainerError,
    ImageConfig,
    Log,
    base_image_label,
    build_image,
    docker_client,
    image_config,
    local_digest,
    print_line,
    run_in_container,
    running_in,
)
from pinbench.ops.export import export_recipe
from pinbench.ops.generation import IN_EVERY_IMAGE, command_argv, command_paths

CACHE_MOUNT = "/cache"
OUT_MOUNT = "/runs/out"
INPUTS_MOUNT = "/inputs"
SAMPLES_MOUNT = "/sample-cache"   # a sample cache the host keeps outside its cache root
# Host GPU selection: mapped to the container's devices (which it sees as 0..n-1), never forwarded as is.
GPU_SELECTION = "CUDA_VISIBLE_DEVICES"
_ARG_DEFAULT = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$", re.MULTILINE)
_FROM_ARG = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", re.MULTILINE | re.IGNORECASE)
FINAL_BASE = "BASE_IMAGE"
_RESULTS = (("scorecard", "scorecard.json"), ("diff", "diff.txt"), ("report", "report/index.html"))
# The host's system folders: the image has its own (a host /usr/bin/python3 mounted over the image's breaks it).
_SYSTEM_DIRS = tuple(Path(p) for p in ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/opt", "/proc",
                                       "/run", "/sbin", "/snap", "/sys", "/usr", "/var"))

# ------------------------------------------------------------------------------------------ build


def recipe_dockerfiles(recipe: Recipe, where: Path | None = None) -> list[str]:
    """The recipe's Dockerfile names (``Dockerfile``, ``Dockerfile.generate``, ...) in its folder, or in ``where``
    (an exported recipe, whose Dockerfiles sit at its top), sorted."""
    folder = recipe.dir if where is None else where
    return sorted(p.name for p in folder.glob("Dockerfile*") if p.is_file() and p.suffix != ".dockerignore")


def base_overrides(recipe: Recipe, given: list[str], where: Path | None = None) -> dict[str, dict[str, str]]:
    """``--base-image [DOCKERFILE[:ARG]=]IMAGE`` values as {Dockerfile name: {base ARG: image}}. ARG defaults to
    BASE_IMAGE (the image's own base; a builder stage's base has its own ARG); a bare IMAGE only when the recipe
    has one Dockerfile. RecipeError (one line) for an unknown Dockerfile or ARG, an empty image, a repeat."""
    dockerfiles = recipe_dockerfiles(recipe, where)
    overrides: dict[str, dict[str, str]] = {}
    for item in given:
        name, sep, image = item.partition("=")
        if not sep:
            if len(dockerfiles) != 1:
                raise RecipeError(f"--base-image {item}: {recipe.name} has {len(dockerfiles)} images; name one as "
                                  f"DOCKERFILE=IMAGE ({', '.join(dockerfiles)})")
            name, image = dockerfiles[0], item
        dockerfile, _, arg = name.partition(":")
        arg = arg or FINAL_BASE
        if dockerfile not in dockerfiles:
            raise RecipeError(f"--base-image {item}: {recipe.name} has no {dockerfile} ({', '.join(dockerfiles)})")
        bases = pinned_bases((recipe.dir if where is None else where) / dockerfile)
        if arg not in bases:
            raise RecipeError(f"--base-image {item}: {dockerfile} has no base ARG {arg} ({', '.join(bases)})")
        if not image.strip() or any(c.isspace() for c in image):
            raise RecipeError(f"--base-image {item}: expected an image reference after '='")
        if arg in overrides.get(dockerfile, {}):
            raise RecipeError(f"--base-image: {dockerfile}:{arg} is given twice")
        overrides.setdefault(dockerfile, {})[arg] = image
    return overrides


def pinned_bases(dockerfile: Path) -> dict[str, str]:
    """{ARG: pinned default} of every base the Dockerfile names through an ARG (``FROM ${ARG}``); BASE_IMAGE is
    the final image's (dockerlint checks that every image declares it)."""
    text = dockerfile.read_text(encoding="utf-8")
    defaults = dict(_ARG_DEFAULT.findall(text))
    bases = {arg: defaults[arg] for arg in _FROM_ARG.findall(text) if arg in defaults}
    if FINAL_BASE not in bases:
        raise RecipeError(f"{dockerfile}: no `ARG BASE_IMAGE=<image@sha256:...>` used by a FROM, so its base cannot "
                          "be recorded or overridden")
    return bases


def build_recipe_images(recipe: Recipe, build_dir: Path = Path("build/export"), *,
                        base_images: Mapping[str, Mapping[str, str]] | None = None, context: Path | None = None,
                        client: Any = None, log: Log = print_line) -> list[str]:
    """Export the recipe (its build context) and build every Dockerfile in it; return the tags.

    ``base_images`` maps a Dockerfile name to {base ARG: image} used instead of the pinned bases (an internal
    registry mirror, say). ``context``: an existing export to build from as it is (an exported recipe's
    ``make build``, whose installed package has no Dockerfiles).
    """
    if context is None:
        context = export_recipe(recipe, build_dir / recipe.name, force=True)
    dockerfiles = recipe_dockerfiles(recipe, context)
    if not dockerfiles:
        raise RecipeError(f"{context}: no Dockerfile for {recipe.name}; is it the recipe's export?")
    client = client or docker_client()
    return [build_from(context, dockerfile, recipe.stage_image(ContainerStage(name="build", dockerfile=dockerfile)),
                       bases=(base_images or {}).get(dockerfile), client=client, log=log)
            for dockerfile in dockerfiles]


def build_from(context: Path, dockerfile: str, tag: str, *, bases: Mapping[str, str] | None, client: Any,
               log: Log = print_line) -> str:
    """Build one image, on ``bases`` ({ARG: image}) instead of its pinned ones where given, labelled with the bases
    it was built on, the digests they resolved to here and the pinned ones; the runtime records that label
    in the scorecard, so a run on a swapped base says so. Returns the tag."""
    pinned = pinned_bases(context / dockerfile)
    used = {arg: (bases or {}).get(arg, ref) for arg, ref in pinned.items()}
    for arg, ref in used.items():
        if ref != pinned[arg]:
            log(f"{tag}: {arg} {ref} instead of the pinned {pinned[arg]} (recorded in its scorecards)")
    digests = {arg: _base_digest(ref, client) for arg, ref in used.items()}
    others = {arg: {"image": used[arg], "digest": digests[arg], "pinned": pinned[arg]}
              for arg in used if arg != FINAL_BASE}
    label = base_image_label(used=used[FINAL_BASE], pinned=pinned[FINAL_BASE], digest=digests[FINAL_BASE],
                             others=others)
    build_image(context, tag, dockerfile=dockerfile, buildargs={a: r for a, r in used.items() if r != pinned[a]},
                labels={BASE_IMAGE_LABEL: label}, client=client, log=log)
    return tag


def _base_digest(base: str, client: Any) -> str:
    """What the base resolves to: pulled first if it is not here (the build would pull it anyway)."""
    try:
        return local_digest(base, client)
    except ContainerError:
        try:
            client.images.pull(base)
        except Exception as exc:  # docker.errors.APIError and friends: one line, never a traceback
            raise ContainerError(f"base image {base}: not available here and the pull failed: "
                                 f"{' '.join(str(exc).split())}") from None
        return local_digest(base, client)


# --------------------------------------------------------------------------------------- forwarding


def user_options(recipe: Recipe, cfg: RunConfig) -> Iterator[tuple[str, OptionSpec, Any]]:
    """(name, spec, value) of every option the user set, on the command line or in the environment."""
    return ((name, recipe.options[name], value) for name, value in cfg.options.items()
            if value is not None and cfg.option_sources.get(name) in ("cli", "env"))


def _forwarded_options(recipe: Recipe, cfg: RunConfig) -> tuple[dict[str, str], dict[Path, str]]:
    """Every option not left at its default, as ``-o`` text for the container (values from the environment
    included, so nothing set on the host is lost), with path options mounted read-only under /inputs."""
    forwarded, mounts = {}, {}
    for name, spec, value in user_options(recipe, cfg):
        if spec.type == "path":
            target = f"{INPUTS_MOUNT}/{name}"
            mounts[Path(value).resolve()] = f"{target}:ro"
            forwarded[name] = target
        else:
            forwarded[name] = spec.format(value)
    return forwarded, mounts


def generator_files(cfg: RunConfig, *, cwd: Path | None = None, image_flag: str = "--generator-image"
                    ) -> tuple[RunConfig, dict[Path, str]]:
    """``cfg`` with the host files its ``--generator`` names (a ``-g`` value, a ``command:`` argument, or the value of
    one written ``--flag=PATH``) made absolute (from ``cwd``, default this process's), and their read-only mounts at
    those paths, as path options are mounted: in the container they did not exist and generation failed deep inside.
    A ``-g`` value that names an existing file or folder outside the system folders counts (``-g dir=made`` as
    ``./made``), and so does a ``command:`` argument, with or without a ``/`` (``python gen.py``), but for the words
    ``command_paths`` keeps (the program, a program on PATH, a module after ``-m``); anything else stays a value.
    RecipeError (one line) for a path whose mount would hand the container ``/``, the home folder or one of its
    hidden folders, a secret-named file, a file in a tool's credential folder (~/.docker/config.json) or a folder
    holding a secret-named one at any depth (``image_flag``: where the hint says to put them instead).
    ``pinbench run --runtime docker`` and ``pinbench submit --container`` mount them alike. With
    ``--skip-generation`` the paths are made absolute and nothing is mounted: nothing runs the generator, but the
    container compares its text with the one the generating run stored (``same_generator``), absolute."""
    if cfg.generator is None:
        return cfg, {}
    mounts: dict[Path, str] = {}

    def mounted(value: str, flag: str, *, bare: bool = False) -> str:
        def refuse(why: str) -> NoReturn:
            raise RecipeError(f"{flag}: {value} is not mounted into the generator's container ({why}); name the files "
                              f"it needs, or put them in {image_flag}")

        target = Path(os.path.normpath(os.path.join(cwd or os.getcwd(), value)))   # a symlink keeps its name
        if (not value or "/" not in value and not bare or not target.exists()
                or any(target.is_relative_to(d) for d in _SYSTEM_DIRS)):
            return value
        if cfg.skip_generation:
            return str(target)
        source, home = target.resolve(), Path.home().resolve()
        if home.is_relative_to(source) or source.parent == home and source.name.startswith("."):
            why = "it is or holds your home folder, or is a hidden folder of it"
        elif is_secret_file(target.name) or is_secret_file(source.name):   # a snapshot's .env: a blob's hash
            why = "it is named for a secret"
        elif _secret_template(target.name, source):
            why = "it is a secret file's template holding what could be a secret"
        elif (folder := _secret_folder(source)) is not None:
            why = f"it lies in {folder}, a tool's credential folder"
        elif (inside := _secret_inside(source, refuse)) is not None:
            why = inside
        else:
            mounts[source] = f"{target}:ro"
            return str(target)
        refuse(why)

    generator = cfg.generator
    if generator.startswith("command:"):
        argv = command_argv(generator)
        absolute = command_paths(argv, lambda value, bare: mounted(   # a bare word: a file, never a folder
            value, f"--generator {redact(generator)}", bare=bare and os.path.isfile(os.path.join(cwd or ".", value))))
        generator = generator if absolute == argv else "command:" + shlex.join(absolute)
    options = {key: mounted(value, f"-g {key}", bare=True) for key, value in cfg.generator_options.items()}
    return replace(cfg, generator=generator, generator_options=options), mounts


# the most files and folders under a mounted folder whose names are checked for a secret's: a model's folder holds
# thousands (10,100 names walked and checked in 0.33 s here: about 3 s at the limit); one past it is refused, never
# mounted unchecked
MOUNT_CHECK_LIMIT = 100_000
# the most files installed packages' lists name (``_package_files``) walked past, not counted against it: a RECORD
# naming 200,000 files had them all walked (4.6 s). A CUDA torch venv's lists name 36,248 of its 52,778 files: four
# such environments fit
MOUNT_LISTED_LIMIT = 150_000


def _secret_folder(source: Path) -> Path | None:
    """The tool's hidden credential folder ``source`` lies in (~/.docker/config.json, ~/.ssh/known_hosts: its own
    name, ``config.json``, is a model's too), or None."""
    return next((folder for folder in source.parents if folder.name.startswith(".") and is_secret_file(folder.name)),
                None)


# the most bytes of a file read to check its text for a credential (a git config, FETCH_HEAD, a reflog's start, a
# secret file's template, a dist-info RECORD: torch's is 2 MB, a conda record): a huge file planted there costs no more
_CHECK_READ_LIMIT = 16 << 20


def _head(path: str | Path) -> str:
    """The text of regular file ``path``'s first ``_CHECK_READ_LIMIT`` bytes, '' when it has none to read."""
    try:
        fd = open_regular(path)
    except FileError:
        return ""
    try:
        return os.read(fd, _CHECK_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _secret_template(name: str, path: str | Path) -> bool:
    """Whether ``name`` is a secret file's template (.env.example: no secret's name, its values are placeholders) and
    the text of ``path`` holds what could be a secret (``holds_secret``: HF_TOKEN=<your token> does not)."""
    stem, suffix = os.path.splitext(name)
    return suffix.lower() in TEMPLATE_SUFFIXES and is_secret_file(stem) and holds_secret(_head(path))


def _package_files(top: str, folders: list[str], source: Path,
                   refuse: Callable[[str], NoReturn]) -> tuple[dict[str, str], dict[str, str]]:
    """The files in ``top`` an installer's list of a package's files there names, each with the SHA-256 (hex) the
    list gives its content: a ``*.dist-info/RECORD`` (pip's ``path,sha256=<urlsafe base64>,size``: site-packages,
    Debian's dist-packages, ``pip install --target vendor``), a conda environment's ``conda-meta/*.json`` or a conda
    package's ``info/paths.json`` (its pkgs/ cache), both ``{"paths": [{"_path", "sha256"}]}``, the first under
    ``paths_data``, with ``sha256_in_prefix`` for a file conda rewrote. A listed file is a package's only while its
    content hashes to that (``_packaged``): a hand-made list naming a user's src/.env, a line with no hash (pip's
    own RECORD line) or a file added to a package's folder after install is judged as any user file is. A listed
    path outside ``top`` (RECORD's ../../bin/pip) is not taken. A conda list that is not JSON, or past
    ``_CHECK_READ_LIMIT``, is refused (``refuse``): its files went unjudged. Second, the files a list names with no
    hash (a RECORD's ``path,,`` line; a conda-meta record with ``files`` and no ``paths_data``; a package's
    ``info/files``), each with that list: trusted for nothing, but a refusal of one says its list gave no hash."""
    listed, unhashed = {}, {}
    for name in sorted(name for name in folders if name.endswith(".dist-info")):
        record = os.path.join(top, name, "RECORD")
        for line in _head(record).splitlines():
            path, _, rest = line.partition(",")
            algorithm, _, digest = rest.partition(",")[0].partition("=")
            if not algorithm:   # pip's path,, (RECORD itself, a .pyc it compiled): no hash to trust it by
                unhashed[path] = record
            try:
                digest = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
            except ValueError:   # binascii.Error: a digest pip never writes, trusted for nothing
                continue
            if algorithm == "sha256" and len(digest) == 64:
                listed[path] = digest
    try:
        conda = sorted(os.listdir(os.path.join(top, "conda-meta"))) if "conda-meta" in folders else []
    except OSError:   # the walk refuses it, naming it, when it gets there
        conda = []
    lists = [os.path.join(top, "conda-meta", name) for name in conda if name.endswith(".json")]
    if "info" in folders:
        lists.append(os.path.join(top, "info", "paths.json"))
        unhashed.update(dict.fromkeys(_head(os.path.join(top, "info", "files")).splitlines(),
                                      os.path.join(top, "info", "files")))
    for path in lists:
        text = _head(path)
        if not text:   # no info/paths.json (an older package): its files judged by their names
            continue
        try:
            record = json.loads(text) if len(text) < _CHECK_READ_LIMIT else None
            paths = record.get("paths_data", record).get("paths", [])
            names = [] if "paths_data" in record else record.get("files", [])   # paths_data's give their hashes
        except (ValueError, AttributeError, RecursionError):   # [[[... 100,000 deep: RecursionError, not a line
            refuse(f"it holds {shown_name(os.path.relpath(path, source))}, not conda's list of a package's files "
                   f"(a JSON object of at most {_CHECK_READ_LIMIT:,} bytes) to check them by")
        unhashed.update(dict.fromkeys(names if isinstance(names, list) else [], path))
        for entry in paths if isinstance(paths, list) else []:
            if isinstance(entry, dict):   # each other entry trusted for nothing
                listed[entry.get("_path")] = entry.get("sha256_in_prefix") or entry.get("sha256")

    def inside(named: dict[Any, Any]) -> dict[str, str]:
        return {os.path.join(top, os.path.normpath(path)): value for path, value in named.items()
                if isinstance(path, str) and isinstance(value, str) and not os.path.normpath(path).startswith("..")}

    return inside(listed), inside(unhashed)


def _packaged(path: str, listed: Mapping[str, str], source: Path, folder: bool = False) -> bool:
    """Whether ``path`` is an installed package's: a file its list names (``_package_files``) whose content hashes
    to the list's and holds nothing that could be a secret (``pip install .`` of a project copies its .env with its
    hash), or a ``folder`` holding one (the docker package's credentials/). A listed link is judged
    by the file it resolves to, which must lie in ``source``, the mounted folder: one outside it is never trusted."""
    if folder:
        return any(name.startswith(path + os.sep) and _packaged(name, listed, source) for name in listed)
    target = os.path.realpath(path)
    return (path in listed and Path(target).is_relative_to(source) and regular_sha256(Path(target)) == listed[path]
            and not holds_secret(_head(target)))


# a config line's section header, the rest of the line its first variable's ([include]path=x is git's too), and an
# include's path: stripped after the match, a lazy (.+?)\s*$ took 46 s on a 100,000-character line of blanks
_GIT_HEADER = re.compile(r"\s*\[\s*(\w*)[^\]]*\]?")
_GIT_PATH = re.compile(r"\s*path\s*=(.*)", re.I)
_GIT_INCLUDES_MOST = 100   # included files read beyond the stores' own, one more refused (git's chain limit: 10 deep)
_GIT_HELD = ("config", "config.worktree", "FETCH_HEAD", "packed-refs")   # a store's files read, beside its reflogs


_WALK_DEPTH_MOST = 400   # os.walk recurses a level a frame (Python 3.11): 1,100 folders deep raised RecursionError


def _walk(top: str | Path, refuse: Callable[[str], NoReturn], source: Path,
          onerror: Callable[[OSError], None] | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)``, refused (``refuse``) at a folder ``_WALK_DEPTH_MOST`` levels below it: the mount check
    stopped in "maximum recursion depth exceeded", naming no folder."""
    depth = str(top).rstrip(os.sep).count(os.sep)
    for entry in os.walk(top, onerror=onerror):
        if entry[0].count(os.sep) - depth >= _WALK_DEPTH_MOST:
            refuse(f"it holds {shown_name(os.path.relpath(entry[0], source))[:200]}..., folders nested more than "
                   f"{_WALK_DEPTH_MOST} deep, too deep to check each name for a secret's")
        yield entry


def _git_files(git_dir: str, source: Path, refuse: Callable[[str], NoReturn],
               counted: Callable[[int], None]) -> list[str]:
    """The files of git store ``git_dir`` that can hold a remote URL's credential: config and config.worktree,
    FETCH_HEAD, packed-refs, every reflog under logs/ (HEAD's and each ref's: a clone's 'from URL', a fetch's), the
    same files of each submodule's store (modules/NAME/, a NAME with a slash, and theirs in modules/NAME/modules/)
    and of each linked worktree's (worktrees/NAME/: its own logs/HEAD and config.worktree), and the files
    [include]/[includeIf] sections name, an included file's own includes too, that lie in ``source``: one outside it
    is not mounted, so it hands the container nothing. The names walked in modules/, worktrees/ and the stores' logs/
    are ``counted`` (against ``MOUNT_CHECK_LIMIT``); past ``_GIT_INCLUDES_MOST`` included files ``refuse``: the rest
    went unread."""
    stores, found, logs = [git_dir], [os.path.join(git_dir, name) for name in _GIT_HELD], []
    for top, folders, files in (entry for under in ("modules", "worktrees")
                                for entry in _walk(os.path.join(git_dir, under), refuse, source)):
        # a submodule's or worktree's store, or what is left of one (a logs/ without HEAD or config: its reflogs went
        # unread, mounted): its reflogs read below
        if "HEAD" in files or "config" in files or "logs" in folders:
            stores.append(top)
            folders[:] = [name for name in folders if name not in ("objects", "refs", "logs", "hooks", "info")]
        counted(len(folders) + len(files))
        found += [os.path.join(top, name) for name in _GIT_HELD if name in files]
    for store in stores:
        for top, folders, files in _walk(os.path.join(store, "logs"), refuse, source):   # a branch may be named config
            counted(len(folders) + len(files))
            logs += [os.path.join(top, name) for name in sorted(files)]
    configs = [path for path in found if os.path.basename(path) in ("config", "config.worktree")]
    most = len(found) + _GIT_INCLUDES_MOST   # not counting the submodules': 96 of them left .git/config's unread
    while configs:
        config, section = configs.pop(), ""
        for line in _head(config).splitlines():
            if (header := _GIT_HEADER.match(line)) is not None:
                section, line = header[1].lower(), line[header.end():]
            if section in ("include", "includeif") and (path := _GIT_PATH.match(line)) is not None:
                named = os.path.expanduser(path[1].strip().strip('"'))
                included = os.path.realpath(os.path.join(os.path.dirname(config), named))
                if included not in found and Path(included).is_relative_to(source):
                    if len(found) == most:
                        refuse(f"its {shown_name(os.path.relpath(config, source))} includes "
                               f"{shown_name(os.path.relpath(included, source))}, past the {_GIT_INCLUDES_MOST} "
                               "included files read to check them for a credential")
                    found.append(included)
                    configs.append(included)
    return found + logs


# a git store's folders whose names git takes from branches, remotes or hashes (refs/heads/token-fix, logs/refs/...,
# branches/REMOTE, remotes/REMOTE, git-svn's svn/refs/remotes/BRANCH), or LFS's objects
_GIT_NAMED_BY_USERS = frozenset({"refs", "logs", "branches", "remotes", "svn", "objects", "rr-cache", "lfs"})
# a git store's folders of the stores of its submodules and linked worktrees, each named for one (modules/NAME/, a
# NAME with a slash too; worktrees/NAME/)
_GIT_STORES = ("modules", "worktrees")


def _git_secret_names(git_dir: str, source: Path, refuse: Callable[[str], NoReturn],
                      counted: Callable[[int], None]) -> list[str]:
    """The files and folders of git store ``git_dir`` and of its submodules' and worktrees' stores named for a
    secret (.git/hf_token and .git/modules/sub/hf_token were mounted unchecked: the walk skips .git), outside the
    folders ``_GIT_NAMED_BY_USERS``, whose names are a branch's (token-fix) or a hash, and but for the names of
    submodules and worktrees (``_GIT_STORES``). The names walked are ``counted``, but for those ``_git_files``
    counted (its walk of modules/ and worktrees/, which leaves out a store's hooks/ and info/)."""
    found, named = [], set()   # named: a folder under modules/ or worktrees/ above a store, its name a submodule's
    walked = {os.path.join(git_dir, name) for name in _GIT_STORES}   # the folders whose names _git_files counted
    for top, folders, files in _walk(git_dir, refuse, source):
        store = top == git_dir or top in named and ("HEAD" in files or "config" in files or "logs" in folders)
        if store:   # as _git_files tells one
            folders[:] = [name for name in folders if name not in _GIT_NAMED_BY_USERS]
            named.update(os.path.join(top, name) for name in folders if name in _GIT_STORES)
        elif top in named:
            named.update(os.path.join(top, name) for name in folders)
        if top in walked:
            walked.update(os.path.join(top, name) for name in folders if not store or name not in ("hooks", "info"))
        else:
            counted(len(files) + sum(os.path.join(top, name) not in walked for name in folders))
        found += [os.path.join(top, name) for name in sorted(folders + files)
                  if is_secret_file(name) and os.path.join(top, name) not in named]
    return found


def _public_folder(top: str, name: str, files: list[str]) -> bool:
    """Whether the walk skips folder ``name`` in ``top`` (``_secret_inside``): git's store, whose refs are branch names
    (fix-token-refresh), or npm's installed packages (node_modules beside a package.json: a user's own folder so
    named hid its token from the walk)."""
    return name == ".git" or name == "node_modules" and "package.json" in files


def _secret_inside(source: Path, refuse: Callable[[str], NoReturn]) -> str | None:
    """Why a folder may not be mounted for what it holds, at any depth, or None: the first file or folder named for a
    secret, as a path under it, and how many more its folder holds (project/sub/.env was mounted: only direct
    children were checked), a git store's config, FETCH_HEAD, reflog or included config holding a credential (a
    remote URL's token: .git is not walked, and none is a secret's name; ``_git_files``), or a secret file's template
    holding one. Source code, an installed package's files (``_package_files``, ``_packaged``) and a folder named
    .env (a virtualenv's name; a dotenv file is never a folder) are not: a project's venv holds google-auth's
    credentials.py. RecipeError past ``MOUNT_CHECK_LIMIT`` entries (a package's listed files not counted, its git
    stores' logs/, modules/ and worktrees/ counted too), ``MOUNT_LISTED_LIMIT`` listed files or ``_WALK_DEPTH_MOST``
    levels, which were not all checked, or for a subfolder the walk may not enter: its names went unchecked, and the
    mount hands it whole (``refuse``: the mount's refusal, one wording with the others). Names are ``shown_name``'s: a
    line break or undecodable bytes in one made the line two, or one no terminal prints."""
    def unreadable(exc: OSError) -> NoReturn:
        refuse(f"it holds {shown_name(os.path.relpath(exc.filename, source))}, which could not be read to check its "
               f"names for a secret's: {exc.strerror}")

    seen, packaged, listed = 0, 0, {}   # listed: the package files its folders' lists name, with their hashes
    unhashed: dict[str, str] = {}   # the files a conda list names with no hash, with that list (_package_files)

    def counted(names: int, package_files: int = 0) -> None:   # the folder's own walk's and its git stores' modules/
        nonlocal seen, packaged                                 # walks' names together; its packages' listed files
        seen, packaged = seen + names, packaged + package_files
        if seen > MOUNT_CHECK_LIMIT:
            refuse(f"it holds more than {MOUNT_CHECK_LIMIT} files and folders, too many to check each name for a "
                   "secret's")
        if packaged > MOUNT_LISTED_LIMIT:
            refuse(f"it holds more than {MOUNT_LISTED_LIMIT} files that its installed packages list, too many to "
                   "check each name for a secret's")

    if not source.is_dir():
        return None
    for top, folders, files in _walk(source, refuse, source, unreadable):   # links not followed: the mount hands none
        gits = [os.path.join(top, ".git")] if ".git" in folders else []
        if "HEAD" in files and "objects" in folders:   # a bare repository (repo.git), or a .git mounted itself
            gits.append(top)
        held = (path for git in gits for path in _git_files(git, source, refuse, counted))
        if (config := next((path for path in held if holds_secret(_head(path))), None)) is not None:
            return f"its {shown_name(os.path.relpath(config, source))} holds a credential"
        if (stored := next((path for git in gits for path in _git_secret_names(git, source, refuse, counted)),
                           None)) is not None:
            return f"it holds {shown_name(os.path.relpath(stored, source))}, named for a secret"
        if top in gits:   # a bare repository, walked just now: its refs/heads/token-fix is a branch's name
            folders[:] = []
        hashed, named = _package_files(top, folders, source, refuse)
        listed.update(hashed)
        unhashed.update(named)
        folders[:] = [name for name in folders if not _public_folder(top, name, files)]
        ours = sum(os.path.join(top, name) in listed for name in files)
        counted(len(folders) + len(files) - ours, ours)
        found = sorted([name for name in folders if name != ".env" and is_secret_file(name)
                        and not _packaged(os.path.join(top, name), listed, source, folder=True)] + [
            name for name in files if os.path.splitext(name)[1].lower() not in CODE_SUFFIXES and is_secret_file(name)
            and not _packaged(os.path.join(top, name), listed, source)])
        if found:
            first = os.path.join(top, found[0])
            more = f", and {len(found) - 1} more beside it" if len(found) > 1 else ""
            if first in unhashed and first not in listed:
                return f"it holds {shown_name(os.path.relpath(first, source))}, named like a secret's file{more}: " \
                       f"{shown_name(os.path.relpath(unhashed[first], source))}, its package's list of files, " \
                       "gives no hash to tell the package's own file from one put in its place"
            return f"it holds {shown_name(os.path.relpath(first, source))}, named for a secret{more}"
        if (template := next((name for name in sorted(files) if _secret_template(name, os.path.join(top, name))),
                             None)) is not None:
            return f"it holds {shown_name(os.path.relpath(os.path.join(top, template), source))}, a secret file's " \
                   "template holding what could be a secret"
    return None


def forwarded_env(recipe: Recipe, environ: Mapping[str, str],
                  image_env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The recipe's declared ``env:`` variables set on the host, as the container gets them, and one note
    per declared variable that is set but not forwarded (and why).

    Not forwarded: CUDA_VISIBLE_DEVICES (it selects the container's devices instead), secrets (a token
    goes only to fetch stages, as HF_TOKEN), and variables the image sets itself (its ENV describes
    the image's own layout, e.g. where the evaluator lives; the host's value describes the host).
    Option twins never come here: they travel as ``-o`` flags.
    """
    env, notes = {}, []
    for name in recipe.env:
        if name not in environ or name == GPU_SELECTION or is_secret_name(name):
            continue
        if name in image_env:
            if environ[name] != image_env[name]:
                notes.append(f"{name} is not forwarded: the image sets its own ({name}={image_env[name]})")
            continue
        env[name] = environ[name]
    return env, notes


def sample_cache_setting(environ: Mapping[str, str], run_dir: Path, cache: Path) -> tuple[dict[str, str],
                                                                                          dict[Path, str]]:
    """The host's ``$PINBENCH_SAMPLE_CACHE`` (and its bound) as the stage containers get them, with the mount it
    needs: ``off`` stays off; a folder inside the cache root (``cache``, resolved) is named at its place under the
    cache mount, any other is mounted read-write at ``SAMPLES_MOUNT`` (the caller makes the folder first, else the
    engine makes it, as root); unset, the containers keep the default, ``samples/`` under the cache mount. Also
    ``pinbench submit``'s container jobs. The containers used that default whatever the host said: a run kept and
    pruned its records in another folder than the host's runs, and ``off`` was not honoured, all unsaid.
    ValueError (``cache_dir``) for a value no run could use."""
    env = {SAMPLE_CACHE_SIZE_ENV: environ[SAMPLE_CACHE_SIZE_ENV]} if SAMPLE_CACHE_SIZE_ENV in environ else {}
    if not environ.get(SAMPLE_CACHE_ENV, "").strip():
        return env, {}
    root = sample_cache_dir(run_dir, environ)
    if root is None:
        return {**env, SAMPLE_CACHE_ENV: "off"}, {}
    root = root.resolve()
    if root.is_relative_to(cache):
        return {**env, SAMPLE_CACHE_ENV: str(PurePosixPath(CACHE_MOUNT, root.relative_to(cache)))}, {}
    return {**env, SAMPLE_CACHE_ENV: SAMPLES_MOUNT}, {root: SAMPLES_MOUNT}


# ------------------------------------------------------------------------------------------ running


def stage_argv(recipe: Recipe, cfg: RunConfig, stage: ContainerStage, options: dict[str, str], *,
               network: bool, skip_doctor: bool = False) -> list[str]:
    """The ``pinbench`` command a stage runs in its container, mirroring the user's flags (``--skip-doctor`` too:
    without it the stage's own doctor stopped at an unusable input the user meant to score around)."""
    command, *extra = stage.argv
    argv = ["pinbench", command, recipe.name, "--checkpoint", cfg.checkpoint]
    if cfg.limit is not None:
        argv += ["--limit", str(cfg.limit)]
    for key, value in options.items():
        argv += ["--option", f"{key}={value}"]
    if command == "run":
        argv += ["--out", OUT_MOUNT, "--runtime", "local", "--gpus", str(cfg.gpus)]
        argv += [] if network else ["--offline"]
        if cfg.shard is not None:
            argv += ["--shard", f"{cfg.shard.index}/{cfg.shard.count}"]
        argv += ["--skip-generation"] * cfg.skip_generation + ["--skip-scoring"] * cfg.skip_scoring
        argv += ["--fixture"] * cfg.fixture + ["--verify-inputs"] * cfg.verify_inputs + ["--skip-doctor"] * skip_doctor
        argv += generator_flags(cfg)   # dropped before: the stage generated (or scored) as if none was given
    return argv + list(extra)


def generator_flags(cfg: RunConfig) -> list[str]:
    """``--generator`` with its ``-g`` options and time limit, as a run inside a container or job gets them."""
    if cfg.generator is None:
        return []
    argv = ["--generator", cfg.generator]
    argv += [item for key, value in cfg.generator_options.items() for item in ("-g", f"{key}={value}")]
    return argv + (["--generation-timeout", f"{cfg.generation_timeout_s:g}"] if cfg.generation_timeout_s is not None
                   else [])


def stages_for(recipe: Recipe, cfg: RunConfig, generator_image: str | None = None) -> list[ContainerStage]:
    """The stages this run needs, in order: a fixture run is one offline CPU run in the recipe's scoring
    image; ``--skip-generation`` / ``--skip-scoring`` drop those stages, ``--offline`` and the recipe's
    ``no_download`` options the fetch stages. With ``generator_image`` the rollouts are made in that image
    (``generation_stages``)."""
    if cfg.fixture:
        last = recipe.last_run_stage
        stages = [ContainerStage(last.name, dockerfile=last.dockerfile, argv=("run",), network=False, gpus=False)]
        if generator_image is None:
            return stages
    else:
        stages = [s for s in recipe.stages
                  if not (s.argv[0] == "fetch" and (cfg.offline or recipe.downloads_nothing(cfg) is not None))]
    if generator_image is not None:
        stages = generation_stages(stages, generator_image, scoring=not cfg.skip_scoring)
    return [s for s in stages
            if not (s.name == "generate" and cfg.skip_generation) and not (s.name == "score" and cfg.skip_scoring)]


def generation_stages(stages: list[ContainerStage], image: str, *, scoring: bool) -> list[ContainerStage]:
    """``stages`` with the rollouts made in ``image`` (``--generator-image``, ``generation_stage``): in place of the
    recipe's generate stage, or, for a recipe without one (it generates in its scoring run), before that run, with
    its GPUs, and the run then only scores (when ``scoring``)."""
    if any(s.name == "generate" for s in stages):
        return [generation_stage(s, image) if s.name == "generate" else s for s in stages]
    last = next(s for s in reversed(stages) if s.argv[0] == "run")
    generate = generation_stage(replace(last, argv=(*last.argv, "--skip-scoring")), image)
    score = [replace(last, argv=(*last.argv, "--skip-generation"))] if scoring else []
    return [s for s in stages if s is not last] + [generate, *score]


def offline_policy(stage: ContainerStage, cfg: RunConfig) -> ContainerStage:
    """``stage`` as the run allows it: under ``--offline`` (or ``PINBENCH_OFFLINE=1``) with neither network nor
    ``HF_TOKEN``, whatever it declares (``pinbench submit``'s jobs as this runtime's containers)."""
    return replace(stage, network=False, needs_token=False) if cfg.offline else stage


def generation_stage(stage: ContainerStage, image: str) -> ContainerStage:
    """``stage`` making the rollouts in the user's ``image``, with the network and ``HF_TOKEN`` its generator has
    on the host, where it may download its weights (the run's ``--offline`` still takes both away). It had the
    scoring run's policy for MIND and RememBench: no network, HF_HUB_OFFLINE=1, so such a generator failed there."""
    return replace(stage, name="generate", image=image, network=True, needs_token=True)


def generation_image_problem(recipe: Recipe, cfg: RunConfig, generator_image: str | None) -> str:
    """Why this ``--runtime docker`` run cannot make its rollouts ("" when it can): ``--generator-image`` with
    nothing to generate, or a generator no image of the run holds (``image_without_generator``)."""
    if generator_image is not None and (cfg.generator is None or cfg.skip_generation):
        return "--generator-image: it runs a --generator's generation, and this run " + (
            "has no --generator" if cfg.generator is None else "generates nothing (--skip-generation)")
    if generator_image is not None or not foreign_generator(recipe, cfg):
        return ""
    image = recipe.stage_image(next((s for s in recipe.stages if s.name == "generate" and not cfg.fixture),
                                    recipe.last_run_stage))
    return (f"--generator {redact(cfg.generator or '')} under --runtime docker would run in {image}, which holds "
            f"none of its code or dependencies: give --generator-image IMAGE (pinbench, {recipe.name} and your "
            f"generator in it, e.g. built FROM {recipe.image}), or generate on this machine first (the same run "
            "without --runtime docker, with --skip-scoring), then score with --runtime docker --skip-generation")


def foreign_generator(recipe: Recipe, cfg: RunConfig) -> bool:
    """Whether this run generates with a ``--generator`` the recipe's images do not hold: any but the recipe's own
    and pinbench's that need nothing else (``IN_EVERY_IMAGE``; ``folder``'s ``-g dir=`` is mounted, generator_files).
    In the recipe's image it lacks the user's code and dependencies and failed deep inside (or, its flag dropped, the
    run scored other rollouts under its name)."""
    return not (cfg.generator is None or cfg.skip_generation or cfg.generator in recipe.generators
                or cfg.generator in IN_EVERY_IMAGE)


def container_user(caller: tuple[int, int], image: str, image_user: str) -> str:
    """``uid:gid`` a stage runs as: the caller's (outputs stay theirs), or for a root caller the image's own
    user, which must be a numeric non-root ``uid[:gid]`` (dockerlint holds every image to 10001:10001)."""
    uid, gid = caller
    if uid != 0:
        return f"{uid}:{gid}"
    match = re.fullmatch(r"(\d+)(?::(\d+))?", image_user.strip())
    if match is None or match.group(1) == "0":
        raise ContainerError(f"{image}: its USER is {image_user or 'unset (root)'!r}; a root caller runs "
                             "containers as the image's non-root numeric user, and this image has none")
    return f"{match.group(1)}:{match.group(2) or match.group(1)}"


def hand_over(paths: list[Path], user: str) -> None:
    """Give every file and directory under ``paths`` to ``uid:gid`` (a root caller, for its container user)."""
    uid, gid = (int(x) for x in user.split(":"))
    for root in paths:
        os.chown(root, uid, gid, follow_symlinks=False)
        for parent, dirs, files in os.walk(root):
            for name in dirs + files:
                os.chown(Path(parent) / name, uid, gid, follow_symlinks=False)


def run_in_docker(recipe: Recipe, cfg: RunConfig, *, generator_image: str | None = None, client: Any = None,
                  environ: Mapping[str, str] | None = None, caller: tuple[int, int] | None = None,
                  log: Log = print_line, skip_doctor: bool = False, note: str | None = None) -> int:
    """Run every stage of the recipe in its image (generation in ``generator_image`` when given; each run stage
    with ``--skip-doctor`` when ``skip_doctor``); stop at the first stage that fails; print where the scorecard,
    diff and report are on the host. ``note`` (a likely typo of the checkpoint, held when the doctor was skipped)
    is said once the first stage has ended well, or with a failed stage whose output is not the recipe's own
    refusal of the name, which is then the one line (``refuses_name``).

    This process claims the run directory (pinbench.core.rundir) for all stages; each container inherits the
    claim through PINBENCH_RUN_LOCK instead of taking its own. RecipeError, before anything runs, for a
    ``--generator`` no image of the run holds (``generation_image_problem``).
    """
    problem = generation_image_problem(recipe, cfg, generator_image)
    if problem:
        raise RecipeError(problem)
    cfg, generator_mounts = generator_files(cfg)
    stages = stages_for(recipe, cfg, generator_image)
    environ = os.environ if environ is None else environ
    # the GPUs first: a count this machine cannot give is one line whether or not an engine is reachable
    devices = gpu_devices(cfg.gpus if any(s.gpus for s in stages) else 0, environ.get(GPU_SELECTION))
    client = client or docker_client()
    caller = caller or (os.getuid(), os.getgid())
    # Every stage's image, and the user it runs as, before the claim: a missing image (a mistyped --generator-image)
    # or one a root caller cannot use fails in seconds, and leaves no run directory holding a run that never ran.
    configs = {image: _image_config(image, recipe, generator_image, client)
               for image in dict.fromkeys(recipe.stage_image(s) for s in stages)}
    users = {image: container_user(caller, image, config.user) for image, config in configs.items()}
    with claim_run_dir(cfg) as claim:
        return _run_stages(recipe, cfg, claim.token, stages, configs, users, generator_mounts, devices,
                           client=client, environ=environ, caller=caller, log=log, skip_doctor=skip_doctor,
                           note=note)


def _image_config(image: str, recipe: Recipe, generator_image: str | None, client: Any) -> ImageConfig:
    """``image_config``; a ``--generator-image`` not built here is named as the user's (not the recipe's) to build."""
    try:
        return image_config(image, client)
    except ContainerError:
        if image != generator_image:
            raise
        raise ContainerError(f"--generator-image {image}: image not found locally; build it first (pinbench, "
                             f"{recipe.name} and your generator in it, e.g. FROM {recipe.image})") from None


def _run_stages(recipe: Recipe, cfg: RunConfig, lock_token: str, stages: list[ContainerStage],
                configs: Mapping[str, ImageConfig], users: Mapping[str, str], generator_mounts: Mapping[Path, str],
                devices: int | list[str], *, client: Any, environ: Mapping[str, str], caller: tuple[int, int],
                log: Log, skip_doctor: bool, note: str | None) -> int:
    started = time.time()
    refused = False   # whether a stage's output refused the checkpoint's name (the recipe's own line)

    def logged(line: str) -> None:
        nonlocal refused
        refused = refused or refuses_name(line, cfg.checkpoint)
        log(line)

    out_dir = cfg.out_dir.resolve()
    _refuse_orphans(out_dir, client)
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = cache_root().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    options, input_mounts = _forwarded_options(recipe, cfg)
    samples_env, samples_mount = sample_cache_setting(environ, out_dir, cache)
    for folder in samples_mount:
        folder.mkdir(parents=True, exist_ok=True)
    mounts = {**generator_mounts, cache: CACHE_MOUNT, out_dir: OUT_MOUNT, **samples_mount, **input_mounts}
    handed: set[str] = set()
    for stage in stages:
        image = recipe.stage_image(stage)
        user = users[image]
        if caller[0] == 0 and user not in handed:
            hand_over([out_dir, cache, *samples_mount], user)
            log(f"running as root: stage {stage.name!r} runs as the image's user {user}; "
                f"{', '.join(map(str, [out_dir, cache, *samples_mount]))} now belong to it")
            handed.add(user)
        env, notes = forwarded_env(recipe, environ, configs[image].env)
        for note in notes:
            log(f"[{stage.name}] {note}")
        allowed = offline_policy(stage, cfg)
        code = run_in_container(
            image, stage_argv(recipe, cfg, stage, options, network=allowed.network, skip_doctor=skip_doctor),
            stage=stage.name, mounts=mounts,
            env={"PINBENCH_CACHE": CACHE_MOUNT, "HF_HOME": CACHE_MOUNT, TOKEN_ENV: lock_token,
                 CHECKPOINT_NOTED_ENV: "1", **env, **samples_env},
            gpus=devices if stage.gpus else 0, network_disabled=not allowed.network, user=user,
            token=environ.get("HF_TOKEN") if allowed.needs_token and allowed.network else None, shm_size="16g",
            run_dir=out_dir, client=client, log=logged,
        )
        if note and not (code and refused):
            print(note, file=sys.stderr, flush=True)
            note = None
        if code != 0:
            log(f"stage {stage.name!r} exited with {code}")
            _show_results(out_dir, started, log)
            return code
    _show_results(out_dir, started, log)
    return 0


def _refuse_orphans(out_dir: Path, client: Any) -> None:
    """Refuse a run directory that a container of a killed earlier run still writes: its lock was taken over as
    stale, and a second container would compute the same samples beside it, both writing the same files."""
    running = running_in(out_dir, client)
    if running:
        ids = " ".join(c.short_id for c in running)
        raise ContainerError(f"{out_dir}: in use: container {ids} of an earlier run (its pinbench was killed) still "
                             f"runs in it; wait for it to end or stop it (docker stop {ids}), then run again")


def _show_results(out_dir: Path, started: float, log: Log) -> None:
    """The host paths of what this run wrote (files older than the run are not its results)."""
    for label, rel in _RESULTS:
        path = out_dir / rel
        if path.is_file() and path.stat().st_mtime >= started - 1:  # 1 s: coarse file-system timestamps
            log(f"{label + ':':<10} {path}")
