"""pinbench annotate remembench without a browser: the files it writes, the scenes it offers, who may talk to
it (token, Host, loopback), what a request can reach, and --agreement."""

from __future__ import annotations

import errno
import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.config import RecipeError
from pinbench.core.recipe import available_recipes
from pinbench.media.video import read_video
from pinbench_recipes.remembench.annotate import main as annotate_main
from pinbench_recipes.remembench.annotate_session import open_session, prefill_departures
from pinbench_recipes.remembench.annotation_store import AnnotationError, AnnotationStore, Rollout, sidecar_path
from pinbench_recipes.remembench.fixture import T2V
from pinbench_recipes.remembench.prepare import read_annotation_file
from pinbench_recipes.remembench.release import open_release
from pinbench_recipes.remembench.tests.conftest import restamp
from pinbench_recipes.remembench.tests.serving import (
    annotation_page,
    fixture_copy,
    published_pair,
    rewrite_release,
    t2v_rows,
)

ROLLOUTS = {"s1": Rollout("s1.mp4", "a" * 64, 100), "s2": Rollout("s2/rollout.mp4", "b" * 64, 50), "s3": None}
runner = CliRunner()


class Clock:
    """Test double for the wall clock: one second per call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"2026-01-01T00:00:{self.calls:02d}+00:00"


def store(out: Path, rollouts=ROLLOUTS, annotator: str = "alice") -> AnnotationStore:
    return AnnotationStore(out, annotator=annotator, rollouts=rollouts, session={"videos": "/v"}, clock=Clock())


# ------------------------------------------------------------------------------------------ the files


def test_a_mark_is_on_disk_in_the_scorers_format_when_set_mark_returns(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with store(out) as s:
        s.set_mark("s1", "departure", 12)
        assert json.loads(out.read_text()) == {}  # half a pair is not a pair
        s.set_mark("s1", "revisit", 80)
        assert json.loads(out.read_text()) == {"s1": {"departure_frame": 12, "revisit_frame": 80}}
        assert read_annotation_file(out) == {"s1": (12, 80)}  # what -o annotations= reads
        s.set_mark("s1", "revisit", 99)
        s.set_mark("s2", "departure", 3, source="dataset", by="the release")
    side = json.loads(sidecar_path(out).read_text())
    assert sidecar_path(out).name == "pairs.provenance.json"
    assert side["scenes"]["s1"]["revisit"] == {"frame": 99, "source": "annotator", "by": "alice",
                                               "at": "2026-01-01T00:00:04+00:00"}  # the session began at :01
    assert side["scenes"]["s2"]["departure"]["source"] == "dataset"
    assert side["scenes"]["s2"]["video"] == "s2/rollout.mp4" and side["scenes"]["s3"]["video"] is None
    assert [(c["scene_id"], c["mark"], c["frame"], c["previous"], c["by"]) for c in side["history"]] == [
        ("s1", "departure", 12, None, "alice"), ("s1", "revisit", 80, None, "alice"),
        ("s1", "revisit", 99, 80, "alice"), ("s2", "departure", 3, None, "the release")]
    assert side["sessions"][0]["annotator"] == "alice" and side["sessions"][0]["videos"] == "/v"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_change_the_disk_refuses_is_one_line_and_undone(tmp_path: Path, monkeypatch) -> None:
    from pinbench_recipes.remembench import annotation_store

    out = tmp_path / "pairs.json"
    with store(out) as s:
        s.set_mark("s1", "departure", 12)
        s.move("s1", 12)
        saved = sidecar_path(out).read_text(), out.read_text()
        written = annotation_store.write_atomic

        def full(path, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(annotation_store, "write_atomic", full)
        with pytest.raises(AnnotationError, match=r"pairs\.provenance\.json: not saved \(No space left on device\)"):
            s.set_mark("s1", "revisit", 80)  # an OSError and a 500 with a traceback before
        with pytest.raises(AnnotationError, match="not saved"):
            s.move("s1", 40)
        assert (s.scene("s1").revisit, s.position.frame, len(s.data.history)) == (None, 12, 1)
        monkeypatch.setattr(annotation_store, "write_atomic", written)
        assert (sidecar_path(out).read_text(), out.read_text()) == saved
        s.set_mark("s1", "departure", 13)  # the next save writes only what was kept
    side = json.loads(sidecar_path(out).read_text())
    assert [c["frame"] for c in side["history"]] == [12, 13] and side["scenes"]["s1"]["revisit"] is None
    assert side["position"] == {"scene_id": "s1", "frame": 12}


def test_a_reversed_pair_stays_in_the_sidecar_and_out_of_the_pairs(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with store(out) as s:
        s.set_mark("s1", "revisit", 10)
        s.set_mark("s1", "departure", 20)
        assert s.scene("s1").state == "revisit before departure"
        assert json.loads(out.read_text()) == {}
        s.set_mark("s1", "departure", 10)  # equal frames are a valid pair for the scorer
        assert read_annotation_file(out) == {"s1": (10, 10)}


@pytest.mark.parametrize("frame", [100, -1, True, "3", 2.0, None])
def test_a_frame_the_rollout_lacks_is_refused(tmp_path: Path, frame: object) -> None:
    with store(tmp_path / "pairs.json") as s:
        with pytest.raises(AnnotationError, match=r"not a frame of its rollout \(0 to 99\)"):
            s.set_mark("s1", "departure", frame)  # type: ignore[arg-type]
        assert s.scene("s1").departure is None


def test_unknown_scene_mark_or_a_scene_without_video_is_refused(tmp_path: Path) -> None:
    with store(tmp_path / "pairs.json") as s:
        with pytest.raises(AnnotationError, match="unknown scene 'nope'"):
            s.set_mark("nope", "departure", 1)
        with pytest.raises(AnnotationError, match="mark 'turnaround'"):
            s.set_mark("s1", "turnaround", 1)
        with pytest.raises(AnnotationError, match="has no video"):
            s.set_mark("s3", "departure", 1)


def test_a_new_session_resumes_marks_and_position_and_records_itself(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with store(out) as s:
        s.set_mark("s2", "departure", 4)
        s.move("s2", 17)
    with store(out, annotator="bob") as s:
        assert s.position.scene_id == "s2" and s.position.frame == 17
        assert s.scene("s2").departure.frame == 4 and s.scene("s2").departure.by == "alice"
        s.set_mark("s2", "revisit", 40)
    side = json.loads(sidecar_path(out).read_text())
    assert [x["annotator"] for x in side["sessions"]] == ["alice", "bob"]
    assert side["scenes"]["s2"]["revisit"]["by"] == "bob"
    assert read_annotation_file(out) == {"s2": (4, 40)}


def test_a_kill_between_the_two_writes_loses_nothing(tmp_path: Path) -> None:
    """The sidecar is written first; a kill before the pairs file leaves the pairs one change behind."""
    out = tmp_path / "pairs.json"
    with store(out) as s:
        s.set_mark("s1", "departure", 1)
        s.set_mark("s1", "revisit", 5)
        before = out.read_text()
        s.set_mark("s1", "revisit", 6)
    out.write_text(before)  # as if killed after the sidecar's rename, before the pairs file's
    with store(out):
        assert read_annotation_file(out) == {"s1": (1, 6)}


KILLED_SAVE = """
import os, signal, sys
from pathlib import Path
from pinbench_recipes.remembench.annotation_store import AnnotationStore, Rollout
s = AnnotationStore(Path(sys.argv[1]), annotator="alice", rollouts={"s1": Rollout("s1.mp4", "a" * 64, 100)},
                    session={})
