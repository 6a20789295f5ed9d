"""Benchmark ``pinbench view`` at CameraBench's real size (11,222 samples, tools/bench_scale.py's score files),
against the static report of the same run (``pinbench report --out DIR``, which also writes the view folder its
samples link to):

* ``pinbench view --bundle DIR``: wall, CPU, peak RSS, and the folder's size;
* the server: from start to its address printed, then ``api/summary`` and ``api/table`` (the page's two requests
  before it draws the sample table) with their sizes, and the server's CPU time and peak RSS once the page is drawn;
* with chromium and chromedriver: the time the page reports its sample table drawn (``performance.now()`` at the
  first draw of the table, from navigation start), and from ``driver.get`` to that;
* 750 rollouts (dynamic-degree's Farneback preview over 750 small lossless videos, the size of RememBench's I2V
  set): the server's table, the first sample opened (its video hashed and probed) and its video fetched twice (the
  web preview made, then from the cache); and the preview of one rollout at RememBench I2V's real size (832x480,
  253 frames at 16 fps, lossless H.264 as the fixtures write it): hashing it, making its preview.

    .venv/bin/python tools/bench_view.py [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_scale import DATA, MISSING, PINBENCH, Measured, camerabench_run, measure, row, write_scores, write_videos

from pinbench.core.files import sha256_file
from pinbench.media.preview import Preview, make_preview


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def served(run: Path) -> tuple[str, subprocess.Popen, float]:
    """``pinbench view RUN``: its address, the process, seconds from start to the address printed."""
    started = time.perf_counter()
    process = subprocess.Popen([*PINBENCH, "view", str(run)], stdout=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("view page: "):
            return line.split(": ", 1)[1].strip(), process, time.perf_counter() - started
    raise SystemExit(f"pinbench view exited {process.wait()} before printing its address")


def cpu_and_peak(pid: int) -> tuple[float, float]:
    """CPU seconds (user + sys) and peak RSS (MB) of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    peak = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM"))
    return cpu, int(peak.split()[1]) / 1024


def get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        size = len(response.read())
    return time.perf_counter() - started, size


def browser_table_ms(url: str) -> tuple[int, float] | None:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        started = time.perf_counter()
        driver.get(url)
        WebDriverWait(driver, 120).until(lambda d: d.execute_script("return document.body.dataset.tableShownMs"))
        return int(driver.execute_script("return document.body.dataset.tableShownMs")), time.perf_counter() - started
    finally:
        driver.quit()


def hash_and_preview(video: Path, previews: Path) -> tuple[float, float, Preview]:
    """Seconds to hash ``video``, seconds to make its web preview in ``previews`` (as the server does), the preview."""
    started = time.perf_counter()
    digest = sha256_file(video)
    hashed = time.perf_counter() - started
    started = time.perf_counter()
    with video.open("rb") as opened:
        preview = make_preview(video, digest, previews, fd=opened.fileno())
    return hashed, time.perf_counter() - started, preview


def rollouts(work: Path) -> None:
    import json

    import numpy as np

    from pinbench.media.video import write_video

    write_videos(work / "videos", 750)
    run = work / "dd"
    measure([*PINBENCH, "run", "dynamic-degree", "--checkpoint", "bench", "-o", f"videos={work / 'videos'}", "-o",
             "flow=farneback", "--offline", "--out", str(run)])
    os.environ["PINBENCH_CACHE"] = str(work / "cache")  # previews made here, not in the user's cache
    url, process, to_address = served(run)
    try:
        table_s, table_bytes = get(url + "api/table")
        sample_s, _ = get(url + "api/sample/0")
        with urllib.request.urlopen(url + "api/sample/0") as response:
            media = json.loads(response.read())["runs"][0]["rollouts"][0]["url"]
        first_s, size = get(url + media)
        again_s, _ = get(url + media)
    finally:
        process.terminate()
        process.wait(timeout=60)
    print(f"750 rollouts (dynamic-degree): server up {to_address:.2f} s; api/table {table_s * 1000:.0f} ms "
          f"({table_bytes / 1e3:.0f} kB); a sample opened {sample_s * 1000:.0f} ms; its video {first_s * 1000:.0f} ms "
          f"(preview made, {size / 1e3:.0f} kB), again {again_s * 1000:.0f} ms (cached)")
    import cv2

    coarse = np.random.default_rng(0).uniform(0, 255, (30, 52, 3)).astype(np.float32)  # a smooth field, moving
    base = np.clip(cv2.resize(coarse, (832, 480), interpolation=cv2.INTER_CUBIC), 0, 255).astype(np.uint8)
    big = write_video(work / "i2v.mp4", (np.roll(base, 3 * t, axis=1) for t in range(253)), 16, crf=0)
    hashed, made, preview = hash_and_preview(big, work / "previews")
    print(f"one 832x480x253 rollout ({big.stat().st_size / 1e6:.1f} MB, lossless H.264): sha256 {hashed * 1000:.0f} ms,"
          f" its web preview {made:.2f} s ({preview.path.stat().st_size / 1e6:.1f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed)")
    args = parser.parse_args()
    if DATA is None:
        raise SystemExit(MISSING)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_view."))
    work.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}, python {sys.version.split()[0]}, load average before {os.getloadavg()[0]:.2f}")
    try:
        n = write_scores(1.0, work / "scores")
        run = work / "run"
        measure(camerabench_run(work / "scores", run), ok=(0, 1))
        print(f"CameraBench score-only run of {n} samples: {run}")
        print(f"{'command':<58} {'wall':>10} {'cpu':>10} {'peak RSS':>11}  {'vs the report (wall, cpu)':>15}")
        report = measure([*PINBENCH, "report", str(run / "scorecard.json"), "--out", str(work / "report")])
        print(row("pinbench report (with its view folder)", report))
        bundle = measure([*PINBENCH, "view", "--bundle", str(work / "bundle"), str(run)])
        print(row(f"pinbench view --bundle ({folder_mb(work / 'bundle'):.1f} MB)", bundle, report))
        url, process, to_address = served(run)
        try:
            summary_s, summary_bytes = get(url + "api/summary")
            table_s, table_bytes = get(url + "api/table")
            shown = browser_table_ms(url)
            cpu, peak = cpu_and_peak(process.pid)
        finally:
            process.terminate()
            process.wait(timeout=60)
        print(row("pinbench view: start to the address printed", Measured(to_address, cpu, peak), report))
        print(f"  api/summary {summary_s * 1000:.0f} ms ({summary_bytes / 1e3:.0f} kB), api/table "
              f"{table_s * 1000:.0f} ms ({table_bytes / 1e6:.2f} MB); cpu and peak RSS above: the server's, once "
              "the page drew its table")
        if shown is None:
            print("  no chromium/chromedriver here: the page's own time to its table not measured")
        else:
            print(f"  in Chromium: sample table drawn {shown[0]} ms after navigation start; {shown[1]:.2f} s from "
                  "driver.get to drawn")
        rollouts(work)
    finally:
        print(f"load average after {os.getloadavg()[0]:.2f}")
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
