"""pins / downloads / cache: pinned HF/URL downloads, verification, offline mode, pins.yaml parsing and resolving.

No network: FakeHub (a test double for huggingface_hub's download functions) serves files from a
local fake repo laid out as <root>/<repo_id>/<revision>/..., and URL pins use file:// or a local
http.server bound to 127.0.0.1.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import socket
import textwrap
import threading
import time
from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError
from huggingface_hub.file_download import repo_folder_name

from pinbench.core.options import is_offline
from pinbench.core.pins import HEX40, HFPin, PinsError, URLPin, load_pins
from pinbench.ops import cache, downloads
from pinbench.ops.downloads import (
    ChecksumError,
    FetchError,
    NotFetchedError,
    PinMismatchError,
    SizeMismatchError,
    UnresolvedPinError,
    fetch_hf,
    fetch_url,
    git_blob_id,
    locate,
)
from pinbench.ops.machine_pins import (
    RESOLVED_NOTE,
    MachinePins,
    MachinePinsError,
    apply_machine_pins,
    legacy_machine_pins_path,
    machine_pins_for,
    machine_pins_path,
    pins_for_provenance,
    resolve,
    stale_keys,
)
from pinbench.ops.pin_writer import write_recipe_pins

REV = "0123456789abcdef0123456789abcdef01234567"
REV2 = "fedcba9876543210fedcba9876543210fedcba98"
TOKEN = "hf_TestTokenDoNotLeak0123456789abcd"
WEIGHTS = b"fake weights \x00\x01\x02" * 100
CONFIG = b'{"hidden": 8}\n'


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeHub:
    """Test double for huggingface_hub.snapshot_download / hf_hub_download over a local fake repo.

    Records every call and asserts that each passes an explicit 40-hex revision. Files land in the
    same <cache_dir>/<type>s--owner--name/snapshots/<rev>/ layout huggingface_hub uses.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[dict] = []
        self.lookups: list[dict] = []

    def add(self, repo_id: str, revision: str, files: dict[str, bytes]) -> None:
        for rel, data in files.items():
            path = self.root / repo_id / revision / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def _source(self, repo_id: str, revision: str | None, token: object) -> Path:
        assert isinstance(revision, str) and HEX40.fullmatch(revision), f"unpinned revision {revision!r}"
        src = self.root / repo_id / revision
        if not src.is_dir():
            raise ValueError(f"404 Client Error for {repo_id}@{revision} (Authorization: Bearer {token})")
        return src

    @staticmethod
    def _snapshot(cache_dir, repo_id: str, repo_type: str | None, revision: str) -> Path:
        folder = repo_folder_name(repo_id=repo_id, repo_type=repo_type)
        return Path(cache_dir) / folder / "snapshots" / revision

    def snapshot_download(self, repo_id, *, repo_type=None, revision=None, allow_patterns=None,
                          cache_dir=None, token=None, local_files_only=False, **kwargs):
        dest = self._snapshot(cache_dir, repo_id, repo_type, revision)
        if local_files_only:  # huggingface_hub's offline lookup: the snapshot folder of a commit, or an error
            self.lookups.append({"repo_id": repo_id, "revision": revision})
            if not dest.is_dir():
                raise LocalEntryNotFoundError(f"{repo_id}@{revision} not in the cache")
            return str(dest)
        self.calls.append({"fn": "snapshot_download", "repo_id": repo_id, "revision": revision,
                           "repo_type": repo_type, "allow_patterns": allow_patterns, "token": token})
        src = self._source(repo_id, revision, token)
        for path in src.rglob("*"):
            rel = path.relative_to(src).as_posix()
            if path.is_file() and (allow_patterns is None or any(fnmatch(rel, p) for p in allow_patterns)):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest / rel)
        dest.mkdir(parents=True, exist_ok=True)
        return str(dest)

    def hf_hub_download(self, repo_id, filename, *, repo_type=None, revision=None, cache_dir=None,
                        token=None, **kwargs):
        self.calls.append({"fn": "hf_hub_download", "repo_id": repo_id, "filename": filename,
                           "revision": revision, "token": token})
        src = self._source(repo_id, revision, token) / filename
        dest = self._snapshot(cache_dir, repo_id, repo_type, revision)
        (dest / filename).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / filename)
        return str(dest / filename)