os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)  # killed between the write and the rename
s.set_mark("s1", "departure", int(sys.argv[2]))
"""


def test_a_save_killed_before_its_rename_leaves_no_temporary_file_once_the_next_session_starts(
        tmp_path: Path) -> None:
    """#30 B6: kill -9 during saves left .tmp files beside the annotations (5 after 6 kills)."""
    import subprocess
    import sys

    out = tmp_path / "pairs.json"
    for frame in (3, 4):  # each killed session finds the one before it left one, and removes it when it starts
        run = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(out), str(frame)], capture_output=True)
        assert run.returncode == -9, run.stderr
        left = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert len(left) == 1 and left[0].startswith(".pairs.provenance.json."), left
    with store(out, rollouts={"s1": ROLLOUTS["s1"]}) as session:
        session.set_mark("s1", "departure", 5)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert json.loads(sidecar_path(out).read_text())["scenes"]["s1"]["departure"]["frame"] == 5


def test_a_pairs_file_edited_elsewhere_is_refused_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with store(out) as s:
        s.set_mark("s1", "departure", 1)
        s.set_mark("s1", "revisit", 5)
    edited = '{"s1": {"departure_frame": 2, "revisit_frame": 5}}\n'
    out.write_text(edited)
    with pytest.raises(AnnotationError, match="changed outside the annotation page"):
        store(out)
    assert out.read_text() == edited


