"""The annotation page in a real browser: Debian's headless Chromium driven by selenium through chromedriver.

Keys and clicks mark frames, a reload and a killed server lose nothing, and the fixture's rollouts annotated
through the page score exactly as with the fixture's own annotations. Skipped only where chromium or its
driver is not installed (CI installs both: .ci/run).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from headless_chromium import CHROMEDRIVER, chromium, driven

from pinbench_recipes.remembench.annotation_store import sidecar_path
from pinbench_recipes.remembench.prepare import read_annotation_file
from pinbench_recipes.remembench.tests.conftest import fixture_config, replace_annotations, restamp
from pinbench_recipes.remembench.tests.serving import (
    annotation_page,
    fixture_copy,
    published_pair,
    rewrite_release,
    t2v_rows,
)

# An exported recipe's venv holds its runtime lock only; selenium is a development tool of the repository.
EXPORTED = (Path(__file__).resolve().parents[3] / ".pinbench-export").is_file()
pytestmark = [
    pytest.mark.skipif(chromium() is None or CHROMEDRIVER is None,
                       reason="needs a headless Chromium and its driver: apt-get install chromium chromium-driver "
                              "(.ci/run installs both)"),
    pytest.mark.skipif(EXPORTED and importlib.util.find_spec("selenium") is None,
                       reason="an exported recipe has no selenium (a development dependency of pinbench)"),
]
WAIT = 30


@pytest.fixture
def browser() -> Iterator[object]:
    with driven("--window-size=1400,1000") as driver:
        yield driver


class PageDriver:
    """What an annotator does, in selenium terms; every wait is on the page's own state."""

    def __init__(self, driver: object, url: str):
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver, self.wait = driver, WebDriverWait(driver, WAIT)
        driver.get(url)
        self.settled("ready")

    def text(self, element_id: str) -> str:
        return self.driver.find_element("id", element_id).text

    def attribute(self, element_id: str, name: str) -> str:
        return self.driver.find_element("id", element_id).get_attribute(name)

    def settled(self, *states: str) -> None:
        """Wait until nothing is being saved and the status is one of ``states``."""
        def done(_driver: object) -> bool:
            return (self.attribute("status", "data-pending") == "0"
                    and self.attribute("status", "data-state") in states)
        self.wait.until(done)

    def keys(self, *keys: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        chain = ActionChains(self.driver)
        for key in keys:
            chain.send_keys(key)
        chain.perform()

    def shift(self, key: str, times: int = 1) -> None:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        chain = ActionChains(self.driver).key_down(Keys.SHIFT)
        for _ in range(times):
            chain.send_keys(key)
        chain.key_up(Keys.SHIFT).perform()

    def frame(self) -> int:
        return int(self.text("frame-number"))

    def at_frame(self, frame: int) -> None:
        self.wait.until(lambda _d: self.frame() == frame)

    def mark(self, key: str, name: str, frame: int) -> None:
        self.keys(key)
        self.wait.until(lambda _d: self.text(f"{name}-frame") == str(frame))
        self.settled("saved")

    def click(self, css: str) -> None:
        self.driver.find_element("css selector", css).click()

    def step_to(self, frame: int) -> None:
        """From the current frame to ``frame`` with Shift+arrows (ten) and arrows (one)."""
        from selenium.webdriver.common.keys import Keys

        distance = frame - self.frame()
        key = Keys.ARROW_RIGHT if distance > 0 else Keys.ARROW_LEFT
        tens, ones = divmod(abs(distance), 10)
        if tens:
            self.shift(key, tens)
        if ones:
            self.keys(*[key] * ones)
        self.at_frame(frame)


def test_keys_and_clicks_mark_frames_and_a_reload_finds_them(built_fixture, tmp_path: Path, browser) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    out = tmp_path / "pairs.json"
    with annotation_page(built_fixture.root, out) as server:
        page = PageDriver(browser, server.url)
        assert page.text("scene-id") == "t2v-000" and page.frame() == 0
        assert [li.text for li in browser.find_elements("css selector", "#prompts li")][3].endswith(
            "block 0 returns")
        assert "11.2 s, frame 268" in page.text("prompts")
        page.keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
        page.at_frame(3)
        page.shift(Keys.ARROW_RIGHT, 2)
        page.at_frame(23)
        page.keys(Keys.ARROW_LEFT)
        page.at_frame(22)
        page.mark("d", "departure", 22)
        assert json.loads(out.read_text()) == {}  # a departure alone is not a pair yet
        page.click('.thumb[data-frame="35"]')  # the strip
        page.at_frame(35)
        page.mark("r", "revisit", 35)
        assert read_annotation_file(out) == {"t2v-000": (22, 35)}

        page.click('#prompts li:nth-child(3) button')  # a segment's start: 6.2 s
        page.at_frame(148)
        assert page.text("segment") == "3 of 4"
        timeline = browser.find_element("id", "timeline")
        ActionChains(browser).move_to_element_with_offset(timeline, timeline.size["width"] // 4, 0).click().perform()
        assert abs(page.frame() - 283) <= 2  # three quarters of 378 frames
        page.click("#mark-revisit")  # the mouse, not the key
        revisit = page.frame()
        page.wait.until(lambda _d: page.text("revisit-frame") == str(revisit))
        page.settled("saved")
        page.shift(Keys.ARROW_RIGHT, 20)
        page.at_frame(378)  # clamped to the last frame the rollout has
        page.settled("saved")

        browser.refresh()
        page.settled("ready")
        assert page.text("scene-id") == "t2v-000" and page.frame() == 378  # resumed where it was
        assert (page.text("departure-frame"), page.text("revisit-frame")) == ("22", str(revisit))
        assert "by tester" in page.text("departure-source")
        assert read_annotation_file(out) == {"t2v-000": (22, revisit)}

        page.keys(Keys.ENTER)
        page.wait.until(lambda _d: page.text("scene-id") == "t2v-001")
        page.at_frame(0)
        page.mark("r", "revisit", 0)
        page.step_to(5)
        page.mark("d", "departure", 5)
        assert "revisit before departure" in page.text("scene-state")
        assert read_annotation_file(out) == {"t2v-000": (22, revisit)}  # a reversed pair is never written
        page.shift(Keys.ENTER)
        page.wait.until(lambda _d: page.text("scene-id") == "t2v-000")
    side = json.loads(sidecar_path(out).read_text())
    assert side["scenes"]["t2v-001"]["departure"]["frame"] == 5 and side["scenes"]["t2v-001"]["revisit"]["frame"] == 0


def test_a_killed_server_loses_nothing_and_the_page_resumes(built_fixture, tmp_path: Path, browser) -> None:
    from selenium.webdriver.common.keys import Keys

    out = tmp_path / "pairs.json"
    with annotation_page(built_fixture.root, out) as server:
        page = PageDriver(browser, server.url)
        page.keys(Keys.ENTER)
        page.wait.until(lambda _d: page.text("scene-id") == "t2v-001")
        page.step_to(17)
        page.mark("d", "departure", 17)
        page.step_to(301)
        page.mark("r", "revisit", 301)
        page.settled("saved")
        server.kill()  # SIGKILL right after the last answer: nothing runs on the way out
    assert read_annotation_file(out) == {"t2v-001": (17, 301)}
    with annotation_page(built_fixture.root, out) as server:
        page = PageDriver(browser, server.url)  # a new session: new port and token
        assert page.text("scene-id") == "t2v-001" and page.frame() == 301
        assert (page.text("departure-frame"), page.text("revisit-frame")) == ("17", "301")
        assert "1 of 3 complete" in page.text("counts")
    assert len(json.loads(sidecar_path(out).read_text())["sessions"]) == 2


def test_native_frames_missing_videos_and_prompts_as_text(built_fixture, tmp_path: Path, browser) -> None:
    from selenium.webdriver.common.keys import Keys

    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    rows = t2v_rows(root)
    rows[0]["prompts"][1] = '<img src=x onerror="document.title=\'injected\'"> leaves'
    rewrite_release(root, t2v_rows=rows)
    (root / "rollouts/t2v-002.mp4").unlink()
    (root / "rollouts/not-a-scene.mp4").write_bytes((root / "rollouts/t2v-000.mp4").read_bytes())
    restamp(root)
    with annotation_page(root, tmp_path / "pairs.json") as server:
        page = PageDriver(browser, server.url)
        assert "<img src=x" in page.text("prompts") and browser.title != "injected"
        assert "t2v-002: no video: looked for" in page.text("missing-list")
        assert browser.find_element("css selector", 'button[data-scene="t2v-002"]').get_attribute("disabled")
        assert page.text("unmatched-list") == "not-a-scene.mp4"  # the fixture's I2V rollouts are the dataset's
        page.keys("n")
        page.wait.until(lambda d: d.execute_script("return document.getElementById('native').naturalWidth") == 64)
        assert page.text("native-size") == "64\u00d748"
        page.keys(Keys.ARROW_RIGHT)
        page.at_frame(1)
        page.wait.until(lambda d: d.execute_script(
            "const img = document.getElementById('native'); return img.complete && img.src.endsWith('/native/1')"))


def test_the_paper_departure_is_prefilled_labelled_and_editable(built_fixture, tmp_path: Path, browser) -> None:
    root = fixture_copy(built_fixture.root, tmp_path / "fx")
    rewrite_release(root, pairs=[published_pair(s, m, 2, 40, 320) for s in ("t2v-000", "t2v-001", "t2v-002")
                                 for m in ("Base", "MosaiChunk")])
    out = tmp_path / "pairs.json"
    with annotation_page(root, out, "--paper-backbone") as server:
        assert "prefilled 3 departure frames from the dataset" in "".join(server.stdout)
        page = PageDriver(browser, server.url)
        assert page.text("departure-frame") == "40"
        assert page.attribute("departure-source", "data-source") == "dataset"
        assert "prefilled from the dataset (paper backbone)" in page.text("departure-source")
        page.step_to(44)
        page.mark("d", "departure", 44)
        assert page.attribute("departure-source", "data-source") == "annotator"
    side = json.loads(sidecar_path(out).read_text())
    assert side["scenes"]["t2v-000"]["departure"]["source"] == "annotator"
    assert side["scenes"]["t2v-001"]["departure"]["source"] == "dataset"
    assert [(c["scene_id"], c["source"], c["frame"], c["previous"]) for c in side["history"]][-1] == (
        "t2v-000", "annotator", 44, 40)


def test_the_fixture_annotated_through_the_page_scores_as_its_own_annotations(
        built_fixture, fixture_scenes, tmp_path: Path, browser) -> None:
    """The annotator's judgement is the fixture's own file; the page is the only way the marks reach disk."""
    from selenium.webdriver.common.keys import Keys

    from pinbench.ops.launch import run_recipe

    own = read_annotation_file(built_fixture.annotations)
    out = tmp_path / "pairs.json"
    with annotation_page(built_fixture.root, out) as server:
        page = PageDriver(browser, server.url)
        for number, (scene_id, (departure, revisit)) in enumerate(own.items()):
            if number:
                page.keys(Keys.ENTER)
            page.wait.until(lambda _d, s=scene_id: page.text("scene-id") == s)
            page.step_to(departure)
            page.mark("d", "departure", departure)
            page.click("#prompts li:nth-child(4) button")  # the return segment, 11.2 s
            page.at_frame(268)
            page.step_to(revisit)
            page.mark("r", "revisit", revisit)
        assert "3 of 3 complete" in page.text("counts")
    assert json.loads(out.read_text()) == json.loads(built_fixture.annotations.read_text())

    # Score the page's file: the fixture run reads its annotations from fixture_data/annotations.json.
    run_dir = tmp_path / "run"
    shutil.copytree(built_fixture.root, run_dir / "fixture_data")
    replace_annotations(run_dir / "fixture_data", out.read_text())
    outcome = run_recipe(fixture_config(run_dir))
    assert outcome.exit_code == 0, outcome.message  # and so within the fixture reference
    rows = [json.loads(line) for line in (run_dir / "scenes.jsonl").read_text().splitlines()]
    scored = {r["scene_id"]: r for r in rows if r["group"] == "t2v"}
    for scene_id, expected in fixture_scenes.items():
        got = scored[scene_id]
        assert (got["departure_frame"], got["revisit_frame"]) == own[scene_id]
        assert (got["clip"], got["lpips_alex"]) == (expected["clip"], expected["lpips_alex"])