class FakeHfApi:
    """Test double for HfApi: repo_info returns the head commit registered per repo; get_paths_info returns
    file records whose ``lfs`` carries the SHA-256 for the paths registered as LFS files."""

    def __init__(self, heads: dict[str, str], lfs: dict[str, str] | None = None,
                 plain: tuple[str, ...] = ()) -> None:
        self.heads, self.lfs, self.plain = heads, lfs or {}, plain
        self.calls: list[tuple] = []

    def repo_info(self, repo_id, *, repo_type=None, token=None, **kwargs):
        self.calls.append((repo_id, repo_type, token))
        return SimpleNamespace(sha=self.heads[repo_id])

    def get_paths_info(self, repo_id, paths, *, revision=None, repo_type=None, token=None, **kwargs):
        assert HEX40.fullmatch(revision), revision
        self.calls.append(("paths_info", repo_id, tuple(paths), revision))
        out = []
        for path in paths:
            if path in self.lfs:
                out.append(SimpleNamespace(path=path, blob_id="1" * 40, size=1,
                                           lfs=SimpleNamespace(sha256=self.lfs[path], size=1)))
            elif path in self.plain:
                out.append(SimpleNamespace(path=path, blob_id="2" * 40, size=1, lfs=None))
        return out


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for var in ("PINBENCH_CACHE", "HF_HOME", "PINBENCH_OFFLINE", "HF_HUB_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def fake_hub(tmp_path, monkeypatch) -> FakeHub:
    fake = FakeHub(tmp_path / "fakehub")
    fake.add("org/model", REV, {"model.safetensors": WEIGHTS, "config.json": CONFIG, "README.md": b"x"})
    fake.add("org/data", REV, {"videos/a.mp4": b"a", "videos/b.mp4": b"bb", "meta.json": b"{}"})
    monkeypatch.setattr(downloads, "snapshot_download", fake.snapshot_download)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake.hf_hub_download)
    return fake


def model_pin(**overrides) -> HFPin:
    fields = {"repo_id": "org/model", "revision": REV, "repo_type": "model",
              "allow_patterns": ["*.safetensors", "config.json"],
              "sha256": {"model.safetensors": sha(WEIGHTS), "config.json": sha(CONFIG)},
              "recipe": "demo-recipe"}
    fields.update(overrides)
    return HFPin(**fields)


# ------------------------------------------------------------------------------------- cache, env


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert cache.cache_root() == tmp_path / "cache"
    monkeypatch.delenv("PINBENCH_CACHE")
    assert cache.cache_root() == tmp_path / "hf"
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_root() == tmp_path / "home" / ".cache" / "pinbench"


@pytest.mark.parametrize(("var", "value", "offline"), [
    ("PINBENCH_OFFLINE", "1", True), ("HF_HUB_OFFLINE", "1", True), ("PINBENCH_OFFLINE", "0", False),
])
def test_is_offline(monkeypatch, var, value, offline):
    monkeypatch.setenv(var, value)
    assert is_offline() is offline


# ------------------------------------------------------------------------------------ HF fetching