def test_a_pairs_file_this_page_did_not_write_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    out.write_text('{"s1": {"departure_frame": 2, "revisit_frame": 5}}\n')
    with pytest.raises(AnnotationError, match="exists without pairs.provenance.json"):
        store(out)
    assert read_annotation_file(out) == {"s1": (2, 5)}


def test_two_sessions_on_one_file_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with store(out):
        with pytest.raises(AnnotationError, match="another annotation session has this file open"):
            store(out)
    store(out).close()  # the lock goes with the session


def test_marks_of_one_rollout_are_refused_for_another(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with store(out) as s:
        s.set_mark("s1", "departure", 1)
    regenerated = {**ROLLOUTS, "s1": Rollout("s1.mp4", "c" * 64, 100)}
    with pytest.raises(AnnotationError, match="is not the rollout that was annotated"):
        store(out, rollouts=regenerated)
    moved_away = {**ROLLOUTS, "s1": None}  # a video missing now keeps its marks
    with store(out, rollouts=moved_away) as s:
        assert s.scene("s1").departure.frame == 1


@pytest.mark.parametrize("problem", ["not-json", "folder", "symlink", "bad-sidecar", "frame-beyond", "in-a-file"])
def test_bad_files_are_one_line_errors_naming_them(tmp_path: Path, problem: str) -> None:
    out = tmp_path / "pairs.json"
    if problem == "not-json":
        out = tmp_path / "pairs.txt"
    elif problem == "folder":
        out.mkdir()
    elif problem == "in-a-file":   # was "[Errno 17] File exists: '<tmp>/notes'", the annotations file unnamed
        (tmp_path / "notes").write_text("x")
        out = tmp_path / "notes" / "pairs.json"
    elif problem == "symlink":
        (tmp_path / "elsewhere.json").write_text("{}")
        out.symlink_to(tmp_path / "elsewhere.json")
    else:
        with store(out) as s:
            s.set_mark("s1", "departure", 1)
        side = json.loads(sidecar_path(out).read_text())
        if problem == "bad-sidecar":
            sidecar_path(out).write_text("{not json")
        else:
            side["scenes"]["s1"]["departure"]["frame"] = 100
            sidecar_path(out).write_text(json.dumps(side))
    with pytest.raises(AnnotationError) as err:
        store(out)
    message = str(err.value)
    assert "\n" not in message and (str(out) in message or str(sidecar_path(out)) in message)
    assert {"not-json": "must end in .json", "folder": "regular file", "symlink": "regular file",
            "bad-sidecar": "invalid JSON", "frame-beyond": "outside the rollout's 100 frames",
            "in-a-file": f"{tmp_path / 'notes'} is a regular file, not a folder"}[problem] in message


def test_annotator_names_are_checked(tmp_path: Path) -> None:
    for name in ("", "a\nb", "x" * 101):
        with pytest.raises(AnnotationError, match="annotator"):
            store(tmp_path / "pairs.json", annotator=name)


# ------------------------------------------------------------------------------------------ the scenes


def _session(root: Path, paper_backbone: bool = False):
    release = open_release("mosaichunk/RememBench", "0" * 40, local_dir=root / "RememBench", download=False)
    return open_session(root / "rollouts", release, T2V, decoder="opencv", paper_backbone=paper_backbone)


def test_scenes_list_their_prompts_segment_starts_and_missing_videos(built_fixture, tmp_path: Path) -> None:
    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    (root / "rollouts/t2v-001.mp4").unlink()
    session = _session(root)
    first, second, _ = session.scenes
    assert [(s.seconds, s.frame) for s in first.starts] == [(0.0, 0), (3.6, 86), (6.2, 148), (11.2, 268)]
    assert first.starts[3].prompt == "block 0 returns" and first.rollout.n_frames == 379
    assert second.rollout is None and second.problem.startswith("no video: looked for ")
    assert "t2v-001.mp4" in second.problem and "t2v-001/rollout.mp4" in second.problem
    # the fixture's folder holds its I2V rollouts too: rollouts of the dataset, never "no scene of the dataset"
    assert session.unmatched_videos == []
    assert session.i2v_videos == ["s01-rot180.mp4", "s02-rot180.mp4", "s02-tr180.mp4", "s03-tr180.mp4"]
    (root / "rollouts/not-a-scene.mp4").write_bytes((root / "rollouts/t2v-000.mp4").read_bytes())
    (root / "rollouts/stray").mkdir()
    (root / "rollouts/stray/rollout.mp4").write_bytes(b"")
    assert _session(root).unmatched_videos == ["not-a-scene.mp4", "stray/rollout.mp4"]


def test_a_scene_id_that_could_leave_the_videos_folder_is_not_offered(built_fixture, tmp_path: Path) -> None:
    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    rows = t2v_rows(root)
    rows[0]["scene_id"] = "../outside"
    (tmp_path / "fx" / "outside.mp4").write_bytes((root / "rollouts/t2v-000.mp4").read_bytes())
    rewrite_release(root, t2v_rows=rows)
    scene = _session(root).scenes[0]
    assert scene.rollout is None and scene.video is None and "cannot name a video file" in scene.problem


def test_a_rollout_that_links_out_of_the_videos_folder_is_not_offered(built_fixture, tmp_path: Path) -> None:
    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "rollouts/t2v-000.mp4").rename(outside / "t2v-000.mp4")  # a video the page would decode and serve
    (root / "rollouts/t2v-000.mp4").symlink_to(outside / "t2v-000.mp4")
    (root / "rollouts/t2v-001.mp4").unlink()
    (root / "rollouts/t2v-001").symlink_to(outside)  # a folder link: t2v-001/rollout.mp4 lies outside too
    (outside / "rollout.mp4").write_bytes((outside / "t2v-000.mp4").read_bytes())
    (root / "rollouts/t2v-002.mp4").rename(root / "rollouts/kept.mp4")
    (root / "rollouts/t2v-002.mp4").symlink_to("kept.mp4")  # a link that stays inside is a rollout as before
    first, second, third = _session(root).scenes
    for scene in (first, second):
        assert scene.rollout is None and scene.video is None and "leads out of" in scene.problem, scene.problem
    assert third.rollout is not None and third.rollout.video == "t2v-002.mp4"


def test_a_short_or_broken_rollout_is_flagged(built_fixture, tmp_path: Path) -> None:
    from pinbench.media.video import write_video

    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    write_video(root / "rollouts/t2v-000.mp4", read_video(root / "rollouts/t2v-000.mp4", max_frames=300,
                                                          backend="pyav").frames, 24)
    (root / "rollouts/t2v-001.mp4").write_bytes(b"not a video")
    first, second, _ = _session(root).scenes
    assert first.rollout.n_frames == 300 and "300 frames, the T2V setting has 379" in first.warning
    assert second.rollout is None and second.problem.startswith("unusable video:")


def test_a_rollout_in_a_container_its_name_does_not_name_is_flagged(built_fixture, tmp_path: Path) -> None:
    """A Matroska file named ``t2v-001.mp4`` was offered for annotation, then its scoring refused it: the page says
    it is unusable, in the words scoring says (``named_video_info``), and the other scenes are offered."""
    from pinbench.media.video import write_video

    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    rollout = root / "rollouts/t2v-001.mp4"
    made = write_video(tmp_path / "t2v-001.mkv", read_video(rollout, backend="pyav").frames, 24)
    made.replace(rollout)
    first, second, third = _session(root).scenes
    assert second.rollout is None and second.problem == (
        f"unusable video: {rollout}: a matroska,webm container under the extension .mp4 (which names mp4): rename "
        "it to its format's extension")
    assert first.rollout is not None and third.rollout is not None