def test_fetch_hf_passes_revision_and_verifies(fake_hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    path = fetch_hf(model_pin())
    assert path == cache.hf_snapshot_dir(model_pin())
    assert path.is_relative_to(tmp_path / "cache" / "hub")
    assert (path / "model.safetensors").read_bytes() == WEIGHTS
    assert not (path / "README.md").exists()  # allow_patterns honoured
    (call,) = fake_hub.calls
    assert call["revision"] == REV and call["repo_type"] == "model" and call["token"] == TOKEN
    err = capsys.readouterr().err
    assert TOKEN not in err
    assert f"fetch org/model@{REV}: {(len(WEIGHTS) + len(CONFIG)) / 1e3:.1f} kB, " in err   # bytes observed


def test_fetch_hf_without_token_sends_none(fake_hub):
    fetch_hf(model_pin())
    assert fake_hub.calls[0]["token"] is False  # not a stored login token


def test_fetch_hf_checksum_mismatch_names_file_and_hashes(fake_hub):
    wrong = "0" * 64
    with pytest.raises(ChecksumError) as err:
        fetch_hf(model_pin(sha256={"model.safetensors": wrong}))
    message = str(err.value)
    assert "model.safetensors" in message and wrong in message and sha(WEIGHTS) in message
    assert err.value.actual == sha(WEIGHTS)


def test_fetch_hf_null_sha_warns_and_proceeds(fake_hub, capsys):
    path = fetch_hf(model_pin(sha256={"model.safetensors": sha(WEIGHTS), "config.json": None}))
    assert (path / "config.json").is_file()
    err = capsys.readouterr().err
    assert "warning:" in err and "config.json" in err and "unverified" in err


def test_fetch_hf_pattern_matching_nothing_fails(fake_hub):
    with pytest.raises(FetchError, match=r"\*\.bin \(matches no file\)"):
        fetch_hf(model_pin(allow_patterns=["*.bin"], sha256={}))


def test_fetch_hf_error_is_redacted(fake_hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(FetchError) as err:
        fetch_hf(model_pin(revision=REV2))
    assert TOKEN not in str(err.value) and "***" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


@pytest.mark.parametrize(("token", "why"), [(None, "set HF_TOKEN to a token of an account that has access to it"),
                                            (TOKEN, "HF_TOKEN's account has no access to it")])
def test_a_gated_repo_that_refuses_is_one_line_naming_hf_token(token, why, fake_hub, monkeypatch):
    """The hub's GatedRepoError text is a paragraph naming neither the repo's page nor HF_TOKEN."""
    from huggingface_hub.errors import GatedRepoError

    def gated(repo_id, **kwargs):  # test double for snapshot_download: the hub refuses the gated repo
        raise GatedRepoError(f"401 Client Error.\n\nCannot access gated repo for url {repo_id}.\nPlease log in.")

    monkeypatch.setattr(downloads, "snapshot_download", gated)
    with pytest.raises(FetchError) as err:
        fetch_hf(model_pin(), token=token)
    assert str(err.value) == f"org/model is gated: {why} (accept its licence on https://huggingface.co/org/model)"
    with pytest.raises(FetchError, match=r"https://huggingface\.co/datasets/org/data\)$"):
        fetch_hf(HFPin("org/data", REV, "dataset", ["meta.json"]))


def test_dataset_subset_by_patterns(fake_hub):
    pin = HFPin("org/data", REV, "dataset", ["videos/a.mp4", "meta.json"], {"videos/a.mp4": sha(b"a")})
    path = fetch_hf(pin)
    assert "datasets--org--data" in str(path)
    assert sorted(p.name for p in path.rglob("*") if p.is_file()) == ["a.mp4", "meta.json"]


def test_an_unresolved_pin_is_refused(fake_hub):
    pin = model_pin(revision=None, resolve_required=True)
    with pytest.raises(UnresolvedPinError, match=r"run `pinbench fetch demo-recipe` on a connected machine"):
        fetch_hf(pin)
    assert fake_hub.calls == []


@pytest.mark.parametrize("revision", ["main", "v1.0", REV[:12], REV.upper(), None])
def test_hfpin_rejects_unpinned_revision(revision):
    with pytest.raises(PinsError):
        HFPin("org/model", revision)


# ----------------------------------------------------------------------------------------- offline


def test_offline_missing_cache_fails_fast_and_clearly(fake_hub, monkeypatch):
    """Fast: it neither waits (no sleep: a retry or backoff) nor connects anywhere, huggingface_hub's own requests
    included. (A clock bound was broken by a loaded machine's pause, not by the code.)"""
    monkeypatch.setenv("PINBENCH_OFFLINE", "1")
    waits, connects = [], []
    monkeypatch.setattr(time, "sleep", waits.append)
    monkeypatch.setattr(socket.socket, "connect", lambda sock, address: connects.append(address))
    with pytest.raises(NotFetchedError) as err:
        fetch_hf(model_pin())
    assert waits == [] and connects == []
    expected_dir = cache.hf_snapshot_dir(model_pin())
    assert str(err.value) == (f"org/model@{REV}: not in cache {expected_dir}; next: run `pinbench fetch demo-recipe` "
                              "on a connected machine and use its cache here (PINBENCH_CACHE; then run with --offline)")
    assert fake_hub.calls == []


def test_offline_with_cache_returns_path(fake_hub, monkeypatch):
    online = fetch_hf(model_pin())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch_hf(model_pin()) == online
    assert locate(model_pin()) == online
    assert len(fake_hub.calls) == 1


def test_offline_partial_cache_names_missing_file(fake_hub, monkeypatch):
    path = fetch_hf(model_pin())
    (path / "config.json").unlink()
    monkeypatch.setenv("PINBENCH_OFFLINE", "1")
    with pytest.raises(NotFetchedError, match=r"config\.json.*not in cache"):
        fetch_hf(model_pin())


def test_offline_corrupted_cache_is_refused(fake_hub, monkeypatch):
    path = fetch_hf(model_pin())
    (path / "model.safetensors").write_bytes(b"tampered")
    monkeypatch.setenv("PINBENCH_OFFLINE", "1")
    with pytest.raises(ChecksumError, match="model.safetensors"):
        locate(model_pin())


# -------------------------------------------------------------------------------------- local_dir


def write_local_copy(root: Path, weights: bytes = WEIGHTS, commit: str | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "model.safetensors").write_bytes(weights)
    (root / "config.json").write_bytes(CONFIG)
    if commit:
        meta = root / ".cache" / "huggingface" / "download" / "model.safetensors.metadata"
        meta.parent.mkdir(parents=True)
        meta.write_text(f"{commit}\netag\n{time.time() + 10}\n")
    return root


def test_local_dir_verified_copy_is_used(fake_hub, tmp_path):
    root = write_local_copy(tmp_path / "mine", commit=REV)
    assert fetch_hf(model_pin(), local_dir=root) == root
    assert fake_hub.calls == []


def test_local_dir_mismatch_is_refused(fake_hub, tmp_path):
    root = write_local_copy(tmp_path / "mine", weights=b"other weights")
    with pytest.raises(ChecksumError) as err:
        fetch_hf(model_pin(), local_dir=root)
    assert str(root / "model.safetensors") in str(err.value) and sha(b"other weights") in str(err.value)


def test_local_dir_from_other_revision_is_refused_by_content(tmp_path):
    # huggingface_hub's private download bookkeeping naming REV2 is not read; the content decides.
    root = write_local_copy(tmp_path / "mine", weights=b"weights of another revision", commit=REV2)
    with pytest.raises(ChecksumError, match="model.safetensors: sha256 mismatch"):
        locate(model_pin(), local_dir=root)
    same = write_local_copy(tmp_path / "same", commit=REV2)   # identical bytes: accepted, whatever the notes say
    assert locate(model_pin(), local_dir=same) == same


def test_local_dir_missing_file(tmp_path):
    root = write_local_copy(tmp_path / "mine")
    (root / "config.json").unlink()
    with pytest.raises(NotFetchedError, match="lacks config.json"):
        locate(model_pin(), local_dir=root)


# -------------------------------------------------------------------------------------------- URLs


def test_fetch_url_file_scheme(tmp_path):
    src = tmp_path / "src" / "sam2_hiera_large.pt"
    src.parent.mkdir()
    src.write_bytes(WEIGHTS)
    pin = URLPin(src.as_uri(), sha(WEIGHTS), "sam2.pt")
    path = fetch_url(pin)
    assert path == tmp_path / "cache" / "urls" / sha(WEIGHTS)[:16] / "sam2.pt"
    assert path.read_bytes() == WEIGHTS
    src.unlink()  # a second fetch reuses the verified cached copy
    assert fetch_url(pin) == path
    assert not list(path.parent.glob("*.part"))


def test_fetch_url_mismatch_leaves_nothing(tmp_path):
    src = tmp_path / "w.bin"
    src.write_bytes(WEIGHTS)
    wrong = "1" * 64
    with pytest.raises(ChecksumError) as err:
        fetch_url(URLPin(src.as_uri(), wrong, "w.bin"))
    assert wrong in str(err.value) and sha(WEIGHTS) in str(err.value) and "w.bin" in str(err.value)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_fetch_url_null_sha_is_unverified(tmp_path, capsys):
    src = tmp_path / "w.bin"
    src.write_bytes(WEIGHTS)
    path = fetch_url(URLPin(src.as_uri(), None, "w.bin"))
    assert path.parent.name.startswith("unverified-")
    assert "unverified" in capsys.readouterr().err


def test_fetch_url_offline_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PINBENCH_OFFLINE", "1")
    pin = URLPin("https://example.invalid/w.bin", "2" * 64, "w.bin", recipe="paibench-c")
    with pytest.raises(NotFetchedError, match=r"^https://example.invalid/w.bin: not in cache .* paibench-c`"):
        fetch_url(pin)


@pytest.fixture
def http_dir(tmp_path):
    """A bounded local HTTP server on 127.0.0.1 serving tmp_path/www; stopped after the test."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_fetch_url_over_http(http_dir):
    root, base = http_dir
    (root / "dover.pth").write_bytes(WEIGHTS)
    path = fetch_url(URLPin(f"{base}/dover.pth", sha(WEIGHTS), "dover.pth"))
    assert path.read_bytes() == WEIGHTS
    with pytest.raises(FetchError, match="404"):
        fetch_url(URLPin(f"{base}/missing.pth", sha(WEIGHTS), "missing.pth"))


# --------------------------------------------------------------------------------------- pins file

GOOD_PINS = f"""\
# pins for a test recipe
upstream:
  evaluator:
    repo: owner/evaluator
    commit: {REV}  # the nine fixes
    url: https://github.com/owner/evaluator
huggingface:
  model:
    repo_id: org/model
    repo_type: model
    revision: {REV}
    allow_patterns: ["*.safetensors", config.json]
    sha256:
      model.safetensors: {sha(WEIGHTS)}
      config.json: null   # filled by --write-pins
  data:
    repo_id: org/data
    repo_type: dataset
    revision: null  # resolved by `pinbench fetch --write-pins`
    resolve: required
urls:
  sam2:
    url: https://dl.example.com/sam2/sam2_hiera_large.pt
    sha256: null
images:
  eval:
    base: nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04@sha256:{"a" * 64}
python:
  lock: requirements.lock
"""


def write_pins(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "my_recipe" / "pins.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_load_pins_valid(tmp_path):
    pins = load_pins(write_pins(tmp_path, GOOD_PINS))
    assert pins.recipe == "my-recipe"
    assert pins.upstream["evaluator"].commit == REV
    assert pins.huggingface["model"].sha256["config.json"] is None
    assert pins.huggingface["data"].revision is None and pins.huggingface["data"].resolve_required
    assert pins.urls["sam2"].filename == "sam2_hiera_large.pt"
    assert pins.images["eval"]["base"].endswith("a" * 64)
    assert pins.huggingface["model"].recipe == "my-recipe"


def test_load_pins_reads_the_older_lock_key(tmp_path):
    """A pins.yaml of an earlier pinbench (or an export of one) says `lock: required` for `resolve: required`."""
    pins = load_pins(write_pins(tmp_path, GOOD_PINS.replace("    resolve: required", "    lock: required")))
    assert pins.huggingface["data"].revision is None and pins.huggingface["data"].resolve_required
    assert not pins.huggingface["model"].resolve_required


@pytest.mark.parametrize(("old", "new", "message"), [
    (f"commit: {REV}", "commit: main", r"upstream\.evaluator\.commit: 'main' is not a 40-hex commit"),
    (f"commit: {REV}", "commit: 0123456", r"upstream\.evaluator\.commit: .* is not a 40-hex commit"),
    (f"revision: {REV}", "revision: main", r"huggingface\.model: .*'main' is not a 40-hex commit"),
    ("    resolve: required\n", "", r"huggingface\.data: .*revision is null"),
    (f"base: nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04@sha256:{'a' * 64}",
     "base: nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04", r"images\.eval\.base: .* has no @sha256"),
    (f"model.safetensors: {sha(WEIGHTS)}", "model.safetensors: abc123",
     r"sha256\[model\.safetensors\]: 'abc123' is not a 64-hex"),
    ("urls:", "url_pins:", r"unknown section\(s\) url_pins"),
    ("    resolve: required", "    resolve: later", r"huggingface\.data\.resolve: 'later'"),
    ("    resolve: required", "    lock: later", r"huggingface\.data\.lock: 'later'"),       # its older name
    ("    resolve: required", "    resolve: required\n    lock: required", r"both `resolve` and `lock`"),
])
def test_load_pins_rejects(tmp_path, old, new, message):
    assert old in GOOD_PINS
    path = write_pins(tmp_path, GOOD_PINS.replace(old, new))
    with pytest.raises(PinsError, match=message) as err:
        load_pins(path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)


def test_load_pins_bad_yaml_names_line(tmp_path):
    path = write_pins(tmp_path, "upstream:\n  a: [unclosed\n")
    with pytest.raises(PinsError, match=rf"^{path}: line \d+: invalid YAML"):
        load_pins(path)
    with pytest.raises(PinsError, match="file not found"):
        load_pins(tmp_path / "nope.yaml")


# ------------------------------------------------- this machine's resolved pins and --write-pins


def recipe_of(pins_path: Path, version: str = "1.2.3") -> SimpleNamespace:
    """What machine_pins_for and write_recipe_pins need of a recipe (a test double for pinbench.core.recipe.Recipe)."""
    return SimpleNamespace(name="my-recipe", version=version, pins_path=pins_path)


def machine_record(tmp_path: Path, version: str = "1.2.3") -> MachinePins:
    path = machine_pins_path("my-recipe", version, tmp_path / "cache")
    return MachinePins.load(path, "my-recipe", version)


@pytest.fixture
def unresolved(tmp_path, fake_hub) -> tuple[Path, FakeHfApi]:
    """GOOD_PINS with a local sam2 file, and a hub whose data head is REV2 and whose config.json is not in LFS."""
    fake_hub.add("org/data", REV2, {"meta.json": b"{}"})
    weights = tmp_path / "sam2_hiera_large.pt"
    weights.write_bytes(WEIGHTS)
    path = write_pins(tmp_path, GOOD_PINS.replace("https://dl.example.com/sam2/sam2_hiera_large.pt",
                                                  weights.as_uri()))
    return path, FakeHfApi({"org/data": REV2}, plain=("config.json",))


def test_first_connected_fetch_resolves_into_machine_pins_never_into_pins(unresolved, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    path, api = unresolved
    before = path.read_text()
    machine = machine_record(tmp_path)
    changes = resolve(load_pins(path), machine, api=api)
    assert [c.split(" = ")[0] for c in changes] == [
        "huggingface.data.revision", "huggingface.model.sha256[config.json]", "urls.sam2.sha256"]
    assert path.read_text() == before                                    # the package's pins are untouched
    assert machine.path == tmp_path / "cache" / "machine-pins" / "my-recipe" / "1.2.3.yaml" and machine.path.is_file()
    assert TOKEN not in machine.path.read_text()
    again = MachinePins.load(machine.path, "my-recipe", "1.2.3")
    pins = apply_machine_pins(load_pins(path), again)
    assert pins.huggingface["data"].revision == REV2
    assert pins.huggingface["model"].sha256["config.json"] == sha(CONFIG)   # not in LFS: downloaded, hashed
    assert pins.urls["sam2"].sha256 == sha(WEIGHTS)
    assert fetch_url(pins.urls["sam2"]).read_bytes() == WEIGHTS          # moved into its verified place
    entry = pins.resolved["huggingface.data.revision"]
    assert entry.how.startswith("head of the default branch") and entry.resolved_at.endswith("Z")
    # later runs reuse the recorded values: nothing is asked of the hub again
    n_calls = len(api.calls)
    assert resolve(load_pins(path), again, api=api) == []
    assert len(api.calls) == n_calls


def test_lfs_hashes_come_from_the_hub_metadata_without_downloading(tmp_path, fake_hub):
    big = "e" * 64
    path = write_pins(tmp_path, f"""\
        huggingface:
          model:
            repo_id: org/model
            revision: {REV}
            sha256:
              model.safetensors: null
        """)
    machine = machine_record(tmp_path)
    resolve(load_pins(path), machine, api=FakeHfApi({}, lfs={"model.safetensors": big}))
    assert machine.entries[("huggingface", "model", "sha256", "model.safetensors")].value == big
    assert "get_paths_info" in machine.entries[("huggingface", "model", "sha256", "model.safetensors")].how
    assert fake_hub.calls == []                                          # nothing downloaded to hash it
    with pytest.raises(downloads.FetchError, match="missing.bin: not a file in the repo"):
        bad = write_pins(tmp_path, f"huggingface:\n  m:\n    repo_id: org/model\n    revision: {REV}\n"
                                   "    sha256:\n      missing.bin: null\n")
        resolve(load_pins(bad), machine_record(tmp_path, "9.9.9"), api=FakeHfApi({}))


def test_resolving_offline_fails_naming_what_is_null(unresolved, tmp_path, monkeypatch):
    monkeypatch.setenv("PINBENCH_OFFLINE", "1")
    with pytest.raises(downloads.FetchError, match=r"huggingface\.data\.revision, .*still null.*needs network"):
        resolve(load_pins(unresolved[0]), machine_record(tmp_path), api=unresolved[1])


def test_provenance_marks_resolved_inputs(unresolved, tmp_path):
    from pinbench.core.provenance import input_states

    path, api = unresolved
    machine = machine_record(tmp_path)
    resolve(load_pins(path), machine, api=api)
    states = input_states(pins_for_provenance(apply_machine_pins(load_pins(path), machine)))
    assert states["huggingface/data"]["state"] == "resolved" and RESOLVED_NOTE in states["huggingface/data"]["reason"]
    assert states["urls/sam2"]["state"] == "resolved" and states["urls/sam2"]["sha256"] == sha(WEIGHTS)
    assert states["upstream/evaluator"]["state"] == "verified"


def test_provenance_holds_only_the_pins_a_run_used(unresolved, tmp_path):
    """A recipe names the pins its run read: the others, and this machine's values for them, are left out of the
    scorecard (``pinbench check`` then notes no unverified input the run never read); a name no pin has is a
    one-line error naming the pins file."""
    path, api = unresolved
    machine = machine_record(tmp_path)
    resolve(load_pins(path), machine, api=api)
    pins = apply_machine_pins(load_pins(path), machine)
    data = pins_for_provenance(pins, ["upstream/evaluator", "urls/sam2"])
    assert (list(data["upstream"]), data["huggingface"], list(data["urls"])) == (["evaluator"], {}, ["sam2"])
    assert list(data["resolved_at_run_time"]) == ["urls.sam2.sha256"]
    assert data["images"] == pins.images
    assert "resolved_at_run_time" not in pins_for_provenance(pins, ["upstream/evaluator"])
    assert list(pins_for_provenance(pins)["huggingface"]) == ["model", "data"]     # None: every pin
    with pytest.raises(PinsError) as info:
        pins_for_provenance(pins, ["urls/sam3"])
    assert str(info.value) == f"{path}: no pin urls/sam3 (a run names the pins it used as <section>/<name>)"


def test_a_value_pinned_later_wins_over_machine_pins(unresolved, tmp_path):
    path, api = unresolved
    machine = machine_record(tmp_path)
    resolve(load_pins(path), machine, api=api)
    path.write_text(path.read_text().replace("revision: null  # resolved", f"revision: {REV}  # resolved")
                    .replace("    resolve: required\n", ""))
    pins = apply_machine_pins(load_pins(path), machine)
    assert pins.huggingface["data"].revision == REV
    assert stale_keys(load_pins(path), machine) == [("huggingface", "data", "revision")]


def test_corrupt_machine_pins_are_one_line(tmp_path):
    machine = machine_record(tmp_path)
    machine.path.parent.mkdir(parents=True)
    machine.path.write_text("recipe: my-recipe\nrecipe_version: 1.2.3\nurls: {x: {sha256: {value: main}}}\n")
    with pytest.raises(MachinePinsError, match=r"1\.2\.3\.yaml: schema violation at \$\.urls\.x\.sha256"):
        MachinePins.load(machine.path, "my-recipe", "1.2.3")
    with pytest.raises(MachinePinsError, match="holds the resolved pins of my-recipe 1.2.3, not other 1.2.3"):
        machine.path.write_text("recipe: my-recipe\nrecipe_version: 1.2.3\n")
        MachinePins.load(machine.path, "other", "1.2.3")
    machine.path.unlink()
    machine.path.mkdir()                                                      # a folder posing as the file
    with pytest.raises(MachinePinsError, match=r"1\.2\.3\.yaml: is a directory, not a file"):
        MachinePins.load(machine.path, "my-recipe", "1.2.3")


def test_machine_pins_of_the_older_locks_folder_are_read_then_moved(unresolved, tmp_path):
    """<cache>/locks/<recipe>/<version>.yaml (earlier pinbench versions) is still read; the next save writes
    <cache>/machine-pins/... and removes the old file, so one file holds the values."""
    path, api = unresolved
    cache = tmp_path / "cache"
    old = legacy_machine_pins_path("my-recipe", "1.2.3", cache)
    assert old == cache / "locks" / "my-recipe" / "1.2.3.yaml"
    earlier = MachinePins(old, "my-recipe", "1.2.3")
    earlier.set(("huggingface", "data", "revision"), REV2, "test: as an earlier pinbench recorded it")
    earlier.save()
    machine = machine_pins_for(recipe_of(path), cache)
    assert machine.source == old and not machine.path.exists()
    assert apply_machine_pins(load_pins(path), machine).huggingface["data"].revision == REV2
    n_calls = len(api.calls)
    changes = resolve(load_pins(path), machine, api=api)        # the two values still null are resolved
    assert [c.split(" = ")[0] for c in changes] == ["huggingface.model.sha256[config.json]", "urls.sam2.sha256"]
    assert [c for c in api.calls[n_calls:] if c[0] == "org/data"] == []   # the old revision is reused, not asked
    assert not old.exists() and machine.source == machine.path == cache / "machine-pins" / "my-recipe" / "1.2.3.yaml"
    again = machine_pins_for(recipe_of(path), cache)
    assert again.entries[("huggingface", "data", "revision")].value == REV2 and len(again.entries) == 3
    # where both exist (an older pinbench wrote one again), the new file wins
    stale = MachinePins(old, "my-recipe", "1.2.3")
    stale.set(("huggingface", "data", "revision"), REV, "test")
    stale.save()
    assert machine_pins_for(recipe_of(path), cache).entries[("huggingface", "data", "revision")].value == REV2


def test_write_pins_keeps_comments_and_layout(unresolved, tmp_path, monkeypatch):
    path, api = unresolved
    before = path.read_text()
    changes = write_recipe_pins(recipe_of(path), api=api)
    assert [c.split(" = ")[0] for c in changes] == [
        "huggingface.model.sha256[config.json]", "huggingface.data.revision", "urls.sam2.sha256"]
    text = path.read_text()
    for comment in ("# pins for a test", "# the nine fixes", "# filled by --write-pins", "# resolved by `pinbench"):
        assert comment in text
    assert 'allow_patterns: ["*.safetensors", config.json]' in text        # flow style and quotes kept
    changed = [line for line in text.splitlines() if line not in before.splitlines()]
    assert len(changed) == 3                                               # exactly the three values
    pins = load_pins(path)
    assert (pins.huggingface["data"].revision, pins.urls["sam2"].sha256) == (REV2, sha(WEIGHTS))
    assert write_recipe_pins(recipe_of(path), api=api) == []


def test_write_pins_quotes_numeric_looking_hex(tmp_path, fake_hub):
    numeric = "1234567890" * 4
    path = write_pins(tmp_path, "huggingface:\n  d:\n    repo_id: org/data\n    repo_type: dataset\n"
                                "    revision: ~\n    resolve: required\n")
    write_recipe_pins(recipe_of(path), api=FakeHfApi({"org/data": numeric}))
    assert load_pins(path).huggingface["d"].revision == numeric


# ---------------------------------------------------------------------------- partial content pins


def test_sha256_prefix_pin_accepts_the_file_and_refuses_another_naming_both(tmp_path):
    src = tmp_path / "raft_large_C_T_V1-22a6c225.pth"
    src.write_bytes(WEIGHTS)
    good = URLPin(src.as_uri(), None, src.name, sha256_prefix=sha(WEIGHTS)[:8])
    assert fetch_url(good).read_bytes() == WEIGHTS
    bad = URLPin(src.as_uri(), None, "other.pth", sha256_prefix="22a6c225")
    with pytest.raises(ChecksumError) as err:
        fetch_url(bad)
    assert "22a6c225... (prefix)" in str(err.value) and sha(WEIGHTS) in str(err.value)
    assert not (cache.url_path(bad)).exists()                              # nothing kept


def test_git_blob_pin(tmp_path):
    src = tmp_path / "tasks.json"
    src.write_bytes(b"[]\n")
    assert git_blob_id(src) == "fe51488c7066f6687ef680d6bfaa4f7768ef205c"   # `printf '[]\n' | git hash-object --stdin`
    assert fetch_url(URLPin(src.as_uri(), None, "tasks.json", git_blob=git_blob_id(src))).is_file()
    with pytest.raises(PinMismatchError, match=f"git blob id mismatch: expected {'3' * 40}, got fe51488"):
        fetch_url(URLPin(src.as_uri(), None, "t2.json", git_blob="3" * 40))


def test_size_is_checked_before_hashing(tmp_path):
    src = tmp_path / "sam2.pt"
    src.write_bytes(WEIGHTS)
    with pytest.raises(SizeMismatchError, match=f"expected 897952466 bytes, got {len(WEIGHTS)}"):
        fetch_url(URLPin(src.as_uri(), sha(WEIGHTS), "sam2.pt", size=897952466))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("sha256_prefix", "22A6", "is not 8 to 63 lowercase hex"),
    ("git_blob", "abc", "is not a 40-hex git blob id"),
    ("size", 0, "is not a positive number of bytes"),
])
def test_partial_pins_are_validated(field, value, message):
    with pytest.raises(PinsError, match=message):
        URLPin("https://x.invalid/a.pth", None, "a.pth", **{field: value})


def test_schema_catches_what_the_loader_does_not_name(tmp_path):
    path = write_pins(tmp_path, GOOD_PINS.replace("    url: https://github.com/owner/evaluator",
                                                  "    url: ftp://github.com/owner/evaluator"))
    with pytest.raises(PinsError, match=r"schema violation at \$\.upstream\.evaluator\.url"):
        load_pins(path)


def test_pins_feed_provenance_input_states(tmp_path):
    from pinbench.core.provenance import input_states, to_jsonable

    states = input_states(to_jsonable(load_pins(write_pins(tmp_path, GOOD_PINS))))
    assert states["upstream/evaluator"]["state"] == "verified"
    assert states["huggingface/model"]["state"] == "unverified"  # config.json has no sha256 yet
    assert states["urls/sam2"]["state"] == "unverified"
    assert TOKEN not in str(states)


def test_a_bad_earlier_download_is_fetched_again_when_resolving(tmp_path, capsys):
    src = tmp_path / "raft.pth"
    src.write_bytes(WEIGHTS)
    path = write_pins(tmp_path, f"urls:\n  raft:\n    url: {src.as_uri()}\n    sha256: null\n"
                                f"    sha256_prefix: {sha(WEIGHTS)[:8]}\n")
    stale = cache.url_path(load_pins(path).urls["raft"])
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"cut short")
    machine = machine_record(tmp_path)
    resolve(load_pins(path), machine)
    assert machine.entries[("urls", "raft", "sha256")].value == sha(WEIGHTS)
    assert "downloading it again" in capsys.readouterr().err and not stale.exists()