def test_paper_backbone_prefills_the_shared_departure_labelled_and_editable(built_fixture, tmp_path: Path) -> None:
    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    pairs = [published_pair("t2v-000", m, b, 40, 300 + b) for m in ("Base", "MoC", "MosaiChunk") for b in (1, 2)]
    pairs += [published_pair("t2v-001", "Base", 1, 40, 300), published_pair("t2v-001", "MosaiChunk", 1, 44, 300)]
    pairs += [published_pair("t2v-002", "Base", 1, 500, 600)]  # beyond this rollout's 379 frames
    rewrite_release(root, pairs=pairs)
    assert [s.prefill for s in _session(root).scenes] == [None, None, None]  # only when asked
    session = _session(root, paper_backbone=True)
    assert [s.prefill for s in session.scenes] == [40, None, 500]
    assert "disagree on its departure (40, 44)" in session.scenes[1].prefill_note
    out = tmp_path / "pairs.json"
    with AnnotationStore(out, annotator="carol", rollouts={s.scene_id: s.rollout for s in session.scenes},
                         session=session.provenance()) as s:
        assert prefill_departures(session, s) == 1
        mark = s.scene("t2v-000").departure
        assert (mark.frame, mark.source) == (40, "dataset") and "t2v_reference_pairs.jsonl" in mark.by
        assert s.scene("t2v-002").departure is None
        s.set_mark("t2v-000", "departure", 42)
        assert (s.scene("t2v-000").departure.source, s.scene("t2v-000").departure.by) == ("annotator", "carol")
    with AnnotationStore(out, annotator="carol", rollouts={s.scene_id: s.rollout for s in session.scenes},
                         session=session.provenance()) as s:
        assert prefill_departures(session, s) == 0  # an edited departure is never prefilled again
        assert s.scene("t2v-000").departure.frame == 42


# ------------------------------------------------------------------------------------------ the server


def _get(page, path: str, host: str | None = None) -> tuple[int, bytes, dict]:
    """A raw request (http.client sends the path as written: no normalisation of '..' or %2F)."""
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=30)
    headers = {"Host": host} if host else {}
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body, dict(response.getheaders())


def _post(page, path: str, body: object, origin: str | None = None,
          content_type: str = "application/json") -> tuple[int, dict | str]:
    """POST ``body`` as JSON (bytes: as they are)."""
    headers = {"content-type": content_type, **({"origin": origin} if origin else {})}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(page.url + path, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        text = exc.read().decode()
        return exc.code, json.loads(text) if exc.headers.get_content_type() == "application/json" else text


def _listening_addresses(port: int) -> list[str]:
    """Local addresses with a socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, _remote, status = line.split()[1:4]
            address, hex_port = local.split(":")
            if int(hex_port, 16) == port and status == "0A":  # LISTEN
                found.append(address)
    return found


def test_only_the_token_url_on_loopback_is_served(built_fixture, tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with annotation_page(built_fixture.root, out) as page:
        token = page.token
        assert len(token) >= 43  # 32 random bytes
        status, body, headers = _get(page, f"/{token}/")
        assert status == 200 and b"annotate.js" in body
        assert headers["referrer-policy"] == "no-referrer" and "frame-ancestors 'none'" in headers[
            "content-security-policy"]
        wrong = ("A" if token[0] != "A" else "B") + token[1:]
        for path in ("/", "/api/session", f"/{wrong}/", f"/{wrong}/api/session", f"/{token[:-1]}/",
                     f"/{token}x/api/session", f"/x/{token}/", "/favicon.ico"):
            status, body, _ = _get(page, path)
            assert status == 403, path
            assert token.encode() not in body
        status, _, _ = _get(page, f"/{token}/api/session", host=f"attacker.example:{page.port}")
        assert status == 403  # a DNS-rebinding page reaches 127.0.0.1 under another name
        assert _listening_addresses(page.port) == ["0100007F"]  # 127.0.0.1, nothing else, no IPv6
        others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
        for address in others - {"127.0.0.1"}:
            with pytest.raises(OSError):
                socket.create_connection((address, page.port), timeout=5).close()
        status, _, _ = _get(page, f"/{token}/api/session")
        assert status == 200
    assert token not in out.read_text() + sidecar_path(out).read_text() + page.stderr.read_text()


def test_no_request_path_leaves_the_videos_folder(built_fixture, tmp_path: Path) -> None:
    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    (root / "secret.txt").write_text("TOP-SECRET")  # beside the videos folder, where '../' would lead
    with annotation_page(root, tmp_path / "pairs.json") as page:
        t = page.token
        for path in (f"/{t}/../secret.txt", f"/{t}/..%2fsecret.txt", f"/{t}/%2e%2e/%2e%2e/secret.txt",
                     f"/{t}/api/scenes/..%2F..%2Fsecret/thumb/0", f"/{t}/api/scenes/../../secret/native/0",
                     f"/{t}/api/scenes/..%2Frollouts%2Ft2v-000/native/0", f"/{t}/annotate.py",
                     f"/{t}/..%2Fannotate_server.py", f"/{t}/api/scenes/t2v-000/native/-1",
                     f"/{t}/api/scenes/t2v-000/native/379", f"/{t}/api/scenes/s01-rot180/native/0",
                     f"/{t}/api/scenes/t2v-000%2F..%2F..%2Fsecret/thumb/0",
                     f"/{t}/api/scenes/t2v-000/thumb/0/../../../../secret.txt",
                     f"/{t}/api/scenes/t2v-000/thumb/{'9' * 5000}", f"/{t}/{'a' * 20000}"):  # 5,000 digits: a 500
            status, body, _ = _get(page, path)
            assert status in (404, 405, 414), (path, status)
            assert b"TOP-SECRET" not in body and b"import" not in body, path


def test_frames_are_served_native_and_lossless_and_marks_are_validated(built_fixture, tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with annotation_page(built_fixture.root, out) as page:
        status, body, headers = _get(page, f"/{page.token}/api/scenes/t2v-001/native/300")
        assert status == 200 and headers["content-type"] == "image/png"
        native = cv2.cvtColor(cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        frames = read_video(built_fixture.videos / "t2v-001.mp4", [300], backend="opencv").frames
        np.testing.assert_array_equal(native, frames[0])  # the frame the scorer reads, bit for bit
        status, body, headers = _get(page, f"/{page.token}/api/scenes/t2v-001/thumb/378")
        assert status == 200 and headers["content-type"] == "image/jpeg"
        for bad in (379, -1, "3", True, None, 2.5):
            status, data = _post(page, "api/scenes/t2v-001/marks", {"mark": "revisit", "frame": bad})
            assert status == 400 and "not a frame of its rollout (0 to 378)" in data["error"], bad
        status, data = _post(page, "api/scenes/t2v-001/marks", {"mark": "revisit", "frame": 378})
        assert status == 200 and data["scene"]["revisit"]["frame"] == 378 and data["scene"]["revisit"]["by"] == "tester"
        status, data = _post(page, "api/scenes/nope/marks", {"mark": "revisit", "frame": 1})
        assert status == 404
        status, data = _post(page, "api/position", {"scene_id": "t2v-001", "frame": 379})
        assert status == 400
        for bad in (["t2v-001"], {"t2v-001": 1}, 7, None):  # a 500 with a traceback before (issue #30, item 9)
            status, data = _post(page, "api/position", {"scene_id": bad, "frame": 3})
            assert status == 400 and data["error"].startswith("scene_id must be a string"), bad
        for origin in ("http://attacker.example", "null", f"http://127.0.0.1:{page.port + 1}"):
            status, data = _post(page, "api/scenes/t2v-001/marks", {"mark": "revisit", "frame": 5}, origin=origin)
            assert status == 403 and data.startswith("forbidden"), origin  # cross-site, carrying the token
        status, data = _post(page, "api/position", {"scene_id": "t2v-001", "frame": 4},
                             origin=f"http://127.0.0.1:{page.port}")
        assert status == 200  # the page's own origin
        rest = page.stop()
    assert "Traceback" not in page.stderr.read_text() + rest
    assert json.loads(sidecar_path(out).read_text())["scenes"]["t2v-001"]["revisit"]["frame"] == 378


def test_a_bad_body_is_one_400_nothing_is_written_and_the_page_keeps_serving(built_fixture, tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    with annotation_page(built_fixture.root, out) as page:
        before = sidecar_path(out).read_text(), out.read_text()
        mark = "api/scenes/t2v-001/marks"
        bad = {"text/plain": (b'{"mark": "revisit", "frame": 5}', "text/plain", "application/json"),  # a form's type
               "urlencoded": (b"mark=revisit&frame=5", "application/x-www-form-urlencoded", "application/json"),
               "nested": (b"[" * 2000 + b"]" * 2000, "application/json", "not JSON"),  # a 500 before
               "not JSON": (b"{mark: revisit}", "application/json", "not JSON"),
               "latin-1": (b'{"mark": "\xff"}', "application/json", "not JSON"),
               "a list": (b"[1, 2]", "application/json", "a JSON object"),
               "NaN": (b'{"mark": "revisit", "frame": NaN}', "application/json", "frame nan is not a frame"),
               "Infinity": (b'{"mark": "revisit", "frame": 1e999}', "application/json", "frame inf is not a frame"),
               "unknown mark": (b'{"mark": "../x", "frame": 5}', "application/json", "mark '../x': expected")}
        for what, (body, content_type, error) in bad.items():
            status, data = _post(page, mark, body, content_type=content_type)
            assert status == 400 and error in data["error"], (what, status, data)
        for length in (str(100 * 2**20), "-1"):  # nothing read: the answer comes before any body
            connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=30)
            connection.putrequest("POST", f"/{page.token}/{mark}")
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", length)
            connection.endheaders()
            assert connection.getresponse().status == 400, length
            connection.close()
        for scene in ("nope", "..%2F..%2Fx", "t2v-001%2F..%2Ft2v-000", "t2v-001%00"):
            assert _post(page, f"api/scenes/{scene}/marks", {"mark": "revisit", "frame": 5})[0] == 404, scene
        assert (sidecar_path(out).read_text(), out.read_text()) == before
        frames = range(100, 140)  # concurrent marks, each saved whole, none lost
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda f: _post(page, mark, {"mark": "revisit", "frame": f})[0], frames))
        assert answers == [200] * len(frames)
        history = json.loads(sidecar_path(out).read_text())["history"]
        assert sorted(c["frame"] for c in history if c["scene_id"] == "t2v-001") == list(frames)
        assert _get(page, f"/{page.token}/api/session")[0] == 200
        stalled = socket.create_connection(("127.0.0.1", page.port), timeout=30)  # a body that never comes
        stalled.sendall(f"POST /{page.token}/{mark} HTTP/1.1\r\nHost: 127.0.0.1:{page.port}\r\n"
                        "Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{".encode())
        time.sleep(1)
        started = time.monotonic()
        rest = page.stop()  # not held by it: SIGTERM waited for that request for ever
        assert time.monotonic() - started < 20
        stalled.close()
    assert "Traceback" not in page.stderr.read_text() + rest


def test_the_command_lists_scenes_without_video_and_says_what_it_saved(built_fixture, tmp_path: Path) -> None:
    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    (root / "rollouts/t2v-002.mp4").unlink()
    restamp(root)
    with annotation_page(root, tmp_path / "pairs.json") as page:
        _post(page, "api/scenes/t2v-000/marks", {"mark": "departure", "frame": 3})
        _post(page, "api/scenes/t2v-000/marks", {"mark": "revisit", "frame": 9})
        rest = page.stop()
    printed = "".join(page.stdout)
    assert "3 T2V scenes, 2 with a rollout" in printed and "without a usable video (1): t2v-002" in printed
    assert f"{tmp_path / 'pairs.json'}: 1 of 3 scenes complete" in rest


# ------------------------------------------------------------------------------------------ agreement


def _pairs_file(path: Path, pairs: dict[str, tuple[int, int]]) -> Path:
    path.write_text(json.dumps({s: {"departure_frame": d, "revisit_frame": r} for s, (d, r) in pairs.items()}))
    return path


def test_agreement_prints_frame_differences_without_videos(tmp_path: Path, capsys) -> None:
    a = _pairs_file(tmp_path / "a.json", {"s1": (40, 300), "s2": (40, 310), "s3": (10, 20)})
    b = _pairs_file(tmp_path / "b.json", {"s1": (40, 300), "s2": (43, 290), "s4": (1, 2)})
    assert annotate_main(["--agreement", str(a), str(b)]) == 1
    text = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith("s")}
    assert rows["s1"] == ["40", "40", "+0", "300", "300", "+0"] and rows["s2"] == ["40", "43", "+3", "310", "290",
                                                                                    "-20"]
    assert "departure: same frame in 1 of 2 scenes, |B - A| median 1.5, max 3" in text
    assert "revisit:   same frame in 1 of 2 scenes, |B - A| median 10, max 20" in text
    assert "only in A (1): s3" in text and "only in B (1): s4" in text and "give --videos" in text
    assert annotate_main(["--agreement", str(a), str(a)]) == 0


@pytest.mark.parametrize(("text", "says"), [
    ('{"s1": {"departure_frame": 50, "revisit_frame": 10}}', "need integers 0 <= departure_frame <= revisit_frame"),
    # was "error: maximum recursion depth exceeded while decoding a JSON array ...", naming no file
    ("[" * 100_000 + "]" * 100_000, "b.json: invalid JSON: nested too deeply to parse"),
])
def test_agreement_refuses_a_bad_file_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    a = _pairs_file(tmp_path / "a.json", {"s1": (40, 300)})
    (tmp_path / "b.json").write_text(text)
    result = runner.invoke(cli.app, ["annotate", "remembench", "--agreement", str(a), str(tmp_path / "b.json")])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and says in result.output, result.output
    with pytest.raises(RecipeError, match=re.escape(says)):   # -o annotations= reads it the same way
        read_annotation_file(tmp_path / "b.json")


def test_agreement_scores_each_pair_as_the_scorer_does(built_fixture, fixture_scenes, tmp_path: Path,
                                                       capsys) -> None:
    """A's values are the fixture run's own per-scene scores; B's changed pair is scored from the full decode."""
    from pinbench_recipes.remembench.metrics import pair_metrics
    from pinbench_recipes.remembench.models import ModelFiles, load_pair_models
    from pinbench_recipes.remembench.weights import CLIP_CONFIG, CLIP_WEIGHTS

    own = read_annotation_file(built_fixture.annotations)
    changed = {**own, "t2v-001": (own["t2v-001"][0] + 5, own["t2v-001"][1] - 30)}
    a, b = _pairs_file(tmp_path / "a.json", own), _pairs_file(tmp_path / "b.json", changed)
    assert annotate_main(["--agreement", str(a), str(b), "--fixture", str(built_fixture.root),
                          "-o", "device=cpu"]) == 1
    text = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("t2v-")}
    for scene_id, scene in fixture_scenes.items():
        clip_a, clip_b, delta = (float(v) for v in rows[scene_id][7:10])
        assert clip_a == pytest.approx(scene["clip"], abs=5e-5)  # printed to 4 decimals
        assert float(rows[scene_id][10]) == pytest.approx(scene["lpips_alex"], abs=5e-5)
        assert (delta == 0) == (scene_id != "t2v-001")
    files = ModelFiles(built_fixture.clip_dir / CLIP_CONFIG, built_fixture.clip_dir / CLIP_WEIGHTS,
                       built_fixture.lpips_trunk, built_fixture.lpips_sha256, None, real_clip=False)
    frames = read_video(built_fixture.videos / "t2v-001.mp4", backend="opencv").frames
    expected = pair_metrics(*load_pair_models(files, "cpu"), frames, *changed["t2v-001"])
    assert float(rows["t2v-001"][8]) == pytest.approx(expected["clip"], abs=5e-5)
    assert float(rows["t2v-001"][11]) == pytest.approx(expected["lpips_alex"], abs=5e-5)
    medians = [line for line in text.splitlines() if line.startswith("median clip")]
    assert medians and "over the 3 scenes scored with both" in medians[0]


# ------------------------------------------------------------------------------------------ the command


def test_the_cli_command_hands_over_to_the_recipe_tool() -> None:
    assert runner.invoke(cli.app, ["annotate"]).exit_code == 2
    shown = runner.invoke(cli.app, ["annotate", "remembench", "--help"])
    assert shown.exit_code == 0 and "--videos" in shown.output and "--agreement" in shown.output
    other = next((name for name in sorted(available_recipes()) if name != "remembench"), None)  # none in an export
    if other is not None:
        refused = runner.invoke(cli.app, ["annotate", other])
        assert refused.exit_code == 2 and f"{other} has no annotation tool" in refused.output
    missing = runner.invoke(cli.app, ["annotate", "remembench", "--videos", "/nonexistent"])
    assert missing.exit_code == 2 and "--out FILE.json is required" in missing.output
    port = runner.invoke(cli.app, ["annotate", "remembench", "--port", "70000"])
    assert port.exit_code == 2 and "'70000' is not a port" in port.output
